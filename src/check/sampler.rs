//! The `sampler.*` invariants, judged on what the ranks trained on: every recorded step says
//! which batch of which epoch a node's ranks took and carries a digest of the ids they were
//! given; the checker deals that batch again from the samplers themselves
//! (`sampler_deal`) and counts coverage from its own deal. It never reads the job's sample
//! ledger or its summary (`EpochCovered`), so a ledger bug cannot hide a sampler bug.
//!
//! The walk is split in three: one pass over the trace lists the steps of started groups;
//! each epoch's steps are then dealt and judged on their own (`sampler_epoch`), on two
//! threads for a long trace; a last pass follows every node's steps from batch to batch.
//! What each part finds is tagged with the step that showed it and merged in trace order,
//! so the verdict and every message are the same whichever thread judged which epoch.
//!
//! Bounded: one entry of a few words per recorded step; per epoch being judged (one per
//! thread), its deals (one per world size, at most `DEALS_CACHED_MAX`) and one bit per
//! (rank, batch) of the deal per group that trained it, all freed when the epoch is judged.

use super::kind::kind_enum;
use super::sampler_epoch::{judge_epochs, EpochJudged, EpochSteps, SECOND_THREAD_FROM_IDS};
use super::InvariantResult;
use super::Violation;
use crate::invariant::Invariant;
use crate::scenario::model::Scenario;
use crate::trace::{Event, EventKind, Trace, TraceNode, TrainedOn};
use std::collections::BTreeMap;

kind_enum! {
    /// The ways `sampler.coverage` breaks: a step out of place, samples other than the
    /// deal's, or a finished epoch's counts.
    pub enum CoverageKind {
        /// A step's world has more ranks than the cluster can hold.
        WorldTooLarge,
        /// A step's ranks lie outside its world.
        RanksOutsideWorld,
        /// The sampler cannot deal the step's epoch to its world.
        Undealable,
        /// A step trained a batch past the epoch's last.
        BatchPastEnd,
        /// A node's ranks trained a batch again.
        BatchRepeated,
        /// A node's ranks skipped batches.
        BatchesSkipped,
        /// A node's ranks went to an epoch other than the next.
        EpochJumped,
        /// A new epoch began before the last batch of the one before.
        EpochBegunEarly,
        /// A new epoch began at another batch than batch 0.
        EpochBegunMidway,
        /// A step's ranks were given other samples than the sampler deals them.
        SamplesNotDealt,
        /// Fewer ranks trained a finished epoch than its world holds.
        RanksMissing,
        /// The ranks of a finished epoch trained on unequal counts.
        UnequalCounts,
        /// A rank trained on another count than the sampler's `num_samples` leaves it.
        WrongCount,
        /// More samples repeated than the sampler's padding accounts for.
        ExcessRepeats,
        /// An epoch run from its start did not cover what it must.
        IncompleteCoverage,
    }
}

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
    coverage_with(scenario, run_seed, trace, SECOND_THREAD_FROM_IDS)
}

/// [`coverage`], judging epochs on a second thread too once they deal
/// `second_thread_from_ids` sample ids (tests pin it to compare one thread with two).
fn coverage_with(
    scenario: &Scenario,
    run_seed: u64,
    trace: &Trace,
    second_thread_from_ids: u64,
) -> InvariantResult {
    let walk = Walk::of(scenario, trace);
    let epochs = walk.steps_by_epoch();
    let judged = judge_epochs(&walk, &epochs, run_seed, second_thread_from_ids);
    let applicable = judged.iter().any(|j| j.applicable);
    let mut found = walk.early;
    found.extend(in_sequence(&walk.steps, &walk.workers, &judged, trace));
    for epoch in judged {
        found.extend(epoch.found);
    }
    // Stable: what one step showed keeps the order it was found in.
    found.sort_by_key(|f| (f.event, f.part));
    let violations = found.into_iter().map(|f| f.violation).collect();
    InvariantResult::judge(Invariant::SamplerCoverage, applicable, violations)
}

/// A node's worker group as its agent started it: the rendezvous it belongs to.
#[derive(Debug, Clone, Copy)]
pub(super) struct Group {
    pub store_incarnation: u64,
    /// The data epoch of the group's first recorded step: its samplers were new then, which
    /// decides the order a `job.set_epoch = "late"` script deals.
    pub first_epoch: Option<u64>,
}

/// One node's workers, as a started group's steps name them.
#[derive(Debug, Clone, Copy)]
pub(super) struct Workers {
    /// The node, numbered in the order the trace first starts workers on it.
    pub node: u32,
    pub round: u64,
}

/// A recorded step of a started group whose ranks fit its world, or a run of them (one
/// `Step` event): to be dealt and judged step by step.
#[derive(Debug, Clone, Copy)]
pub(super) struct StepRef {
    /// Its index in the trace.
    pub event: usize,
    /// Index into [`Walk::workers`].
    pub workers: u32,
    /// Index into [`Walk::groups`]: the group its workers were in when it was recorded.
    pub group: u32,
}

