//! The `sampler.*` invariants, judged on what the ranks trained on: every recorded step says
//! which batch of which epoch a node's ranks took and carries a digest of the ids they were
//! given; the checker deals that batch again from the samplers themselves
//! (`sampler_deal`) and counts coverage from its own deal. It never reads the job's sample
//! ledger or its summary (`EpochCovered`), so a ledger bug cannot hide a sampler bug.
//!
//! Bounded: one bitset of `dataset.len` bits per (group, epoch) still open, freed when the
//! epoch is judged, and a few dealt epochs at a time.

use super::sampler_deal::{Deal, Dealer};
use super::{InvariantResult, Violation};
use crate::sampler::samples_per_rank;
use crate::scenario::model::Scenario;
use crate::trace::{samples_digest, Event, EventKind, Trace, TrainedOn};
use std::collections::{BTreeMap, BTreeSet};

/// `sampler.coverage`: per epoch a group finished (each of its nodes trained the epoch's
/// last batch), every rank trained on the same number of samples; an epoch run from its
/// start covers the whole dataset (all of it, or with `drop_last` exactly `num_samples ×
/// world_size` distinct samples); and the only repeats are the sampler's padding
/// (`total_size − len`). An epoch resumed mid-way is held to the counts of its remaining
/// batches and to the padding bound. Every step of a started group must take the batch after
/// its previous one (a new epoch from batch 0, after the last batch of the one before), and
/// its ranks must have been given the samples the sampler deals them. Not applicable when no
/// epoch was finished.
pub(super) fn coverage(scenario: &Scenario, run_seed: u64, trace: &Trace) -> InvariantResult {
    let mut coverage = Coverage {
        scenario,
        dealer: Dealer::new(&scenario.job, run_seed),
        groups: BTreeMap::new(),
        last: BTreeMap::new(),
        tallies: BTreeMap::new(),
        misdealt: BTreeSet::new(),
        applicable: false,
        violations: Vec::new(),
        batches: Vec::new(),
    };
    for event in &trace.events {
        let Some(node) = event.node.as_deref() else {
            continue;
        };
        match &event.kind {
            EventKind::WorkersStarted {
                pid,
                round,
                world_size,
                store_incarnation,
                ..
            } => {
                let group = Group {
                    store_incarnation: *store_incarnation,
                    members: *world_size as usize,
                };
                coverage.groups.insert((node, *pid, *round), group);
            }
            EventKind::Step {
                pid,
                round,
                epoch,
                samples,
                trained,
                ..
            } => {
                let key = (node, *pid, *round);
                if let Some(group) = coverage.groups.get(&key).copied() {
                    let step = StepSeen {
                        event,
                        workers: key,
                        group,
                        epoch: *epoch,
                        samples: *samples,
                        trained: *trained,
                    };
                    coverage.step(&step);
                }
            }
            _ => {}
        }
    }
    InvariantResult::judge("sampler.coverage", coverage.applicable, coverage.violations)
}

/// A node's worker group as its agent started it: the rendezvous it belongs to, and how
/// many nodes it was told the group has.
#[derive(Debug, Clone, Copy)]
struct Group {
    store_incarnation: u64,
    members: usize,
}

/// One node's workers: (node, pid, round), the node's name borrowed from the trace.
type Workers<'t> = (&'t str, u32, u64);

/// One recorded step of a started group.
struct StepSeen<'a> {
    event: &'a Event,
    workers: Workers<'a>,
    group: Group,
    epoch: u64,
    samples: u64,
    trained: TrainedOn,
}

impl StepSeen<'_> {
    fn violation(&self, message: String) -> Violation {
        Violation::new(
            self.event.at_us,
            self.event.node.as_deref(),
            format!(
                "epoch {} (world size {}): {message}",
                self.epoch, self.trained.world_size
            ),
        )
    }
}

/// Where a node's workers were after their previous step: epoch, batch, batches per rank.
#[derive(Debug, Clone, Copy)]
struct Place {
    epoch: u64,
    batch: u64,
    batches: u64,
}

/// What a group's ranks trained on in one epoch, from the checker's own deal.
#[derive(Debug)]
struct Tally<'t> {
    world_size: u64,
    /// The batch the group's first recorded step of the epoch took.
    first_batch: u64,
    seen: Vec<u64>,
    samples: u64,
    distinct: u64,
    /// Samples per global rank, `None` until the rank trains.
    per_rank: Vec<Option<u64>>,
    /// Nodes that trained the epoch's last batch.
    nodes_done: BTreeSet<&'t str>,
    judged: bool,
}

