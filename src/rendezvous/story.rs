//! The handler's steps as the run's story tells them: a state's lists as nodes and pids, in
//! torch's order, and the step record a handler makes of one decided action.

use super::state::{NodeDesc, NodeSet, RendezvousState};
use crate::scenario::node::NodeIndex;
use crate::sim_time::SimInstant;
use crate::trace::story::{
    ListSizes, Member, RendezvousAction, RendezvousLists, RendezvousOp, RendezvousStep,
};

/// A node descriptor as a list entry; `None` for an address that names no node.
pub fn member(node: &NodeDesc) -> Option<Member> {
    let index: NodeIndex = node.addr.parse().ok()?;
    Some(Member {
        node: index,
        pid: node.pid,
    })
}

/// Descriptors as list entries, in their order.
pub fn members<'a>(nodes: impl IntoIterator<Item = &'a NodeDesc>) -> Vec<Member> {
    nodes.into_iter().filter_map(member).collect()
}

fn len(count: usize) -> u32 {
    u32::try_from(count).unwrap_or(u32::MAX)
}

/// How long each of `state`'s lists is. O(1).
pub fn sizes(state: &RendezvousState) -> ListSizes {
    ListSizes {
        participants: len(state.participants.len()),
        wait_list: len(state.wait_list.len()),
        redundancy_list: len(state.redundancy_list.len()),
    }
}

/// `state`'s lists, each sorted as torch sorts node descriptors (participants in rank order
/// once the round is complete). O(nodes).
pub fn lists(state: &RendezvousState) -> RendezvousLists {
    let set = |nodes: &NodeSet| members(nodes.iter());
    RendezvousLists {
        participants: members(state.participants.keys()),
        wait_list: set(&state.wait_list),
        redundancy_list: set(&state.redundancy_list),
    }
}

/// Who took a step, and in which op: the parts of a step record the state does not hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepTaker {
    /// When the node decided the step.
    pub at: SimInstant,
    pub node: NodeIndex,
    pub pid: u32,
    pub op: RendezvousOp,
    pub action: RendezvousAction,
    pub store_incarnation: u64,
}

/// The record of a step that left `state` (the state written, or for a step that writes
/// nothing the state it was decided on), having removed `dropped` (expired heartbeats). Its
/// lists are made apart (see [`lists`]), only if the story has room for them.
pub fn step(taker: StepTaker, state: &RendezvousState, dropped: &[NodeDesc]) -> RendezvousStep {
    RendezvousStep {
        at: taker.at,
        node: taker.node,
        pid: taker.pid,
        op: taker.op,
        action: taker.action,
        store_incarnation: taker.store_incarnation,
        round: state.round,
        complete: state.complete,
        closed: state.closed,
        dropped: members(dropped),
        sizes: sizes(state),
        lists: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rendezvous::apply::apply;
    use crate::rendezvous::ops::{decide, Action, OpContext, OpKind};
    use crate::rendezvous::settings::RendezvousSettings;

    const NOW_UTC_US: i64 = 1_000_000_000;
    const MONO_US: i64 = 50_000_000;

    fn node(addr: &str, pid: u32) -> NodeDesc {
        NodeDesc::new(addr.to_owned(), pid, 0)
    }

    /// `node`'s join decides, and what it decides is applied.
    fn join(state: &mut RendezvousState, settings: &RendezvousSettings, node: &NodeDesc) -> Action {
        let ctx = OpContext::new(node, state, settings);
        let action = decide(OpKind::Join, &ctx, NOW_UTC_US, MONO_US, MONO_US + 1_000_000)
            .expect("an open rendezvous");
        if action.mutates_state() {
            apply(action, state, node, settings, NOW_UTC_US);
        }
        action
    }

    fn taker(action: Action) -> StepTaker {
        StepTaker {
            at: SimInstant::from_us(7),
            node: NodeIndex(0),
            pid: 10,
            op: OpKind::Join,
            action,
            store_incarnation: 1,
        }
    }

    #[test]
    fn a_late_node_at_max_nodes_lands_on_the_redundancy_list() {
        let settings = RendezvousSettings::new("run", 2, 3);
        let mut state = RendezvousState::default();
        let [late, a, b, c] = [0, 1, 2, 3].map(|i| node(&format!("node-{i}"), 10 + i));
        for early in [&a, &b] {
            assert_eq!(
                join(&mut state, &settings, early),
                Action::AddToParticipants
            );
        }
        // The third join reaches max_nodes: it completes the round itself.
        assert_eq!(join(&mut state, &settings, &c), Action::AddToParticipants);
        assert!(state.complete);
        let action = join(&mut state, &settings, &late);
        assert_eq!(action, Action::AddToRedundancyList);
        let record = step(taker(action), &state, &[]);
        assert_eq!(
            (record.round, record.complete, record.closed),
            (0, true, false)
        );
        let made = lists(&state);
        let names = |list: &[Member]| list.iter().map(|m| m.node.0).collect::<Vec<u32>>();
        assert_eq!(names(&made.participants), [1, 2, 3]);
        assert_eq!(names(&made.redundancy_list), [0]);
        assert!(made.wait_list.is_empty());
        assert_eq!(record.sizes, made.sizes());
        // Parked, it waits while the round is full, and leaves the list once it has room.
        assert_ne!(
            join(&mut state, &settings, &late),
            Action::RemoveFromRedundancyList
        );
        state.participants.remove(&a);
        assert_eq!(
            join(&mut state, &settings, &late),
            Action::RemoveFromRedundancyList
        );
        assert!(lists(&state).redundancy_list.is_empty());
    }

    #[test]
    fn lists_follow_torchs_sorted_descriptors() {
        let mut state = RendezvousState::default();
        for (addr, pid) in [("node-10", 5), ("node-2", 9), ("node-2", 3)] {
            state.participants.insert(node(addr, pid), 0);
        }
        state.wait_list.insert(node("node-4", 1));
        state.redundancy_list.insert(node("not a node", 1));
        let made = lists(&state);
        let shown: Vec<(u32, u32)> = made
            .participants
            .iter()
            .map(|m| (m.node.0, m.pid))
            .collect();
        // String order, as torch's ranks: node-10 before node-2, then by pid.
        assert_eq!(shown, [(10, 5), (2, 3), (2, 9)]);
        assert_eq!(made.wait_list.len(), 1);
        assert!(made.redundancy_list.is_empty(), "no node, no entry");
        assert_eq!(sizes(&state).total(), 5);
    }
}
