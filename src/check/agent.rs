//! The `agent.*` invariants: the restart budget and zombie steps. (Rank assignment is in
//! `ranks.rs`.)

use super::{InvariantResult, Violation};
use crate::scenario::model::Scenario;
use crate::trace::{EventKind, Trace};
use std::collections::BTreeMap;

/// What one agent process has done so far that the budget cares about.
#[derive(Default)]
struct Process {
    counted_restarts: u32,
    /// Whether its latest `next_rendezvous()` call raised.
    rendezvous_failed_last: bool,
}

/// `agent.restart_budget`: per agent process, counted restarts ≤ max_restarts; and a process
/// that exits FAILED either spent its whole budget or was ended by a rendezvous error
/// (its latest `next_rendezvous()` raised).
///
/// Not applicable when no process restarted and none failed.
pub(super) fn restart_budget(scenario: &Scenario, trace: &Trace) -> InvariantResult {
    let max = scenario.agent.max_restarts;
    let mut processes: BTreeMap<u32, Process> = BTreeMap::new();
    let mut violations = Vec::new();
    let mut applicable = false;
    for event in &trace.events {
        let node = event.node.as_deref();
        match &event.kind {
            EventKind::AgentRestart {
                pid, counted: true, ..
            } => {
                applicable = true;
                let process = processes.entry(*pid).or_default();
                process.counted_restarts += 1;
                if process.counted_restarts == max + 1 {
                    violations.push(Violation::new(
                        event.at_us,
                        node,
                        format!("agent pid {pid} restarted its workers beyond max_restarts {max}"),
                    ));
                }
            }
            EventKind::AgentRestart { .. } => applicable = true,
            EventKind::RendezvousJoining { pid } | EventKind::RendezvousCompleted { pid, .. } => {
                processes.entry(*pid).or_default().rendezvous_failed_last = false;
            }
            EventKind::RendezvousFailed { pid, .. } => {
                processes.entry(*pid).or_default().rendezvous_failed_last = true;
            }
            EventKind::AgentExited { pid, state, .. } if state == "FAILED" => {
                applicable = true;
                let process = processes.entry(*pid).or_default();
                let spent = process.counted_restarts >= max;
                if !spent && !process.rendezvous_failed_last {
                    violations.push(Violation::new(
                        event.at_us,
                        node,
                        format!(
                            "agent pid {pid} exited FAILED after {} of {max} restarts, with no rendezvous error",
                            process.counted_restarts
                        ),
                    ));
                }
            }
            _ => {}
        }
    }
    InvariantResult::judge("agent.restart_budget", applicable, violations)
}

