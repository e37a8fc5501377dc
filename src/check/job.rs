//! The `job.*` invariants: training progress across restarts and checkpoints.

use super::kind::kind_enum;
use super::{InvariantResult, Violation};
use crate::invariant::Invariant;
use crate::scenario::model::{Outcome, Scenario};
use crate::trace::{Event, EventKind, RunEnd, Trace, TraceNode};
use std::collections::BTreeMap;

kind_enum! {
    /// The ways `job.progress` breaks.
    pub enum ProgressKind {
        /// A node wrote a checkpoint of a step it had not reached.
        CheckpointAhead,
        /// A group resumed from another step than the last checkpoint written.
        ResumedElsewhere,
        /// A node's step did not follow its previous one.
        StepOutOfOrder,
        /// A node went past `job.steps`.
        PastTarget,
        /// The run succeeded short of `job.steps`.
        SucceededShort,
    }
}

/// `job.progress`: per node, steps go up by one; a (re)started group resumes from the last
/// checkpoint written (or step 0 when there is none) and continues from there; no step
/// goes past `job.steps`; and a succeeded run reached exactly `job.steps`.
///
/// Checkpoints are global (shared storage), so "the last checkpoint" is the latest
/// `Checkpoint` event from any node. Not applicable when no step was taken, unless the run
/// claims success: succeeding without training is itself a violation.
pub(super) fn progress(scenario: &Scenario, trace: &Trace, end: &RunEnd) -> InvariantResult {
    let target = scenario.job.steps;
    let mut seen = ProgressSeen {
        target,
        next_step: BTreeMap::new(),
        last_checkpoint: None,
        highest: None,
        violations: Vec::new(),
    };
    for event in &trace.events {
        seen.observe(event);
    }
    let ProgressSeen {
        highest,
        mut violations,
        ..
    } = seen;
    let succeeded = end.outcome == Outcome::Succeeded;
    if succeeded && highest != Some(target) {
        violations.push(Violation::new(
            end.ended_at,
            None,
            ProgressKind::SucceededShort,
            format!(
                "the run succeeded having reached step {} of job.steps {target}",
                highest.unwrap_or(0)
            ),
        ));
    }
    InvariantResult::judge(
        Invariant::JobProgress,
        highest.is_some() || succeeded,
        violations,
    )
}

/// What `job.progress` has seen of the trace so far, event by event.
struct ProgressSeen {
    /// `job.steps`.
    target: u64,
    /// The step each node must take next; a node that never resumed starts at 1.
    next_step: BTreeMap<TraceNode, u64>,
    last_checkpoint: Option<u64>,
    highest: Option<u64>,
    violations: Vec<Violation>,
}

