//! `job.resumes_after_heal`: once the last fault is over and at least `min_nodes` healthy
//! nodes run their agents, the job trains again within a bound derived from the scenario's
//! timeouts, or ends as torch promises (it finishes, or an agent's restart budget is spent).
//!
//! The other invariants judge each mechanism on its own; this one judges the whole job, so a
//! run where every mechanism kept its word and the job still stopped training (agents that
//! all gave up on a healthy cluster, survivors blocked for ever in a collective or a store
//! wait) is no longer "as expected".

use super::kind::kind_enum;
use super::rendezvous::survivor_bound;
use super::{at_secs, span_secs, InvariantResult, Violation};
use crate::invariant::Invariant;
use crate::scenario::model::{FaultKind, FaultName, Outcome, Scenario, StoreHost};
use crate::sim_time::{SimDuration, SimInstant};
use crate::trace::WorkerGroupState;
use crate::trace::{AgentState, Event, EventKind, ExitReason, RunEnd, Trace, TraceNode};
use std::collections::{BTreeMap, BTreeSet};

kind_enum! {
    /// The ways `job.resumes_after_heal` breaks.
    pub enum ResumesKind {
        /// Enough healthy nodes ran agents once the faults were over, yet no training step
        /// followed within the bound.
        NoStepAfterHeal,
        /// Every agent exited with the job unfinished and no restart budget spent, while
        /// enough healthy nodes had run agents once the faults were over.
        FailedWhileHealthy,
    }
}

/// Slack for store round trips and the agents' own scheduling.
const SLACK: SimDuration = SimDuration::from_ms(10_000);

/// How long a job with enough healthy nodes may go without a training step once its faults
/// are over: noticing a dead member (heartbeat expiry, a keep-alive tick and the monitor's
/// interval), the last call and one more heartbeat expiry for the new round, an agent's
/// start, its workers' start and checkpoint load, two steps and a checkpoint save, plus
/// slack. The process group's collective timeout is deliberately not part of it: survivors
/// owe a re-rendezvous long before it (`rendezvous.liveness` part b), so a job that waits
/// for it after its last fault has not resumed in time.
pub(crate) fn resume_bound(scenario: &Scenario) -> SimDuration {
    let (r, a, j) = (&scenario.rendezvous, &scenario.agent, &scenario.job);
    let expiry = r
        .keep_alive_interval
        .saturating_mul(u64::from(r.keep_alive_max_attempt));
    [
        r.last_call_timeout,
        expiry,
        a.start_time,
        a.start_time_jitter,
        j.worker_start_time,
        j.worker_start_jitter,
        j.checkpoint_load_time,
        j.checkpoint_save_time,
        j.step_time.saturating_mul(2),
        SLACK,
    ]
    .into_iter()
    .fold(survivor_bound(scenario), SimDuration::saturating_add)
}

/// `job.resumes_after_heal` over the trace. Not applicable when the faults never ended
/// (a partition never healed, a clogged link, a lasting network change, the store lost to a
/// fault and not restarted) or fewer than `min_nodes` healthy nodes ran agents once they
/// were over.
pub(super) fn resumes_after_heal(
    scenario: &Scenario,
    trace: &Trace,
    end: &RunEnd,
) -> InvariantResult {
    let mut walk = Walk::new(scenario);
    if scenario.job.steps == 0 || walk.degraded_for_good {
        return InvariantResult::not_applicable(Invariant::JobResumesAfterHeal);
    }
    for event in &trace.events {
        walk.observe(event);
    }
    let applicable = walk.owed_from.is_some();
    let violations = walk.finish(end);
    InvariantResult::judge(Invariant::JobResumesAfterHeal, applicable, violations)
}

