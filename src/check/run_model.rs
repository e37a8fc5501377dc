//! The run as the rendezvous checkers see it, replayed once over the trace: which agent
//! processes started and still live (and on which node), which nodes are paused, which
//! processes wait in `next_rendezvous()`, which belong to a live group, and the rounds each
//! store incarnation completed. Each invariant that needs it is an [`Observer`] that sees
//! every event with the model as it stood just before the event and just after it, so one
//! walk over the trace serves them all.

use super::membership::Membership;
use crate::scenario::model::FaultName;
use crate::sim_time::SimInstant;
use crate::trace::{Event, EventKind, Trace, TraceNode};
use std::collections::{BTreeMap, BTreeSet};

/// One invariant's view of the replay: it may keep borrows of the trace's events (`'t`).
pub(super) trait Observer<'t> {
    /// Sees `event` with the model as it stood before the event.
    fn before(&mut self, _model: &RunModel, _event: &'t Event) {}
    /// Sees `event` with the model once the event is applied.
    fn after(&mut self, _model: &RunModel, _event: &'t Event) {}
}

/// Walks `trace` once, showing each event to every observer before and after the model
/// applies it, in the order the observers are given. Returns the model at the trace's end.
pub(super) fn replay<'t>(trace: &'t Trace, observers: &mut [&mut dyn Observer<'t>]) -> RunModel {
    let mut model = RunModel::default();
    for event in &trace.events {
        for observer in observers.iter_mut() {
            observer.before(&model, event);
        }
        model.apply(event);
        for observer in observers.iter_mut() {
            observer.after(&model, event);
        }
    }
    model
}

/// The replayed state; see the module's documentation.
#[derive(Debug, Default)]
pub(super) struct RunModel {
    /// Every pid that ever started an agent.
    started: BTreeSet<u32>,
    /// Live agent processes, with their node.
    live: BTreeMap<u32, TraceNode>,
    /// Nodes paused and not yet resumed, killed, restarted or started.
    paused_nodes: BTreeSet<TraceNode>,
    /// Processes inside a `next_rendezvous()` call.
    waiting: BTreeSet<u32>,
    /// How many of `waiting` are healthy, kept as events change either: the liveness check
    /// asks after every event, and counting the waiting afresh each time cost a 4 096-node
    /// storm's replay 4 096 × its events look-ups.
    healthy_waiting: usize,
    /// Who belongs to a live group.
    membership: Membership,
    /// Per store incarnation, each completed round and when it first completed.
    rounds: BTreeMap<u64, BTreeMap<u64, SimInstant>>,
    /// Whether any process ever called `next_rendezvous()`.
    joined: bool,
}

impl RunModel {
    /// Who belongs to a live group.
    pub fn membership(&self) -> &Membership {
        &self.membership
    }

    /// Whether any process ever called `next_rendezvous()`.
    pub fn joined(&self) -> bool {
        self.joined
    }

    /// Whether `node` is paused.
    pub fn is_paused(&self, node: TraceNode) -> bool {
        self.paused_nodes.contains(&node)
    }

    /// Whether process `pid` lives on a node that is not paused.
    pub fn is_healthy(&self, pid: u32) -> bool {
        self.live
            .get(&pid)
            .is_some_and(|&node| !self.is_paused(node))
    }

    /// Live, unpaused agents waiting in `next_rendezvous()`.
    pub fn healthy_waiting(&self) -> usize {
        self.healthy_waiting
    }

    /// [`RunModel::healthy_waiting`] counted afresh.
    #[cfg(test)]
    fn count_healthy_waiting(&self) -> usize {
        self.waiting
            .iter()
            .filter(|&&pid| self.is_healthy(pid))
            .count()
    }

    /// Of `pids`, how many wait and are healthy.
    fn healthy_waiting_among(&self, pids: &[u32]) -> usize {
        pids.iter()
            .filter(|&&pid| self.waiting.contains(&pid) && self.is_healthy(pid))
            .count()
    }

    /// The processes whose being healthy and waiting `event` may change: the one it names,
    /// or for a fault on a node, those waiting on it.
    fn touched_by(&self, event: &Event) -> Vec<u32> {
        match (&event.kind, event.node) {
            (EventKind::FaultApplied { .. }, Some(node)) => self
                .waiting
                .iter()
                .copied()
                .filter(|pid| self.live.get(pid) == Some(&node))
                .collect(),
            (
                EventKind::AgentStarted { pid }
                | EventKind::AgentKilled { pid }
                | EventKind::AgentExited { pid, .. }
                | EventKind::RendezvousJoining { pid }
                | EventKind::RendezvousCompleted { pid, .. }
                | EventKind::RendezvousFailed { pid, .. },
                _,
            ) => vec![*pid],
            _ => Vec::new(),
        }
    }

    /// When `round` first completed, if it did.
    #[cfg(test)]
    pub fn completed_at(&self, round: super::membership::RoundId) -> Option<SimInstant> {
        let rounds = self.rounds.get(&round.store_incarnation)?;
        rounds.get(&round.round).copied()
    }

    /// Applies one event, and to the healthy waiting count what it changed.
    fn apply(&mut self, event: &Event) {
        let touched = self.touched_by(event);
        let before = self.healthy_waiting_among(&touched);
        self.apply_to_sets(event);
        let after = self.healthy_waiting_among(&touched);
        self.healthy_waiting = self.healthy_waiting + after - before;
    }

    /// Applies one event to the processes, nodes, waits and rounds.
    fn apply_to_sets(&mut self, event: &Event) {
        match &event.kind {
            EventKind::AgentStarted { pid } => {
                let first_start = self.started.insert(*pid);
                assert!(first_start, "pid {pid} started twice");
                // A process records its start on its own node, so the start names it; a
                // start that did not could not be placed and is never counted healthy.
                if let Some(node) = event.node {
                    self.live.insert(*pid, node);
                }
            }
            EventKind::AgentKilled { pid } | EventKind::AgentExited { pid, .. } => {
                assert!(
                    self.started.contains(pid),
                    "pid {pid} stopped without having started"
                );
                self.live.remove(pid);
                self.waiting.remove(pid);
            }
            EventKind::RendezvousJoining { pid } => {
                self.joined = true;
                self.waiting.insert(*pid);
            }
            EventKind::RendezvousCompleted {
                pid,
                round,
                store_incarnation,
                ..
            } => {
                self.waiting.remove(pid);
                self.complete(*store_incarnation, *round, event.at);
            }
            EventKind::RendezvousFailed { pid, .. } => {
                self.waiting.remove(pid);
            }
            // The faults that pause and wake a node target one, and the trace names it; a
            // fault naming no node touches no node's pause.
            EventKind::FaultApplied { fault, .. } => match (fault, event.node) {
                (FaultName::Pause, Some(node)) => {
                    self.paused_nodes.insert(node);
                }
                // A resumed node runs again; a killed or restarted one is a new process.
                (
                    FaultName::Resume | FaultName::Kill | FaultName::Restart | FaultName::Start,
                    Some(node),
                ) => {
                    self.paused_nodes.remove(&node);
                }
                _ => {}
            },
            _ => {}
        }
        self.membership.observe(event);
    }

    /// A process completed `round` of `store_incarnation` at `at`: the round's first
    /// completion is kept, and a round never completes before an earlier one of its own
    /// incarnation did.
    fn complete(&mut self, store_incarnation: u64, round: u64, at: SimInstant) {
        let rounds = self.rounds.entry(store_incarnation).or_default();
        let first = *rounds.entry(round).or_insert(at);
        assert!(
            first <= at,
            "round {round} of store incarnation {store_incarnation} completed at {} µs, \
             before its first completion at {} µs",
            at.as_us(),
            first.as_us()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::membership::RoundId;
    use super::super::testkit::*;
    use super::*;

    #[test]
    fn the_model_follows_processes_pauses_and_rounds() {
        let mut events = round_zero(3);
        events.push(e(40, "node-1", fault("pause")));
        events.push(e(45, "node-2", fault("kill")));
        events.push(e(45, "node-2", killed(102)));
        events.push(e(46, "node-0", joining(100)));
        let model = replay(&trace(events), &mut []);
        assert!(model.joined());
        assert!(model.is_paused(TraceNode::node(1)));
        assert!(!model.is_healthy(101), "node-1 is paused");
        assert!(!model.is_healthy(102), "pid 102 was killed");
        assert_eq!(model.healthy_waiting(), 1);
        assert_eq!(
            model.membership().len(),
            1,
            "only pid 101 is still in round 0"
        );
        let round = RoundId {
            store_incarnation: 1,
            round: 0,
        };
        assert_eq!(model.completed_at(round), Some(SimInstant::from_us(2 * S)));
    }

    /// After every event, the kept count of healthy waiting agents is the one counted afresh.
    struct CountCheck;

    impl Observer<'_> for CountCheck {
        fn after(&mut self, model: &RunModel, event: &Event) {
            assert_eq!(
                model.healthy_waiting(),
                model.count_healthy_waiting(),
                "after {event:?}"
            );
        }
    }

    #[test]
    fn the_healthy_waiting_count_follows_joins_pauses_kills_and_exits() {
        let mut events = round_zero(3);
        events.push(e(40, "node-1", joining(101)));
        events.push(e(41, "node-1", fault("pause")));
        events.push(e(42, "node-0", joining(100)));
        events.push(e(43, "node-1", fault("resume")));
        events.push(e(44, "node-1", fault("pause")));
        events.push(e(45, "node-2", joining(102)));
        events.push(e(46, "node-2", fault("kill")));
        events.push(e(46, "node-2", killed(102)));
        // A kill ends the node's pause; its process counts until its own death is recorded.
        events.push(e(47, "node-1", fault("kill")));
        let model = replay(&trace(events.clone()), &mut [&mut CountCheck]);
        assert_eq!(model.healthy_waiting(), 2, "pids 100 and 101 wait, healthy");
        events.push(e(47, "node-1", killed(101)));
        let model = replay(&trace(events), &mut [&mut CountCheck]);
        assert_eq!(model.healthy_waiting(), 1, "only pid 100 waits, healthy");
    }

    #[test]
    fn the_healthy_waiting_count_holds_over_runs_with_faults() {
        for file in [
            "scenarios/pause_resume.toml",
            "scenarios/killed_during_last_call.toml",
            "scenarios/store_host_paused_past_timeout.toml",
            "scenarios/worker_crash_restart.toml",
            "scenarios/late_joiner_next_round.toml",
        ] {
            let text = std::fs::read_to_string(file).unwrap();
            let scenario = crate::scenario::parse(&text, file).unwrap();
            let run = crate::runner::Run::of(&scenario, file).simulate().unwrap();
            replay(&run.trace, &mut [&mut CountCheck]);
        }
    }
}
