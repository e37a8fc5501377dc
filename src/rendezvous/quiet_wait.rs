//! A joiner's wait fast-forwarded through quiet windows (`world::quiet`): a node that waits
//! in a join for nodes that have not come (a round short of `min_nodes`, a wait list, a
//! redundancy list) only polls the state every second and keeps its heartbeat alive, so
//! while every other process is quiet too those polls and keep-alives may be skipped.
//!
//! The wait is routine only while the decision would stay the same without anyone else
//! acting: the join op decides `SYNC` or `KEEP_ALIVE` and no last call is running (the state
//! has no deadline, which would complete the round when it passes). What may end it is
//! announced: a node starting, a fault, another process acting (each a disturbance that
//! closes the window), or this join's own timeout, which the sleeper wakes for and announces.

use super::ops::Action;
use super::settings::RendezvousSettings;
use super::skipped_beats::writer_id;
use super::state::{NodeDesc, RendezvousState};
use crate::world::wake::Wake;
use crate::world::{time, NodeEnv};
use futures::future::{select, Either};
use std::sync::Arc;

/// How long after a disturbance (a fault, a process starting, an agent acting) a routine
/// is simulated message by message before a quiet window may skip it: long enough for a
/// peer that died then to miss its keep-alives, expire, and be dropped by a poll (expiry,
/// one keep-alive interval, the state cache's second, a monitor tick) and twice that, so
/// the polls that follow see the state settle.
pub fn settle_us(settings: &RendezvousSettings, monitor_interval_us: u64) -> u64 {
    let expiry_us = u64::try_from(settings.heartbeat_expiry_us()).unwrap_or(u64::MAX);
    let one_pass_us = expiry_us
        .saturating_add(settings.keep_alive_interval_us)
        .saturating_add(u64::try_from(super::handler::CACHE_US).unwrap_or(0))
        .saturating_add(monitor_interval_us);
    one_pass_us.saturating_mul(2)
}

/// Whether a join's `action` only repeats its wait: a poll or a keep-alive, with no last
/// call running.
pub fn is_routine(action: Action, state: &RendezvousState) -> bool {
    matches!(action, Action::Sync | Action::KeepAlive) && state.deadline_utc_us.is_none()
}

/// What the wait's shell does after [`wait`]: go on as torch does (poll after its second,
/// or write the keep-alive), or poll now because a window was slept through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitOutcome {
    AsTorch,
    Slept,
}

/// One routine step of a join's wait. The process is declared quiet; when a window is open
/// it sleeps through it, its keep-alives kept as skipped beats, until the window closes or
/// its join deadline passes (then it disturbs, so everyone wakes), and resumes on its
/// one-second poll grid.
pub async fn wait(
    env: &NodeEnv,
    node: &NodeDesc,
    settings: &RendezvousSettings,
    state: &RendezvousState,
    action: Action,
    deadline_mono_us: i64,
) -> WaitOutcome {
    let settle = settle_us(settings, env.scenario().agent.monitor_interval.as_us());
    env.set_quiet(true, settle);
    let interval_us = settings.keep_alive_interval_us;
    let start_us = time::elapsed_us();
    let first_due_us = if action == Action::KeepAlive {
        start_us
    } else {
        next_keep_alive_us(env, node, state, interval_us, start_us)
    };
    let wake = Arc::new(Wake::default());
    if !env.skip_beats_through_window(&wake, writer_id(node), first_due_us, interval_us) {
        return WaitOutcome::AsTorch;
    }
    // torch times out when its monotonic clock is past the deadline.
    let until_deadline_us = u64::try_from(deadline_mono_us.saturating_sub(env.now_mono_us()))
        .unwrap_or(0)
        .saturating_add(1);
    let timeout = std::pin::pin!(time::sleep_us(until_deadline_us));
    if let Either::Right(((), _)) = select(wake.notified(), timeout).await {
        // Its own timeout ends the window: this node is about to act.
        env.set_quiet(false, settle);
        return WaitOutcome::Slept;
    }
    let slept_us = time::elapsed_us() - start_us;
    let poll_us = super::handler::SYNC_DELAY_US;
    time::sleep_until_us(start_us + slept_us.div_ceil(poll_us).max(1) * poll_us).await;
    WaitOutcome::Slept
}

/// The simulated moment this node's next keep-alive falls due: when its stamp in `state` is
/// one interval old (at once when it has none, which a routine wait does not see).
fn next_keep_alive_us(
    env: &NodeEnv,
    node: &NodeDesc,
    state: &RendezvousState,
    interval_us: u64,
    now_us: u64,
) -> u64 {
    let Some(&stamp_utc_us) = state.last_heartbeats.get(node) else {
        return now_us;
    };
    let age_us = u64::try_from(env.now_utc_us().saturating_sub(stamp_utc_us)).unwrap_or(0);
    now_us.saturating_add(interval_us.saturating_sub(age_us))
}
