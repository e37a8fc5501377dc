//! Goodput: how much of a job's wall time went to training steps it kept, and what took the
//! rest, cause by cause, read from the trace; and the job's fate in one sentence.
//!
//! The wall time runs from the start until the job finished its last step, failed for good
//! (the first agent to exit FAILED after the last step), or reached its time limit. It is
//! cut into pieces that never overlap, so the productive time and the badput add up to it
//! exactly:
//! - each step of a worker group, as its group rank 0 recorded it, spans the time from the
//!   step before (the group's first step: one step's length back, not before its workers
//!   started); it is productive when its step is never done again, else wasted progress;
//! - a failed job's steps after its last checkpoint are lost when it failed: the next
//!   attempt computes them again;
//! - the rest is named after what the agents were doing, in the vocabulary of
//!   ml-goodput-measurement: a step in progress that never ended is wasted progress; from a
//!   fault that hits a training group until an agent acts is detection (heartbeat expiry, a
//!   collective hanging until its timeout); then rendezvous and restart, or waiting for
//!   nodes while fewer than `min_nodes` agents run; worker start and checkpoint restore until
//!   the group's first step.

use crate::check::at_secs;
use crate::scenario::model::{FaultName, Outcome, Scenario};
use crate::sim_time::{SimDuration, SimInstant};
use crate::trace::{AgentState, Event, EventKind, RunEnd, Trace, TraceNode};
use serde::Serialize;
use std::collections::BTreeMap;

/// Where a moment of the job's wall time went that was not a kept step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum Cause {
    /// No group trains and fewer than `min_nodes` agents run.
    WaitingForNodes,
    /// A fault hit a training group and no agent has acted yet.
    Detection,
    /// Agents stop workers, re-rendezvous and agree on a new group (the first one too).
    RendezvousRestart,
    /// From a group's workers' spawn to the end of their first step's compute: Python,
    /// imports, the process group and the checkpoint's restore.
    WorkerStartRestore,
    /// Steps done again after a rollback, and a step in progress that never ended.
    WastedProgress,
    /// Writing checkpoints while training waited.
    CheckpointSave,
    /// A failed job's steps since its last checkpoint: the progress its failure lost for
    /// good (a new attempt starts again from that checkpoint).
    LostWhenFailed,
}

/// Every cause, in the order reports list them.
pub const CAUSES: [Cause; 7] = [
    Cause::WaitingForNodes,
    Cause::Detection,
    Cause::RendezvousRestart,
    Cause::WorkerStartRestore,
    Cause::WastedProgress,
    Cause::CheckpointSave,
    Cause::LostWhenFailed,
];

/// What a fate says between the node that ended the job and its agent's exit reason; the
/// summary over seeds reads the reason after it.
pub const AGENT_FAILED: &str = "'s agent failed: ";

/// The goodput of one run (the report's `goodput` object).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Goodput {
    /// Effective training time ratio: `productive_us / wall_us` (0 for no wall time).
    pub ettr: f64,
    pub wall_us: u64,
    pub productive_us: u64,
    /// Every cause, zero or not; with `productive_us` they add up to `wall_us`.
    pub badput_us: BTreeMap<&'static str, u64>,
    /// When training stopped for good: the job's last step when it finished, else the
    /// moment its failure became final (or its last step, when the time limit cut it).
    pub training_stopped_at_us: u64,
    /// The job's fate in one sentence.
    pub fate: String,
}

/// One step as a group's rank 0 recorded it.
#[derive(Debug, Clone, Copy)]
struct StepSpan {
    start: SimInstant,
    end: SimInstant,
    step: u64,
    /// The blocking checkpoint write at the span's start (after a checkpointed step).
    save: SimDuration,
}

/// Measures the goodput of a run from its trace.
pub fn measure(scenario: &Scenario, trace: &Trace, end: &RunEnd) -> Goodput {
    measure_with_stretches(scenario, trace, end).0
}

/// A stretch of the wall time given to one cause (`None`: kept training), as the page
/// draws it where it happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stretch {
    pub start: SimInstant,
    pub end: SimInstant,
    pub cause: Option<Cause>,
}

