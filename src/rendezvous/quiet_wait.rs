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
use crate::sim_time::{span_between_readings, SimDuration, SimInstant};
use crate::world::quiet::Settle;
use crate::world::wake::Wake;
use crate::world::{time, NodeEnv};
use futures::future::{select, Either};
use std::sync::Arc;

/// How long after a disturbance a routine is simulated message by message before a quiet
/// window may skip it, twice over so that the polls that follow see the state settle:
/// - after a loss (a fault, a process ending), long enough for a peer that died then to
///   miss its keep-alives, expire, and be dropped by a poll (expiry, one keep-alive
///   interval, the state cache's second, a monitor tick);
/// - after a change (a process starting or acting), long enough for every routine to read
///   the new state: a joiner's next poll (its second) or a monitor's next read after its
///   cache's second, at its next tick.
///
/// And how far apart the nodes' wall clocks may be while the routine stays routine. A
/// reader drops a peer whose stamp looks older than the expiry by its own clock; a live
/// peer's stamp is at most `stamp_age_max` old when read, so a spread of clocks below the
/// expiry minus that age never makes a live peer look dead. A wider spread may, at a moment
/// no disturbance announces, so it keeps the routine message by message.
pub fn settle(
    settings: &RendezvousSettings,
    monitor_interval: SimDuration,
    latency_max: SimDuration,
) -> Settle {
    let read_by_all = super::handler::CACHE
        .saturating_add(super::handler::SYNC_DELAY)
        .saturating_add(monitor_interval);
    let expire_and_read = settings
        .heartbeat_expiry()
        .saturating_add(settings.keep_alive_interval)
        .saturating_add(super::handler::CACHE)
        .saturating_add(monitor_interval);
    Settle {
        after_loss: expire_and_read.saturating_mul(2),
        after_change: read_by_all.saturating_mul(2),
        clock_spread_below: settings.heartbeat_expiry().saturating_sub(stamp_age_max(
            settings,
            monitor_interval,
            latency_max,
        )),
    }
}

/// The oldest a live peer's heartbeat stamp can be when a routine reads it, by the peer's own
/// clock: its keep-alive falls due one interval after the last and is seen at the next poll
/// (its second) or heartbeat tick, then read, written and landed (two round trips), and a
/// reader may hold the state a cache's second before it compares, at its own next monitor
/// tick, another round trip after the store answered.
fn stamp_age_max(
    settings: &RendezvousSettings,
    monitor_interval: SimDuration,
    latency_max: SimDuration,
) -> SimDuration {
    let round_trip = latency_max.saturating_mul(2);
    settings
        .keep_alive_interval
        .saturating_add(super::handler::SYNC_DELAY)
        .saturating_add(round_trip.saturating_mul(3))
        .saturating_add(super::handler::CACHE)
        .saturating_add(monitor_interval)
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
    let scenario = env.scenario();
    let settle = settle(
        settings,
        scenario.agent.monitor_interval,
        scenario.network.latency_max,
    );
    env.set_quiet(settle);
    let interval = settings.keep_alive_interval;
    let start = time::now_whole_us();
    let first_due = if action == Action::KeepAlive {
        start
    } else {
        next_keep_alive(env, node, state, interval, start)
    };
    let wake = Arc::new(Wake::default());
    if !env.skip_beats_through_window(&wake, writer_id(node), first_due, interval) {
        return WaitOutcome::AsTorch;
    }
    // torch times out when its monotonic clock is past the deadline.
    let until_deadline = span_between_readings(env.now_mono_us(), deadline_mono_us)
        .saturating_add(SimDuration::from_us(1));
    let timeout = std::pin::pin!(time::sleep(until_deadline));
    if let Either::Right(((), _)) = select(wake.notified(), timeout).await {
        // Its own timeout ends the window: this node is about to act.
        env.set_busy();
        return WaitOutcome::Slept;
    }
    // Resume on the first poll of the one-second grid from the start that lies after now.
    let slept = time::now_whole_us().since(start);
    let poll = super::handler::SYNC_DELAY;
    let resume_after = slept.ceil_to(poll).max(poll);
    time::sleep_until_whole_us(start.after(resume_after)).await;
    WaitOutcome::Slept
}

/// The simulated moment this node's next keep-alive falls due: when its stamp in `state` is
/// one interval old (at once when it has none, which a routine wait does not see).
fn next_keep_alive(
    env: &NodeEnv,
    node: &NodeDesc,
    state: &RendezvousState,
    interval: SimDuration,
    now: SimInstant,
) -> SimInstant {
    let Some(&stamp_utc_us) = state.last_heartbeats.get(node) else {
        return now;
    };
    let age = span_between_readings(stamp_utc_us, env.now_utc_us());
    now.after(interval.saturating_sub(age))
}
