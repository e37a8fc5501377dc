//! The `agent.*` invariants: the restart budget and zombie steps. (Rank assignment is in
//! `ranks.rs`, the workers' bootstrap address in `bootstrap.rs`.)

use super::kind::kind_enum;
use super::membership::RoundId;
use super::run_model::{Observer, RunModel};
use super::{InvariantResult, Violation};
use crate::invariant::Invariant;
use crate::scenario::model::Scenario;
use crate::scenario::node::NodeIndex;
use crate::trace::{AgentState, Event, EventKind, ExitReason, TraceNode};
use std::collections::{BTreeMap, BTreeSet};
#[cfg(test)]
use {super::run_model::replay, crate::trace::Trace};

kind_enum! {
    /// The ways `agent.restart_budget` breaks.
    pub enum RestartBudgetKind {
        /// A process's worker group restarted after failures more than max_restarts times.
        BeyondBudget,
        /// A process exited FAILED with budget left and no rendezvous error.
        FailedWithBudgetLeft,
    }
}

kind_enum! {
    /// The ways `agent.no_zombie_steps` breaks.
    pub enum NoZombieStepsKind {
        /// A step tagged with another round than the process's running group's.
        StepOfOtherRound,
        /// A step while no worker group of the process was running.
        StepWithoutGroup,
    }
}

/// What one agent process has done so far that the budget cares about.
#[derive(Default)]
struct Process {
    /// Its node, from its start.
    node: Option<TraceNode>,
    /// Restarts the agent itself counted (`AgentRestart { counted: true }`).
    counted_restarts: u32,
    /// Restarts of its worker group that followed a failure in the group (see
    /// [`restart_budget`]), counted when the new workers start.
    failure_restarts: u32,
    /// The round of its running (or last) worker group.
    group_round: Option<RoundId>,
    /// Whether its pending restart was counted by the agent.
    restart_counted: bool,
    /// The participants of its latest completed round.
    participants: std::sync::Arc<[NodeIndex]>,
    /// Whether its latest `next_rendezvous()` call raised.
    rendezvous_failed_last: bool,
    /// Whether a beyond-budget violation was already reported for it.
    reported: bool,
}

/// The budget's bookkeeping over the whole trace.
#[derive(Default)]
struct Budget {
    processes: BTreeMap<u32, Process>,
    /// Round -> nodes of that round's group whose workers failed or whose agent was killed
    /// while the group ran.
    failed_members: BTreeMap<RoundId, BTreeSet<TraceNode>>,
}

impl Budget {
    /// Follows one event; returns the pid of a process it took beyond `max` restarts.
    fn observe(&mut self, event: &crate::trace::Event, max: u32) -> Option<u32> {
        match &event.kind {
            EventKind::AgentStarted { pid } => {
                self.processes.entry(*pid).or_default().node = event.node;
                None
            }
            EventKind::AgentRestart { pid, counted, .. } => {
                let process = self.processes.entry(*pid).or_default();
                process.restart_counted |= *counted;
                process.counted_restarts += u32::from(*counted);
                (process.counted_restarts > max).then_some(*pid)
            }
            EventKind::WorkerFailed { pid, .. } | EventKind::AgentKilled { pid } => {
                self.member_failed(*pid);
                None
            }
            EventKind::WorkersStarted {
                pid,
                round,
                store_incarnation,
                ..
            } => self
                .workers_started(
                    *pid,
                    RoundId {
                        store_incarnation: *store_incarnation,
                        round: *round,
                    },
                )
                .filter(|made| *made > max)
                .map(|_| *pid),
            EventKind::RendezvousJoining { pid } => {
                self.processes
                    .entry(*pid)
                    .or_default()
                    .rendezvous_failed_last = false;
                None
            }
            EventKind::RendezvousCompleted {
                pid, participants, ..
            } => {
                let process = self.processes.entry(*pid).or_default();
                process.rendezvous_failed_last = false;
                process.participants = participants.clone();
                None
            }
            EventKind::RendezvousFailed { pid, .. } => {
                self.processes
                    .entry(*pid)
                    .or_default()
                    .rendezvous_failed_last = true;
                None
            }
            _ => None,
        }
    }

