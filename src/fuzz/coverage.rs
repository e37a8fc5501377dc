//! Coverage: named rare protocol situations, each read off a run's trace (no hooks in the
//! models), so a campaign can say how many cases reached each one.
//!
//! The trace holds what processes observed, not the shared state's internals, so each
//! situation is defined by what the trace shows; [`SITUATIONS`] says how.

use crate::scenario::model::{FaultName, Scenario, StoreHost};
use crate::scenario::node::NodeIndex;
use crate::sim_time::SimInstant;
use crate::trace::event::{Event, EventKind};
use crate::trace::{AgentState, RendezvousErrorKind, Trace, TraceNode};
use std::collections::{BTreeMap, BTreeSet};

/// Every situation, by name, with how the trace shows it.
pub const SITUATIONS: &[(&str, &str)] = &[
    ("waiting_at_completion", "a node that had called next_rendezvous is left out of a round completing after the call (wait list not empty at completion)"),
    ("parked_at_full_round", "a node is left out of a round that completes at max_nodes (redundancy list)"),
    ("left_out_then_admitted", "a node left out of a completed round completes a later one (wait or redundancy node promoted)"),
    ("restart_with_nodes_waiting", "an agent restarts its workers as a membership change (num_nodes_waiting > 0)"),
    ("counted_restart", "an agent restart spends max_restarts"),
    ("agent_failed", "an agent exits FAILED"),
    ("rendezvous_closed", "a node commits closed = true"),
    ("join_after_close", "next_rendezvous raises RendezvousClosedError (a join racing a close)"),
    ("join_timeout", "next_rendezvous raises RendezvousTimeoutError"),
    ("store_client_error", "next_rendezvous raises a store connection error"),
    ("round_below_max", "a round completes with fewer than max_nodes (last call expired)"),
    ("spare_in_round", "a spare node is a participant of a completed round"),
    ("rank0_faulted", "a fault hits the node that is rank 0 of the latest completed round"),
    ("store_host_faulted", "a fault hits the store host after a round completed"),
    ("restarted_agent_in_round", "a restarted agent (new pid on a node) completes a round"),
    ("node_listed_twice", "a completed round lists one node twice (a stale entry)"),
    ("two_masters_in_round", "the workers of one round are given different MASTER_ADDR:PORTs"),
    ("world_size_disagreement", "nodes finishing one round report different world sizes"),
    ("heartbeat_gap_past_expiry", "a live agent's heartbeats stop for longer than keep_alive_interval × keep_alive_max_attempt"),
    ("heartbeat_gap_while_joining", "such a heartbeat gap overlaps another node's pending next_rendezvous (expiry during a forming round)"),
    ("round_shrinks", "a round completes with fewer participants than the one before it"),
    ("round_grows", "a round completes with more participants than the one before it"),
    ("worker_failed_in_job", "a worker fails for a reason other than an injected crash (a collective or bootstrap failure)"),
    ("five_rounds", "five or more rounds complete in one run"),
    ("run_timed_out", "the run reaches its time limit"),
];

/// The situations a run reached, as indices into [`SITUATIONS`].
pub fn reached(s: &Scenario, trace: &Trace) -> BTreeSet<usize> {
    let mut r = Reader::new(s);
    for e in &trace.events {
        r.event(e);
    }
    r.hit
        .iter()
        .filter_map(|name| SITUATIONS.iter().position(|(n, _)| n == name))
        .collect()
}

/// One pass over the events.
struct Reader<'a> {
    s: &'a Scenario,
    hit: BTreeSet<&'static str>,
    /// Nodes with a pending next_rendezvous, since when.
    pending: BTreeMap<TraceNode, SimInstant>,
    /// Nodes left out of a completed round, waiting to be admitted.
    left_out: BTreeSet<TraceNode>,
    /// (incarnation, round) → world size first reported.
    rounds: BTreeMap<(u64, u64), u32>,
    /// (incarnation, round) → master first given.
    masters: BTreeMap<(u64, u64), String>,
    last_participants: Vec<NodeIndex>,
    starts: BTreeMap<TraceNode, u32>,
    last_heartbeat: BTreeMap<TraceNode, SimInstant>,
    any_round: bool,
}

