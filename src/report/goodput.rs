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

use crate::check::secs;
use crate::scenario::model::{FaultName, Outcome, Scenario};
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
    start_us: u64,
    end_us: u64,
    step: u64,
    /// The blocking checkpoint write at the span's start (after a checkpointed step).
    save_us: u64,
}

/// Measures the goodput of a run from its trace.
pub fn measure(scenario: &Scenario, trace: &Trace, end: &RunEnd) -> Goodput {
    let spans = step_spans(scenario, &trace.events);
    // The step training last reached (after any rollback), as the report's `steps_done`.
    let final_step = spans.iter().max_by_key(|s| s.end_us).map_or(0, |s| s.step);
    let last_progress_us = spans.iter().map(|s| s.end_us).max().unwrap_or(0);
    let failure = (end.outcome == Outcome::Failed)
        .then(|| final_failure(&trace.events, last_progress_us, end.sim_time_us));
    let wall_us = match (end.outcome, &failure) {
        (Outcome::Succeeded, _) => spans
            .iter()
            .filter(|s| s.step == scenario.job.steps)
            .map(|s| s.end_us)
            .max()
            .unwrap_or(end.sim_time_us),
        (_, Some(f)) => f.at_us,
        _ => end.sim_time_us,
    };
    let stopped_us = match end.outcome {
        Outcome::TimedOut => last_progress_us,
        _ => wall_us,
    };
    let fates = step_fates(&trace.events, &spans, failure.is_some(), stopped_us);
    let changes = cause_changes(scenario, &trace.events);
    let mut tally = Tally::default();
    let mut cursor_us = 0;
    for (i, span) in spans.iter().enumerate() {
        let start_us = span.start_us.max(cursor_us).min(wall_us);
        let end_us = span.end_us.min(wall_us);
        tally.gap(&changes, cursor_us, start_us);
        if end_us > start_us {
            let save_us = span.save_us.min(end_us - start_us);
            *tally.badput_us.entry(Cause::CheckpointSave).or_default() += save_us;
            tally.span(fates[i], end_us - start_us - save_us);
        }
        cursor_us = cursor_us.max(end_us);
    }
    tally.gap(&changes, cursor_us, wall_us);
    let fate = fate(
        scenario,
        end.outcome,
        final_step,
        stopped_us,
        failure.as_ref(),
    );
    tally.finish(wall_us, stopped_us, fate)
}

/// The steps of every worker group, as its group rank 0 recorded them, in time order.
fn step_spans(scenario: &Scenario, events: &[Event]) -> Vec<StepSpan> {
    // (pid, round) of each group rank 0, with when its workers started.
    let mut started_us: BTreeMap<(u32, u64), u64> = BTreeMap::new();
    let mut ends: BTreeMap<(u32, u64), Vec<(u64, u64)>> = BTreeMap::new();
    for e in events {
        match &e.kind {
            EventKind::WorkersStarted {
                pid,
                round,
                group_rank: 0,
                ..
            } => {
                started_us.insert((*pid, *round), e.at_us);
            }
            EventKind::Step { pid, round, .. } if started_us.contains_key(&(*pid, *round)) => {
                let ends = ends.entry((*pid, *round)).or_default();
                ends.extend(e.kind.each_step(e.at_us).map(|v| (v.at_us, v.step)));
            }
            _ => {}
        }
    }
    let job = &scenario.job;
    let mut spans = Vec::new();
    for (group, steps) in &ends {
        let workers_us = started_us[group];
        for (i, &(end_us, step)) in steps.iter().enumerate() {
            let start_us = match i {
                0 => {
                    let length_us = steps
                        .get(1)
                        .map_or(job.step_time.as_us(), |next| next.0.saturating_sub(end_us));
                    end_us.saturating_sub(length_us).max(workers_us)
                }
                _ => steps[i - 1].0,
            };
            let after_checkpoint = i > 0 && steps[i - 1].1.is_multiple_of(job.checkpoint_every);
            let save_us = match after_checkpoint {
                true => job.checkpoint_save_time.as_us().min(end_us - start_us),
                false => 0,
            };
            spans.push(StepSpan {
                start_us,
                end_us,
                step,
                save_us,
            });
        }
    }
    spans.sort_by_key(|s| (s.start_us, s.end_us, s.step));
    spans
}

