//! The rendezvous op decisions (torch's `_RendezvousJoinOp`, `_RendezvousExitOp`,
//! `_RendezvousCloseOp`, `_RendezvousKeepAliveOp`): given the state, which action comes next.

use super::edits::Membership;
use super::settings::RendezvousSettings;
use super::state::{NodeDesc, RendezvousState};
use crate::sim_time::{deadline_after, reading_before, SimDuration};

/// How long past its deadline a join op may still undo its own membership (torch hard-codes
/// 5 s): inside this window it removes itself instead of failing with a timeout at once.
pub const ROLLBACK_WINDOW: SimDuration = SimDuration::from_secs(5);

/// Which operation a node is running, and the next step an op asks for (torch's
/// `_Action`): the trace's story names the steps, so the words live there.
pub use crate::trace::story::{RendezvousAction as Action, RendezvousOp as OpKind};

/// torch's `RendezvousGracefulExitError`: the join op of a redundant node found the
/// rendezvous closed. Not a failure: the node should stop quietly.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the rendezvous '{run_id}' is closed, terminating pending rendezvous")]
pub struct GracefulExit {
    /// The run that was closed.
    pub run_id: String,
}

/// What an op looks at: torch's `_RendezvousContext`.
#[derive(Clone, Copy, Debug)]
pub struct OpContext<'a> {
    /// The node running the op.
    pub node: &'a NodeDesc,
    /// The state as last synced (and sanitized).
    pub state: &'a RendezvousState,
    /// The shared settings.
    pub settings: &'a RendezvousSettings,
    /// The node's entries in the state, looked up once: the decision reads them, and a
    /// write it decides plans its edits from them.
    pub member: Membership,
}

impl<'a> OpContext<'a> {
    /// The context of `node` acting on `state`.
    pub fn new(
        node: &'a NodeDesc,
        state: &'a RendezvousState,
        settings: &'a RendezvousSettings,
    ) -> Self {
        OpContext {
            node,
            state,
            settings,
            member: Membership::of(state, node),
        }
    }
}

/// torch's `_should_keep_alive`: a node with a heartbeat sends another once the old one is at
/// least one interval old (`<=`, so exactly one interval old is due). No heartbeat, no renewal.
pub fn should_keep_alive(ctx: &OpContext<'_>, now_utc_us: i64) -> bool {
    let due_us = reading_before(now_utc_us, ctx.settings.keep_alive_interval);
    match ctx.member.heartbeat_utc_us {
        Some(last_us) => last_us <= due_us,
        None => false,
    }
}

/// The action `op` takes next for `ctx.node`.
///
/// `now_utc_us` is the wall clock (heartbeats, the last-call deadline); `now_mono_us` and
/// `deadline_mono_us` are the node's monotonic clock and the op's deadline on it. torch's
/// comparison is "timed out when now > deadline", so now == deadline is still in time.
pub fn decide(
    op: OpKind,
    ctx: &OpContext<'_>,
    now_utc_us: i64,
    now_mono_us: i64,
    deadline_mono_us: i64,
) -> Result<Action, GracefulExit> {
    let settings = ctx.settings;
    assert!(
        settings.min_nodes >= 1 && settings.min_nodes <= settings.max_nodes,
        "op {} decided under unvalidated node bounds min {} max {}",
        op.name(),
        settings.min_nodes,
        settings.max_nodes
    );
    let timed_out = now_mono_us > deadline_mono_us;
    let action = match op {
        OpKind::Join => decide_join(ctx, now_utc_us, now_mono_us, deadline_mono_us)?,
        OpKind::Exit => match (ctx.member.is_participant(), timed_out) {
            (false, _) => Action::Finish,
            (true, true) => Action::ErrorTimeout,
            (true, false) => Action::RemoveFromParticipants,
        },
        OpKind::Close => match (ctx.state.closed, timed_out) {
            (true, _) => Action::Finish,
            (false, true) => Action::ErrorTimeout,
            (false, false) => Action::MarkRendezvousClosed,
        },
        OpKind::KeepAlive => match (should_keep_alive(ctx, now_utc_us), timed_out) {
            (false, _) => Action::Finish,
            (true, true) => Action::ErrorTimeout,
            (true, false) => Action::KeepAlive,
        },
    };
    assert_decided(op, ctx, action, timed_out);
    Ok(action)
}