/// The run as this check follows it. Which fault is the last is known only at the trace's
/// end, so every fault starts the judgement afresh; the stalls are found once the walk is
/// over, from the spans the nodes trained in (a `Step` event may record a run of steps at
/// the time of its last one, after events of other nodes that happened during the run).
struct Walk {
    bound: SimDuration,
    min_nodes: usize,
    /// Whether a network change without a duration never ends (the faults are never over).
    degraded_for_good: bool,
    /// When the last network or GPU change with a duration ends.
    changes_end_at: SimInstant,
    /// Live agent processes, by pid, with their node.
    live: BTreeMap<u32, TraceNode>,
    /// Nodes a fault took out (killed, powered off, stopped, paused, a GPU lost) until a new
    /// agent process starts on them or they resume.
    downed: BTreeSet<TraceNode>,
    partitioned: bool,
    clogged_links: u32,
    store_up: bool,
    /// The node whose agent hosts the rendezvous store, if one does.
    store_host: Option<TraceNode>,
    /// Whether a fault took the store (its host killed, stopped or powered off, or the store
    /// crashed) and no store has started since: the store's death is then the fault's, and
    /// torch cannot train without it. A store that dies because its host's agent exited on
    /// its own is part of the job's failure, not a fault.
    store_lost_to_fault: bool,
    /// The last fault applied so far, and when.
    last_fault: Option<(SimInstant, FaultName)>,
    /// Since the last fault: the first moment enough healthy nodes ran agents with no fault
    /// in force, and how many did.
    owed_from: Option<(SimInstant, usize)>,
    /// Each `Step` event's span: from its first step's end to its last's.
    trained: Vec<(SimInstant, SimInstant)>,
    /// When the job ended as torch promises: a success, or a spent restart budget.
    over_at: Option<SimInstant>,
    /// The last agent exit, for a failed run's violation.
    last_exit: Option<SimInstant>,
}

impl Walk {
    fn new(scenario: &Scenario) -> Self {
        let mut degraded_for_good = false;
        let mut changes_end_at = SimInstant::from_us(0);
        for fault in &scenario.faults {
            let lasts = match &fault.kind {
                FaultKind::Latency { duration, .. } | FaultKind::Loss { duration, .. } => *duration,
                FaultKind::GpuSlow { duration, .. } => Some(*duration),
                _ => continue,
            };
            match lasts {
                Some(span) => changes_end_at = changes_end_at.max(fault.at.after(span)),
                None => degraded_for_good = true,
            }
        }
        Walk {
            bound: resume_bound(scenario),
            min_nodes: scenario.rendezvous.min_nodes as usize,
            degraded_for_good,
            changes_end_at,
            live: BTreeMap::new(),
            downed: BTreeSet::new(),
            partitioned: false,
            clogged_links: 0,
            store_up: false,
            store_host: match scenario.cluster.store {
                StoreHost::Node(index) => Some(TraceNode::node(index)),
                StoreHost::Dedicated => None,
            },
            store_lost_to_fault: false,
            last_fault: None,
            owed_from: None,
            trained: Vec::new(),
            over_at: None,
            last_exit: None,
        }
    }

    fn observe(&mut self, event: &Event) {
        match &event.kind {
            EventKind::FaultApplied { fault, .. } => self.fault(*fault, event.node, event.at),
            EventKind::AgentStarted { pid } => {
                if let Some(node) = event.node {
                    self.live.insert(*pid, node);
                    self.downed.remove(&node);
                }
            }
            EventKind::AgentKilled { pid } => {
                self.live.remove(pid);
            }
            EventKind::AgentExited { pid, state, reason } => {
                self.live.remove(pid);
                self.last_exit = Some(event.at);
                let promised = *state == AgentState::Succeeded
                    || (*state == AgentState::Failed
                        && matches!(reason, ExitReason::BudgetSpent { .. }));
                if promised {
                    self.over_at.get_or_insert(event.at);
                }
            }
            EventKind::WorkerGroupState {
                state: WorkerGroupState::Succeeded,
                ..
            } => {
                self.over_at.get_or_insert(event.at);
            }
            EventKind::Step { run, .. } => {
                let earlier = run.step.saturating_mul(run.steps() - 1);
                self.trained.push((event.at.before(earlier), event.at));
            }
            EventKind::StoreStarted => {
                self.store_up = true;
                self.store_lost_to_fault = false;
            }
            EventKind::StoreDied { .. } => self.store_up = false,
            _ => {}
        }
        self.note_owed(event.at);
    }

