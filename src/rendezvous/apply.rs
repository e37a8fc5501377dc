//! The state changes torch's `_DistributedRendezvousOpExecutor` makes for each action, and the
//! participant-removal epilogue it shares with sanitize.

use super::edits::{Edits, Membership};
use super::ops::Action;
use super::settings::{RendezvousFix, RendezvousSettings};
use super::state::{NodeDesc, RendezvousState};

/// Applies `action`, taken by `node` at wall-clock `now_utc_us`, to `state`.
///
/// Actions that change nothing in torch (SYNC, the errors, FINISH) change nothing here.
/// `action` must be one the decision table could have chosen for `node` in `state`
/// ([`assert_applicable`]): where torch would raise `KeyError` (removing a node that is not
/// there) this panics too, and so does any other action the table never asks for.
pub fn apply(
    action: Action,
    state: &mut RendezvousState,
    node: &NodeDesc,
    settings: &RendezvousSettings,
    now_utc_us: i64,
) {
    assert_applicable(action, state, node, settings);
    let before = Before::of(state);
    apply_unchecked(action, state, node, settings, now_utc_us);
    before.assert_moved_forward(state, action);
    assert_applied(action, state, node, now_utc_us);
}

fn apply_unchecked(
    action: Action,
    state: &mut RendezvousState,
    node: &NodeDesc,
    settings: &RendezvousSettings,
    now_utc_us: i64,
) {
    if drops_stale_entries(action, settings) {
        drop_stale_entries_of(state, node, settings);
    }
    let membership = Membership::of(state, node);
    Edits::plan(action, state, &membership, settings, now_utc_us).apply(state, node, settings);
}

/// Whether `action` for `node` changes only what its plan of edits says, from the state it
/// is planned in: its written length can then be counted from that state without a copy.
pub fn is_planned_alone(action: Action, settings: &RendezvousSettings) -> bool {
    !drops_stale_entries(action, settings)
}

/// Whether `action` first drops the entries of an earlier incarnation of its node: an
/// action that enters the node into the state, under the `restarted-node-replaces-entry`
/// fix.
fn drops_stale_entries(action: Action, settings: &RendezvousSettings) -> bool {
    let enters_state = matches!(
        action,
        Action::AddToParticipants | Action::AddToWaitList | Action::AddToRedundancyList
    );
    enters_state && settings.has_fix(RendezvousFix::RestartedNodeReplacesEntry)
}

/// Panics unless the decision table could have chosen `action` for `node` in `state`: the
/// caller (the op executor, after `ops::decide` on this very state) must have established
/// this. The parity vectors, torch's own applies, all satisfy it.
pub fn assert_applicable(
    action: Action,
    state: &RendezvousState,
    node: &NodeDesc,
    settings: &RendezvousSettings,
) {
    assert_applicable_to(action, state, &Membership::of(state, node), node, settings);
}

/// [`assert_applicable`] with `node`'s entries (`membership`) already looked up.
pub fn assert_applicable_to(
    action: Action,
    state: &RendezvousState,
    membership: &Membership,
    node: &NodeDesc,
    settings: &RendezvousSettings,
) {
    let ok = is_applicable(action, state, membership, settings);
    let Membership {
        waiting,
        redundant,
        heartbeat_utc_us,
        ..
    } = *membership;
    let participant = membership.is_participant();
    let (round, closed, complete) = (state.round, state.closed, state.complete);
    assert!(
        ok,
        "{action} for {node} is not an action the decision table takes in round {round}: \
         closed {closed}, complete {complete}, participant {participant}, waiting {waiting}, \
         redundant {redundant} (heartbeat {heartbeat_utc_us:?}, {} participants)",
        state.participants.len()
    );
}