impl Tally<'_> {
    fn new(world_size: u64, first_batch: u64, len: u64) -> Self {
        Tally {
            world_size,
            first_batch,
            seen: vec![0; len.div_ceil(64) as usize],
            samples: 0,
            distinct: 0,
            per_rank: vec![None; world_size as usize],
            nodes_done: BTreeSet::new(),
            judged: false,
        }
    }

    fn add(&mut self, rank: u64, ids: &[u64]) {
        for &i in ids {
            if let Some(w) = self.seen.get_mut((i / 64) as usize) {
                let bit = 1u64 << (i % 64);
                self.distinct += u64::from(*w & bit == 0);
                *w |= bit;
            }
        }
        self.samples += ids.len() as u64;
        if let Some(count) = self.per_rank.get_mut(rank as usize) {
            *count = Some(count.unwrap_or(0) + ids.len() as u64);
        }
    }
}

struct Coverage<'a, 't> {
    scenario: &'a Scenario,
    dealer: Dealer<'a>,
    groups: BTreeMap<Workers<'t>, Group>,
    last: BTreeMap<Workers<'t>, Place>,
    /// By (store incarnation, round, epoch).
    tallies: BTreeMap<(u64, u64, u64), Tally<'t>>,
    /// (workers, epoch) already reported for samples other than the deal's: one each.
    misdealt: BTreeSet<(Workers<'t>, u64)>,
    applicable: bool,
    violations: Vec<Violation>,
    /// The deal of the current step, by local rank.
    batches: Vec<Vec<u64>>,
}

impl<'t> Coverage<'_, 't> {
    fn step(&mut self, step: &StepSeen<'t>) {
        let t = step.trained;
        let cluster = &self.scenario.cluster;
        let ranks_max = u64::from(cluster.nodes + cluster.spare_nodes)
            * u64::from(self.scenario.agent.nproc_per_node);
        if t.world_size > ranks_max {
            // Not dealt: a world the cluster cannot hold would only exhaust memory.
            let message = format!("a world of more ranks than the cluster's {ranks_max}");
            self.violations.push(step.violation(message));
            return;
        }
        let Some(last_rank) = t
            .first_rank
            .checked_add(u64::from(t.ranks))
            .filter(|&end| end <= t.world_size)
        else {
            let message = format!(
                "ranks {}..{} trained, outside a world of {} ranks",
                t.first_rank,
                t.first_rank.saturating_add(u64::from(t.ranks)),
                t.world_size
            );
            self.violations.push(step.violation(message));
            return;
        };
        let deal = match self.dealer.deal(step.epoch, t.world_size) {
            Ok(deal) => deal,
            Err(e) => {
                let message = format!("the sampler cannot deal it: {e}");
                self.violations.push(step.violation(message));
                return;
            }
        };
        let batches = deal.batches();
        if t.batch >= batches {
            let message = format!("batch {} trained, past the last of {batches}", t.batch);
            self.violations.push(step.violation(message));
            return;
        }
        let place = Place {
            epoch: step.epoch,
            batch: t.batch,
            batches,
        };
        if let Some(message) = self
            .last
            .insert(step.workers, place)
            .and_then(|before| out_of_sequence(before, place))
        {
            self.violations.push(step.violation(message));
        }
        redeal(deal, &t, last_rank, &mut self.batches);
        self.compare(step);
        self.tally(step, batches);
    }

    /// A step whose ranks were given other samples than the deal: once per workers and epoch.
    fn compare(&mut self, step: &StepSeen<'t>) {
        let t = step.trained;
        let dealt: u64 = self.batches.iter().map(|b| b.len() as u64).sum();
        let digest = samples_digest(self.batches.iter().map(Vec::as_slice));
        if (digest, dealt) == (t.samples_digest, step.samples)
            || !self.misdealt.insert((step.workers, step.epoch))
        {
            return;
        }
        let message = format!(
            "at batch {}, ranks {}..{} were given other samples than the sampler deals them ({} taken, {dealt} dealt)",
            t.batch,
            t.first_rank,
            t.first_rank + u64::from(t.ranks),
            step.samples,
        );
        self.violations.push(step.violation(message));
    }

