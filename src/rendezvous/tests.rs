//! Tests of the rendezvous core as a whole: the op decision tables and properties of
//! decide → apply → sanitize sequences.

use proptest::prelude::*;

use super::apply::apply;
use super::ops::{
    decide, should_keep_alive, Action, GracefulExit, OpContext, OpKind, ROLLBACK_WINDOW,
};
use super::sanitize::sanitize;
use super::settings::{RendezvousFix, RendezvousSettings};
use super::state::{nodes_at, NodeDesc, RendezvousState};
use crate::scenario::node::NodeIndex;
use crate::sim_time::{clock_span, deadline_after, reading_before};

const NOW_UTC_US: i64 = 1_000_000_000;
const MONO_US: i64 = 50_000_000;

fn n(addr: &str) -> NodeDesc {
    NodeDesc::new(addr, 1, 0)
}

fn settings(min: u32, max: u32) -> RendezvousSettings {
    RendezvousSettings::new("run", min, max)
}

/// Decides `op` for `node` with the op deadline `slack_us` ahead of the monotonic clock.
fn run(
    op: OpKind,
    node: &NodeDesc,
    st: &RendezvousState,
    s: &RendezvousSettings,
    slack_us: i64,
) -> Result<Action, GracefulExit> {
    let ctx = OpContext::new(node, st, s);
    decide(op, &ctx, NOW_UTC_US, MONO_US, MONO_US + slack_us)
}

fn join(node: &NodeDesc, st: &RendezvousState, s: &RendezvousSettings) -> Action {
    run(OpKind::Join, node, st, s, 1_000_000).unwrap()
}

fn fresh(st: &mut RendezvousState, node: &NodeDesc) {
    st.last_heartbeats.insert(node.clone(), NOW_UTC_US);
}

#[test]
fn action_names_round_trip() {
    for &a in Action::ALL {
        assert_eq!(Action::from_torch_name(a.torch_name()), Some(a));
        assert_eq!(a.to_string(), a.torch_name());
    }
    let names: Vec<&str> = Action::ALL.iter().map(|a| a.torch_name()).collect();
    assert_eq!(
        names,
        [
            "KEEP_ALIVE",
            "ADD_TO_PARTICIPANTS",
            "ADD_TO_WAIT_LIST",
            "ADD_TO_REDUNDANCY_LIST",
            "REMOVE_FROM_PARTICIPANTS",
            "REMOVE_FROM_WAIT_LIST",
            "REMOVE_FROM_REDUNDANCY_LIST",
            "MARK_RENDEZVOUS_COMPLETE",
            "MARK_RENDEZVOUS_CLOSED",
            "SYNC",
            "ERROR_CLOSED",
            "ERROR_TIMEOUT",
            "FINISH",
        ]
    );
    assert_eq!(OpKind::from_name("keep_alive"), Some(OpKind::KeepAlive));
    assert_eq!(OpKind::KeepAlive.name(), "keep_alive");
    assert_eq!(OpKind::from_name("KeepAlive"), None);
    assert_eq!(
        Action::AddToParticipants.torch_name(),
        "ADD_TO_PARTICIPANTS"
    );
    assert_eq!(OpKind::from_name("keep_alive"), Some(OpKind::KeepAlive));
}

#[test]
fn join_closed_errors_but_redundant_node_exits_gracefully() {
    let s = settings(1, 1);
    let mut st = RendezvousState {
        closed: true,
        ..Default::default()
    };
    assert_eq!(join(&n("a"), &st, &s), Action::ErrorClosed);
    st.redundancy_list.insert(n("a"));
    assert!(run(OpKind::Join, &n("a"), &st, &s, 0).is_err());
}

#[test]
fn join_redundant_waits_while_full_and_leaves_when_room_ignoring_deadline() {
    let s = settings(1, 1);
    let mut st = RendezvousState {
        complete: true,
        ..Default::default()
    };
    st.participants.insert(n("a"), 0);
    st.redundancy_list.insert(n("b"));
    fresh(&mut st, &n("b"));
    // Long past the deadline, still no timeout for a redundant node.
    assert_eq!(
        run(OpKind::Join, &n("b"), &st, &s, -60_000_000),
        Ok(Action::Sync)
    );
    st.last_heartbeats
        .insert(n("b"), reading_before(NOW_UTC_US, s.keep_alive_interval));
    assert_eq!(join(&n("b"), &st, &s), Action::KeepAlive);
    st.participants.clear();
    assert_eq!(
        run(OpKind::Join, &n("b"), &st, &s, -60_000_000),
        Ok(Action::RemoveFromRedundancyList)
    );
}