/// What each op's answer promises about the state it was decided on: FINISH only once the
/// op's goal holds, a timeout only past the deadline, a heartbeat only for a node that has
/// one. O(log nodes).
fn assert_decided(op: OpKind, ctx: &OpContext<'_>, action: Action, timed_out: bool) {
    let (state, node) = (ctx.state, ctx.node);
    let ok = match (op, action) {
        (OpKind::Join, Action::Finish) => state.join_finished(node),
        (OpKind::Exit, Action::Finish) => !state.is_participant(node),
        (OpKind::Close, Action::Finish) => state.closed,
        (_, Action::ErrorTimeout) => timed_out,
        (_, Action::KeepAlive) => state.last_heartbeats.contains_key(node),
        (OpKind::Join, _) => true,
        (_, other) => matches!(
            (op, other),
            (OpKind::Exit, Action::RemoveFromParticipants)
                | (OpKind::Close, Action::MarkRendezvousClosed)
                | (OpKind::KeepAlive, Action::Finish)
        ),
    };
    assert!(
        ok,
        "op {} decided {action} for {node} with timed_out {timed_out} in round {}: complete {}, \
         closed {}, participant {}, heartbeat {:?}",
        op.name(),
        state.round,
        state.complete,
        state.closed,
        state.is_participant(node),
        state.last_heartbeats.get(node)
    );
}

/// KEEP_ALIVE if a heartbeat is due, else SYNC: every "wait and look again" exit of the join op.
fn wait_action(ctx: &OpContext<'_>, now_utc_us: i64) -> Action {
    if should_keep_alive(ctx, now_utc_us) {
        Action::KeepAlive
    } else {
        Action::Sync
    }
}

/// torch's join decision table, checked in torch's order.
fn decide_join(
    ctx: &OpContext<'_>,
    now_utc_us: i64,
    now_mono_us: i64,
    deadline_mono_us: i64,
) -> Result<Action, GracefulExit> {
    let (state, settings) = (ctx.state, ctx.settings);
    let max_nodes = settings.max_nodes as usize;
    let redundant = ctx.member.redundant;
    // A closed rendezvous admits no one; a parked (redundant) node exits quietly instead.
    if state.closed {
        return if redundant {
            Err(GracefulExit {
                run_id: settings.run_id.clone(),
            })
        } else {
            Ok(Action::ErrorClosed)
        };
    }
    // A redundant node ignores the deadline: it waits while the round is full and leaves the
    // redundancy list as soon as there is room (the shell then renews the join deadline).
    if redundant {
        if state.participants.len() == max_nodes {
            return Ok(wait_action(ctx, now_utc_us));
        }
        return Ok(Action::RemoveFromRedundancyList);
    }
    let is_participant = ctx.member.is_participant();
    if state.complete && is_participant {
        return Ok(Action::Finish);
    }
    if now_mono_us > deadline_mono_us {
        let in_rollback = now_mono_us <= deadline_after(deadline_mono_us, ROLLBACK_WINDOW);
        return Ok(join_past_deadline(ctx, in_rollback));
    }
    let decided = if state.complete {
        join_complete_round(ctx)
    } else if is_participant {
        join_open_round_as_participant(ctx, now_utc_us)
    } else {
        Some(Action::AddToParticipants)
    };
    Ok(decided.unwrap_or_else(|| wait_action(ctx, now_utc_us)))
}

/// A join past its deadline: within the rollback window the node tries to undo its
/// membership; past it, or with nothing to undo, the join fails (a stale heartbeat cleans
/// up after it eventually).
fn join_past_deadline(ctx: &OpContext<'_>, in_rollback: bool) -> Action {
    if in_rollback {
        if ctx.member.is_participant() {
            return Action::RemoveFromParticipants;
        }
        if ctx.member.waiting {
            return Action::RemoveFromWaitList;
        }
    }
    Action::ErrorTimeout
}

/// A node that is not a participant of the complete current round: wait for the next one
/// if this one is not full, park on the redundancy list if it is. `None`: already where it
/// belongs, so it waits.
fn join_complete_round(ctx: &OpContext<'_>) -> Option<Action> {
    let (state, settings) = (ctx.state, ctx.settings);
    let has_room = state.participants.len() < settings.max_nodes as usize;
    // The planted bug for the fuzzer's canary: join the running round directly.
    if settings.has_mutant(crate::mutant::Mutant::LateJoinerJoinsCompleteRound) && has_room {
        return Some(Action::AddToParticipants);
    }
    if ctx.member.waiting {
        return None;
    }
    Some(if has_room {
        Action::AddToWaitList
    } else {
        Action::AddToRedundancyList
    })
}

/// A participant of the open round: it completes the round once there are enough
/// participants and the last call is over (strictly past its deadline). `None`: it waits.
fn join_open_round_as_participant(ctx: &OpContext<'_>, now_utc_us: i64) -> Option<Action> {
    let (state, settings) = (ctx.state, ctx.settings);
    let count = state.participants.len();
    let enough = count >= settings.min_nodes as usize && count <= settings.max_nodes as usize;
    let last_call_over = state
        .deadline_utc_us
        .is_some_and(|deadline_us| deadline_us < now_utc_us);
    (enough && last_call_over).then_some(Action::MarkRendezvousComplete)
}
