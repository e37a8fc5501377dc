//! Dead-node removal after every sync: torch's `_BackendRendezvousStateHolder._sanitize`,
//! and the receipt-time expiry of the opt-in fix `monotonic-heartbeats`.

use std::collections::BTreeMap;

use super::apply::remove_participant_epilogue;
use super::settings::RendezvousSettings;
use super::state::{NodeDesc, RendezvousState};
use crate::sim_time::reading_before;

/// Drops every node whose last heartbeat is strictly older than
/// `now − keep_alive_interval × keep_alive_max_attempt` (a heartbeat exactly at the horizon
/// survives) from the heartbeats, participants, wait list and redundancy list, then runs the
/// participant epilogue once if any participant went. Returns the dropped nodes in node order.
///
/// Only nodes with a heartbeat can expire: torch decides deadness from `last_heartbeats`
/// alone, so a member without one is never removed here.
pub fn sanitize(
    state: &mut RendezvousState,
    settings: &RendezvousSettings,
    now_utc_us: i64,
) -> Vec<NodeDesc> {
    // The planted bug for the fuzzer's canary: nobody ever expires.
    if settings.has_mutant(crate::mutant::Mutant::NoHeartbeatExpiry) {
        return Vec::new();
    }
    let expire_us = reading_before(now_utc_us, settings.heartbeat_expiry());
    let dead: Vec<NodeDesc> = state
        .last_heartbeats
        .iter()
        .filter(|(_, &last_us)| last_us < expire_us)
        .map(|(node, _)| node.clone())
        .collect();
    drop_nodes(state, settings, &dead);
    if let Some((node, last_us)) = state.last_heartbeats.iter().find(|(_, &t)| t < expire_us) {
        panic!("sanitize kept {node}, whose heartbeat {last_us} is older than {expire_us}");
    }
    dead
}

/// Removes `dead` from the heartbeats, participants, wait list and redundancy list, then
/// runs the participant epilogue once if any participant went, as torch's `_sanitize` does.
pub fn drop_nodes(state: &mut RendezvousState, settings: &RendezvousSettings, dead: &[NodeDesc]) {
    let mut participant_removed = false;
    for node in dead {
        state.last_heartbeats.remove(node);
        participant_removed |= state.participants.remove(node).is_some();
        state.wait_list.remove(node);
        state.redundancy_list.remove(node);
    }
    if participant_removed {
        remove_participant_epilogue(state, settings);
    }
    if let Some(node) = dead.iter().find(|node| state.knows(node)) {
        panic!(
            "{node} was dropped but is still in round {}'s state (participant {}, waiting {}, \
             redundant {}, heartbeat {:?})",
            state.round,
            state.is_participant(node),
            state.wait_list.contains(node),
            state.redundancy_list.contains(node),
            state.last_heartbeats.get(node)
        );
    }
}

/// For the fix `monotonic-heartbeats`: when this reader first saw each node's current
/// heartbeat stamp, on its own monotonic clock.
///
/// torch compares a stamp written with the writer's wall clock against the reader's wall
/// clock, so skew between the two adds to (or eats) the expiry margin. Judging age by the
/// time since the stamp last changed, as this reader observed it, involves one clock only.
/// The price: a reader that first sees a stamp counts its age from then, so a node that
/// died before the reader started is dropped up to one expiry later than torch would.
#[derive(Clone, Debug, Default)]
pub struct HeartbeatReceipts {
    /// node → (stamp last seen, monotonic time it was first seen).
    seen_mono_us: BTreeMap<NodeDesc, (i64, i64)>,
    /// The monotonic time of the latest observation: a monotonic clock never goes back.
    last_observed_mono_us: Option<i64>,
}

impl HeartbeatReceipts {
    /// Records the stamps of a freshly synced state; forgets nodes that left it.
    pub fn observe(&mut self, state: &RendezvousState, now_mono_us: i64) {
        assert_monotonic(self.last_observed_mono_us, now_mono_us, "observe");
        self.last_observed_mono_us = Some(now_mono_us);
        self.seen_mono_us
            .retain(|node, _| state.last_heartbeats.contains_key(node));
        for (node, &stamp_us) in &state.last_heartbeats {
            match self.seen_mono_us.get_mut(node) {
                Some((seen_stamp_us, _)) if *seen_stamp_us == stamp_us => {}
                Some(entry) => *entry = (stamp_us, now_mono_us),
                None => {
                    self.seen_mono_us
                        .insert(node.clone(), (stamp_us, now_mono_us));
                }
            }
        }
        // Exactly the state's heartbeats are tracked (both maps are keyed by node).
        assert_eq!(
            self.seen_mono_us.len(),
            state.last_heartbeats.len(),
            "heartbeat receipts track {} nodes for {} heartbeats in round {}",
            self.seen_mono_us.len(),
            state.last_heartbeats.len(),
            state.round
        );
    }