impl<'a> Reader<'a> {
    fn new(s: &'a Scenario) -> Self {
        Reader {
            s,
            hit: BTreeSet::new(),
            pending: BTreeMap::new(),
            left_out: BTreeSet::new(),
            rounds: BTreeMap::new(),
            masters: BTreeMap::new(),
            last_participants: Vec::new(),
            starts: BTreeMap::new(),
            last_heartbeat: BTreeMap::new(),
            any_round: false,
        }
    }

    fn event(&mut self, e: &Event) {
        // Agent processes record their events on their own node; only the run's end and a
        // fault on no one node name none.
        let Some(node) = e.node else {
            if matches!(&e.kind, EventKind::RunEnded { outcome } if outcome == "timed_out") {
                self.hit.insert("run_timed_out");
            }
            return;
        };
        match &e.kind {
            EventKind::RendezvousJoining { .. } => {
                self.pending.insert(node, e.at);
            }
            EventKind::RendezvousCompleted {
                round,
                world_size,
                participants,
                store_incarnation,
                ..
            } => self.completed(
                node,
                (*store_incarnation, *round),
                *world_size,
                participants,
            ),
            EventKind::RendezvousFailed { error, .. } => self.join_failed(node, error),
            EventKind::AgentKilled { .. } | EventKind::AgentExited { .. } => {
                self.pending.remove(&node);
                self.last_heartbeat.remove(&node);
                if matches!(&e.kind, EventKind::AgentExited { state, .. } if *state == AgentState::Failed)
                {
                    self.hit.insert("agent_failed");
                }
            }
            EventKind::AgentStarted { .. } => *self.starts.entry(node).or_default() += 1,
            EventKind::AgentRestart { counted, .. } => {
                self.hit.insert(if *counted {
                    "counted_restart"
                } else {
                    "restart_with_nodes_waiting"
                });
            }
            EventKind::RendezvousClosed { .. } => {
                self.hit.insert("rendezvous_closed");
            }
            EventKind::Heartbeat { .. } => self.heartbeat(node, e.at),
            EventKind::WorkersStarted {
                round,
                store_incarnation,
                master,
                ..
            } => self.workers_started((*store_incarnation, *round), master),
            EventKind::WorkerFailed { reason, .. } if reason != "worker_crash" => {
                self.hit.insert("worker_failed_in_job");
            }
            EventKind::FaultApplied { fault, .. } => self.fault(node, *fault),
            EventKind::RunEnded { outcome } if outcome == "timed_out" => {
                self.hit.insert("run_timed_out");
            }
            _ => {}
        }
    }

    fn join_failed(&mut self, node: TraceNode, error: &RendezvousErrorKind) {
        self.pending.remove(&node);
        self.hit.insert(match error {
            RendezvousErrorKind::Closed => "join_after_close",
            RendezvousErrorKind::Timeout => "join_timeout",
            RendezvousErrorKind::StoreUnreachable => "store_client_error",
            _ => return,
        });
    }

    /// The workers of round `key` on one node were handed `master`: the round's first
    /// master is remembered, and any other one is a second master in the round.
    fn workers_started(&mut self, key: (u64, u64), master: &str) {
        let first = self.masters.entry(key).or_insert_with(|| master.to_owned());
        if first.as_str() != master {
            self.hit.insert("two_masters_in_round");
        }
    }

