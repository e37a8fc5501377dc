//! The shape every rendezvous state the simulation writes must have, checked with `assert!`
//! where a state changes shape (a round completes or reopens, sanitize drops a node).
//!
//! These are properties of the states that torch's decision table and executor produce
//! from the empty state, not of any state: the parity vectors feed the pure core states
//! torch never writes (a participant on the wait list, more participants than `max_nodes`),
//! so the pure core does not call this; the handler does, on the states it writes.

use super::settings::{RendezvousFix, RendezvousSettings};
use super::state::{NodeMap, RendezvousState};
use crate::mutant::Mutant;

impl RendezvousState {
    /// Panics, naming the broken property and the values found, unless this state is one
    /// the decision table can reach. O(nodes · log nodes): call it where a round completes,
    /// reopens or loses a node, never per heartbeat.
    ///
    /// The planted bugs break some properties on purpose (a late joiner takes rank 0 in a
    /// complete round and may reopen its last call; a rank collision repeats a rank); those
    /// are the fuzzer's to find as invariant verdicts, so they are not asserted under them.
    pub fn assert_well_formed(&self, settings: &RendezvousSettings) {
        self.assert_lists_disjoint_and_alive();
        let count = self.participants.len();
        let max_nodes = settings.max_nodes as usize;
        assert!(
            count <= max_nodes,
            "round {} has {count} participants, over max_nodes {max_nodes}",
            self.round
        );
        let late_joiner = settings.has_mutant(Mutant::LateJoinerJoinsCompleteRound);
        let ranks_may_repeat = late_joiner || settings.has_mutant(Mutant::RankCollision);
        if self.complete {
            assert!(
                count > 0,
                "round {} is complete with no participant (the epilogue reopens it)",
                self.round
            );
            assert!(
                late_joiner || self.deadline_utc_us.is_none(),
                "complete round {} still has a last-call deadline {:?}",
                self.round,
                self.deadline_utc_us
            );
            assert_ranks_below(&self.participants, max_nodes, self.round);
            if !ranks_may_repeat {
                assert_ranks_distinct(&self.participants, self.round);
            }
        } else {
            if let Some((node, rank)) = self.participants.iter().find(|(_, &rank)| rank != 0) {
                panic!(
                    "open round {}: participant {node} has rank {rank}, expected 0 until completion",
                    self.round
                );
            }
            let min_nodes = settings.min_nodes as usize;
            assert!(
                late_joiner || self.deadline_utc_us.is_some() == (count >= min_nodes),
                "open round {} with {count} participants (min_nodes {min_nodes}) has deadline {:?}: \
                 expected a last call exactly while min_nodes are in",
                self.round,
                self.deadline_utc_us
            );
        }
        self.assert_completed_world(settings, ranks_may_repeat, late_joiner);
    }

    /// Participants, wait list and redundancy list are disjoint, every node on them has a
    /// heartbeat, and every heartbeat is a node's on one of them: each add writes the
    /// heartbeat, each removal drops it.
    fn assert_lists_disjoint_and_alive(&self) {
        let round = self.round;
        for node in self.participants.keys() {
            assert!(
                !self.wait_list.contains(node) && !self.redundancy_list.contains(node),
                "round {round}: participant {node} is also on the wait list ({}) or the \
                 redundancy list ({})",
                self.wait_list.contains(node),
                self.redundancy_list.contains(node)
            );
        }
        if let Some(node) = self
            .wait_list
            .iter()
            .find(|n| self.redundancy_list.contains(*n))
        {
            panic!("round {round}: {node} is on both the wait list and the redundancy list");
        }
        let members = self.participants.keys();
        let listed = self.wait_list.iter().chain(self.redundancy_list.iter());
        if let Some(node) = members
            .chain(listed)
            .find(|n| !self.last_heartbeats.contains_key(*n))
        {
            panic!("round {round}: {node} is a member with no heartbeat");
        }
        let member_count =
            self.participants.len() + self.wait_list.len() + self.redundancy_list.len();
        assert_eq!(
            self.last_heartbeats.len(),
            member_count,
            "round {round}: {} heartbeats for {member_count} members (participants, wait \
             list, redundancy list): a heartbeat outlived its node's membership",
            self.last_heartbeats.len()
        );
    }

