//! The agent's restart policy (pure): torch's `_remaining_restarts` bookkeeping in
//! `SimpleElasticAgent._invoke_run`, the worker-group states it moves through, and the
//! opt-in agent fixes (`agent.fixes`) that change how restarts are counted.

use crate::scenario::node::NodeIndex;
use crate::trace::AgentState;
pub use crate::trace::WorkerGroupState;
use std::collections::BTreeSet;

pub use crate::fixes::AgentFix;

/// `launch_agent`'s shutdown rule for an agent that exits in `state` (not by a signal):
/// torch closes the rendezvous whatever the state; with [`AgentFix::KeepOpenOnFailure`] a
/// FAILED agent leaves it open.
pub fn closes_rendezvous_on_exit(state: AgentState, fixes: &[AgentFix]) -> bool {
    let keep_open = fixes.contains(&AgentFix::KeepOpenOnFailure);
    !(keep_open && state == AgentState::Failed)
}

/// Why the agent restarts its workers; named as the trace's `agent_restart.reason` carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum RestartReason {
    /// A worker failed (counted).
    Failure,
    /// A member of the group came back as a new process (counted with the fix
    /// `count-rejoined-failures`).
    MemberRejoined,
    /// Nodes wait to join (uncounted, as torch does).
    MembershipChange,
}

impl RestartReason {
    /// The name the trace's `agent_restart.reason` carries.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// Why the workers stop before the restart, in the words of the trace's
    /// `workers_stopped.reason`.
    pub fn stop_reason(self) -> &'static str {
        match self {
            RestartReason::Failure => "a worker failed",
            RestartReason::MemberRejoined => "a member rejoined after a failure",
            RestartReason::MembershipChange => "membership change",
        }
    }
}

/// What the monitor loop does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Keep monitoring.
    Continue,
    /// Stop the workers and re-rendezvous; `counted` restarts spent the budget.
    Restart {
        counted: bool,
        reason: RestartReason,
    },
    /// Stop the workers and end the agent FAILED: no restarts remain.
    GiveUp,
}

/// One agent process's restart budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestartPolicy {
    max_restarts: u32,
    remaining_restarts: u32,
    fixes: BTreeSet<AgentFix>,
}

impl RestartPolicy {
    /// A fresh budget: every process starts with `max_restarts` left.
    pub fn new(max_restarts: u32, fixes: BTreeSet<AgentFix>) -> Self {
        Self {
            max_restarts,
            remaining_restarts: max_restarts,
            fixes,
        }
    }

    /// Whether the named agent fix is switched on.
    pub fn has_fix(&self, fix: AgentFix) -> bool {
        self.fixes.contains(&fix)
    }

    /// `TORCHELASTIC_RESTART_COUNT`: `max_restarts - remaining_restarts`.
    pub fn restart_count(&self) -> u32 {
        self.max_restarts
            .checked_sub(self.remaining_restarts)
            .unwrap_or_else(|| {
                panic!(
                    "the restart budget holds {} restarts left of max_restarts {}",
                    self.remaining_restarts, self.max_restarts
                )
            })
    }

    /// The monitor saw a FAILED (or UNHEALTHY) group: restart while the budget lasts.
    pub fn on_failure(&mut self) -> Decision {
        self.spend(RestartReason::Failure)
    }

    /// The monitor saw a HEALTHY group and `waiting` nodes want to join (which nodes, when
    /// the caller read them; only [`AgentFix::CountRejoinedFailures`] needs them).
    /// `members` are the nodes of the running group. torch restarts uncounted.
    pub fn on_nodes_waiting(
        &mut self,
        waiting_count: usize,
        waiting: &[NodeIndex],
        members: &[NodeIndex],
    ) -> Decision {
        if waiting_count == 0 {
            return Decision::Continue;
        }
        let rejoined = waiting.iter().any(|node| members.contains(node));
        if rejoined && self.has_fix(AgentFix::CountRejoinedFailures) {
            return self.spend(RestartReason::MemberRejoined);
        }
        Decision::Restart {
            counted: false,
            reason: RestartReason::MembershipChange,
        }
    }