/// Whether the decision table could have chosen `action` in `state` for the node whose
/// entries are `membership`.
pub fn is_applicable(
    action: Action,
    state: &RendezvousState,
    membership: &Membership,
    settings: &RendezvousSettings,
) -> bool {
    let participant = membership.is_participant();
    let (waiting, redundant) = (membership.waiting, membership.redundant);
    let (closed, complete) = (state.closed, state.complete);
    match action {
        Action::KeepAlive => membership.heartbeat_utc_us.is_some(),
        Action::AddToParticipants => {
            let late_joiner =
                settings.has_mutant(crate::mutant::Mutant::LateJoinerJoinsCompleteRound);
            !closed && (!complete || late_joiner) && !participant && !redundant
        }
        Action::AddToWaitList | Action::AddToRedundancyList => {
            !closed && complete && !participant && !waiting
        }
        Action::RemoveFromParticipants => participant,
        Action::RemoveFromWaitList => waiting,
        Action::RemoveFromRedundancyList => redundant && !closed,
        Action::MarkRendezvousComplete => {
            let count = state.participants.len();
            let (min, max) = (settings.min_nodes as usize, settings.max_nodes as usize);
            !closed && !complete && participant && (min..=max).contains(&count)
        }
        Action::MarkRendezvousClosed => !closed,
        Action::Sync | Action::ErrorClosed | Action::ErrorTimeout | Action::Finish => true,
    }
}

/// The counters an action may only move forward.
struct Before {
    round: u64,
    closed: bool,
    complete: bool,
}

impl Before {
    fn of(state: &RendezvousState) -> Self {
        Before {
            round: state.round,
            closed: state.closed,
            complete: state.complete,
        }
    }

    /// The round moves on by at most one, and only when a complete round lost its last
    /// participant; a closed rendezvous stays closed.
    fn assert_moved_forward(&self, state: &RendezvousState, action: Action) {
        let reopened = self.complete && !state.complete && state.participants.is_empty();
        let expected_round = self.round + u64::from(reopened);
        assert_eq!(
            state.round, expected_round,
            "{action} moved round {} to {}; expected {expected_round} (complete {} -> {})",
            self.round, state.round, self.complete, state.complete
        );
        assert!(
            state.closed || !self.closed,
            "{action} reopened a closed rendezvous in round {}",
            state.round
        );
    }
}

/// Panics unless `state` keeps what `action` promises about `node`.
fn assert_applied(action: Action, state: &RendezvousState, node: &NodeDesc, now_utc_us: i64) {
    let ok = keeps_promise(action, state, node, now_utc_us);
    let heartbeat = state.last_heartbeats.get(node).copied();
    assert!(
        ok,
        "{action} for {node} at {now_utc_us} left heartbeat {heartbeat:?}, participant {}, \
         waiting {}, redundant {}, complete {}, closed {}, deadline {:?}",
        state.is_participant(node),
        state.wait_list.contains(node),
        state.redundancy_list.contains(node),
        state.complete,
        state.closed,
        state.deadline_utc_us
    );
}

/// What each action, taken by `node` at `now_utc_us`, promises about `node` afterwards: every
/// state `apply` leaves keeps it, so a state that does not was not left by this action.
/// O(log nodes).
pub fn keeps_promise(
    action: Action,
    state: &RendezvousState,
    node: &NodeDesc,
    now_utc_us: i64,
) -> bool {
    let heartbeat = state.last_heartbeats.get(node).copied();
    let (fresh, gone) = (heartbeat == Some(now_utc_us), heartbeat.is_none());
    match action {
        Action::KeepAlive => fresh,
        Action::AddToParticipants => {
            fresh && state.is_participant(node) && !state.wait_list.contains(node)
        }
        Action::AddToWaitList => {
            fresh && state.wait_list.contains(node) && !state.redundancy_list.contains(node)
        }
        Action::AddToRedundancyList => fresh && state.redundancy_list.contains(node),
        Action::RemoveFromParticipants => gone && !state.is_participant(node),
        Action::RemoveFromWaitList => gone && !state.wait_list.contains(node),
        Action::RemoveFromRedundancyList => gone && !state.redundancy_list.contains(node),
        Action::MarkRendezvousComplete => state.complete && state.deadline_utc_us.is_none(),
        Action::MarkRendezvousClosed => state.closed,
        Action::Sync | Action::ErrorClosed | Action::ErrorTimeout | Action::Finish => true,
    }
}

