//! `sampler.coverage`'s judgement of one epoch at a time: deals it to each world size its
//! steps name, checks every step's samples against the deal and counts what each group
//! trained, judging the group's epoch when all its nodes finished it. Epochs share nothing,
//! so a long trace's epochs are judged on two threads, each taking the next epoch in turn;
//! the results come back in epoch order whichever thread judged them.

use super::sampler::{step_fields, CoverageKind, Found, Part, StepRef, Walk};
use super::sampler_deal::{Deal, DealSource, Dealer};
use crate::sampler::dealt_epoch::PairTally;
use crate::sampler::{samples_per_rank, SamplerError};
use crate::scenario::model::Scenario;
use crate::trace::TrainedOn;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Dealt sample ids (epochs × dataset length) from which epochs are judged on a second
/// thread too. Measured on a 2-core machine: from 1M ids (10 epochs of 100 000 samples,
/// about 3 ms of dealing) the second thread cuts the check by a fifth or more while the
/// other core is free, but adds to its median while that core is busy, as it is under
/// `trainsim fuzz` and `trainsim check`, which run cases on every core. Their traces stay
/// below this (the scenarios reach 1.3M ids, the fuzz workload's cases 0.4M); the bench's
/// reference job deals 53M.
pub(super) const SECOND_THREAD_FROM_IDS: u64 = 2_000_000;

/// One epoch's steps: indices into [`Walk::steps`], in trace order.
pub(super) struct EpochSteps {
    pub epoch: u64,
    pub steps: Vec<u32>,
}

/// What judging one epoch found.
pub(super) struct EpochJudged {
    pub epoch: u64,
    /// Per world size its steps name, the deal's batches per rank or why it failed.
    pub shapes: Vec<(u64, Result<u64, SamplerError>)>,
    /// A group finished the epoch.
    pub applicable: bool,
    pub found: Vec<Found>,
}

/// Judges every epoch, on a second thread as well when the epochs deal at least
/// `second_thread_from_ids` sample ids; the result lists the epochs in the order given.
pub(super) fn judge_epochs(
    walk: &Walk,
    epochs: &[EpochSteps],
    run_seed: u64,
    second_thread_from_ids: u64,
) -> Vec<EpochJudged> {
    let source = DealSource::new(&walk.scenario.job, run_seed);
    let ids = (epochs.len() as u64).saturating_mul(walk.scenario.job.dataset.len);
    if epochs.len() < 2 || ids < second_thread_from_ids {
        // The newest first, as on two threads.
        let mut judged: Vec<EpochJudged> = epochs
            .iter()
            .rev()
            .map(|e| judge(walk, &source, e))
            .collect();
        judged.reverse();
        return judged;
    }
    judge_on_two_threads(walk, &source, epochs)
}

/// Both threads take the next epoch not yet taken until none is left, the newest first:
/// the process still keeps the deals its run made last (`sampler::shared_deal`), and
/// dealing the oldest first would push those out before they are read.
fn judge_on_two_threads(
    walk: &Walk,
    source: &DealSource,
    epochs: &[EpochSteps],
) -> Vec<EpochJudged> {
    let next = AtomicUsize::new(0);
    let take_turns = || {
        let mut judged = Vec::new();
        loop {
            let taken = next.fetch_add(1, Ordering::Relaxed);
            let Some(i) = epochs.len().checked_sub(taken + 1) else {
                return judged;
            };
            let epoch = &epochs[i];
            judged.push((i, judge(walk, source, epoch)));
        }
    };
    let (mine, theirs) = std::thread::scope(|scope| {
        let helper = scope.spawn(take_turns);
        let mine = take_turns();
        // A panic on the helper is the check's own: raise it here with its message.
        let theirs = helper
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (mine, theirs)
    });
    let mut slots: Vec<Option<EpochJudged>> = epochs.iter().map(|_| None).collect();
    for (i, judged) in mine.into_iter().chain(theirs) {
        slots[i] = Some(judged);
    }
    slots
        .into_iter()
        .map(|slot| slot.expect("every epoch was taken once"))
        .collect()
}

