//! `rendezvous.liveness`: waiting nodes get a round, and survivors of a dead participant
//! re-rendezvous.
//!
//! Two "eventually" properties, each with a deadline derived from the scenario's own
//! timeouts. A deadline the run ended before is not decided: it never yields a violation.
//! Each part is an observer of one replay of the run (`check::run_model`).

use super::super::kind::kind_enum;
use super::super::membership::RoundId;
use super::super::run_model::{Observer, RunModel};
use super::super::{at_secs, span_secs, InvariantResult, Violation};
use crate::invariant::Invariant;
use crate::scenario::model::FaultName;
use crate::scenario::model::Scenario;
use crate::sim_time::{SimDuration, SimInstant};
use crate::trace::{
    AgentState, Event, EventKind, ExitReason, RendezvousErrorKind, RunEnd, TraceNode,
    WorkerGroupState,
};
use std::collections::{BTreeMap, BTreeSet};

kind_enum! {
    /// The ways `rendezvous.liveness` breaks.
    pub enum LivenessKind {
        /// Enough healthy nodes waited in `next_rendezvous()` but no round completed in time.
        NoRoundInTime,
        /// Enough healthy nodes were refused by a rendezvous closed before the job succeeded.
        RefusedByClose,
        /// A survivor of a killed participant stayed in the dead group past its bound.
        SurvivorStuck,
    }
}

/// Slack for the store round trips and state caching of the rendezvous ops.
const SLACK: SimDuration = SimDuration::from_ms(10_000);

/// How long waiting nodes may wait for a completion once the liveness phase has begun:
/// join timeout + last-call timeout + heartbeat expiry + slack.
pub(crate) fn completion_bound(scenario: &Scenario) -> SimDuration {
    let r = &scenario.rendezvous;
    r.join_timeout
        .saturating_add(r.last_call_timeout)
        .saturating_add(
            r.keep_alive_interval
                .saturating_mul(u64::from(r.keep_alive_max_attempt)),
        )
        .saturating_add(SLACK)
}

/// How long a survivor of a killed participant may stay in the dead group: the dead node's
/// heartbeat expiry, one more keep-alive tick for a live node's op to notice it, the
/// agent's monitor interval for the agent to act on it, plus slack.
///
/// The join timeout is deliberately not part of it: re-joining starts a new
/// `next_rendezvous()` call and does not wait for one to finish. With torch's defaults
/// this is about 30 s, well under the process group's 10-minute collective timeout, so
/// survivors that only notice through the collective (pytorch#111646) are caught.
pub(crate) fn survivor_bound(scenario: &Scenario) -> SimDuration {
    let r = &scenario.rendezvous;
    r.keep_alive_interval
        .saturating_mul(u64::from(r.keep_alive_max_attempt) + 1)
        .saturating_add(r.heartbeat_timeout)
        .saturating_add(scenario.agent.monitor_interval)
        .saturating_add(SLACK)
}

/// `rendezvous.liveness` over a trace of its own (the checks judge it together with the
/// other observers of one replay: [`Liveness`]).
#[cfg(test)]
pub(in crate::check) fn liveness(
    scenario: &Scenario,
    trace: &crate::trace::Trace,
    end: &RunEnd,
) -> InvariantResult {
    let mut liveness = Liveness::new(scenario);
    let model = super::super::run_model::replay(trace, &mut [&mut liveness]);
    liveness.finish(&model, end)
}

/// `rendezvous.liveness`'s two parts, observing one replay of the run.
pub(in crate::check) struct Liveness {
    waiting: WaitingNodes,
    survivors: Survivors,
}

impl Liveness {
    pub fn new(scenario: &Scenario) -> Self {
        Liveness {
            waiting: WaitingNodes::new(scenario),
            survivors: Survivors::new(scenario),
        }
    }

    /// The verdict once the replay is over. Not applicable when no node ever called
    /// `next_rendezvous()`.
    pub fn finish(self, model: &RunModel, end: &RunEnd) -> InvariantResult {
        let mut violations = self.waiting.finish(end);
        violations.extend(self.survivors.finish(end));
        violations.sort_by_key(|v| v.at);
        InvariantResult::judge(Invariant::RendezvousLiveness, model.joined(), violations)
    }
}

impl Observer<'_> for Liveness {
    fn before(&mut self, model: &RunModel, event: &Event) {
        self.waiting.before(model, event);
        self.survivors.before(model, event);
    }

    fn after(&mut self, model: &RunModel, event: &Event) {
        self.waiting.after(model, event);
    }
}