/// The `restarted-node-replaces-entry` fix: a process on `node`'s host (same address and
/// local id, another pid) is an earlier incarnation that died, since one host runs one
/// agent per local id; its entries go, as sanitize would drop them once its heartbeat expired.
fn drop_stale_entries_of(
    state: &mut RendezvousState,
    node: &NodeDesc,
    settings: &RendezvousSettings,
) {
    let is_stale = |other: &NodeDesc| {
        other.addr == node.addr && other.local_id == node.local_id && other.pid != node.pid
    };
    let stale: Vec<NodeDesc> = state
        .last_heartbeats
        .keys()
        .chain(state.participants.keys())
        .chain(state.wait_list.iter())
        .chain(state.redundancy_list.iter())
        .filter(|other| is_stale(other))
        .cloned()
        .collect();
    super::sanitize::drop_nodes(state, settings, &stale);
}

/// torch's `_mark_rendezvous_complete`: complete, no deadline, ranks 0.. in node order. With
/// the fix `world-at-completion` the assignment is also recorded as the round's world; with
/// `full-round-parks-waiters` a round completed at `max_nodes` parks its waiters.
pub(super) fn mark_complete(state: &mut RendezvousState, settings: &RendezvousSettings) {
    state.complete = true;
    state.deadline_utc_us = None;
    let natural = settings.has_fix(RendezvousFix::NaturalNodeOrder);
    let mut in_rank_order: Vec<NodeDesc> = state.participants.keys().cloned().collect();
    if natural {
        in_rank_order.sort_by(natural_order);
    }
    state.participants = (0u32..)
        .zip(in_rank_order)
        .map(|(rank, node)| (node, rank))
        .collect();
    // The planted bug for the fuzzer's canary: the second participant also gets rank 0.
    if settings.has_mutant(crate::mutant::Mutant::RankCollision) {
        if let Some(second) = state.participants.keys().nth(1).cloned() {
            state.participants.insert(second, 0);
        }
    } else if natural {
        let mut ranks: Vec<u32> = state.participants.values().copied().collect();
        ranks.sort_unstable();
        assert!(
            ranks.iter().zip(0u32..).all(|(&rank, i)| rank == i),
            "completion gave ranks {ranks:?}, not 0..{}",
            ranks.len()
        );
    } else if let Some((i, (node, rank))) = state
        .participants
        .iter()
        .enumerate()
        .find(|(i, (_, &rank))| rank as usize != *i)
    {
        panic!("completion gave {node}, place {i} in node order, rank {rank}, expected {i}");
    }
    if settings.has_fix(RendezvousFix::WorldAtCompletion) {
        // Persistent maps share structure: the record costs no copy of the nodes.
        state.completed_world = Some(state.participants.clone());
    }
    let full = state.participants.len() >= settings.max_nodes as usize;
    if full && settings.has_fix(RendezvousFix::FullRoundParksWaiters) {
        for node in std::mem::take(&mut state.wait_list) {
            state.redundancy_list.insert(node);
        }
    }
}

/// Node order with the numbers inside addresses compared as numbers (`node-2` before
/// `node-10`), then torch's own order for the rest; the fix `natural-node-order`.
fn natural_order(a: &NodeDesc, b: &NodeDesc) -> std::cmp::Ordering {
    let (left, right) = (chunks(&a.addr), chunks(&b.addr));
    left.iter()
        .zip(&right)
        .map(|(l, r)| match (l.parse::<u128>(), r.parse::<u128>()) {
            // Two runs of digits compare as numbers (then as text: `02` after `2`).
            (Ok(x), Ok(y)) => x.cmp(&y).then_with(|| l.cmp(r)),
            // Anything else compares as text, as torch compares the whole address.
            _ => l.cmp(r),
        })
        .find(|order| order.is_ne())
        .unwrap_or_else(|| left.len().cmp(&right.len()))
        .then_with(|| a.cmp(b))
}