impl ProgressSeen {
    /// Judges one event against the checkpoints, resumes and steps seen before it.
    fn observe(&mut self, event: &Event) {
        // Checkpoints, resumes and steps are recorded by a node's agent process, so they
        // always name their node; an event without one is none of them.
        let Some(node) = event.node else {
            return;
        };
        let fail = |kind: ProgressKind, message: String| {
            Violation::new(event.at, Some(node), kind, message)
        };
        match &event.kind {
            EventKind::Checkpoint { step, .. } => {
                let reached = self.next_step.get(&node).map(|n| n - 1);
                if reached.is_some_and(|r| *step > r) {
                    self.violations.push(fail(
                        ProgressKind::CheckpointAhead,
                        format!(
                            "{node} wrote a checkpoint of step {step} having reached only step {}",
                            reached.unwrap_or(0)
                        ),
                    ));
                }
                self.last_checkpoint = Some(*step);
            }
            EventKind::ResumedFromCheckpoint { step, .. } => {
                let expected = self.last_checkpoint.unwrap_or(0);
                if *step != expected {
                    self.violations.push(fail(
                        ProgressKind::ResumedElsewhere,
                        format!(
                        "{node} resumed from step {step}, but the last checkpoint written is step {expected}"
                    ),
                    ));
                }
                self.next_step.insert(node, step + 1);
            }
            EventKind::Step { .. } => {
                // A run of steps, one event, is judged step by step.
                for step in event.kind.each_step(event.at).map(|view| view.step) {
                    let expected = self.next_step.get(&node).copied().unwrap_or(1);
                    if step != expected {
                        self.violations.push(fail(
                            ProgressKind::StepOutOfOrder,
                            format!("{node} went to step {step}, expected step {expected}"),
                        ));
                    }
                    let target = self.target;
                    if step > target && self.highest.is_none_or(|h| h <= target) {
                        self.violations.push(fail(
                            ProgressKind::PastTarget,
                            format!("{node} went to step {step}, past job.steps {target}"),
                        ));
                    }
                    self.next_step.insert(node, step + 1);
                    self.highest = self.highest.max(Some(step));
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::super::Status;
    use super::*;

    #[test]
    fn held_on_a_clean_run() {
        let r = progress(&scenario(), &trace(happy_run(3, 10)), &end(13, "succeeded"));
        assert_eq!(r.status, Status::Held, "{:?}", r.violations);
    }

    #[test]
    fn not_applicable_without_steps() {
        let r = progress(&scenario(), &trace(round_zero(2)), &end(5, "failed"));
        assert_eq!(r.status, Status::NotApplicable);
    }

    #[test]
    fn success_short_of_the_target_is_violated() {
        let r = progress(&scenario(), &trace(happy_run(2, 7)), &end(10, "succeeded"));
        assert_eq!(r.status, Status::Violated);
        assert!(r.violations[0].message.contains("step 7 of job.steps 10"));
        let r = progress(&scenario(), &trace(vec![]), &end(10, "succeeded"));
        assert_eq!(r.status, Status::Violated);
    }

    #[test]
    fn resume_from_the_last_checkpoint_holds() {
        let mut events = happy_run(2, 7);
        events.retain(|e| !matches!(e.kind, EventKind::AgentExited { .. }));
        // The group restarts and resumes from checkpoint 5, losing steps 6 and 7.
        events.push(e(20, "node-0", resumed(100, 5)));
        events.push(e(20, "node-1", resumed(101, 5)));
        for s in 6..=10 {
            events.push(e(20 + s, "node-0", step(100, 1, s)));
            events.push(e(20 + s, "node-1", step(101, 1, s)));
        }
        let r = progress(&scenario(), &trace(events), &end(40, "succeeded"));
        assert_eq!(r.status, Status::Held, "{:?}", r.violations);
    }

    #[test]
    fn skipped_steps_and_wrong_rollbacks_are_violated() {
        let mut events = happy_run(1, 7);
        events.push(e(20, "node-0", resumed(100, 3)));
        events.push(e(21, "node-0", step(100, 1, 4)));
        events.push(e(22, "node-0", step(100, 1, 6)));
        let r = progress(&scenario(), &trace(events), &end(40, "failed"));
        let text: Vec<&str> = r.violations.iter().map(|v| v.message.as_str()).collect();
        assert_eq!(text.len(), 2, "{text:?}");
        assert!(text[0].contains("resumed from step 3, but the last checkpoint written is step 5"));
        assert!(text[1].contains("went to step 6, expected step 5"));
        let kinds: Vec<_> = r.violations.iter().map(|v| v.kind).collect();
        assert_eq!(
            kinds,
            [ProgressKind::ResumedElsewhere, ProgressKind::StepOutOfOrder].map(Into::into)
        );
    }

    #[test]
    fn steps_past_the_target_are_violated() {
        let mut events = happy_run(1, 10);
        events.push(e(30, "node-0", step(100, 0, 11)));
        let r = progress(&scenario(), &trace(events), &end(40, "failed"));
        assert_eq!(r.status, Status::Violated);
        assert!(r.violations[0].message.contains("past job.steps 10"));
    }
}