/// Judges one epoch's steps in trace order.
fn judge(walk: &Walk, source: &DealSource, epoch: &EpochSteps) -> EpochJudged {
    let mut judging = Judging {
        walk,
        dealer: Dealer::new(source),
        tallies: BTreeMap::new(),
        misdealt: BTreeSet::new(),
        judged: EpochJudged {
            epoch: epoch.epoch,
            shapes: Vec::new(),
            applicable: false,
            found: Vec::new(),
        },
    };
    for &i in &epoch.steps {
        judging.step(&walk.steps[i as usize]);
    }
    judging.judged
}

/// What a group's ranks trained on in the epoch, from the checker's own deal (its world is
/// the group's).
#[derive(Debug)]
struct Tally {
    /// The batches taken, from the batch the group's first recorded step of the epoch
    /// took; dropped once the epoch is judged, as nothing after counts.
    pairs: Option<PairTally>,
    world_size: u64,
    /// Nodes (numbered as in [`super::sampler::Workers::node`]) that trained the epoch's
    /// last batch.
    nodes_done: BTreeSet<u32>,
}

impl Tally {
    fn new(deal: &Arc<Deal>, first_batch: u64) -> Self {
        Tally {
            pairs: Some(PairTally::new(deal, first_batch)),
            world_size: deal.world_size(),
            nodes_done: BTreeSet::new(),
        }
    }
}

/// One epoch being judged.
struct Judging<'w, 'a, 't, 's, 'd> {
    walk: &'w Walk<'a, 't>,
    dealer: Dealer<'s, 'd>,
    /// By (store incarnation, round).
    tallies: BTreeMap<(u64, u64), Tally>,
    /// Workers (indices into [`Walk::workers`]) already reported for samples other than
    /// the deal's: one report each.
    misdealt: BTreeSet<u32>,
    judged: EpochJudged,
}

impl Judging<'_, '_, '_, '_, '_> {
    /// Deals the step's world; a step the deal has a batch for is compared and counted (a
    /// failing deal and a batch past the last are the sequence pass's to report). A run of
    /// steps is judged step by step, and its count of samples once for the whole run.
    fn step(&mut self, step: &StepRef) {
        let event = &self.walk.events[step.event];
        let (_, samples, first) = step_fields(event).expect("a step event");
        let mut dealt_count = 0;
        // The first step of the run given other samples: its batch and when it ended.
        let mut first_misdealt = None;
        for view in event.kind.each_step(event.at) {
            let Some(dealt) = self.one_step(step, &view.trained) else {
                return;
            };
            dealt_count += dealt.count;
            if !dealt.as_digested && first_misdealt.is_none() {
                first_misdealt = Some((view.trained.batch, view.at));
            }
        }
        // A step whose ranks were given other samples than the deal: once per workers.
        if (first_misdealt.is_some() || dealt_count != samples)
            && self.misdealt.insert(step.workers)
        {
            let t = first;
            let ranks = t.first_rank..t.first_rank + u64::from(t.ranks);
            let message = format!(
                "at batch {}, ranks {}..{} were given other samples than the sampler deals them ({samples} taken, {dealt_count} dealt)",
                first_misdealt.map_or(t.batch, |(batch, _)| batch), ranks.start, ranks.end,
            );
            let kind = CoverageKind::SamplesNotDealt;
            let mut found = Found::at_step(
                step.event,
                event,
                Part::Samples,
                t.world_size,
                (kind, &message),
            );
            // A run of steps is one event at its last step: the violation is at the step
            // that showed it, as on the step-by-step path, where each step is an event.
            if let Some((_, at)) = first_misdealt {
                found.violation.at = at;
            }
            self.judged.found.push(found);
        }
    }

    /// Deals, digests and counts one step; `None` when its deal fails or has no such batch.
    fn one_step(&mut self, step: &StepRef, t: &TrainedOn) -> Option<Dealt> {
        let workers = self.walk.workers[step.workers as usize];
        let group = self.walk.groups[step.group as usize];
        // The order the script's `set_epoch` pattern left the group's samplers on.
        let first_epoch = group.first_epoch.unwrap_or(self.judged.epoch);
        let set_epoch = self.walk.scenario.job.set_epoch;
        let sampler_epoch = set_epoch.sampler_epoch(self.judged.epoch, first_epoch);
        let deal = self.dealer.deal(sampler_epoch, t.world_size);
        if !self.judged.shapes.iter().any(|(ws, _)| *ws == t.world_size) {
            let shape = deal.map(|d| d.batches()).map_err(Clone::clone);
            self.judged.shapes.push((t.world_size, shape));
        }
        let deal = deal.ok()?;
        let batches = deal.batches();
        if t.batch >= batches {
            return None;
        }
        // The walk kept only steps whose ranks lie inside their world.
        let ranks = t.first_rank..t.first_rank + u64::from(t.ranks);
        let lens = deal.batch_lens(ranks, t.batch);
        let count: u64 = lens.clone().map(|(_, len)| len).sum();
        let digest = deal.digest(t.first_rank, t.ranks, t.batch);
        let tally = self
            .tallies
            .entry((group.store_incarnation, workers.round))
            .or_insert_with(|| Tally::new(deal, t.batch));
        let counting = tally.pairs.is_some();
        if let Some(pairs) = tally.pairs.as_mut() {
            for (rank, len) in lens {
                pairs.add(rank, t.batch, len);
            }
        }
        let judged = Dealt {
            count,
            as_digested: digest == t.samples_digest,
        };
        if !counting || t.batch + 1 != batches {
            return Some(judged);
        }
        tally.nodes_done.insert(workers.node);
        // Judged when as many nodes finished as the step's world of ranks spans: the
        // process group is that world, whatever a node's view of the round said.
        let nodes_in_world = t.world_size.div_ceil(u64::from(t.ranks.max(1)));
        if tally.nodes_done.len() as u64 >= nodes_in_world {
            self.judged.applicable = true;
            let pairs = tally.pairs.take().expect("counting");
            let verdict = judge_epoch(self.walk.scenario, &pairs);
            let event = &self.walk.events[step.event];
            for (kind, wrong) in verdict {
                let found = Found::at_step(
                    step.event,
                    event,
                    Part::Epoch,
                    tally.world_size,
                    (kind, &wrong),
                );
                self.judged.found.push(found);
            }
        }
        Some(judged)
    }
}