/// Part (a): after the last fault, whenever at least min_nodes healthy agents wait at once,
/// some round completes within [`completion_bound`].
///
/// A closed rendezvous never completes another round, so healthy agents that call
/// `next_rendezvous()` and are refused with `closed` before any agent succeeded still want
/// to train: once min_nodes of them are refused, the miss is decided at once (see
/// [`Refusals`]). After an agent succeeded, or failed with its restart budget spent, the job
/// is over as torch promises and the close is its end.
///
/// Waiting agents are not owed a round while the live groups already hold max_nodes
/// members: torch parks such joiners on its redundancy list until a member leaves.
/// One stall is reported once; the next completion re-arms the check.
///
/// Which fault is the last is known only at the trace's end, so every fault starts the
/// phase afresh: what was found since the fault before is dropped, and what a success
/// ended is kept (a success ends the job whenever it happens).
struct WaitingNodes {
    bound: SimDuration,
    min: usize,
    max: usize,
    /// When the healthy waiting began that a round is now owed to, and how many waited.
    pending: Option<(SimInstant, usize)>,
    /// Whether a miss was reported and no round completed since.
    stalled: bool,
    refusals: Refusals,
    violations: Vec<Violation>,
}

impl WaitingNodes {
    fn new(scenario: &Scenario) -> Self {
        WaitingNodes {
            bound: completion_bound(scenario),
            min: scenario.rendezvous.min_nodes as usize,
            max: scenario.rendezvous.max_nodes as usize,
            pending: None,
            stalled: false,
            refusals: Refusals::default(),
            violations: Vec::new(),
        }
    }

    fn miss(&self, since: SimInstant, waiting: usize) -> Violation {
        let message = format!(
            "{waiting} healthy nodes were waiting in next_rendezvous() from {} but no round completed within {}",
            at_secs(since),
            span_secs(self.bound)
        );
        let kind = LivenessKind::NoRoundInTime;
        Violation::new(since.after(self.bound), None, kind, message)
    }

    /// The misses found, the one still pending at the run's end included when the run
    /// outlived its deadline.
    fn finish(mut self, end: &RunEnd) -> Vec<Violation> {
        if let Some((since, waiting)) = self.pending {
            if end.ended_at > since.after(self.bound) {
                let miss = self.miss(since, waiting);
                self.violations.push(miss);
            }
        }
        self.violations
    }
}

impl Observer<'_> for WaitingNodes {
    fn before(&mut self, model: &RunModel, event: &Event) {
        if matches!(event.kind, EventKind::FaultApplied { .. }) {
            self.violations.clear();
            self.pending = None;
            self.stalled = false;
            self.refusals.restart();
        }
        if model.membership().len() < self.max {
            if let Some(message) = self.refusals.observe(event, model, self.min) {
                let kind = LivenessKind::RefusedByClose;
                self.violations
                    .push(Violation::new(event.at, None, kind, message));
            }
        } else {
            self.refusals.note_success(event);
        }
        if let Some((since, waiting)) = self.pending {
            if event.at > since.after(self.bound) {
                let miss = self.miss(since, waiting);
                self.violations.push(miss);
                self.pending = None;
                self.stalled = true;
            }
        }
        if matches!(event.kind, EventKind::RendezvousCompleted { .. }) {
            self.pending = None;
            self.stalled = false;
        }
    }

    fn after(&mut self, model: &RunModel, event: &Event) {
        if self.pending.is_some() || self.stalled {
            return;
        }
        let waiting = model.healthy_waiting();
        if waiting >= self.min && model.membership().len() < self.max {
            self.pending = Some((event.at, waiting));
        }
    }
}

/// Healthy agents refused by a closed rendezvous before the job succeeded.
#[derive(Default)]
struct Refusals {
    succeeded: bool,
    refused: BTreeSet<u32>,
    reported: bool,
}

impl Refusals {
    /// A success, or a failure with the restart budget spent, ends the job: a close after it
    /// is the job's end, not a liveness miss.
    fn note_success(&mut self, event: &Event) {
        if let EventKind::AgentExited { state, reason, .. } = &event.kind {
            self.succeeded |= *state == AgentState::Succeeded
                || (*state == AgentState::Failed
                    && matches!(reason, ExitReason::BudgetSpent { .. }));
        }
    }

    /// A fault starts the phase afresh: refusals before it are forgotten, a success is not.
    fn restart(&mut self) {
        self.refused.clear();
        self.reported = false;
    }

