//! Dead-node removal after every sync: torch's `_BackendRendezvousStateHolder._sanitize`.

use super::apply::remove_participant_epilogue;
use super::settings::RendezvousSettings;
use super::state::{NodeDesc, RendezvousState};

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
    if settings.has_mutant(super::settings::MUTANT_NO_HEARTBEAT_EXPIRY) {
        return Vec::new();
    }
    let expire_us = now_utc_us.saturating_sub(settings.heartbeat_expiry_us());
    let dead: Vec<NodeDesc> = state
        .last_heartbeats
        .iter()
        .filter(|(_, &last_us)| last_us < expire_us)
        .map(|(node, _)| node.clone())
        .collect();
    let mut participant_removed = false;
    for node in &dead {
        state.last_heartbeats.remove(node);
        participant_removed |= state.participants.remove(node).is_some();
        state.wait_list.remove(node);
        state.redundancy_list.remove(node);
    }
    if participant_removed {
        remove_participant_epilogue(state, settings);
    }
    assert!(state.last_heartbeats.values().all(|&t| t >= expire_us));
    dead
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_is_strict() {
        let s = RendezvousSettings::new("r", 1, 3);
        let expiry = s.heartbeat_expiry_us();
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
