//! `agent.no_restart_loop`: no node's agent restarts its worker group more often, without a
//! training step in between, than the scenario's failures and membership changes explain.
//!
//! Each restart is judged sound by the other invariants (counted within the budget, or a
//! free restart for a membership change), so an agent that restarts for ever because a node
//! waits that can never join (torch's `num_nodes_waiting` seeing a spare) breaks none of
//! them: this one counts the restarts between steps.

use super::kind::kind_enum;
use super::{at_secs, InvariantResult, Violation};
use crate::invariant::Invariant;
use crate::scenario::model::{Relaunch, Scenario};
use crate::sim_time::SimInstant;
use crate::trace::{EventKind, Trace, TraceNode};
use std::collections::BTreeMap;

kind_enum! {
    /// The ways `agent.no_restart_loop` breaks.
    pub enum RestartLoopKind {
        /// A node's worker group restarted more than the bound allows without a step.
        RestartsWithoutStep,
    }
}

/// How many restarts of one node's worker group may follow each other without a training
/// step: every node may spend its restart budget (each counted restart of a member makes
/// every other member restart once more), join or leave once, be relaunched up to its
/// limit, and every fault may take a node out and bring it back.
pub(crate) fn restarts_without_step_max(scenario: &Scenario) -> u64 {
    let nodes = u64::from(scenario.cluster.nodes) + u64::from(scenario.cluster.spare_nodes);
    let relaunches = match scenario.agent.relaunch {
        Relaunch::Never => 0,
        Relaunch::OnFailure | Relaunch::Always => u64::from(scenario.agent.relaunch_max),
    };
    let faults = scenario.faults.len() as u64;
    (u64::from(scenario.agent.max_restarts) + 1 + relaunches)
        .saturating_mul(nodes)
        .saturating_add(faults.saturating_mul(2))
}

/// One node's restarts since its last step.
#[derive(Default)]
struct Run {
    restarts: u64,
    first_at: Option<SimInstant>,
    last_at: Option<SimInstant>,
    /// The violation reported for this loop, by its place in the list.
    reported: Option<usize>,
}

/// `agent.no_restart_loop` over the trace: reported once per loop, at the restart that
/// passes the bound, saying how long the loop went on. Not applicable when no worker group
/// restarted.
pub(super) fn no_restart_loop(scenario: &Scenario, trace: &Trace) -> InvariantResult {
    let max = restarts_without_step_max(scenario);
    let mut runs: BTreeMap<TraceNode, Run> = BTreeMap::new();
    let mut restarted = false;
    let mut violations = Vec::new();
    for event in &trace.events {
        let Some(node) = event.node else {
            continue;
        };
        match &event.kind {
            EventKind::Step { .. } => {
                if let Some(run) = runs.remove(&node) {
                    tell_length(node, &run, max, &mut violations);
                }
            }
            EventKind::AgentRestart { .. } => {
                restarted = true;
                let run = runs.entry(node).or_default();
                run.restarts += 1;
                run.first_at.get_or_insert(event.at);
                run.last_at = Some(event.at);
                if run.restarts > max && run.reported.is_none() {
                    run.reported = Some(violations.len());
                    let kind = RestartLoopKind::RestartsWithoutStep;
                    violations.push(Violation::new(event.at, Some(node), kind, String::new()));
                }
            }
            _ => {}
        }
    }
    for (node, run) in &runs {
        tell_length(*node, run, max, &mut violations);
    }
    InvariantResult::judge(Invariant::AgentNoRestartLoop, restarted, violations)
}

/// Writes a reported loop's sentence once its length is known (a step ended it, or the run).
fn tell_length(node: TraceNode, run: &Run, max: u64, violations: &mut [Violation]) {
    let (Some(index), Some(first), Some(last)) = (run.reported, run.first_at, run.last_at) else {
        return;
    };
    violations[index].message = format!(
        "{node}'s worker group restarted {} times without a training step, from {} to {}; \
         its budget, the nodes and the scenario's faults explain at most {}",
        run.restarts,
        at_secs(first),
        at_secs(last),
        max
    );
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::super::Status;
    use super::*;

    #[test]
    fn the_bound_counts_budgets_nodes_relaunches_and_faults() {
        let mut s = scenario();
        // 3 nodes + 1 spare, max_restarts 1, no faults.
        assert_eq!(restarts_without_step_max(&s), 8);
        s.agent.relaunch = Relaunch::OnFailure;
        s.agent.relaunch_max = 2;
        assert_eq!(restarts_without_step_max(&s), 16);
    }

    fn restarts(node: &str, pid: u32, from_s: u64, count: u64) -> Vec<crate::trace::Event> {
        (0..count)
            .map(|i| e(from_s + i, node, restart(pid, false, 0)))
            .collect()
    }

    #[test]
    fn restarts_within_the_bound_or_between_steps_hold() {
        let mut events = round_zero(3);
        events.extend(restarts("node-0", 100, 10, 8));
        events.push(e(20, "node-0", step(100, 1, 1)));
        events.extend(restarts("node-0", 100, 30, 8));
        let r = no_restart_loop(&scenario(), &trace(events));
        assert_eq!(r.status, Status::Held, "{:?}", r.violations);
        let r = no_restart_loop(&scenario(), &trace(round_zero(3)));
        assert_eq!(r.status, Status::NotApplicable);
    }

    #[test]
    fn a_loop_is_reported_once_with_its_length() {
        let mut events = round_zero(3);
        events.extend(restarts("node-1", 101, 10, 40));
        events.push(e(60, "node-1", step(101, 2, 1)));
        events.extend(restarts("node-2", 102, 70, 9));
        let r = no_restart_loop(&scenario(), &trace(events));
        assert_eq!(r.status, Status::Violated);
        assert_eq!(r.violations.len(), 2, "{:?}", r.violations);
        let first = &r.violations[0];
        assert_eq!(first.node, Some(TraceNode::node(1)));
        assert_eq!(first.at.as_us(), 18 * S, "the ninth restart passes 8");
        assert_eq!(first.kind, RestartLoopKind::RestartsWithoutStep.into());
        assert!(
            first
                .message
                .contains("restarted 40 times without a training step, from 10 s to 49 s"),
            "{}",
            first.message
        );
        assert!(r.violations[1].message.contains("restarted 9 times"));
    }
}