/// Which check of a step found a violation: a step's violations are listed in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Part {
    /// Its world, its deal, its batch and its place after the node's previous step.
    Place,
    /// The samples its ranks were given.
    Samples,
    /// The epoch it finished.
    Epoch,
}

/// A violation, tagged with the step that showed it.
#[derive(Debug)]
pub(super) struct Found {
    pub event: usize,
    pub part: Part,
    pub violation: Violation,
}

impl Found {
    /// A violation of `kind` of the step at `event`: `epoch E (world size W): message`.
    pub fn at_step(
        event: usize,
        e: &Event,
        part: Part,
        world_size: u64,
        (kind, message): (CoverageKind, &str),
    ) -> Self {
        let (epoch, _, _) = step_fields(e).expect("a step event");
        let message = format!("epoch {epoch} (world size {world_size}): {message}");
        Found {
            event,
            part,
            violation: Violation::new(e.at, e.node, kind, message),
        }
    }
}

/// A step event's epoch, sample count and what it trained on.
pub(super) fn step_fields(event: &Event) -> Option<(u64, u64, TrainedOn)> {
    match &event.kind {
        EventKind::Step {
            epoch,
            samples,
            trained,
            ..
        } => Some((*epoch, *samples, *trained)),
        _ => None,
    }
}

/// The first pass: the steps of started groups, and the violations seen without a deal.
pub(super) struct Walk<'a, 't> {
    pub scenario: &'a Scenario,
    pub events: &'t [Event],
    pub workers: Vec<Workers>,
    pub groups: Vec<Group>,
    /// In trace order.
    pub steps: Vec<StepRef>,
    /// Steps whose world the cluster cannot hold or whose ranks lie outside it.
    early: Vec<Found>,
}

impl<'a, 't> Walk<'a, 't> {
    fn of(scenario: &'a Scenario, trace: &'t Trace) -> Self {
        let cluster = &scenario.cluster;
        let ranks_max = u64::from(cluster.nodes + cluster.spare_nodes)
            * u64::from(scenario.agent.nproc_per_node);
        let mut walk = Walk {
            scenario,
            events: &trace.events,
            workers: Vec::new(),
            groups: Vec::new(),
            steps: Vec::new(),
            early: Vec::new(),
        };
        // (round, pid, node) → (index into `workers`, index into `groups`).
        let mut started: BTreeMap<(u64, u32, TraceNode), (u32, u32)> = BTreeMap::new();
        let mut nodes: BTreeMap<TraceNode, u32> = BTreeMap::new();
        for (i, event) in trace.events.iter().enumerate() {
            let Some(node) = event.node else {
                continue;
            };
            match &event.kind {
                EventKind::WorkersStarted {
                    pid,
                    round,
                    store_incarnation,
                    ..
                } => walk.workers_started(
                    (*round, *pid, node),
                    *store_incarnation,
                    &mut started,
                    &mut nodes,
                ),
                EventKind::Step {
                    pid,
                    round,
                    epoch,
                    trained,
                    ..
                } => {
                    if let Some(&(workers, group)) = started.get(&(*round, *pid, node)) {
                        let first = &mut walk.groups[group as usize].first_epoch;
                        first.get_or_insert(*epoch);
                        walk.step(
                            i,
                            StepRef {
                                event: i,
                                workers,
                                group,
                            },
                            trained,
                            ranks_max,
                        );
                    }
                }
                _ => {}
            }
        }
        walk
    }

    /// Workers started on `key`'s (round, pid, node): a new group always, and new workers
    /// unless that process already started some (a later group of the same workers).
    fn workers_started(
        &mut self,
        key: (u64, u32, TraceNode),
        store_incarnation: u64,
        started: &mut BTreeMap<(u64, u32, TraceNode), (u32, u32)>,
        nodes: &mut BTreeMap<TraceNode, u32>,
    ) {
        let (round, _, node) = key;
        let group = index(self.groups.len());
        self.groups.push(Group {
            store_incarnation,
            first_epoch: None,
        });
        let next_node = index(nodes.len());
        let node_index = *nodes.entry(node).or_insert(next_node);
        let next_workers = index(self.workers.len());
        let entry = started.entry(key).or_insert((next_workers, group));
        entry.1 = group;
        if entry.0 == next_workers {
            self.workers.push(Workers {
                node: node_index,
                round,
            });
        }
    }