    /// A fault starts the judgement afresh: only what follows the last one is owed.
    fn fault(&mut self, fault: FaultName, node: Option<TraceNode>, at: SimInstant) {
        use FaultName::*;
        self.last_fault = Some((at, fault));
        self.owed_from = None;
        // A user signal ends the agent as SIGTERM does, handled or by its default action.
        let takes_the_host = matches!(fault, Kill | PowerOff | Stop | Signal);
        if fault == StoreCrash || (takes_the_host && node.is_some() && node == self.store_host) {
            self.store_lost_to_fault = true;
        }
        match (fault, node) {
            (Kill | PowerOff | Stop | Signal | Pause | GpuFail, Some(node)) => {
                self.downed.insert(node);
            }
            (Resume, Some(node)) => {
                self.downed.remove(&node);
            }
            (Partition, _) => self.partitioned = true,
            // A heal restores every cut link, clogged ones included (as the world does).
            (Heal, _) => {
                self.partitioned = false;
                self.clogged_links = 0;
            }
            (ClogLink, _) => self.clogged_links += 1,
            (UnclogLink, _) => self.clogged_links = self.clogged_links.saturating_sub(1),
            _ => {}
        }
    }

    /// Healthy nodes running an agent process.
    fn healthy_nodes(&self) -> usize {
        let nodes: BTreeSet<&TraceNode> = self
            .live
            .values()
            .filter(|node| !self.downed.contains(node))
            .collect();
        nodes.len()
    }

    /// Training is owed from the first moment, after the last fault and the last timed
    /// change, when no fault is in force and enough healthy nodes run agents, unless the
    /// job already ended as promised.
    fn note_owed(&mut self, at: SimInstant) {
        let in_force = self.partitioned
            || self.clogged_links > 0
            || !self.store_up
            || self.store_lost_to_fault;
        let over = self.over_at.is_some();
        if self.owed_from.is_some() || over || in_force || at < self.changes_end_at {
            return;
        }
        let healthy = self.healthy_nodes();
        if healthy >= self.min_nodes {
            self.owed_from = Some((at, healthy));
        }
    }

    /// The gaps longer than the bound between `owed` and `until` in which no node trained,
    /// as (start of the gap, whether a step ended it).
    fn stalls(&mut self, owed: SimInstant, until: SimInstant) -> Vec<(SimInstant, bool)> {
        self.trained.sort();
        let mut stalls = Vec::new();
        let mut cursor = owed;
        for &(first, last) in &self.trained {
            if last < cursor {
                continue;
            }
            if first > cursor.after(self.bound) && cursor.after(self.bound) < until {
                stalls.push((cursor, true));
            }
            cursor = cursor.max(last);
        }
        if until > cursor.after(self.bound) {
            stalls.push((cursor, false));
        }
        stalls
    }

    /// `4 healthy nodes ran agents (min_nodes 2) after the last fault (kill at 30 s) with no
    /// fault in force`.
    fn healthy_words(&self, healthy: usize) -> String {
        let after = match self.last_fault {
            Some((at, fault)) => format!("after the last fault ({fault} at {})", at_secs(at)),
            None => "in a run without faults".to_owned(),
        };
        let nodes = if healthy == 1 {
            "1 healthy node ran an agent".to_owned()
        } else {
            format!("{healthy} healthy nodes ran agents")
        };
        format!(
            "{nodes} (min_nodes {}) {after} with no fault in force",
            self.min_nodes
        )
    }

    /// The violations: every stall past the bound while training was owed, and a failed
    /// run that was owed training ends the job on a healthy cluster (its last stall is that
    /// failure, not a stall of its own).
    fn finish(mut self, end: &RunEnd) -> Vec<Violation> {
        let Some((owed, healthy)) = self.owed_from else {
            return Vec::new();
        };
        let failed = end.outcome == Outcome::Failed && self.over_at.is_none();
        let until = self.over_at.or(self.last_exit.filter(|_| failed));
        let until = until.unwrap_or(end.ended_at);
        let mut violations = Vec::new();
        for (since, resumed) in self.stalls(owed, until) {
            if failed && !resumed {
                continue;
            }
            let message = format!(
                "no training step from {} for more than {}: {}",
                at_secs(since),
                span_secs(self.bound),
                self.healthy_words(healthy)
            );
            let kind = ResumesKind::NoStepAfterHeal;
            violations.push(Violation::new(since.after(self.bound), None, kind, message));
        }
        if failed {
            violations.push(self.failed_while_healthy(until, healthy));
        }
        violations
    }