    fn completed(
        &mut self,
        node: TraceNode,
        key: (u64, u64),
        world_size: u32,
        participants: &[NodeIndex],
    ) {
        self.pending.remove(&node);
        if self.left_out.remove(&node) {
            self.hit.insert("left_out_then_admitted");
        }
        if self.starts.get(&node).copied().unwrap_or(0) > 1 {
            self.hit.insert("restarted_agent_in_round");
        }
        if let Some(&first) = self.rounds.get(&key) {
            if first != world_size {
                self.hit.insert("world_size_disagreement");
            }
            return;
        }
        // The first node to report a round: judge the round itself.
        self.rounds.insert(key, world_size);
        self.any_round = true;
        let max = self.s.rendezvous.max_nodes;
        let members: BTreeSet<TraceNode> = participants.iter().map(|&n| n.into()).collect();
        if members.len() < participants.len() {
            self.hit.insert("node_listed_twice");
        }
        if world_size < max {
            self.hit.insert("round_below_max");
        }
        let spare = (self.s.cluster.nodes..self.s.cluster.nodes + self.s.cluster.spare_nodes)
            .any(|i| members.contains(&TraceNode::node(i)));
        if spare {
            self.hit.insert("spare_in_round");
        }
        let outside: Vec<TraceNode> = self
            .pending
            .keys()
            .filter(|n| **n != node && !members.contains(n))
            .copied()
            .collect();
        if !outside.is_empty() {
            self.hit.insert("waiting_at_completion");
            if world_size >= max {
                self.hit.insert("parked_at_full_round");
            }
            self.left_out.extend(outside);
        }
        if !self.last_participants.is_empty() {
            match participants.len().cmp(&self.last_participants.len()) {
                std::cmp::Ordering::Less => self.hit.insert("round_shrinks"),
                std::cmp::Ordering::Greater => self.hit.insert("round_grows"),
                std::cmp::Ordering::Equal => false,
            };
        }
        self.last_participants = participants.to_vec();
        if self.rounds.len() >= 5 {
            self.hit.insert("five_rounds");
        }
    }

    fn heartbeat(&mut self, node: TraceNode, at: SimInstant) {
        let r = &self.s.rendezvous;
        let expiry = r
            .keep_alive_interval
            .saturating_mul(u64::from(r.keep_alive_max_attempt));
        if let Some(last) = self.last_heartbeat.insert(node, at) {
            if at.since(last) > expiry {
                self.hit.insert("heartbeat_gap_past_expiry");
                let joining = self
                    .pending
                    .iter()
                    .any(|(n, &since)| *n != node && since < at);
                if joining {
                    self.hit.insert("heartbeat_gap_while_joining");
                }
            }
        }
    }

    fn fault(&mut self, node: TraceNode, fault: FaultName) {
        if matches!(
            fault,
            FaultName::Resume | FaultName::Heal | FaultName::Start
        ) {
            return;
        }
        if self
            .last_participants
            .first()
            .is_some_and(|&p| TraceNode::Node(p) == node)
        {
            self.hit.insert("rank0_faulted");
        }
        if let StoreHost::Node(i) = self.s.cluster.store {
            if self.any_round && TraceNode::node(i) == node {
                self.hit.insert("store_host_faulted");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn there_are_at_least_fifteen_distinct_situations() {
        let names: BTreeSet<&str> = SITUATIONS.iter().map(|s| s.0).collect();
        assert_eq!(names.len(), SITUATIONS.len());
        assert!(names.len() >= 15);
    }

    #[test]
    fn a_node_left_out_of_a_full_round_and_admitted_later_is_read_off_the_trace() {
        let mut s = crate::scenario::default_scenario("cov");
        s.rendezvous.max_nodes = 1;
        let at = |at_us: u64, node: &str, kind: EventKind| Event {
            at: SimInstant::from_us(at_us),
            node: Some(node.parse().expect("node-N")),
            kind,
        };
        let done = |round: u64, who: &str| EventKind::RendezvousCompleted {
            pid: 1,
            round,
            rank: 0,
            world_size: 1,
            participants: vec![who.parse().expect("node-N")].into(),
            store_incarnation: 1,
        };
        let trace = Trace {
            events: vec![
                at(1, "node-0", EventKind::RendezvousJoining { pid: 1 }),
                at(2, "node-1", EventKind::RendezvousJoining { pid: 2 }),
                at(3, "node-0", done(0, "node-0")),
                at(9, "node-1", done(1, "node-1")),
            ],
            ..Trace::default()
        };
        let got: Vec<&str> = reached(&s, &trace)
            .iter()
            .map(|&i| SITUATIONS[i].0)
            .collect();
        for name in [
            "waiting_at_completion",
            "parked_at_full_round",
            "left_out_then_admitted",
        ] {
            assert!(got.contains(&name), "{got:?}");
        }
    }
}