/// The goodput and the wall time cut into its stretches, in time order: the pieces the
/// figures sum, adjacent pieces of one cause joined. They cover `[0, wall_us)` exactly.
pub fn measure_with_stretches(
    scenario: &Scenario,
    trace: &Trace,
    end: &RunEnd,
) -> (Goodput, Vec<Stretch>) {
    let spans = step_spans(scenario, &trace.events);
    // The step training last reached (after any rollback), as the report's `steps_done`.
    let final_step = spans.iter().max_by_key(|s| s.end).map_or(0, |s| s.step);
    let last_progress = spans
        .iter()
        .map(|s| s.end)
        .max()
        .unwrap_or(SimInstant::START);
    let failure = (end.outcome == Outcome::Failed)
        .then(|| final_failure(&trace.events, last_progress, end.ended_at));
    let wall_end = match (end.outcome, &failure) {
        (Outcome::Succeeded, _) => spans
            .iter()
            .filter(|s| s.step == scenario.job.steps)
            .map(|s| s.end)
            .max()
            .unwrap_or(end.ended_at),
        (_, Some(f)) => f.at,
        _ => end.ended_at,
    };
    let stopped = match end.outcome {
        Outcome::TimedOut => last_progress,
        _ => wall_end,
    };
    let fates = step_fates(&trace.events, &spans, failure.is_some(), stopped);
    let changes = cause_changes(scenario, &trace.events);
    let mut tally = Tally::default();
    let mut cursor = SimInstant::START;
    for (i, span) in spans.iter().enumerate() {
        let start = span.start.max(cursor).min(wall_end);
        let end = span.end.min(wall_end);
        tally.gap(&changes, cursor, start);
        if end > start {
            let length = end.since(start);
            let save = span.save.min(length);
            tally.add(Some(Cause::CheckpointSave), start, save);
            tally.add(fates[i], start.after(save), length.saturating_sub(save));
        }
        cursor = cursor.max(end);
    }
    tally.gap(&changes, cursor, wall_end);
    let fate = fate(scenario, end.outcome, final_step, stopped, failure.as_ref());
    let stretches = std::mem::take(&mut tally.stretches);
    (
        tally.finish(wall_end.since_start(), stopped, fate),
        stretches,
    )
}

/// The steps of every worker group, as its group rank 0 recorded them, in time order.
fn step_spans(scenario: &Scenario, events: &[Event]) -> Vec<StepSpan> {
    // (pid, round) of each group rank 0, with when its workers started.
    let mut started: BTreeMap<(u32, u64), SimInstant> = BTreeMap::new();
    let mut ends: BTreeMap<(u32, u64), Vec<(SimInstant, u64)>> = BTreeMap::new();
    for e in events {
        match &e.kind {
            EventKind::WorkersStarted {
                pid,
                round,
                group_rank: 0,
                ..
            } => {
                started.insert((*pid, *round), e.at);
            }
            EventKind::Step { pid, round, .. } if started.contains_key(&(*pid, *round)) => {
                let ends = ends.entry((*pid, *round)).or_default();
                ends.extend(e.kind.each_step(e.at).map(|v| (v.at, v.step)));
            }
            _ => {}
        }
    }
    let job = &scenario.job;
    let mut spans = Vec::new();
    for (group, steps) in &ends {
        let workers_at = started[group];
        for (i, &(end, step)) in steps.iter().enumerate() {
            let start = match i {
                0 => {
                    let length = steps.get(1).map_or(job.step_time, |next| next.0.since(end));
                    end.before(length).max(workers_at)
                }
                _ => steps[i - 1].0,
            };
            let after_checkpoint = i > 0 && steps[i - 1].1.is_multiple_of(job.checkpoint_every);
            let save = match after_checkpoint {
                true => job.checkpoint_save_time.min(end.since(start)),
                false => SimDuration::ZERO,
            };
            spans.push(StepSpan {
                start,
                end,
                step,
                save,
            });
        }
    }
    spans.sort_by_key(|s| (s.start, s.end, s.step));
    spans
}