#[test]
fn join_rollback_window_after_deadline() {
    let s = settings(2, 3);
    let mut st = RendezvousState::default();
    st.participants.insert(n("a"), 0);
    st.wait_list.insert(n("w"));
    // now == deadline is still in time.
    assert_eq!(run(OpKind::Join, &n("a"), &st, &s, 0), Ok(Action::Sync));
    assert_eq!(
        run(OpKind::Join, &n("a"), &st, &s, -1),
        Ok(Action::RemoveFromParticipants)
    );
    assert_eq!(
        run(OpKind::Join, &n("w"), &st, &s, -clock_span(ROLLBACK_WINDOW)),
        Ok(Action::RemoveFromWaitList)
    );
    assert_eq!(
        run(
            OpKind::Join,
            &n("a"),
            &st,
            &s,
            -clock_span(ROLLBACK_WINDOW) - 1
        ),
        Ok(Action::ErrorTimeout)
    );
    assert_eq!(
        run(OpKind::Join, &n("z"), &st, &s, -1),
        Ok(Action::ErrorTimeout)
    );
    // A finished participant never times out.
    st.complete = true;
    assert_eq!(
        run(OpKind::Join, &n("a"), &st, &s, -60_000_000),
        Ok(Action::Finish)
    );
}

#[test]
fn join_on_complete_round_waits_or_parks() {
    let s = settings(1, 2);
    let mut st = RendezvousState {
        complete: true,
        ..Default::default()
    };
    st.participants.insert(n("a"), 0);
    assert_eq!(join(&n("b"), &st, &s), Action::AddToWaitList);
    st.wait_list.insert(n("b"));
    assert_eq!(join(&n("b"), &st, &s), Action::Sync);
    st.participants.insert(n("c"), 1);
    assert_eq!(join(&n("d"), &st, &s), Action::AddToRedundancyList);
    // Already waiting: a full round does not move it to the redundancy list.
    assert_eq!(join(&n("b"), &st, &s), Action::Sync);
}

#[test]
fn join_completes_only_strictly_after_last_call() {
    let s = settings(2, 3);
    let mut st = RendezvousState::default();
    assert_eq!(join(&n("a"), &st, &s), Action::AddToParticipants);
    st.participants.insert(n("a"), 0);
    st.participants.insert(n("b"), 0);
    assert_eq!(
        join(&n("a"), &st, &s),
        Action::Sync,
        "no deadline, no completion"
    );
    st.deadline_utc_us = Some(NOW_UTC_US);
    assert_eq!(join(&n("a"), &st, &s), Action::Sync);
    st.deadline_utc_us = Some(NOW_UTC_US - 1);
    assert_eq!(join(&n("a"), &st, &s), Action::MarkRendezvousComplete);
}