/// What became of each span's step: kept (`None`) when it is the last time that step was
/// done, and for a failed job only up to its last checkpoint before training stopped;
/// else the cause its time counts for.
fn step_fates(
    events: &[Event],
    spans: &[StepSpan],
    failed: bool,
    stopped_us: u64,
) -> Vec<Option<Cause>> {
    let mut last_of_step: BTreeMap<u64, usize> = BTreeMap::new();
    for (i, span) in spans.iter().enumerate() {
        let keep = last_of_step.entry(span.step).or_insert(i);
        if spans[*keep].end_us <= span.end_us {
            *keep = i;
        }
    }
    let checkpointed = events
        .iter()
        .take_while(|e| e.at_us <= stopped_us)
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
    at_us: u64,
    node: Option<TraceNode>,
    reason: Option<String>,
}

/// The first agent that exited FAILED after the job's last step, or the job's end.
fn final_failure(events: &[Event], last_progress_us: u64, wall_us: u64) -> FinalFailure {
    let exit = events.iter().find(|e| {
        e.at_us >= last_progress_us
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
            at_us: e.at_us.min(wall_us),
            node: e.node,
            reason: match &e.kind {
                EventKind::AgentExited { reason, .. } => Some(reason.to_string()),
                _ => None,
            },
        },
        None => FinalFailure {
            at_us: wall_us,
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
        Restart | Start | Resume | Heal | UnclogLink | Latency | Loss | ClockSkew | GpuSlow => {
            false
        }
    }
}

/// The cause of the time outside kept and wasted steps, as it changes: `(from_us, cause)`,
/// in time order; a moment's last change wins.
fn cause_changes(scenario: &Scenario, events: &[Event]) -> Vec<(u64, Cause)> {
    let min_nodes = scenario.rendezvous.min_nodes as usize;
    let mut agents_running: BTreeMap<Option<TraceNode>, u32> = BTreeMap::new();
    let mut activity = Cause::RendezvousRestart;
    let mut changes = vec![(0, Cause::RendezvousRestart)];
    for e in events {
        let node = e.node;
        activity = match &e.kind {
            EventKind::AgentStarted { .. } => {
                *agents_running.entry(node).or_default() += 1;
                activity
            }
            // A process's end is the fault itself or its consequence, not a survivor acting.
            EventKind::AgentKilled { .. } | EventKind::AgentExited { .. } => {
                let running = agents_running.entry(node).or_default();
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
        let nodes_running = agents_running.values().filter(|&&n| n > 0).count();
        let cause = match activity {
            Cause::RendezvousRestart if nodes_running < min_nodes => Cause::WaitingForNodes,
            other => other,
        };
        if changes.last().map(|c| c.1) != Some(cause) {
            changes.push((e.at_us, cause));
        }
    }
    changes
}

/// The wall time as it is cut into pieces.
#[derive(Default)]
struct Tally {
    productive_us: u64,
    badput_us: BTreeMap<Cause, u64>,
}

impl Tally {
    fn span(&mut self, lost_to: Option<Cause>, length_us: u64) {
        match lost_to {
            None => self.productive_us += length_us,
            Some(cause) => *self.badput_us.entry(cause).or_default() += length_us,
        }
    }

    /// Adds `[from_us, to_us)`, outside every step, to the causes that held over it.
    fn gap(&mut self, changes: &[(u64, Cause)], from_us: u64, to_us: u64) {
        if to_us <= from_us {
            return;
        }
        let first = changes
            .partition_point(|c| c.0 <= from_us)
            .saturating_sub(1);
        let mut at_us = from_us;
        for (i, &(_, cause)) in changes.iter().enumerate().skip(first) {
            let until_us = changes.get(i + 1).map_or(to_us, |next| next.0.min(to_us));
            if until_us > at_us {
                *self.badput_us.entry(cause).or_default() += until_us - at_us;
                at_us = until_us;
            }
            if at_us >= to_us {
                break;
            }
        }
    }

    fn finish(self, wall_us: u64, stopped_us: u64, fate: String) -> Goodput {
        let badput_us: BTreeMap<&'static str, u64> = CAUSES
            .iter()
            .map(|c| {
                (
                    <&'static str>::from(*c),
                    self.badput_us.get(c).copied().unwrap_or(0),
                )
            })
            .collect();
        let lost_us: u64 = badput_us.values().sum();
        assert_eq!(
            self.productive_us + lost_us,
            wall_us,
            "goodput's pieces must add up to the wall time"
        );
        let ettr = match wall_us {
            0 => 0.0,
            _ => (self.productive_us as f64 / wall_us as f64 * 1e6).round() / 1e6,
        };
        Goodput {
            ettr,
            wall_us,
            productive_us: self.productive_us,
            badput_us,
            training_stopped_at_us: stopped_us,
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
    stopped_us: u64,
    failure: Option<&FinalFailure>,
) -> String {
    let steps = scenario.job.steps;
    let at = secs(stopped_us);
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