    /// Follows one event; returns the violation's sentence when the min_nodes-th healthy
    /// agent is refused.
    fn observe(&mut self, event: &Event, model: &RunModel, min: usize) -> Option<String> {
        self.note_success(event);
        let EventKind::RendezvousFailed { pid, error, .. } = &event.kind else {
            return None;
        };
        if *error != RendezvousErrorKind::Closed || self.succeeded || !model.is_healthy(*pid) {
            return None;
        }
        self.refused.insert(*pid);
        if self.refused.len() < min || std::mem::replace(&mut self.reported, true) {
            return None;
        }
        Some(format!(
            "{} healthy nodes wanted a new round but the rendezvous was closed before the job succeeded; no round can complete after a close",
            self.refused.len()
        ))
    }
}

/// A survivor's obligation to leave the group of a killed participant.
struct Obligation {
    node: TraceNode,
    deadline: SimInstant,
    dead_node: TraceNode,
    killed_at: SimInstant,
    round: RoundId,
}

impl Obligation {
    fn violation(&self, bound: SimDuration) -> Violation {
        let message = format!(
            "{} stayed in round {} for more than {} after participant {} was killed at {}, \
             without re-joining or exiting (survivors must re-rendezvous; pytorch#111646)",
            self.node,
            self.round,
            span_secs(bound),
            self.dead_node,
            at_secs(self.killed_at)
        );
        let kind = LivenessKind::SurvivorStuck;
        Violation::new(self.deadline, Some(self.node), kind, message)
    }
}

/// Part (b): when a member of a live group is killed, every other member of that group
/// calls `next_rendezvous()` again or exits within [`survivor_bound`].
///
/// Stop faults are graceful exits and are not covered here. A survivor whose node is paused
/// is excused, whether the pause came before the kill or after: it cannot act until
/// resumed. So is a survivor whose workers have finished (its group `SUCCEEDED`): it has
/// nothing left to train and waits in the exit barrier.
struct Survivors {
    bound: SimDuration,
    /// By the survivor's pid.
    owed: BTreeMap<u32, Obligation>,
    /// Processes whose worker group succeeded.
    finished: BTreeSet<u32>,
    violations: Vec<Violation>,
}

impl Survivors {
    fn new(scenario: &Scenario) -> Self {
        Survivors {
            bound: survivor_bound(scenario),
            owed: BTreeMap::new(),
            finished: BTreeSet::new(),
            violations: Vec::new(),
        }
    }

    /// The misses found, with the obligations still open whose deadline the run outlived.
    fn finish(mut self, end: &RunEnd) -> Vec<Violation> {
        for obligation in self.owed.values() {
            if end.ended_at > obligation.deadline {
                self.violations.push(obligation.violation(self.bound));
            }
        }
        self.violations
    }

    /// Every other member of the group of `pid`, killed at `at`, owes a re-join.
    fn killed(&mut self, model: &RunModel, pid: u32, at: SimInstant) {
        self.owed.remove(&pid);
        let membership = model.membership();
        let Some(dead) = membership.of_pid(pid) else {
            return;
        };
        for survivor in membership.members() {
            if survivor.pid == pid
                || survivor.round != dead.round
                || self.finished.contains(&survivor.pid)
                || model.is_paused(survivor.node)
            {
                continue;
            }
            self.owed.entry(survivor.pid).or_insert_with(|| Obligation {
                node: survivor.node,
                deadline: at.after(self.bound),
                dead_node: dead.node,
                killed_at: at,
                round: dead.round,
            });
        }
    }
}