    /// Nodes whose stamp has not changed for strictly longer than the heartbeat expiry, by
    /// this reader's monotonic clock, in node order.
    pub fn expired(&self, settings: &RendezvousSettings, now_mono_us: i64) -> Vec<NodeDesc> {
        assert_monotonic(self.last_observed_mono_us, now_mono_us, "expired");
        let horizon_us = reading_before(now_mono_us, settings.heartbeat_expiry());
        self.seen_mono_us
            .iter()
            .filter(|(_, &(_, seen_us))| seen_us < horizon_us)
            .map(|(node, _)| node.clone())
            .collect()
    }
}

/// A reader's monotonic clock never goes back between two uses of its receipts.
fn assert_monotonic(last_mono_us: Option<i64>, now_mono_us: i64, what: &str) {
    if let Some(last_mono_us) = last_mono_us {
        assert!(
            now_mono_us >= last_mono_us,
            "heartbeat receipts {what} at monotonic {now_mono_us}, before the last \
             observation at {last_mono_us}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_is_strict() {
        let s = RendezvousSettings::new("r", 1, 3);
        let expiry = crate::sim_time::clock_span(s.heartbeat_expiry());
        let now = 1_000_000_000;
        let (a, b) = (NodeDesc::new("a", 1, 0), NodeDesc::new("b", 1, 0));
        let mut st = RendezvousState::default();
        st.participants.insert(a.clone(), 0);
        st.participants.insert(b.clone(), 1);
        st.complete = true;
        st.last_heartbeats.insert(a.clone(), now - expiry);
        st.last_heartbeats.insert(b.clone(), now - expiry - 1);
        st.wait_list.insert(b.clone());
        let dead = sanitize(&mut st, &s, now);
        assert_eq!(dead, vec![b.clone()]);
        assert!(st.is_participant(&a) && !st.knows(&b));
        assert!(st.complete);
    }

    #[test]
    fn receipts_ignore_the_writers_clock() {
        let s = RendezvousSettings::new("r", 1, 3);
        let expiry = crate::sim_time::clock_span(s.heartbeat_expiry());
        let (a, b) = (NodeDesc::new("a", 1, 0), NodeDesc::new("b", 1, 0));
        let mut st = RendezvousState::default();
        // b's clock runs far behind: its stamp already looks older than the expiry.
        st.last_heartbeats.insert(a.clone(), 1_000_000_000);
        st.last_heartbeats
            .insert(b.clone(), 1_000_000_000 - 2 * expiry);
        let mut receipts = HeartbeatReceipts::default();
        receipts.observe(&st, 0);
        assert!(receipts.expired(&s, expiry).is_empty());
        // b heartbeats again (a new stamp); a does not.
        st.last_heartbeats.insert(b.clone(), 1_000_000_000 - expiry);
        receipts.observe(&st, 10);
        assert_eq!(receipts.expired(&s, expiry + 1), vec![a.clone()]);
        // A node gone from the state is forgotten.
        st.last_heartbeats.remove(&a);
        receipts.observe(&st, 20);
        assert!(receipts.expired(&s, expiry + 10).is_empty());
        assert_eq!(receipts.expired(&s, expiry + 11), vec![b]);
    }

    #[test]
    #[should_panic(expected = "before the last observation at 20")]
    fn a_monotonic_clock_going_back_fires() {
        let mut receipts = HeartbeatReceipts::default();
        receipts.observe(&RendezvousState::default(), 20);
        receipts.observe(&RendezvousState::default(), 19);
    }

    #[test]
    fn losing_every_participant_advances_the_round() {
        let s = RendezvousSettings::new("r", 1, 3);
        let a = NodeDesc::new("a", 1, 0);
        let mut st = RendezvousState {
            round: 4,
            complete: true,
            ..Default::default()
        };
        st.participants.insert(a.clone(), 0);
        st.last_heartbeats.insert(a.clone(), 0);
        sanitize(&mut st, &s, i64::MAX / 2);
        assert_eq!((st.round, st.complete), (5, false));
    }
}