    /// With [`AgentFix::SharedRestartCount`]: adopt the highest restart count of the new group's
    /// agents, so the group shares one count and one budget. Without it, does nothing.
    pub fn adopt_group_count(&mut self, group_count_max: u32) {
        if !self.has_fix(AgentFix::SharedRestartCount) {
            return;
        }
        let before = self.restart_count();
        let adopted = group_count_max.min(self.max_restarts);
        if adopted > before {
            self.remaining_restarts = self.max_restarts - adopted;
        }
        // The count only grows: adopting never hands back a spent restart.
        let after = self.restart_count();
        assert!(
            after >= before && after <= self.max_restarts,
            "adopting the group's restart count {group_count_max} moved this agent's count \
             from {before} to {after} (max_restarts {})",
            self.max_restarts
        );
    }

    fn spend(&mut self, reason: RestartReason) -> Decision {
        if self.remaining_restarts == 0 {
            return Decision::GiveUp;
        }
        let before = self.restart_count();
        self.remaining_restarts = self.remaining_restarts.checked_sub(1).unwrap_or_else(|| {
            panic!("a counted restart ({reason:?}) spent a budget with no restart left")
        });
        assert_eq!(
            self.restart_count(),
            before + 1,
            "a counted restart ({reason:?}) moves the restart count by exactly one"
        );
        Decision::Restart {
            counted: true,
            reason,
        }
    }
}

/// Whether the worker group may move from `from` (`None` before its first state) to `to` in
/// `SimpleElasticAgent._invoke_run` as the run loop drives it: INIT first, HEALTHY once
/// workers run (from INIT or after a restart's STOPPED), a monitored state (SUCCEEDED,
/// FAILED) or a restart's STOPPED only from HEALTHY or FAILED, and nothing after SUCCEEDED.
/// Staying in a state is no transition and always allowed.
pub fn group_transition_allowed(from: Option<WorkerGroupState>, to: WorkerGroupState) -> bool {
    use WorkerGroupState::{Failed, Healthy, Init, Stopped, Succeeded};
    if from == Some(to) {
        return true;
    }
    match (from, to) {
        (None, Init) => true,
        (Some(Init | Stopped), Healthy) => true,
        (Some(Healthy), Succeeded | Failed | Stopped) => true,
        // A failure restarts (STOPPED); a give-up stays FAILED.
        (Some(Failed), Stopped) => true,
        _ => false,
    }
}

