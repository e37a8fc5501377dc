//! The workers' thread of the Perfetto export: each worker-group lifetime as a span, the
//! group's consecutive steps coalesced into spans inside it, and checkpoints, resumes and
//! worker failures as instants.

use super::{instant, open, Export, WORKERS};
use crate::sim_time::SimInstant;
use crate::trace::{EventKind, TraceNode};
use serde_json::json;

/// Consecutive steps of one worker group, drawn as one span.
#[derive(Debug, Clone)]
pub(super) struct StepRun {
    start: SimInstant,
    last_at: SimInstant,
    first: u64,
    last: u64,
}

impl Export {
    /// Closes the coalesced steps, then the worker group they belong to.
    pub(super) fn close_group(&mut self, node: TraceNode, pid: u64, end: SimInstant, why: &str) {
        self.flush_steps(node, pid);
        let mut group = self.state(node).group.take();
        if let Some(g) = group.as_mut() {
            g.args.insert("stopped".to_owned(), json!(why));
        }
        self.push_span(pid, WORKERS, group, end);
    }

    fn flush_steps(&mut self, node: TraceNode, pid: u64) {
        if let Some(run) = self.state(node).steps.take() {
            let name = if run.first == run.last {
                format!("step {}", run.first)
            } else {
                format!("steps {}-{}", run.first, run.last)
            };
            let args = json!({ "first": run.first, "last": run.last });
            self.push_span(pid, WORKERS, open(run.start, name, args), run.last_at);
        }
    }

    pub(super) fn worker_event(
        &mut self,
        node: TraceNode,
        pid: u64,
        at: SimInstant,
        kind: &EventKind,
    ) {
        match kind {
            EventKind::WorkersStarted {
                round,
                group_rank,
                world_size,
                restart_count,
                ..
            } => {
                self.close_group(node, pid, at, "replaced");
                let name = format!("workers round {round}: rank {group_rank} of {world_size}");
                let args = json!({ "round": round, "restart_count": restart_count });
                self.state(node).group = open(at, name, args);
            }
            EventKind::WorkersStopped { reason, .. } => self.close_group(node, pid, at, reason),
            EventKind::Step { .. } => {
                for view in kind.each_step(at) {
                    self.step(node, pid, view.at, view.step);
                }
            }
            EventKind::WorkerFailed {
                local_rank,
                exit_code,
                reason,
                ..
            } => {
                let name = format!("worker {local_rank} failed (exit {exit_code})");
                self.out
                    .push(instant(pid, WORKERS, at, name, json!({ "reason": reason })));
            }
            EventKind::Checkpoint { step, .. } => {
                let name = format!("checkpoint step {step}");
                self.out.push(instant(pid, WORKERS, at, name, json!({})));
            }
            EventKind::ResumedFromCheckpoint {
                step, lost_steps, ..
            } => {
                let name = format!("resumed from step {step}, {lost_steps} steps lost");
                self.out.push(instant(pid, WORKERS, at, name, json!({})));
            }
            _ => unreachable!("worker_event gets worker events only"),
        }
    }

    /// Extends the current run of consecutive steps, or starts a new one; a step span
    /// starts where the previous step (or the group) left off, since a step event marks
    /// the end of the step's work.
    fn step(&mut self, node: TraceNode, pid: u64, at: SimInstant, step: u64) {
        let state = self.state(node);
        if let Some(run) = state.steps.as_mut() {
            if step == run.last + 1 {
                run.last = step;
                run.last_at = at;
                return;
            }
        }
        let start = match (&state.steps, &state.group) {
            (Some(run), _) => run.last_at,
            (None, Some(group)) => group.start,
            (None, None) => at,
        };
        self.flush_steps(node, pid);
        self.state(node).steps = Some(StepRun {
            start,
            last_at: at,
            first: step,
            last: step,
        });
    }
}