#[test]
fn exit_close_keep_alive_tables() {
    let s = settings(1, 2);
    let mut st = RendezvousState::default();
    assert_eq!(run(OpKind::Exit, &n("a"), &st, &s, -1), Ok(Action::Finish));
    st.participants.insert(n("a"), 0);
    assert_eq!(
        run(OpKind::Exit, &n("a"), &st, &s, 0),
        Ok(Action::RemoveFromParticipants)
    );
    assert_eq!(
        run(OpKind::Exit, &n("a"), &st, &s, -1),
        Ok(Action::ErrorTimeout)
    );
    assert_eq!(
        run(OpKind::Close, &n("a"), &st, &s, 0),
        Ok(Action::MarkRendezvousClosed)
    );
    assert_eq!(
        run(OpKind::Close, &n("a"), &st, &s, -1),
        Ok(Action::ErrorTimeout)
    );
    st.closed = true;
    assert_eq!(run(OpKind::Close, &n("a"), &st, &s, -1), Ok(Action::Finish));
    // No heartbeat: nothing to renew.
    assert_eq!(
        run(OpKind::KeepAlive, &n("a"), &st, &s, -1),
        Ok(Action::Finish)
    );
    fresh(&mut st, &n("a"));
    assert_eq!(
        run(OpKind::KeepAlive, &n("a"), &st, &s, 0),
        Ok(Action::Finish)
    );
    st.last_heartbeats
        .insert(n("a"), reading_before(NOW_UTC_US, s.keep_alive_interval));
    assert_eq!(
        run(OpKind::KeepAlive, &n("a"), &st, &s, 0),
        Ok(Action::KeepAlive)
    );
    assert_eq!(
        run(OpKind::KeepAlive, &n("a"), &st, &s, -1),
        Ok(Action::ErrorTimeout)
    );
    let node = n("a");
    let ctx = OpContext::new(&node, &st, &s);
    assert!(should_keep_alive(&ctx, NOW_UTC_US));
    assert!(!should_keep_alive(&ctx, NOW_UTC_US - 1));
}

#[test]
#[should_panic(expected = "op join decided under unvalidated node bounds min 3 max 2")]
fn deciding_under_node_bounds_torch_refuses_fires() {
    let _ = run(
        OpKind::Join,
        &n("a"),
        &RendezvousState::default(),
        &settings(3, 2),
        0,
    );
}

/// Runs a join op for `node` to its end against a single shared state with no other writers,
/// the way the shell would (decide, apply, sanitize), returning the last action.
fn drive_join(
    st: &mut RendezvousState,
    s: &RendezvousSettings,
    node: &NodeDesc,
    now_utc_us: &mut i64,
) -> Action {
    for _ in 0..100 {
        sanitize(st, s, *now_utc_us);
        let ctx = OpContext::new(node, st, s);
        let action = decide(OpKind::Join, &ctx, *now_utc_us, 0, i64::MAX / 2).unwrap();
        if !action.mutates_state() {
            return action;
        }
        apply(action, st, node, s, *now_utc_us);
        *now_utc_us += 1;
    }
    panic!("join did not settle");
}

#[test]
fn lone_node_joins_and_gets_rank_zero_after_last_call() {
    let s = settings(1, 2);
    let mut st = RendezvousState::default();
    let mut now = NOW_UTC_US;
    assert_eq!(drive_join(&mut st, &s, &n("a"), &mut now), Action::Sync);
    now = deadline_after(now, s.last_call_timeout) + 1;
    // Heartbeat is stale by now; the sanitize horizon is 15 s but the last call is 30 s, so
    // refresh the heartbeat the way the keep-alive path would.
    st.last_heartbeats.insert(n("a"), now);
    assert_eq!(drive_join(&mut st, &s, &n("a"), &mut now), Action::Finish);
    assert_eq!(st.rank_of(&n("a")), Some(0));
    assert!(st.join_finished(&n("a")));
}

fn arb_node() -> impl Strategy<Value = NodeDesc> {
    (
        prop::sample::select(vec!["a", "b", "c", "d"]),
        1u32..3,
        0u32..2,
    )
        .prop_map(|(a, p, l)| NodeDesc::new(a, p, l))
}

fn arb_op() -> impl Strategy<Value = OpKind> {
    prop::sample::select(vec![
        OpKind::Join,
        OpKind::Join,
        OpKind::Exit,
        OpKind::Close,
        OpKind::KeepAlive,
    ])
}

/// Ranks in a complete round never collide.
fn ranks_distinct(st: &RendezvousState) -> bool {
    let ranks: std::collections::BTreeSet<u32> = st.participants.values().copied().collect();
    ranks.len() == st.participants.len()
}