/// An address cut into runs of digits and runs of other characters.
fn chunks(addr: &str) -> Vec<&str> {
    let mut chunks = Vec::new();
    let mut rest = addr;
    while let Some(first) = rest.chars().next() {
        let digit = first.is_ascii_digit();
        let end = rest
            .find(|c: char| c.is_ascii_digit() != digit)
            .unwrap_or(rest.len());
        chunks.push(&rest[..end]);
        rest = &rest[end..];
    }
    chunks
}

/// torch's `_remove_participant_epilogue`, run after participants were removed (by the exit or
/// rollback path, or by sanitize).
///
/// A complete round that lost its last participant reopens as the next round. An incomplete
/// round that fell below `min_nodes` loses its last-call deadline. Nothing else changes: a
/// complete round keeps running with the remaining ranks (gaps included).
pub fn remove_participant_epilogue(state: &mut RendezvousState, settings: &RendezvousSettings) {
    match epilogue(state.complete, state.participants.len(), settings) {
        Epilogue::Reopen => reopen(state),
        Epilogue::ClearDeadline => state.deadline_utc_us = None,
        Epilogue::Nothing => {}
    }
    assert!(
        !(state.complete && state.participants.is_empty()),
        "round {} is still complete with no participant after the epilogue",
        state.round
    );
}

/// What the participant epilogue does to a round that is `complete` or not and has
/// `participants_left` participants after the removal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Epilogue {
    Reopen,
    ClearDeadline,
    Nothing,
}

pub(super) fn epilogue(
    complete: bool,
    participants_left: usize,
    settings: &RendezvousSettings,
) -> Epilogue {
    match (complete, participants_left) {
        (true, 0) => Epilogue::Reopen,
        (true, _) => Epilogue::Nothing,
        (false, left) if left < settings.min_nodes as usize => Epilogue::ClearDeadline,
        (false, _) => Epilogue::Nothing,
    }
}

