//! Which agent processes currently belong to a live group, replayed event by event.
//!
//! A process joins a group when its `next_rendezvous()` returns round r. It stays a member
//! until it calls `next_rendezvous()` again, its rendezvous fails, it exits or it is
//! killed. Several checks need the same notion, so it lives here once.

use crate::scenario::node::NodeIndex;
use crate::trace::{Event, EventKind, TraceNode};
use std::collections::{BTreeMap, BTreeSet};

/// A round of one rendezvous: a restarted store starts a new rendezvous whose round numbers
/// start again, so a round is its store incarnation and its number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct RoundId {
    pub store_incarnation: u64,
    pub round: u64,
}

impl std::fmt::Display for RoundId {
    /// The round number; the incarnation too when it is not the store's first process.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.store_incarnation {
            0 | 1 => write!(f, "{}", self.round),
            k => write!(f, "{} of store incarnation {k}", self.round),
        }
    }
}

/// One process's membership of a completed round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Member {
    pub pid: u32,
    pub node: TraceNode,
    pub round: RoundId,
    /// The round's participants as this process saw them.
    pub participants: std::sync::Arc<[NodeIndex]>,
}

/// The live-group members at one point of the trace.
#[derive(Debug, Default)]
pub(crate) struct Membership {
    by_pid: BTreeMap<u32, Member>,
    /// The live members' pids per node: `of_node` is asked for every participant of every
    /// completion, and a scan of `by_pid` made that O(nodes³) at 1 024 nodes.
    pids_by_node: BTreeMap<TraceNode, BTreeSet<u32>>,
}

impl Membership {
    /// Applies one event: a completion adds its process, leaving events remove it.
    pub fn observe(&mut self, event: &Event) {
        match &event.kind {
            EventKind::RendezvousCompleted {
                pid,
                round,
                participants,
                store_incarnation,
                ..
            } => {
                // An agent process records its completion on its own node, so a completion
                // always names one; one that did not could not be placed in a group.
                let Some(node) = event.node else {
                    return;
                };
                let member = Member {
                    pid: *pid,
                    node,
                    round: RoundId {
                        store_incarnation: *store_incarnation,
                        round: *round,
                    },
                    participants: participants.clone(),
                };
                self.insert(member);
            }
            EventKind::RendezvousJoining { pid }
            | EventKind::RendezvousFailed { pid, .. }
            | EventKind::AgentExited { pid, .. }
            | EventKind::AgentKilled { pid } => self.remove(*pid),
            _ => {}
        }
    }

    fn insert(&mut self, member: Member) {
        self.remove(member.pid);
        self.pids_by_node
            .entry(member.node)
            .or_default()
            .insert(member.pid);
        self.by_pid.insert(member.pid, member);
    }

    fn remove(&mut self, pid: u32) {
        let Some(member) = self.by_pid.remove(&pid) else {
            return;
        };
        let pids = self
            .pids_by_node
            .get_mut(&member.node)
            .expect("every live member is indexed by its node");
        assert!(pids.remove(&pid), "pid {pid} was indexed under its node");
        if pids.is_empty() {
            self.pids_by_node.remove(&member.node);
        }
    }

    /// The membership of process `pid`, if it is in a live group.
    pub fn of_pid(&self, pid: u32) -> Option<&Member> {
        self.by_pid.get(&pid)
    }

    /// The live membership held by a process on `node`, if any.
    pub fn of_node(&self, node: TraceNode) -> Option<&Member> {
        // The lowest pid, as a scan of `by_pid` in pid order would find.
        let pid = self.pids_by_node.get(&node)?.first()?;
        self.by_pid.get(pid)
    }

    /// Every member of a live group, by pid.
    pub fn members(&self) -> impl Iterator<Item = &Member> {
        self.by_pid.values()
    }

    /// How many processes are members of a live group.
    pub fn len(&self) -> usize {
        self.by_pid.len()
    }
}