    fn failed_while_healthy(&self, at: SimInstant, healthy: usize) -> Violation {
        let stopped = match self.trained.iter().map(|&(_, last)| last).max() {
            Some(step) => format!("training stopped at {}", at_secs(step)),
            None => "it never trained".to_owned(),
        };
        let message = format!(
            "every agent had exited by {} with the job unfinished and no restart budget spent ({stopped}): {}",
            at_secs(at),
            self.healthy_words(healthy)
        );
        Violation::new(at, None, ResumesKind::FailedWhileHealthy, message)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::super::Status;
    use super::*;
    use crate::trace::StepRun;

    /// Three nodes with the store up at 0 s, round 0 at 2 s, steps 1..=steps one a second.
    fn training(steps: u64) -> Vec<Event> {
        let mut events = vec![e(0, "node-0", EventKind::StoreStarted)];
        events.extend(round_zero(3));
        for s in 1..=steps {
            for i in 0..3 {
                events.push(e(2 + s, &format!("node-{i}"), step(100 + i, 0, s)));
            }
        }
        events
    }

    fn judge(events: Vec<Event>, end_at_s: u64, outcome: &str) -> InvariantResult {
        resumes_after_heal(&scenario(), &trace(events), &end(end_at_s, outcome))
    }

    fn failed_exit(pid: u32) -> EventKind {
        exited(pid, AgentState::Failed)
    }

    #[test]
    fn the_bound_follows_the_scenario() {
        let s = scenario();
        // Survivor bound 35.1 s, last call 30 s, expiry 15 s, slack 10 s, and the job's
        // starts, loads and steps.
        let job = &s.job;
        let starts = s.agent.start_time.as_us()
            + s.agent.start_time_jitter.as_us()
            + job.worker_start_time.as_us()
            + job.worker_start_jitter.as_us()
            + job.checkpoint_load_time.as_us()
            + job.checkpoint_save_time.as_us()
            + 2 * job.step_time.as_us();
        let expected = 35_100_000 + 30 * S + 15 * S + 10 * S + starts;
        assert_eq!(resume_bound(&s).as_us(), expected);
    }

    #[test]
    fn a_job_that_trains_to_its_end_holds() {
        let r = judge(happy_run(3, 10), 13, "succeeded");
        assert_eq!(
            r.status,
            Status::NotApplicable,
            "no store start, nothing owed"
        );
        let mut events = training(10);
        for i in 0..3 {
            events.push(e(
                13,
                &format!("node-{i}"),
                exited(100 + i, AgentState::Succeeded),
            ));
        }
        let r = judge(events, 13, "succeeded");
        assert_eq!(r.status, Status::Held, "{:?}", r.violations);
    }

    #[test]
    fn every_agent_failing_on_a_healthy_cluster_violates() {
        let mut events = training(5);
        for i in 0..3 {
            events.push(e(70, &format!("node-{i}"), failed_exit(100 + i)));
        }
        let r = judge(events, 70, "failed");
        assert_eq!(r.status, Status::Violated);
        assert_eq!(r.violations.len(), 1, "{:?}", r.violations);
        assert_eq!(r.violations[0].kind, ResumesKind::FailedWhileHealthy.into());
        assert_eq!(r.violations[0].at.as_us(), 70 * S);
        assert!(r.violations[0].message.contains("training stopped at 7 s"));
        assert!(r.violations[0].message.contains("in a run without faults"));
    }

    #[test]
    fn a_spent_budget_ends_the_job_as_promised() {
        let mut events = training(5);
        let spent = EventKind::AgentExited {
            pid: 102,
            state: AgentState::Failed,
            reason: ExitReason::BudgetSpent {
                last_failure: "worker 0 failed".into(),
            },
        };
        events.push(e(20, "node-2", spent));
        for i in 0..2 {
            events.push(e(70, &format!("node-{i}"), failed_exit(100 + i)));
        }
        let r = judge(events, 70, "failed");
        assert_eq!(r.status, Status::Held, "{:?}", r.violations);
    }

    #[test]
    fn a_stall_past_the_bound_violates_once_it_is_over() {
        let bound = resume_bound(&scenario());
        let r = judge(training(5), 7 + bound.as_secs(), "timed_out");
        assert_eq!(
            r.status,
            Status::Held,
            "the bound has not passed: {:?}",
            r.violations
        );
        let r = judge(training(5), 8 + bound.as_secs(), "timed_out");
        assert_eq!(r.status, Status::Violated);
        assert_eq!(r.violations[0].kind, ResumesKind::NoStepAfterHeal.into());
        assert_eq!(r.violations[0].at, SimInstant::from_us(7 * S).after(bound));
    }

    #[test]
    fn a_run_of_steps_recorded_at_its_end_is_no_stall() {
        let mut events = training(1);
        // One event at 1000 s records 100 steps, one every 10 s from 10 s; a checkpoint of
        // another node lands in between, before the run's event.
        events.push(e(500, "node-1", checkpoint(101, 50)));
        let run = StepRun {
            step: SimDuration::from_ms(10_000),
            later_digests: vec![0; 99],
        };
        let kind = EventKind::Step {
            pid: 100,
            round: 0,
            step: 101,
            epoch: 0,
            samples: 32,
            trained: Default::default(),
            run,
        };
        events.push(e(1000, "node-0", kind));
        let r = judge(events, 1010, "timed_out");
        assert_eq!(r.status, Status::Held, "{:?}", r.violations);
    }

    #[test]
    fn faults_never_over_or_too_few_healthy_nodes_are_not_judged() {
        let mut partitioned = training(5);
        partitioned.push(e(10, "", fault("partition")));
        let r = judge(partitioned.clone(), 5000, "timed_out");
        assert_eq!(r.status, Status::NotApplicable, "{:?}", r.violations);
        // Healed, the three nodes are owed training again.
        partitioned.push(e(20, "", fault("heal")));
        let r = judge(partitioned, 5000, "timed_out");
        assert_eq!(r.status, Status::Violated);
        assert!(r.violations[0].message.contains("(heal at 20 s)"));
        // Two of three killed: one healthy node is below min_nodes (2).
        let mut killed = training(5);
        for (node, pid) in [("node-1", 101), ("node-2", 102)] {
            killed.push(e(10, node, fault("kill")));
            killed.push(e(10, node, EventKind::AgentKilled { pid }));
        }
        let r = judge(killed.clone(), 5000, "timed_out");
        assert_eq!(r.status, Status::NotApplicable, "{:?}", r.violations);
        // A restart brings node-2 back with a new agent: two healthy nodes are owed again.
        killed.push(e(30, "node-2", fault("restart")));
        killed.push(e(31, "node-2", started(103)));
        let r = judge(killed, 5000, "timed_out");
        assert_eq!(r.status, Status::Violated);
        assert!(r.violations[0].message.contains("2 healthy nodes"));
    }

    #[test]
    fn a_store_lost_to_a_fault_is_a_fault_in_force() {
        let mut s = scenario();
        s.cluster.store = StoreHost::Node(0);
        let mut events = training(5);
        events.push(e(10, "node-0", fault("stop")));
        events.push(e(
            11,
            "node-0",
            EventKind::StoreDied {
                reason: "gone".into(),
            },
        ));
        events.push(e(11, "node-0", exited(100, AgentState::Stopped)));
        for i in 1..3 {
            events.push(e(12, &format!("node-{i}"), failed_exit(100 + i)));
        }
        let r = resumes_after_heal(&s, &trace(events.clone()), &end(12, "failed"));
        assert_eq!(r.status, Status::NotApplicable, "{:?}", r.violations);
        // The same store dying with its host's agent, which failed on its own, is the job's
        // failure.
        let own: Vec<Event> = events
            .into_iter()
            .filter(|ev| !matches!(ev.kind, EventKind::FaultApplied { .. }))
            .collect();
        let r = resumes_after_heal(&s, &trace(own), &end(12, "failed"));
        assert_eq!(r.status, Status::Violated, "{:?}", r.violations);
    }

    #[test]
    fn a_stall_before_the_last_fault_is_forgiven() {
        let mut events = training(5);
        events.push(e(3000, "node-2", fault("gpu_slow")));
        for s in 6..=10 {
            events.push(e(3000 + s, "node-0", step(100, 1, s)));
        }
        let r = judge(events, 3020, "timed_out");
        assert_eq!(r.status, Status::Held, "{:?}", r.violations);
    }
}