/// What became of each span's step: kept (`None`) when it is the last time that step was
/// done, and for a failed job only up to its last checkpoint before training stopped;
/// else the cause its time counts for.
fn step_fates(
    events: &[Event],
    spans: &[StepSpan],
    failed: bool,
    stopped: SimInstant,
) -> Vec<Option<Cause>> {
    let mut last_of_step: BTreeMap<u64, usize> = BTreeMap::new();
    for (i, span) in spans.iter().enumerate() {
        let keep = last_of_step.entry(span.step).or_insert(i);
        if spans[*keep].end <= span.end {
            *keep = i;
        }
    }
    let checkpointed = events
        .iter()
        .take_while(|e| e.at <= stopped)
        .filter_map(|e| match e.kind {
            EventKind::Checkpoint { step, .. } => Some(step),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let mut fates = vec![Some(Cause::WastedProgress); spans.len()];
    for (step, i) in last_of_step {
        fates[i] = match failed && step > checkpointed {
            true => Some(Cause::LostWhenFailed),
            false => None,
        };
    }
    fates
}

/// The agent exit that ended a failed job's training for good.
#[derive(Debug, Clone)]
struct FinalFailure {
    at: SimInstant,
    node: Option<TraceNode>,
    reason: Option<String>,
}

/// The first agent that exited FAILED after the job's last step, or the job's end.
fn final_failure(
    events: &[Event],
    last_progress: SimInstant,
    ended_at: SimInstant,
) -> FinalFailure {
    let exit = events.iter().find(|e| {
        e.at >= last_progress
            && matches!(
                e.kind,
                EventKind::AgentExited {
                    state: AgentState::Failed,
                    ..
                }
            )
    });
    match exit {
        Some(e) => FinalFailure {
            at: e.at.min(ended_at),
            node: e.node,
            reason: match &e.kind {
                EventKind::AgentExited { reason, .. } => Some(reason.to_string()),
                _ => None,
            },
        },
        None => FinalFailure {
            at: ended_at,
            node: None,
            reason: None,
        },
    }
}

/// Whether a fault can stop a training group (a process, host, link or GPU lost); the
/// others (a start, a heal, a latency change, a slow GPU) do not end a step.
fn disrupts(fault: FaultName) -> bool {
    use FaultName::*;
    match fault {
        Kill | PowerOff | Stop | Pause | Partition | ClogLink | GpuFail | WorkerCrash
        | StoreCrash => true,
        // A user signal ends no step by itself: handled, the workers it stops end with it.
        Signal | Restart | Start | Resume | Heal | UnclogLink | Latency | Loss | ClockSkew
        | GpuSlow => false,
    }
}

/// The cause of the time outside kept and wasted steps, as it changes: `(from, cause)`,
/// in time order; a moment's last change wins.
fn cause_changes(scenario: &Scenario, events: &[Event]) -> Vec<(SimInstant, Cause)> {
    let min_nodes = scenario.rendezvous.min_nodes as usize;
    let mut agents_running: BTreeMap<Option<TraceNode>, u32> = BTreeMap::new();
    // Nodes with an agent running, kept as counts cross zero: counting them afresh at each
    // event cost a 4 096-node run its events × nodes.
    let mut nodes_running = 0usize;
    let mut activity = Cause::RendezvousRestart;
    let mut changes = vec![(SimInstant::START, Cause::RendezvousRestart)];
    for e in events {
        let node = e.node;
        activity = match &e.kind {
            EventKind::AgentStarted { .. } => {
                let running = agents_running.entry(node).or_default();
                nodes_running += usize::from(*running == 0);
                *running += 1;
                activity
            }
            // A process's end is the fault itself or its consequence, not a survivor acting.
            EventKind::AgentKilled { .. } | EventKind::AgentExited { .. } => {
                let running = agents_running.entry(node).or_default();
                nodes_running -= usize::from(*running == 1);
                *running = running.saturating_sub(1);
                activity
            }
            EventKind::Step { .. } => Cause::WastedProgress,
            EventKind::FaultApplied { fault, .. }
                if disrupts(*fault)
                    && matches!(activity, Cause::WastedProgress | Cause::WorkerStartRestore) =>
            {
                Cause::Detection
            }
            // An agent acted on a failure: recovery begins. (A node joining does not stop a
            // group that trains or starts; it only waits for the next round.)
            EventKind::WorkerFailed { .. }
            | EventKind::AgentRestart { .. }
            | EventKind::WorkersStopped { .. }
            | EventKind::RendezvousFailed { .. } => Cause::RendezvousRestart,
            EventKind::WorkersStarted { .. } => Cause::WorkerStartRestore,
            _ => activity,
        };
        if cfg!(test) {
            let counted = agents_running.values().filter(|&&n| n > 0).count();
            assert_eq!(nodes_running, counted, "the running nodes' count drifted");
        }
        let cause = match activity {
            Cause::RendezvousRestart if nodes_running < min_nodes => Cause::WaitingForNodes,
            other => other,
        };
        if changes.last().map(|c| c.1) != Some(cause) {
            changes.push((e.at, cause));
        }
    }
    changes
}

/// The wall time as it is cut into pieces.
#[derive(Default)]
struct Tally {
    productive: SimDuration,
    badput: BTreeMap<Cause, SimDuration>,
    /// The pieces in time order, a piece joined to the one before when their causes match.
    stretches: Vec<Stretch>,
}

impl Tally {
    /// Counts `length` from `from` as productive (`lost_to` none) or lost to a cause.
    fn add(&mut self, lost_to: Option<Cause>, from: SimInstant, length: SimDuration) {
        if length == SimDuration::ZERO {
            return;
        }
        let total = match lost_to {
            None => &mut self.productive,
            Some(cause) => self.badput.entry(cause).or_default(),
        };
        *total = total.saturating_add(length);
        let end = from.after(length);
        match self.stretches.last_mut() {
            Some(last) if last.cause == lost_to && last.end == from => last.end = end,
            _ => self.stretches.push(Stretch {
                start: from,
                end,
                cause: lost_to,
            }),
        }
    }

    /// Adds `[from, to)`, outside every step, to the causes that held over it.
    fn gap(&mut self, changes: &[(SimInstant, Cause)], from: SimInstant, to: SimInstant) {
        if to <= from {
            return;
        }
        let first = changes.partition_point(|c| c.0 <= from).saturating_sub(1);
        let mut at = from;
        for (i, &(_, cause)) in changes.iter().enumerate().skip(first) {
            let until = changes.get(i + 1).map_or(to, |next| next.0.min(to));
            if until > at {
                self.add(Some(cause), at, until.since(at));
                at = until;
            }
            if at >= to {
                break;
            }
        }
    }

    /// The report's figures, in the microseconds its JSON carries.
    fn finish(self, wall: SimDuration, stopped: SimInstant, fate: String) -> Goodput {
        let badput_us: BTreeMap<&'static str, u64> = CAUSES
            .iter()
            .map(|c| {
                (
                    <&'static str>::from(*c),
                    self.badput.get(c).map_or(0, |d| d.as_us()),
                )
            })
            .collect();
        let lost_us: u64 = badput_us.values().sum();
        let (wall_us, productive_us) = (wall.as_us(), self.productive.as_us());
        assert_eq!(
            productive_us + lost_us,
            wall_us,
            "goodput's pieces must add up to the wall time"
        );
        let ettr = match wall_us {
            0 => 0.0,
            _ => (productive_us as f64 / wall_us as f64 * 1e6).round() / 1e6,
        };
        Goodput {
            ettr,
            wall_us,
            productive_us,
            badput_us,
            training_stopped_at_us: stopped.as_us(),
            fate,
        }
    }
}

/// The job's fate in one sentence: finished, stopped for good (where and why), or cut by
/// the time limit.
fn fate(
    scenario: &Scenario,
    outcome: Outcome,
    steps_done: u64,
    stopped: SimInstant,
    failure: Option<&FinalFailure>,
) -> String {
    let steps = scenario.job.steps;
    let at = at_secs(stopped);
    match (outcome, failure) {
        (Outcome::Succeeded, _) => format!("training finished at {at}: all {steps} steps done"),
        (
            _,
            Some(FinalFailure {
                node: Some(node),
                reason: Some(reason),
                ..
            }),
        ) => format!(
            "training stopped for good at {at} after step {steps_done} of {steps}: \
             {node}{AGENT_FAILED}{reason}"
        ),
        (Outcome::Failed, _) => format!(
            "training stopped for good at {at} after step {steps_done} of {steps}: no agent \
             was left running"
        ),
        _ => format!(
            "the time limit ended the run with step {steps_done} of {steps} done; training \
             last advanced at {at}"
        ),
    }
}

#[cfg(test)]
#[path = "goodput_tests.rs"]
mod tests;