/// Asserts that the worker group may move from `from` to `to` (see
/// [`group_transition_allowed`]): a run loop that skips or reorders a state is a bug in the
/// model, stopped at the transition.
pub fn assert_group_transition(from: Option<WorkerGroupState>, to: WorkerGroupState) {
    assert!(
        group_transition_allowed(from, to),
        "the worker group moved from {from:?} to {to:?}, which the agent's run loop never does"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(max: u32, fixes: &[AgentFix]) -> RestartPolicy {
        RestartPolicy::new(max, fixes.iter().copied().collect())
    }

    fn names(list: &[&str]) -> Vec<NodeIndex> {
        list.iter().map(|s| s.parse().expect("node-N")).collect()
    }

    #[test]
    fn failures_spend_the_budget_then_give_up() {
        let mut p = policy(2, &[]);
        assert_eq!(p.restart_count(), 0);
        assert!(matches!(
            p.on_failure(),
            Decision::Restart { counted: true, .. }
        ));
        assert!(matches!(
            p.on_failure(),
            Decision::Restart { counted: true, .. }
        ));
        assert_eq!(p.restart_count(), 2);
        assert_eq!(p.on_failure(), Decision::GiveUp);
    }

    #[test]
    fn membership_changes_are_free_as_in_torch() {
        let mut p = policy(0, &[]);
        let members = names(&["node-0", "node-1"]);
        assert_eq!(p.on_nodes_waiting(0, &[], &members), Decision::Continue);
        // Even a replaced member (a crash loop) restarts for free: pytorch#147064.
        let d = p.on_nodes_waiting(1, &names(&["node-1"]), &members);
        assert_eq!(
            d,
            Decision::Restart {
                counted: false,
                reason: RestartReason::MembershipChange
            }
        );
        assert_eq!(p.restart_count(), 0);
    }

    #[test]
    fn rejoined_members_count_with_the_fix() {
        let mut p = policy(1, &[AgentFix::CountRejoinedFailures]);
        let members = names(&["node-0", "node-1"]);
        // A new node (scale-up) stays free.
        let d = p.on_nodes_waiting(1, &names(&["node-2"]), &members);
        assert!(matches!(d, Decision::Restart { counted: false, .. }));
        let d = p.on_nodes_waiting(1, &names(&["node-1"]), &members);
        assert_eq!(
            d,
            Decision::Restart {
                counted: true,
                reason: RestartReason::MemberRejoined
            }
        );
        assert_eq!(
            p.on_nodes_waiting(1, &names(&["node-1"]), &members),
            Decision::GiveUp
        );
    }

    #[test]
    fn a_failed_agent_closes_the_rendezvous_unless_fixed() {
        assert!(closes_rendezvous_on_exit(AgentState::Failed, &[]));
        assert!(closes_rendezvous_on_exit(AgentState::Succeeded, &[]));
        let fixed = vec![AgentFix::KeepOpenOnFailure];
        assert!(!closes_rendezvous_on_exit(AgentState::Failed, &fixed));
        assert!(closes_rendezvous_on_exit(AgentState::Succeeded, &fixed));
    }

    #[test]
    #[should_panic(expected = "the restart budget holds 3 restarts left of max_restarts 1")]
    fn a_budget_with_more_left_than_its_maximum_stops_the_run() {
        let broken = RestartPolicy {
            max_restarts: 1,
            remaining_restarts: 3,
            fixes: BTreeSet::new(),
        };
        broken.restart_count();
    }

    #[test]
    fn the_run_loop_moves_the_group_as_torch_does() {
        use WorkerGroupState::*;
        let path = [
            Init, Healthy, Failed, Stopped, Healthy, Stopped, Healthy, Succeeded,
        ];
        let mut last = None;
        for state in path {
            assert!(
                group_transition_allowed(last, state),
                "{last:?} -> {state:?}"
            );
            last = Some(state);
        }
        assert!(group_transition_allowed(Some(Healthy), Failed));
        assert!(group_transition_allowed(Some(Failed), Failed));
        assert!(!group_transition_allowed(None, Healthy));
        assert!(!group_transition_allowed(Some(Succeeded), Stopped));
        assert!(!group_transition_allowed(Some(Stopped), Failed));
    }

    #[test]
    #[should_panic(expected = "the worker group moved from Some(Init) to Succeeded")]
    fn a_group_that_succeeds_before_its_workers_ran_stops_the_run() {
        assert_group_transition(Some(WorkerGroupState::Init), WorkerGroupState::Succeeded);
    }

    #[test]
    fn group_count_is_adopted_only_with_the_fix() {
        let mut torch = policy(3, &[]);
        torch.adopt_group_count(2);
        assert_eq!(torch.restart_count(), 0);
        let mut fixed = policy(3, &[AgentFix::SharedRestartCount]);
        fixed.adopt_group_count(2);
        assert_eq!(fixed.restart_count(), 2);
        // Never backwards, never past the budget.
        fixed.adopt_group_count(1);
        assert_eq!(fixed.restart_count(), 2);
        fixed.adopt_group_count(9);
        assert_eq!(fixed.restart_count(), 3);
        assert_eq!(fixed.on_failure(), Decision::GiveUp);
    }
}