    /// `completed_world` exists exactly while a round that completed under the fix
    /// `world-at-completion` runs, and the participants are a subset of it.
    fn assert_completed_world(
        &self,
        settings: &RendezvousSettings,
        ranks_may_repeat: bool,
        late_joiner: bool,
    ) {
        let fix = settings.has_fix(RendezvousFix::WorldAtCompletion);
        let recorded = self.completed_world.is_some();
        assert_eq!(
            recorded,
            fix && self.complete,
            "round {}: completed world recorded = {recorded}, expected it exactly while a \
             round is complete (complete = {}) with world-at-completion on (on = {fix})",
            self.round,
            self.complete
        );
        let Some(world) = &self.completed_world else {
            return;
        };
        if !ranks_may_repeat {
            assert_ranks_distinct(world, self.round);
        }
        if late_joiner {
            return;
        }
        for (node, rank) in &self.participants {
            assert_eq!(
                world.get(node),
                Some(rank),
                "round {}: participant {node} has rank {rank}, but the completed world says {:?}",
                self.round,
                world.get(node)
            );
        }
    }
}

/// No two nodes of a complete round share a rank.
fn assert_ranks_distinct(ranks: &NodeMap<u32>, round: u64) {
    let mut seen = std::collections::BTreeMap::new();
    for (node, &rank) in ranks {
        if let Some(other) = seen.insert(rank, node) {
            panic!("complete round {round}: {other} and {node} both have rank {rank}");
        }
    }
}

/// Ranks are handed out 0.. over at most `max_nodes` participants.
fn assert_ranks_below(ranks: &NodeMap<u32>, max_nodes: usize, round: u64) {
    if let Some((node, rank)) = ranks.iter().find(|(_, &r)| r as usize >= max_nodes) {
        panic!("complete round {round}: {node} has rank {rank}, not below max_nodes {max_nodes}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rendezvous::apply::apply;
    use crate::rendezvous::ops::Action;
    use crate::rendezvous::state::NodeDesc;

    fn n(addr: &str) -> NodeDesc {
        NodeDesc::new(addr, 1, 0)
    }

    /// Three joins under min 2, max 3: a complete round of three.
    fn complete_round(settings: &RendezvousSettings) -> RendezvousState {
        let mut st = RendezvousState::default();
        for (i, addr) in ["a", "b", "c"].into_iter().enumerate() {
            apply(
                Action::AddToParticipants,
                &mut st,
                &n(addr),
                settings,
                i as i64,
            );
            st.assert_well_formed(settings);
        }
        assert!(st.complete);
        st
    }

    #[test]
    fn states_the_table_reaches_are_well_formed() {
        let s = RendezvousSettings::new("r", 2, 3);
        let mut st = complete_round(&s);
        apply(Action::AddToWaitList, &mut st, &n("d"), &s, 5);
        apply(Action::RemoveFromParticipants, &mut st, &n("a"), &s, 6);
        st.assert_well_formed(&s);
        RendezvousState::default().assert_well_formed(&s);
    }

    #[test]
    #[should_panic(expected = "is also on the wait list (true)")]
    fn a_participant_on_the_wait_list_fires() {
        let s = RendezvousSettings::new("r", 2, 3);
        let mut st = complete_round(&s);
        st.wait_list.insert(n("a"));
        st.assert_well_formed(&s);
    }

    #[test]
    #[should_panic(expected = "both have rank 1")]
    fn a_repeated_rank_fires() {
        let s = RendezvousSettings::new("r", 2, 3);
        let mut st = complete_round(&s);
        st.participants.insert(n("c"), 1);
        st.assert_well_formed(&s);
    }

    #[test]
    #[should_panic(expected = "expected a last call exactly while min_nodes are in")]
    fn an_open_round_at_min_without_a_deadline_fires() {
        let s = RendezvousSettings::new("r", 2, 3);
        let mut st = RendezvousState::default();
        apply(Action::AddToParticipants, &mut st, &n("a"), &s, 1);
        apply(Action::AddToParticipants, &mut st, &n("b"), &s, 2);
        st.deadline_utc_us = None;
        st.assert_well_formed(&s);
    }

    #[test]
    #[should_panic(expected = "a heartbeat outlived its node's membership")]
    fn an_orphan_heartbeat_fires() {
        let s = RendezvousSettings::new("r", 2, 3);
        let mut st = complete_round(&s);
        st.last_heartbeats.insert(n("z"), 9);
        st.assert_well_formed(&s);
    }
}