    /// Keeps a step whose world fits the cluster and whose ranks fit its world.
    fn step(&mut self, i: usize, step: StepRef, t: &TrainedOn, ranks_max: u64) {
        let event = &self.events[i];
        let (kind, message) = if t.world_size > ranks_max {
            // Not dealt: a world the cluster cannot hold would only exhaust memory.
            (
                CoverageKind::WorldTooLarge,
                format!("a world of more ranks than the cluster's {ranks_max}"),
            )
        } else if t
            .first_rank
            .checked_add(u64::from(t.ranks))
            .is_none_or(|end| end > t.world_size)
        {
            let message = format!(
                "ranks {}..{} trained, outside a world of {} ranks",
                t.first_rank,
                t.first_rank.saturating_add(u64::from(t.ranks)),
                t.world_size
            );
            (CoverageKind::RanksOutsideWorld, message)
        } else {
            self.steps.push(step);
            return;
        };
        let found = Found::at_step(i, event, Part::Place, t.world_size, (kind, &message));
        self.early.push(found);
    }

    /// The kept steps' indices grouped by epoch, epochs in order, each in trace order.
    fn steps_by_epoch(&self) -> Vec<EpochSteps> {
        let mut by_epoch: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
        for (i, step) in self.steps.iter().enumerate() {
            let (epoch, _, _) = step_fields(&self.events[step.event]).expect("a step event");
            by_epoch.entry(epoch).or_default().push(index(i));
        }
        by_epoch
            .into_iter()
            .map(|(epoch, steps)| EpochSteps { epoch, steps })
            .collect()
    }
}

/// A list index as the walk stores it: a trace too long for `u32` steps is not a trace
/// this harness can record.
fn index(len: usize) -> u32 {
    u32::try_from(len).expect("fewer than 2^32 started groups and steps")
}

/// Where a node's workers were after their previous step: epoch, batch, batches per rank.
#[derive(Debug, Clone, Copy)]
struct Place {
    epoch: u64,
    batch: u64,
    batches: u64,
}

/// The last pass: each kept step's deal must have dealt, its batch must be one the deal
/// has, and it must follow its workers' previous step.
fn in_sequence(
    steps: &[StepRef],
    workers: &[Workers],
    judged: &[EpochJudged],
    trace: &Trace,
) -> Vec<Found> {
    let shapes: BTreeMap<(u64, u64), &Result<u64, crate::sampler::SamplerError>> = judged
        .iter()
        .flat_map(|j| j.shapes.iter().map(|(ws, shape)| ((j.epoch, *ws), shape)))
        .collect();
    let mut last: Vec<Option<Place>> = vec![None; workers.len()];
    let mut found = Vec::new();
    for step in steps {
        let event = &trace.events[step.event];
        let (epoch, _, _) = step_fields(event).expect("a step event");
        for view in event.kind.each_step(event.at) {
            let t = view.trained;
            let (kind, message) = match shapes[&(epoch, t.world_size)] {
                Err(e) => (
                    CoverageKind::Undealable,
                    format!("the sampler cannot deal it: {e}"),
                ),
                Ok(batches) if t.batch >= *batches => (
                    CoverageKind::BatchPastEnd,
                    format!("batch {} trained, past the last of {batches}", t.batch),
                ),
                Ok(batches) => {
                    let place = Place {
                        epoch,
                        batch: t.batch,
                        batches: *batches,
                    };
                    let before = last[step.workers as usize].replace(place);
                    match before.and_then(|before| out_of_sequence(before, place)) {
                        Some(found) => found,
                        None => continue,
                    }
                }
            };
            let f = Found::at_step(
                step.event,
                event,
                Part::Place,
                t.world_size,
                (kind, &message),
            );
            found.push(f);
        }
    }
    found
}

/// Why a node's step at `now` cannot follow its step at `before`, if it cannot: within an
/// epoch the next batch, else the next epoch's first batch after the last one's.
fn out_of_sequence(before: Place, now: Place) -> Option<(CoverageKind, String)> {
    let (b, n) = (before, now);
    if n.epoch == b.epoch {
        return match n.batch.cmp(&(b.batch + 1)) {
            std::cmp::Ordering::Equal => None,
            std::cmp::Ordering::Less => Some((
                CoverageKind::BatchRepeated,
                format!("batch {} trained again, after batch {}", n.batch, b.batch),
            )),
            std::cmp::Ordering::Greater => Some((
                CoverageKind::BatchesSkipped,
                format!(
                    "batches {}..{} skipped, from batch {} to {}",
                    b.batch + 1,
                    n.batch,
                    b.batch,
                    n.batch
                ),
            )),
        };
    }
    if n.epoch != b.epoch + 1 {
        return Some((
            CoverageKind::EpochJumped,
            format!("the ranks went from epoch {} to epoch {}", b.epoch, n.epoch),
        ));
    }
    if b.batch + 1 != b.batches {
        return Some((
            CoverageKind::EpochBegunEarly,
            format!(
                "begun after batch {} of epoch {}'s {}, not its last",
                b.batch, b.epoch, b.batches
            ),
        ));
    }
    (n.batch != 0).then(|| {
        (
            CoverageKind::EpochBegunMidway,
            format!("begun at batch {}, not at batch 0", n.batch),
        )
    })
}

#[cfg(test)]
#[path = "sampler_tests.rs"]
mod tests;