/// The next round opens, incomplete, with no world yet (always `None` without
/// `world-at-completion`).
pub(super) fn reopen(state: &mut RendezvousState) {
    state.complete = false;
    state.round = state
        .round
        .checked_add(1)
        .expect("round number overflows u64");
    state.completed_world = None;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim_time::deadline_after;

    fn n(addr: &str) -> NodeDesc {
        NodeDesc::new(addr, 1, 0)
    }

    #[test]
    fn reaching_min_opens_last_call_and_max_completes() {
        let s = RendezvousSettings::new("r", 2, 3);
        let mut st = RendezvousState::default();
        st.wait_list.insert(n("c"));
        apply(Action::AddToParticipants, &mut st, &n("c"), &s, 100);
        assert_eq!(st.deadline_utc_us, None);
        assert!(st.wait_list.is_empty());
        apply(Action::AddToParticipants, &mut st, &n("a"), &s, 200);
        assert_eq!(
            st.deadline_utc_us,
            Some(deadline_after(200, s.last_call_timeout))
        );
        apply(Action::AddToParticipants, &mut st, &n("b"), &s, 300);
        assert!(st.complete);
        assert_eq!(st.deadline_utc_us, None);
        let ranks: Vec<u32> = [n("a"), n("b"), n("c")]
            .iter()
            .map(|x| st.participants[x])
            .collect();
        assert_eq!(ranks, vec![0, 1, 2]);
        assert_eq!(st.last_heartbeats[&n("b")], 300);
    }

    #[test]
    fn min_equals_max_completes_without_deadline() {
        let s = RendezvousSettings::new("r", 1, 1);
        let mut st = RendezvousState::default();
        apply(Action::AddToParticipants, &mut st, &n("a"), &s, 5);
        assert!(st.complete);
        assert_eq!(st.deadline_utc_us, None);
    }

    #[test]
    fn last_participant_leaving_a_complete_round_starts_the_next() {
        let s = RendezvousSettings::new("r", 1, 1);
        let mut st = RendezvousState::default();
        apply(Action::AddToParticipants, &mut st, &n("a"), &s, 5);
        st.wait_list.insert(n("a"));
        apply(Action::RemoveFromParticipants, &mut st, &n("a"), &s, 6);
        assert_eq!((st.round, st.complete), (1, false));
        // The wait-list entry survives, as in torch.
        assert!(st.wait_list.contains(&n("a")));
        assert!(!st.last_heartbeats.contains_key(&n("a")));
    }

    #[test]
    fn falling_below_min_clears_deadline() {
        let s = RendezvousSettings::new("r", 2, 4);
        let mut st = RendezvousState::default();
        apply(Action::AddToParticipants, &mut st, &n("a"), &s, 1);
        apply(Action::AddToParticipants, &mut st, &n("b"), &s, 2);
        assert!(st.deadline_utc_us.is_some());
        apply(Action::RemoveFromParticipants, &mut st, &n("b"), &s, 3);
        assert_eq!(st.deadline_utc_us, None);
    }

    #[test]
    fn wait_list_takes_node_off_redundancy_list() {
        let s = RendezvousSettings::new("r", 1, 1);
        let mut st = RendezvousState::default();
        apply(Action::AddToParticipants, &mut st, &n("p"), &s, 8);
        apply(Action::AddToRedundancyList, &mut st, &n("a"), &s, 9);
        assert!(st.redundancy_list.contains(&n("a")));
        apply(Action::AddToWaitList, &mut st, &n("a"), &s, 10);
        assert!(st.redundancy_list.is_empty() && st.wait_list.contains(&n("a")));
        assert_eq!(st.last_heartbeats[&n("a")], 10);
    }

    #[test]
    fn non_mutating_actions_change_nothing() {
        let s = RendezvousSettings::new("r", 1, 2);
        let mut st = RendezvousState::default();
        st.participants.insert(n("a"), 0);
        let before = st.clone();
        for a in [
            Action::Sync,
            Action::ErrorClosed,
            Action::ErrorTimeout,
            Action::Finish,
        ] {
            assert!(!a.mutates_state());
            apply(a, &mut st, &n("a"), &s, 1);
        }
        assert_eq!(st, before);
    }

    #[test]
    #[should_panic(
        expected = "REMOVE_FROM_WAIT_LIST for a_1_0 is not an action the decision table takes"
    )]
    fn removing_a_node_that_is_not_there_fires() {
        let s = RendezvousSettings::new("r", 1, 2);
        let mut st = RendezvousState::default();
        apply(Action::RemoveFromWaitList, &mut st, &n("a"), &s, 1);
    }

    #[test]
    #[should_panic(
        expected = "ADD_TO_PARTICIPANTS for a_1_0 is not an action the decision table takes in round 0: closed true"
    )]
    fn joining_a_closed_rendezvous_fires() {
        let s = RendezvousSettings::new("r", 1, 2);
        let mut st = RendezvousState {
            closed: true,
            ..Default::default()
        };
        apply(Action::AddToParticipants, &mut st, &n("a"), &s, 1);
    }

    /// Settings with the `restarted-node-replaces-entry` fix on (or off).
    fn with_replace_fix(min: u32, max: u32, on: bool) -> RendezvousSettings {
        let mut s = RendezvousSettings::new("r", min, max);
        if on {
            s.fixes.insert(RendezvousFix::RestartedNodeReplacesEntry);
        }
        s
    }

    #[test]
    fn restarted_node_fills_an_open_round_twice_without_the_fix() {
        let s = with_replace_fix(2, 3, false);
        let mut st = RendezvousState::default();
        let (old, new) = (NodeDesc::new("b", 1, 0), NodeDesc::new("b", 2, 0));
        apply(Action::AddToParticipants, &mut st, &n("a"), &s, 1);
        apply(Action::AddToParticipants, &mut st, &old, &s, 2);
        apply(Action::AddToParticipants, &mut st, &new, &s, 3);
        // torch: the dead pid counts toward max_nodes and the round completes with it.
        assert!(st.complete && st.participants.len() == 3);
        assert!(st.is_participant(&old) && st.is_participant(&new));
    }

    #[test]
    fn restarted_node_replaces_its_dead_entry_with_the_fix() {
        let s = with_replace_fix(2, 3, true);
        let mut st = RendezvousState::default();
        let (old, new) = (NodeDesc::new("b", 1, 0), NodeDesc::new("b", 2, 0));
        let other_local = NodeDesc::new("b", 7, 1);
        apply(Action::AddToParticipants, &mut st, &n("a"), &s, 1);
        apply(Action::AddToParticipants, &mut st, &old, &s, 2);
        st.wait_list.insert(other_local.clone());
        st.last_heartbeats.insert(other_local.clone(), 2);
        apply(Action::AddToParticipants, &mut st, &new, &s, 3);
        assert!(!st.complete && st.participants.len() == 2);
        assert!(!st.knows(&old) && !st.last_heartbeats.contains_key(&old));
        // Another local id on the same host is another handler, not a restart.
        assert!(st.wait_list.contains(&other_local));
        // Still two participants = min_nodes: the last call keeps running.
        assert!(st.deadline_utc_us.is_some());
    }

    #[test]
    fn restarted_node_of_a_complete_round_reopens_it_when_alone() {
        let s = with_replace_fix(1, 1, true);
        let mut st = RendezvousState::default();
        let (old, new) = (NodeDesc::new("b", 1, 0), NodeDesc::new("b", 2, 0));
        apply(Action::AddToParticipants, &mut st, &old, &s, 1);
        assert!(st.complete);
        apply(Action::AddToRedundancyList, &mut st, &new, &s, 2);
        // The dead entry was the last participant: the epilogue opens the next round.
        assert_eq!((st.round, st.complete), (1, false));
        assert!(st.redundancy_list.contains(&new) && !st.knows(&old));
    }

    #[test]
    fn the_completed_world_survives_sanitize_only_with_its_fix() {
        use crate::rendezvous::sanitize::sanitize;
        let mut fixed = RendezvousSettings::new("r", 1, 3);
        fixed.fixes.insert(RendezvousFix::WorldAtCompletion);
        for settings in [RendezvousSettings::new("r", 1, 3), fixed] {
            let on = settings.has_fix(RendezvousFix::WorldAtCompletion);
            let mut st = RendezvousState::default();
            apply(Action::AddToParticipants, &mut st, &n("a"), &settings, 1);
            apply(Action::AddToParticipants, &mut st, &n("b"), &settings, 2);
            apply(Action::AddToParticipants, &mut st, &n("c"), &settings, 0);
            assert!(st.complete);
            // c's heartbeat expires: sanitize drops it from the complete round.
            let now_utc_us = 1 + crate::sim_time::clock_span(settings.heartbeat_expiry());
            assert_eq!(sanitize(&mut st, &settings, now_utc_us), vec![n("c")]);
            assert_eq!(st.participants.len(), 2);
            let world: Vec<(NodeDesc, u32)> =
                st.world().iter().map(|(n, r)| (n.clone(), *r)).collect();
            if on {
                assert_eq!(world, vec![(n("a"), 0), (n("b"), 1), (n("c"), 2)]);
            } else {
                // torch: the world is whatever survived the last sanitize.
                assert_eq!(world, vec![(n("a"), 0), (n("b"), 1)]);
                assert_eq!(st.completed_world, None);
            }
            // The round's last participants leave: the next round has no world yet.
            apply(
                Action::RemoveFromParticipants,
                &mut st,
                &n("a"),
                &settings,
                3,
            );
            apply(
                Action::RemoveFromParticipants,
                &mut st,
                &n("b"),
                &settings,
                3,
            );
            assert_eq!((st.round, st.complete), (1, false));
            assert_eq!(st.completed_world, None);
            assert!(st.world().is_empty());
        }
    }

    #[test]
    fn natural_order_compares_the_numbers_in_addresses_as_numbers() {
        let node = |addr: &str| NodeDesc::new(addr, 1, 0);
        let mut nodes: Vec<NodeDesc> = ["node-10", "node-2", "node-1", "127.0.0.10", "127.0.0.9"]
            .iter()
            .map(|a| node(a))
            .collect();
        nodes.sort_by(natural_order);
        let addrs: Vec<&str> = nodes.iter().map(|n| &*n.addr).collect();
        assert_eq!(
            addrs,
            ["127.0.0.9", "127.0.0.10", "node-1", "node-2", "node-10"]
        );
    }
}
