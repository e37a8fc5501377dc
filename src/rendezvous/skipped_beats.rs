//! Keep-alives skipped in a quiet window (`world::quiet`): the writer's side (the loop
//! sleeps through the window on its grid) and the reader's (each stamp is at least the
//! writer's last skipped one, as if every keep-alive had landed).

use super::decoded_states::SharedState;
use super::state::{NodeDesc, RendezvousState};
use crate::sim_time::SimDuration;
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