impl Observer<'_> for Survivors {
    fn before(&mut self, model: &RunModel, event: &Event) {
        let overdue: Vec<u32> = self
            .owed
            .iter()
            .filter(|(_, o)| event.at > o.deadline)
            .map(|(pid, _)| *pid)
            .collect();
        for pid in overdue {
            if let Some(obligation) = self.owed.remove(&pid) {
                self.violations.push(obligation.violation(self.bound));
            }
        }
        match &event.kind {
            EventKind::AgentKilled { pid } => self.killed(model, *pid, event.at),
            EventKind::RendezvousJoining { pid }
            | EventKind::RendezvousFailed { pid, .. }
            | EventKind::AgentExited { pid, .. } => {
                self.owed.remove(pid);
            }
            EventKind::WorkerGroupState {
                pid,
                state: WorkerGroupState::Succeeded,
            } => {
                self.finished.insert(*pid);
                self.owed.remove(pid);
            }
            EventKind::FaultApplied {
                fault: FaultName::Pause,
                ..
            } => {
                self.owed.retain(|_, o| Some(o.node) != event.node);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::testkit::*;
    use super::super::super::Status;
    use super::*;

    #[test]
    fn bounds_follow_the_scenario() {
        let s = scenario();
        assert_eq!(completion_bound(&s).as_us(), (600 + 30 + 15 + 10) * S);
        assert_eq!(
            survivor_bound(&s).as_us(),
            20 * S + 5 * S + 100_000 + 10 * S
        );
    }

    #[test]
    fn not_applicable_without_rendezvous() {
        let events = vec![
            e(0, "node-0", started(1)),
            e(5, "node-0", exited(1, AgentState::Failed)),
        ];
        let r = liveness(&scenario(), &trace(events), &end(5, "failed"));
        assert_eq!(r.status, Status::NotApplicable);
    }

    #[test]
    fn held_when_rounds_complete_promptly() {
        let r = liveness(&scenario(), &trace(happy_run(3, 10)), &end(13, "succeeded"));
        assert_eq!(r.status, Status::Held, "{:?}", r.violations);
    }

    #[test]
    fn violated_when_enough_nodes_wait_forever() {
        let mut events = vec![];
        for i in 0..2 {
            events.push(e(0, &format!("node-{i}"), started(i)));
            events.push(e(1, &format!("node-{i}"), joining(i)));
        }
        let r = liveness(&scenario(), &trace(events), &end(2000, "timed_out"));
        assert_eq!(r.status, Status::Violated);
        assert_eq!(r.violations.len(), 1);
        assert_eq!(r.violations[0].at.as_us(), (1 + 655) * S);
        assert_eq!(r.violations[0].kind, LivenessKind::NoRoundInTime.into());
    }

    #[test]
    fn undecided_when_run_ends_before_the_deadline() {
        let mut events = vec![];
        for i in 0..2 {
            events.push(e(0, &format!("node-{i}"), started(i)));
            events.push(e(1, &format!("node-{i}"), joining(i)));
        }
        let r = liveness(&scenario(), &trace(events), &end(600, "timed_out"));
        assert_eq!(r.status, Status::Held);
    }

    #[test]
    fn waiting_before_the_last_fault_is_not_owed() {
        // Two nodes wait, but a fault at 1000 s restarts the liveness phase, and a paused
        // node does not count as healthy.
        let mut events = vec![];
        for i in 0..2 {
            events.push(e(0, &format!("node-{i}"), started(i)));
            events.push(e(1, &format!("node-{i}"), joining(i)));
        }
        events.push(e(1000, "node-1", fault("pause")));
        let r = liveness(&scenario(), &trace(events), &end(5000, "timed_out"));
        assert_eq!(r.status, Status::Held, "{:?}", r.violations);
    }

    #[test]
    fn healthy_nodes_refused_by_an_early_close_violate_at_once() {
        let mut events = round_zero(3);
        events.push(e(10, "node-2", exited(102, AgentState::Failed)));
        events.push(e(10, "node-2", closed(102, 0)));
        for pid in [100, 101] {
            let node = format!("node-{}", pid - 100);
            events.push(e(610, &node, joining(pid)));
            events.push(e(611, &node, rdzv_failed(pid, "closed")));
            events.push(e(611, &node, exited(pid, AgentState::Failed)));
        }
        let r = liveness(&scenario(), &trace(events.clone()), &end(611, "failed"));
        assert_eq!(r.status, Status::Violated);
        assert_eq!(r.violations.len(), 1);
        assert!(r.violations[0]
            .message
            .contains("2 healthy nodes wanted a new round"));
        assert_eq!(r.violations[0].kind, LivenessKind::RefusedByClose.into());
        // After a success the close is the job's end, and one refused node is not owed.
        let mut done = round_zero(3);
        done.push(e(10, "node-2", exited(102, AgentState::Succeeded)));
        done.extend(events[events.len() - 6..].iter().cloned());
        let r = liveness(&scenario(), &trace(done), &end(611, "failed"));
        assert_eq!(r.status, Status::Held, "{:?}", r.violations);
        // A failure with the budget spent is the job's end too.
        let mut spent = events.clone();
        spent[round_zero(3).len()] = e(
            10,
            "node-2",
            EventKind::AgentExited {
                pid: 102,
                state: AgentState::Failed,
                reason: ExitReason::BudgetSpent {
                    last_failure: "worker 0 failed".into(),
                },
            },
        );
        let r = liveness(&scenario(), &trace(spent.clone()), &end(611, "failed"));
        assert_eq!(r.status, Status::Held, "{:?}", r.violations);
        // The check reads the typed reason, never its words: an error that happens to end
        // like a spent budget is no end of the job.
        spent[round_zero(3).len()] = e(
            10,
            "node-2",
            EventKind::AgentExited {
                pid: 102,
                state: AgentState::Failed,
                reason: "worker 0 failed and no restarts remain".into(),
            },
        );
        let r = liveness(&scenario(), &trace(spent), &end(611, "failed"));
        assert_eq!(r.status, Status::Violated, "{:?}", r.violations);
        let one = events[..events.len() - 3].to_vec();
        let r = liveness(&scenario(), &trace(one), &end(611, "failed"));
        assert_eq!(r.status, Status::Held, "{:?}", r.violations);
    }

    #[test]
    fn too_few_waiting_nodes_are_not_owed_a_round() {
        let events = vec![e(0, "node-0", started(1)), e(1, "node-0", joining(1))];
        let r = liveness(&scenario(), &trace(events), &end(5000, "timed_out"));
        assert_eq!(r.status, Status::Held);
    }

    #[test]
    fn survivors_that_wait_for_the_collective_timeout_violate() {
        let mut events = round_zero(3);
        events.push(e(45, "node-2", fault("kill")));
        events.push(e(45, "node-2", killed(102)));
        // The survivors notice only when the collective times out, 600 s later.
        events.push(e(645, "node-0", exited(100, AgentState::Failed)));
        events.push(e(645, "node-1", exited(101, AgentState::Failed)));
        let r = liveness(&scenario(), &trace(events), &end(645, "failed"));
        assert_eq!(r.status, Status::Violated);
        let nodes: Vec<_> = r.violations.iter().map(|v| v.node.unwrap()).collect();
        assert_eq!(nodes, vec![TraceNode::node(0), TraceNode::node(1)]);
        assert!(r.violations[0]
            .message
            .contains("participant node-2 was killed at 45 s"));
        assert_eq!(r.violations[0].kind, LivenessKind::SurvivorStuck.into());
    }

    #[test]
    fn survivors_that_rejoin_promptly_hold() {
        let mut events = round_zero(3);
        events.push(e(45, "node-2", fault("kill")));
        events.push(e(45, "node-2", killed(102)));
        events.push(e(62, "node-0", joining(100)));
        events.push(e(62, "node-1", joining(101)));
        events.push(e(93, "node-0", completed(100, 1, 0, &[0, 1])));
        events.push(e(93, "node-1", completed(101, 1, 1, &[0, 1])));
        let r = liveness(&scenario(), &trace(events), &end(200, "timed_out"));
        assert_eq!(r.status, Status::Held, "{:?}", r.violations);
    }

    #[test]
    fn survivors_whose_workers_finished_owe_no_new_round() {
        let mut events = round_zero(3);
        events.push(e(45, "node-2", fault("kill")));
        events.push(e(45, "node-2", killed(102)));
        for (node, pid) in [("node-0", 100), ("node-1", 101)] {
            let state = EventKind::WorkerGroupState {
                pid,
                state: WorkerGroupState::Succeeded,
            };
            events.push(e(62, node, state));
        }
        // They wait in the exit barrier for node-2 until its timeout.
        events.push(e(362, "node-0", exited(100, AgentState::Succeeded)));
        events.push(e(362, "node-1", exited(101, AgentState::Succeeded)));
        let r = liveness(&scenario(), &trace(events), &end(362, "succeeded"));
        assert_eq!(r.status, Status::Held, "{:?}", r.violations);
    }

    #[test]
    fn a_survivor_paused_before_the_kill_is_excused() {
        let mut events = round_zero(3);
        events.push(e(40, "node-1", fault("pause")));
        events.push(e(45, "node-2", fault("kill")));
        events.push(e(45, "node-2", killed(102)));
        // node-1 is paused past node-0's deadline; node-0 is not and still owes a rejoin.
        events.push(e(645, "node-0", exited(100, AgentState::Failed)));
        let r = liveness(&scenario(), &trace(events), &end(645, "failed"));
        let nodes: Vec<_> = r.violations.iter().map(|v| v.node).collect();
        assert_eq!(nodes, vec![Some(TraceNode::node(0))], "{:?}", r.violations);
    }
}