/// One step as the checker dealt it: how many samples, and whether its digest matched.
struct Dealt {
    count: u64,
    as_digested: bool,
}

/// What is wrong with a finished epoch's tally: its kind and one sentence each.
fn judge_epoch(scenario: &Scenario, t: &PairTally) -> Vec<(CoverageKind, String)> {
    let len = scenario.job.dataset.len;
    let sampler = &scenario.job.sampler;
    let world_size = t.epoch().world_size();
    let mut wrong = Vec::new();
    let (num_samples, total_size) = samples_per_rank(len, world_size, sampler.drop_last);
    let expected_per_rank =
        num_samples.saturating_sub(t.first_batch.saturating_mul(sampler.batch_size));
    let counts: Vec<u64> = t.rank_counts().collect();
    let ranks = counts.len() as u64;
    let min = counts.iter().copied().min().unwrap_or(0);
    let max = counts.iter().copied().max().unwrap_or(0);
    if ranks != world_size {
        wrong.push((
            CoverageKind::RanksMissing,
            format!("{ranks} of {world_size} ranks trained"),
        ));
    }
    if min != max {
        wrong.push((
            CoverageKind::UnequalCounts,
            format!("ranks trained on unequal counts, {min} to {max}"),
        ));
    }
    if max != expected_per_rank || min != expected_per_rank {
        wrong.push((
            CoverageKind::WrongCount,
            format!(
            "a rank trained on {min}..{max} samples, the sampler's num_samples leaves {expected_per_rank}"
        ),
        ));
    }
    let padding = total_size.saturating_sub(len);
    let distinct = t.distinct();
    let repeats = t.samples - distinct;
    if repeats > padding {
        wrong.push((
            CoverageKind::ExcessRepeats,
            format!("{repeats} samples were repeated, but padding accounts for only {padding}"),
        ));
    }
    let whole = total_size.min(len);
    if t.first_batch == 0 && distinct != whole {
        wrong.push((
            CoverageKind::IncompleteCoverage,
            format!(
            "the ranks together covered {distinct} distinct samples of the {whole} the epoch must cover"
        ),
        ));
    }
    wrong
}
