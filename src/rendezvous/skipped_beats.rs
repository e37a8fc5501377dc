//! Keep-alives skipped in a quiet window (`world::quiet`): the writer's side (the loop
//! sleeps through the window on its grid) and the reader's (each stamp is at least the
//! writer's last skipped one, as if every keep-alive had landed); and the monitor's cached
//! reads the same window skipped.

use super::decoded_states::SharedState;
use super::state::{NodeDesc, RendezvousState};
use crate::sim_time::{SimDuration, SimInstant};
use crate::world::{time, NodeEnv};
use std::sync::Arc;

/// In a quiet window the keep-alives fall due on their grid without being sent: the world
/// keeps their stamps, and every reader applies them. The loop goes on at the first tick
/// of its grid after the window closes.
pub async fn skip_through_window(env: &NodeEnv, writer: u64, interval: SimDuration) {
    let wake = Arc::new(crate::world::wake::Wake::default());
    let origin = time::now_whole_us();
    if !env.skip_beats_through_window(&wake, writer, origin, interval) {
        return;
    }
    wake.notified().await;
    let slept = time::now_whole_us().since(origin);
    let next_tick = slept.floor_to(interval).saturating_add(interval);
    time::sleep_until_whole_us(origin.after(next_tick)).await;
}

/// Raises each stamp of the state just read (`synced`, now in `state`) to its node's last
/// skipped keep-alive. Nothing to do, and nothing copied, when the oldest stamp is already
/// newer than every skipped one; once no window is open, the first reader of a state raises
/// it for every later one (the skipped keep-alives stand still until the next window).
pub fn apply(env: &NodeEnv, state: &mut Arc<RendezvousState>, synced: &SharedState) {
    let Some(newest_us) = env.newest_skipped_beat_wall_us() else {
        return;
    };
    if synced
        .oldest_heartbeat_us
        .is_none_or(|oldest_us| oldest_us >= newest_us)
    {
        return;
    }
    let generation = env.settled_skipped_beats();
    if let Some(raised) = generation.and_then(|g| synced.raised_under(g)) {
        *state = raised;
        return;
    }
    raise(env, state);
    if let Some(generation) = generation {
        synced.keep_raised(generation, state);
    }
}

/// Raises each stamp of `state` to its writer's last skipped keep-alive, where newer.
fn raise(env: &NodeEnv, state: &mut Arc<RendezvousState>) {
    let stamps = state
        .last_heartbeats
        .iter()
        .map(|(node, &stamp)| (node, writer_id(node), stamp));
    let skipped: Vec<(NodeDesc, i64)> = env
        .newer_skipped_beats(stamps)
        .into_iter()
        .map(|(node, beat)| (node.clone(), beat))
        .collect();
    if skipped.is_empty() {
        return;
    }
    let state = Arc::make_mut(state);
    for (node, beat) in skipped {
        state.last_heartbeats.insert(node, beat);
    }
}

/// The number a node's keep-alives are known by on the world's board: its process id and
/// handler counter, which tell the run's handlers apart (process ids are never reused).
pub fn writer_id(node: &NodeDesc) -> u64 {
    (u64::from(node.pid) << 32) | u64::from(node.local_id)
}

/// The monitor's last read of the state that a quiet window skipped: its ticks fall every
/// `grid` after `ticks_from`, and a tick reads the store once the last sync (`last_sync`, a
/// real one or a skipped keep-alive) is more than `cache` old. `last_sync` itself when no
/// tick before `now` would have read. Which call a fault then catches in flight depends
/// on it: without it the monitor would read at its first tick after every window, ahead of
/// a keep-alive that torch's routine sends first.
pub fn last_skipped_read(
    last_sync: SimInstant,
    ticks_from: SimInstant,
    grid: SimDuration,
    cache: SimDuration,
    now: SimInstant,
) -> SimInstant {
    assert!(!grid.is_zero(), "the monitor ticks every 0 us");
    let stale_after = last_sync.after(cache).max(ticks_from);
    // The first tick strictly after the cache went stale.
    let first = ticks_from.after(
        stale_after
            .since(ticks_from)
            .floor_to(grid)
            .saturating_add(grid),
    );
    if first >= now {
        return last_sync;
    }
    // From then on every read is on the grid, so the next one is the first tick past it
    // plus the cache: a fixed period.
    let period = cache.floor_to(grid).saturating_add(grid);
    let reads_after_first = now.since(first).saturating_sub(SimDuration::from_ns(1));
    first.after(reads_after_first.floor_to(period))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at_ms(ms: u64) -> SimInstant {
        SimInstant::from_start(SimDuration::from_ms(ms))
    }

    /// The exact routine, tick by tick: what the closed form must give.
    fn by_ticks(last_sync: u64, from: u64, grid: u64, cache: u64, now: u64) -> u64 {
        let mut last = last_sync;
        let mut tick = from + grid;
        while tick < now {
            if last + cache < tick {
                last = tick;
            }
            tick += grid;
        }
        last
    }

    #[test]
    fn matches_the_routine_tick_by_tick() {
        for (last, from, grid, cache) in [
            (0, 0, 100, 1000),
            (37, 50, 100, 1000),
            (900, 950, 300, 1000),
            (0, 0, 1000, 1000),
            (10, 0, 7, 20),
        ] {
            for now in (from..from + 12_000).step_by(13) {
                assert_eq!(
                    last_skipped_read(
                        at_ms(last),
                        at_ms(from),
                        SimDuration::from_ms(grid),
                        SimDuration::from_ms(cache),
                        at_ms(now)
                    ),
                    at_ms(by_ticks(last, from, grid, cache, now)),
                    "last sync {last}, ticks from {from} every {grid}, cache {cache}, now {now}"
                );
            }
        }
    }

    #[test]
    fn no_read_while_the_cache_is_fresh() {
        let read = last_skipped_read(
            at_ms(4_000),
            at_ms(4_050),
            SimDuration::from_ms(100),
            SimDuration::from_secs(1),
            at_ms(5_000),
        );
        assert_eq!(read, at_ms(4_000));
    }
}