proptest! {
    /// Any interleaving of ops by several nodes against one state, each decided on the
    /// sanitized state and applied, keeps a complete round's ranks distinct, never lists a
    /// node on both the wait and redundancy lists, round/closed never go backwards, and
    /// every state is well formed (with or without the fixes that change the state).
    #[test]
    fn decide_apply_sanitize_keeps_invariants(
        min in 1u32..3, extra in 0u32..3, replace_fix in any::<bool>(), world_fix in any::<bool>(),
        steps in prop::collection::vec((arb_node(), arb_op(), 0i64..20_000_000, -6_000_000i64..2_000_000), 1..60),
    ) {
        let mut s = settings(min, min + extra);
        for (on, fix) in [
            (replace_fix, RendezvousFix::RestartedNodeReplacesEntry),
            (world_fix, RendezvousFix::WorldAtCompletion),
        ] {
            if on {
                s.fixes.insert(fix.to_owned());
            }
        }
        let mut st = RendezvousState::default();
        let mut now = NOW_UTC_US;
        for (node, op, advance_us, slack_us) in steps {
            let before = (st.clone(), st.encode().len());
            now += advance_us;
            let (round, closed) = (st.round, st.closed);
            sanitize(&mut st, &s, now);
            let ctx = OpContext::new(&node, &st, &s);
            if let Ok(action) = decide(op, &ctx, now, MONO_US, MONO_US + slack_us) {
                apply(action, &mut st, &node, &s, now);
            }
            sanitize(&mut st, &s, now);
            prop_assert!(st.round >= round && (st.closed || !closed));
            if st.complete {
                prop_assert!(ranks_distinct(&st), "rank collision in {:?}", st);
                prop_assert!(st.participants.len() <= s.max_nodes as usize);
            }
            prop_assert!(st.wait_list.iter().all(|n| !st.redundancy_list.contains(n)));
            st.assert_well_formed(&s);
            prop_assert_eq!(RendezvousState::decode(&st.encode()).unwrap(), st.clone());
            // A state's length, counted from the state it was changed from, is its encoding's.
            prop_assert_eq!(st.encoded_len_from(&before.0, before.1), st.encode().len());
        }
    }
}

fn arb_any_node() -> impl Strategy<Value = NodeDesc> {
    ("[a-z\"\\\\\u{1}é0-9._-]{0,12}", any::<u32>(), any::<u32>())
        .prop_map(|(addr, pid, local_id)| NodeDesc::new(addr, pid, local_id))
}

proptest! {
    /// The hand-written encoder writes exactly the bytes serde_json writes, for any state,
    /// addresses that need escaping included; its byte count is their length; and the bytes
    /// give the state back, so different states never share bytes (values of states are
    /// compared as states, `store::Value`).
    #[test]
    fn encode_equals_the_serde_encoding(
        round in any::<u64>(), complete in any::<bool>(), closed in any::<bool>(),
        deadline in prop::option::of(any::<i64>()),
        participants in prop::collection::btree_map(arb_any_node(), any::<u32>(), 0..6),
        wait_list in prop::collection::btree_set(arb_any_node(), 0..4),
        redundancy_list in prop::collection::btree_set(arb_any_node(), 0..4),
        last_heartbeats in prop::collection::btree_map(arb_any_node(), any::<i64>(), 0..6),
        completed_world in prop::option::of(
            prop::collection::btree_map(arb_any_node(), any::<u32>(), 0..6)
        ),
    ) {
        let st = RendezvousState {
            round, complete, deadline_utc_us: deadline, closed,
            participants: participants.into_iter().collect(),
            wait_list: wait_list.into_iter().collect(),
            redundancy_list: redundancy_list.into_iter().collect(),
            last_heartbeats: last_heartbeats.into_iter().collect(),
            completed_world: completed_world.map(|w| w.into_iter().collect()),
        };
        let bytes = st.encode();
        prop_assert_eq!(&bytes, &st.encode_with_serde());
        prop_assert_eq!(crate::store::Encode::encoded_len(&st), bytes.len());
        prop_assert_eq!(RendezvousState::decode(&bytes).expect("decodes"), st);
    }
}

#[test]
fn participant_addresses_become_nodes_once_and_a_stranger_is_a_corrupt_state() {
    assert_eq!(
        nodes_at(["node-0", "node-12"]),
        Ok(vec![NodeIndex(0), NodeIndex(12)])
    );
    let err = nodes_at(["node-1", "10.0.0.7"]).unwrap_err();
    assert_eq!(err.kind(), crate::trace::RendezvousErrorKind::StateError);
    assert!(err.to_string().contains("`10.0.0.7`"), "{err}");
}