    /// A member of a running group failed: its workers failed or its agent was killed.
    fn member_failed(&mut self, pid: u32) {
        if let Some(process) = self.processes.get(&pid) {
            // A process records its start on its own node; one whose start named none
            // cannot be found among a later round's participants, so it is not noted.
            if let (Some(round), Some(node)) = (process.group_round, process.node) {
                self.failed_members.entry(round).or_default().insert(node);
            }
        }
    }

    /// New workers started for `round`: a restart when the process ran a group before. It
    /// follows a failure when the agent counted it, or when a member of the old group
    /// failed and that member's node is back in the new group (a replaced process; a member
    /// that never comes back is a scale-down, which torch rightly does not count).
    /// Returns the process's failure restarts if this was one.
    fn workers_started(&mut self, pid: u32, round: RoundId) -> Option<u32> {
        let process = self.processes.entry(pid).or_default();
        let previous = process.group_round.replace(round)?;
        let counted = std::mem::take(&mut process.restart_counted);
        let failed = self.failed_members.get(&previous);
        let rejoined = failed.is_some_and(|nodes| {
            process
                .participants
                .iter()
                .map(|&n| TraceNode::Node(n))
                .any(|n| Some(n) != process.node && nodes.contains(&n))
        });
        if !(counted || rejoined) {
            return None;
        }
        process.failure_restarts += 1;
        Some(process.failure_restarts)
    }
}

/// `agent.restart_budget`: per agent process, restarts after failures ≤ max_restarts; and a
/// process that exits FAILED either spent its whole budget or was ended by a rendezvous
/// error (its latest `next_rendezvous()` raised).
///
/// torch's documentation promises that when workers fail, all workers are stopped and
/// restarted up to max_restarts; node departures and arrivals are free. So a restart of a
/// process's group counts when it follows a failure anywhere in that group: its own
/// counted restart, or another member's failed workers or killed agent when that member
/// is back in the new group. torch counts only the first (pytorch#108158, #135712,
/// #147064). Not applicable when no process restarted and none failed.
#[cfg(test)]
pub(super) fn restart_budget(scenario: &Scenario, trace: &Trace) -> InvariantResult {
    let mut observer = RestartBudget::new(scenario);
    replay(trace, &mut [&mut observer]);
    observer.finish()
}

/// `agent.restart_budget` as an observer of the replay.
pub(super) struct RestartBudget {
    max: u32,
    budget: Budget,
    violations: Vec<Violation>,
    /// Whether any agent restarted or failed.
    applicable: bool,
}

impl RestartBudget {
    pub fn new(scenario: &Scenario) -> Self {
        RestartBudget {
            max: scenario.agent.max_restarts,
            budget: Budget::default(),
            violations: Vec::new(),
            applicable: false,
        }
    }

    pub fn finish(self) -> InvariantResult {
        let (applicable, violations) = (self.applicable, self.violations);
        InvariantResult::judge(Invariant::AgentRestartBudget, applicable, violations)
    }
}

impl Observer<'_> for RestartBudget {
    fn before(&mut self, _model: &RunModel, event: &Event) {
        let (max, node) = (self.max, event.node);
        self.applicable |= matches!(&event.kind, EventKind::AgentRestart { .. })
            || matches!(&event.kind, EventKind::AgentExited { state, .. } if *state == AgentState::Failed);
        if let EventKind::AgentExited { pid, state, reason } = &event.kind {
            let process = self.budget.processes.entry(*pid).or_default();
            let made = process.counted_restarts.max(process.failure_restarts);
            // A signal's default action ends torchrun before it can restart anything.
            let signalled = matches!(reason, ExitReason::SignalDefaultAction { .. });
            if *state == AgentState::Failed
                && made < max
                && !process.rendezvous_failed_last
                && !signalled
            {
                self.violations.push(Violation::new(
                    event.at,
                    node,
                    RestartBudgetKind::FailedWithBudgetLeft,
                    format!(
                        "agent pid {pid} exited FAILED after {made} of {max} restarts, with no rendezvous error"
                    ),
                ));
            }
            return;
        }
        let Some(pid) = self.budget.observe(event, max) else {
            return;
        };
        let process = self.budget.processes.entry(pid).or_default();
        if !std::mem::replace(&mut process.reported, true) {
            let made = process.counted_restarts.max(process.failure_restarts);
            self.violations.push(Violation::new(
                event.at,
                node,
                RestartBudgetKind::BeyondBudget,
                format!(
                    "agent pid {pid}'s worker group made {made} restarts after failures, beyond max_restarts {max}"
                ),
            ));
        }
    }
}