/// `agent.no_zombie_steps`: a process's workers take steps only while their group runs:
/// after `WorkersStarted` for a round and before that group is stopped
/// (`WorkersStopped`), the agent exits or is killed. A step in any other window, or
/// tagged with another round than the running group's, is a zombie. Not applicable when no
/// step was taken.
pub(super) fn no_zombie_steps(trace: &Trace) -> InvariantResult {
    // pid -> the round of its running worker group, if one runs.
    let mut running: BTreeMap<u32, Option<u64>> = BTreeMap::new();
    let mut violations = Vec::new();
    let mut applicable = false;
    for event in &trace.events {
        match &event.kind {
            EventKind::WorkersStarted { pid, round, .. } => {
                running.insert(*pid, Some(*round));
            }
            EventKind::WorkersStopped { pid, .. }
            | EventKind::AgentExited { pid, .. }
            | EventKind::AgentKilled { pid } => {
                running.insert(*pid, None);
            }
            EventKind::Step {
                pid, round, step, ..
            } => {
                applicable = true;
                let live = running.get(pid).copied().flatten();
                if live != Some(*round) {
                    let state = match live {
                        Some(r) => format!("its running group is round {r}"),
                        None => "no worker group of it was running".to_owned(),
                    };
                    violations.push(Violation::new(
                        event.at_us,
                        event.node.as_deref(),
                        format!("pid {pid} took step {step} for round {round}, but {state}"),
                    ));
                }
            }
            _ => {}
        }
    }
    InvariantResult::judge("agent.no_zombie_steps", applicable, violations)
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::super::Status;
    use super::*;

    #[test]
    fn not_applicable_on_a_clean_run() {
        let r = restart_budget(&scenario(), &trace(happy_run(2, 3)));
        assert_eq!(r.status, Status::NotApplicable);
    }

    #[test]
    fn held_when_failure_follows_a_spent_budget() {
        // max_restarts is 1 in the test scenario.
        let events = vec![
            e(0, "node-0", started(1)),
            e(10, "node-0", restart(1, true, 1)),
            e(11, "node-0", restart(1, false, 1)),
            e(20, "node-0", exited(1, "FAILED")),
        ];
        let r = restart_budget(&scenario(), &trace(events));
        assert_eq!(r.status, Status::Held, "{:?}", r.violations);
    }

    #[test]
    fn held_when_a_rendezvous_error_ends_the_agent() {
        let events = vec![
            e(0, "node-0", started(1)),
            e(1, "node-0", joining(1)),
            e(601, "node-0", rdzv_failed(1, "timeout")),
            e(601, "node-0", exited(1, "FAILED")),
        ];
        let r = restart_budget(&scenario(), &trace(events));
        assert_eq!(r.status, Status::Held, "{:?}", r.violations);
    }

    #[test]
    fn violated_beyond_budget_and_on_early_failure() {
        let events = vec![
            e(0, "node-0", started(1)),
            e(10, "node-0", restart(1, true, 1)),
            e(20, "node-0", restart(1, true, 2)),
            e(0, "node-1", started(2)),
            e(30, "node-1", exited(2, "FAILED")),
        ];
        let r = restart_budget(&scenario(), &trace(events));
        assert_eq!(r.status, Status::Violated);
        assert_eq!(r.violations.len(), 2);
        assert!(r.violations[0].message.contains("beyond max_restarts 1"));
        assert!(r.violations[1].message.contains("after 0 of 1 restarts"));
    }

    #[test]
    fn budget_is_per_process() {
        // A restarted node is a new process with a fresh budget.
        let events = vec![
            e(10, "node-0", restart(1, true, 1)),
            e(11, "node-0", killed(1)),
            e(20, "node-0", started(2)),
            e(30, "node-0", restart(2, true, 1)),
        ];
        assert_eq!(
            restart_budget(&scenario(), &trace(events)).status,
            Status::Held
        );
    }

    #[test]
    fn steps_inside_the_running_group_hold() {
        let events = vec![
            e(1, "node-0", workers_started(100, 0, 0, 2)),
            e(2, "node-0", step(100, 0, 1)),
            e(3, "node-0", stopped(100)),
            e(4, "node-0", workers_started(100, 1, 0, 2)),
            e(5, "node-0", step(100, 1, 2)),
        ];
        assert_eq!(no_zombie_steps(&trace(events)).status, Status::Held);
    }

    #[test]
    fn a_step_after_the_group_stopped_is_a_zombie() {
        let events = vec![
            e(1, "node-0", workers_started(100, 0, 0, 2)),
            e(3, "node-0", stopped(100)),
            e(4, "node-0", step(100, 0, 1)),
        ];
        let r = no_zombie_steps(&trace(events));
        assert_eq!(r.status, Status::Violated);
        assert!(r.violations[0]
            .message
            .contains("no worker group of it was running"));
    }

    #[test]
    fn a_step_of_an_old_round_is_a_zombie() {
        let events = vec![
            e(1, "node-0", workers_started(100, 0, 0, 2)),
            e(3, "node-0", stopped(100)),
            e(4, "node-0", workers_started(100, 1, 0, 2)),
            e(5, "node-0", step(100, 0, 7)),
        ];
        assert_eq!(no_zombie_steps(&trace(events)).status, Status::Violated);
    }

    #[test]
    fn no_steps_is_not_applicable() {
        assert_eq!(
            no_zombie_steps(&trace(vec![])).status,
            Status::NotApplicable
        );
    }

    fn stopped(pid: u32) -> EventKind {
        EventKind::WorkersStopped {
            pid,
            reason: "membership change".into(),
        }
    }
}