    /// Adds the step's deal to its group's epoch; when the last node of the group trained
    /// the epoch's last batch, judges the epoch.
    fn tally(&mut self, step: &StepSeen<'t>, batches: u64) {
        let t = step.trained;
        let key = (step.group.store_incarnation, step.workers.2, step.epoch);
        let len = self.scenario.job.dataset.len;
        let tally = self
            .tallies
            .entry(key)
            .or_insert_with(|| Tally::new(t.world_size, t.batch, len));
        if tally.judged {
            return;
        }
        for (rank, ids) in (t.first_rank..).zip(&self.batches) {
            tally.add(rank, ids);
        }
        if t.batch + 1 != batches {
            return;
        }
        tally.nodes_done.insert(step.workers.0);
        // Judged when a node that finished counts as many finished nodes as it was told
        // its group has.
        if tally.nodes_done.len() >= step.group.members {
            self.applicable = true;
            let verdict = judge_epoch(self.scenario, tally);
            tally.judged = true;
            tally.seen = Vec::new();
            tally.per_rank = Vec::new();
            self.violations.extend(verdict.into_iter().map(|m| {
                Violation::new(
                    step.event.at_us,
                    step.event.node.as_deref(),
                    format!(
                        "epoch {} (world size {}): {m}",
                        step.epoch, tally.world_size
                    ),
                )
            }));
        }
    }
}

/// Deals the step's batch to its ranks `first_rank..last_rank`, one list per local rank.
fn redeal(deal: &Deal, t: &TrainedOn, last_rank: u64, batches: &mut Vec<Vec<u64>>) {
    let ranks = (last_rank - t.first_rank) as usize;
    batches.resize_with(ranks, Vec::new);
    for (rank, out) in (t.first_rank..).zip(batches.iter_mut()) {
        deal.batch_into(rank, t.batch, out);
    }
}

/// Why a node's step at `now` cannot follow its step at `before`, if it cannot: within an
/// epoch the next batch, else the next epoch's first batch after the last one's.
fn out_of_sequence(before: Place, now: Place) -> Option<String> {
    let (b, n) = (before, now);
    if n.epoch == b.epoch {
        return match n.batch.cmp(&(b.batch + 1)) {
            std::cmp::Ordering::Equal => None,
            std::cmp::Ordering::Less => Some(format!(
                "batch {} trained again, after batch {}",
                n.batch, b.batch
            )),
            std::cmp::Ordering::Greater => Some(format!(
                "batches {}..{} skipped, from batch {} to {}",
                b.batch + 1,
                n.batch,
                b.batch,
                n.batch
            )),
        };
    }
    if n.epoch != b.epoch + 1 {
        return Some(format!(
            "the ranks went from epoch {} to epoch {}",
            b.epoch, n.epoch
        ));
    }
    if b.batch + 1 != b.batches {
        return Some(format!(
            "begun after batch {} of epoch {}'s {}, not its last",
            b.batch, b.epoch, b.batches
        ));
    }
    (n.batch != 0).then(|| format!("begun at batch {}, not at batch 0", n.batch))
}

/// What is wrong with a finished epoch's tally, one sentence each.
fn judge_epoch(scenario: &Scenario, t: &Tally) -> Vec<String> {
    let len = scenario.job.dataset.len;
    let sampler = &scenario.job.sampler;
    let world_size = t.world_size;
    let mut wrong = Vec::new();
    let (num_samples, total_size) = samples_per_rank(len, world_size, sampler.drop_last);
    let expected_per_rank =
        num_samples.saturating_sub(t.first_batch.saturating_mul(sampler.batch_size));
    let counts: Vec<u64> = t.per_rank.iter().flatten().copied().collect();
    let ranks = counts.len() as u64;
    let min = counts.iter().copied().min().unwrap_or(0);
    let max = counts.iter().copied().max().unwrap_or(0);
    if ranks != world_size {
        wrong.push(format!("{ranks} of {world_size} ranks trained"));
    }
    if min != max {
        wrong.push(format!("ranks trained on unequal counts, {min} to {max}"));
    }
    if max != expected_per_rank || min != expected_per_rank {
        wrong.push(format!(
            "a rank trained on {min}..{max} samples, the sampler's num_samples leaves {expected_per_rank}"
        ));
    }
    let padding = total_size.saturating_sub(len);
    let repeats = t.samples - t.distinct;
    if repeats > padding {
        wrong.push(format!(
            "{repeats} samples were repeated, but padding accounts for only {padding}"
        ));
    }
    let whole = total_size.min(len);
    if t.first_batch == 0 && t.distinct != whole {
        wrong.push(format!(
            "the ranks together covered {} distinct samples of the {whole} the epoch must cover",
            t.distinct
        ));
    }
    wrong
}

#[cfg(test)]
#[path = "sampler_tests.rs"]
mod tests;