/// `agent.no_zombie_steps`: a process's workers take steps only while their group runs:
/// after `WorkersStarted` for a round and before that group is stopped
/// (`WorkersStopped`), the agent exits or is killed (a signal's default action ends the
/// agent alone: its orphaned workers run until they stop). A step in any other window, or
/// tagged with another round than the running group's, is a zombie. Not applicable when no
/// step was taken.
#[cfg(test)]
pub(super) fn no_zombie_steps(trace: &Trace) -> InvariantResult {
    let mut observer = NoZombieSteps::default();
    replay(trace, &mut [&mut observer]);
    observer.finish()
}

/// `agent.no_zombie_steps` as an observer of the replay.
#[derive(Default)]
pub(super) struct NoZombieSteps {
    /// pid -> the round of its running worker group, if one runs.
    running: BTreeMap<u32, Option<u64>>,
    violations: Vec<Violation>,
    /// Whether any step was taken.
    applicable: bool,
}

impl NoZombieSteps {
    pub fn finish(self) -> InvariantResult {
        let (applicable, violations) = (self.applicable, self.violations);
        InvariantResult::judge(Invariant::AgentNoZombieSteps, applicable, violations)
    }
}

impl Observer<'_> for NoZombieSteps {
    fn before(&mut self, _model: &RunModel, event: &Event) {
        match &event.kind {
            EventKind::WorkersStarted { pid, round, .. } => {
                self.running.insert(*pid, Some(*round));
            }
            // A signal's default action ends the agent alone: its workers train on,
            // orphaned, until they stop (`WorkersStopped`).
            EventKind::AgentExited {
                reason: ExitReason::SignalDefaultAction { .. },
                ..
            } => {}
            EventKind::WorkersStopped { pid, .. }
            | EventKind::AgentExited { pid, .. }
            | EventKind::AgentKilled { pid } => {
                self.running.insert(*pid, None);
            }
            EventKind::Step {
                pid, round, step, ..
            } => {
                self.applicable = true;
                let live = self.running.get(pid).copied().flatten();
                if live == Some(*round) {
                    return;
                }
                let (kind, state) = match live {
                    Some(r) => (
                        NoZombieStepsKind::StepOfOtherRound,
                        format!("its running group is round {r}"),
                    ),
                    None => (
                        NoZombieStepsKind::StepWithoutGroup,
                        "no worker group of it was running".to_owned(),
                    ),
                };
                self.violations.push(Violation::new(
                    event.at,
                    event.node,
                    kind,
                    format!("pid {pid} took step {step} for round {round}, but {state}"),
                ));
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
            e(20, "node-0", exited(1, AgentState::Failed)),
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
            e(601, "node-0", exited(1, AgentState::Failed)),
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
            e(30, "node-1", exited(2, AgentState::Failed)),
        ];
        let r = restart_budget(&scenario(), &trace(events));
        assert_eq!(r.status, Status::Violated);
        assert_eq!(r.violations.len(), 2);
        assert!(
            r.violations[0].message.contains("beyond max_restarts 1"),
            "{:?}",
            r.violations
        );
        assert!(r.violations[1].message.contains("after 0 of 1 restarts"));
        let kinds: Vec<_> = r.violations.iter().map(|v| v.kind).collect();
        let expected = [
            RestartBudgetKind::BeyondBudget,
            RestartBudgetKind::FailedWithBudgetLeft,
        ];
        assert_eq!(kinds, expected.map(Into::into));
    }

    #[test]
    fn budget_is_per_process() {
        // A restarted node is a new process with a fresh budget.
        let events = vec![
            e(0, "node-0", started(1)),
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

    /// Two nodes in round 0 (pids 100, 101), both with workers running.
    fn pair_in_round_zero() -> Vec<crate::trace::Event> {
        let mut events = round_zero(2);
        events.push(e(2, "node-0", workers_started(100, 0, 0, 2)));
        events.push(e(2, "node-1", workers_started(101, 0, 1, 2)));
        events
    }

    /// `pid` on `node` re-forms the group of nodes 0 and 1 in `round`.
    fn regroup(events: &mut Vec<crate::trace::Event>, at: u64, node: &str, pid: u32, round: u64) {
        let rank = u32::from(node == "node-1");
        events.push(e(at, node, joining(pid)));
        events.push(e(at + 1, node, completed(pid, round, rank, &[0, 1])));
        events.push(e(at + 1, node, workers_started(pid, round, rank, 2)));
    }

    fn worker_failed(pid: u32) -> EventKind {
        EventKind::WorkerFailed {
            pid,
            local_rank: 0,
            exit_code: 1,
            reason: "worker_crash".into(),
        }
    }

    #[test]
    fn failures_on_alternating_nodes_spend_the_groups_budget() {
        // pytorch#135712: node-1 fails (counted by node-1, free for node-0), then node-0
        // fails (counted by node-0, free for node-1). Each agent counted one restart, but
        // both groups restarted twice after failures; max_restarts is 1.
        let mut events = pair_in_round_zero();
        events.push(e(10, "node-1", worker_failed(101)));
        events.push(e(10, "node-1", restart(101, true, 1)));
        events.push(e(10, "node-0", restart(100, false, 0)));
        regroup(&mut events, 11, "node-0", 100, 1);
        regroup(&mut events, 11, "node-1", 101, 1);
        let first = restart_budget(&scenario(), &trace(events.clone()));
        assert_eq!(first.status, Status::Held, "{:?}", first.violations);
        events.push(e(20, "node-0", worker_failed(100)));
        events.push(e(20, "node-0", restart(100, true, 1)));
        events.push(e(20, "node-1", restart(101, false, 1)));
        regroup(&mut events, 21, "node-0", 100, 2);
        regroup(&mut events, 21, "node-1", 101, 2);
        let r = restart_budget(&scenario(), &trace(events));
        assert_eq!(r.status, Status::Violated);
        assert_eq!(r.violations.len(), 2, "{:?}", r.violations);
        assert!(r.violations[0]
            .message
            .contains("made 2 restarts after failures"));
    }

    #[test]
    fn a_killed_member_that_comes_back_is_a_failure_and_one_that_leaves_is_not() {
        let mut s = scenario();
        s.agent.max_restarts = 0;
        // Scale-down: node-1 is killed and never returns; node-0 goes on alone for free.
        let mut events = pair_in_round_zero();
        events.push(e(10, "node-1", killed(101)));
        events.push(e(30, "node-0", restart(100, false, 0)));
        events.push(e(30, "node-0", joining(100)));
        events.push(e(31, "node-0", completed(100, 1, 0, &[0])));
        events.push(e(31, "node-0", workers_started(100, 1, 0, 1)));
        let r = restart_budget(&s, &trace(events));
        assert_eq!(r.status, Status::Held, "{:?}", r.violations);
        // pytorch#147064: node-1 is killed and comes back at once as pid 102.
        let mut events = pair_in_round_zero();
        events.push(e(10, "node-1", killed(101)));
        events.push(e(11, "node-1", started(102)));
        events.push(e(12, "node-0", restart(100, false, 0)));
        regroup(&mut events, 12, "node-0", 100, 1);
        regroup(&mut events, 12, "node-1", 102, 1);
        let r = restart_budget(&s, &trace(events));
        assert_eq!(r.status, Status::Violated);
        assert_eq!(r.violations[0].node, Some(TraceNode::node(0)));
        assert!(r.violations[0].message.contains("beyond max_restarts 0"));
    }

    #[test]
    fn a_membership_restart_after_a_failure_counts_toward_spent() {
        // node-0 restarted for free after node-1's failure, then failed itself: its group's
        // budget (1) was spent, so exiting FAILED is within the rules.
        let mut events = pair_in_round_zero();
        events.push(e(10, "node-1", worker_failed(101)));
        events.push(e(10, "node-1", restart(101, true, 1)));
        events.push(e(10, "node-0", restart(100, false, 0)));
        regroup(&mut events, 11, "node-0", 100, 1);
        regroup(&mut events, 11, "node-1", 101, 1);
        events.push(e(20, "node-0", worker_failed(100)));
        events.push(e(20, "node-0", exited(100, AgentState::Failed)));
        let r = restart_budget(&scenario(), &trace(events));
        assert_eq!(r.status, Status::Held, "{:?}", r.violations);
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
