//! The async shell of torch's `DynamicRendezvousHandler` with the c10d backend: the state
//! holder (CAS on the encoded state, 1 s cache, sanitize on sync), the op executor loop,
//! `next_rendezvous`, the keep-alive timer, `num_nodes_waiting`, `is_closed`, `shutdown`.
//!
//! Every decision is the pure core's (`ops::decide`, `apply::apply`, `sanitize::sanitize`);
//! this file only moves state between them and the store, and sleeps.

use super::apply::apply;
use super::ops::{decide, Action, OpContext, OpKind};
use super::sanitize::{drop_nodes, sanitize, HeartbeatReceipts};
use super::settings::{RendezvousSettings, FIX_DEAD_PARTICIPANT_REJOIN, FIX_MONOTONIC_HEARTBEATS};
use super::shared::{self, SharedState};
use super::state::{NodeDesc, RendezvousState};
use crate::store::service::{StoreClient, StoreError, READ_TIMEOUT_US};
use crate::store::Value;
use crate::trace::EventKind;
use crate::world::{spawn, time, NodeEnv};
use futures::lock::Mutex;
use rand::Rng;
use std::sync::Arc;

/// What the c10d backend stores under the state key before anyone wrote a state
/// (torch's null sentinel, base64 of "canimadam").
const NULL_SENTINEL: &[u8] = b"Y2FuaW1hZGFt";
/// The state holder serves a cached state for this long (torch's `cache_duration`).
const CACHE_US: i64 = 1_000_000;
/// `SYNC` waits this long before polling again (torch's `_delay(seconds=1)`).
const SYNC_DELAY_US: u64 = 1_000_000;
/// The first round's random start delay, up to 0.3 s, spreads the first joins.
const FIRST_ROUND_DELAY_US_MAX: u64 = 300_000;

/// Why `next_rendezvous` (or another handler call) failed, as torch's exceptions.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RendezvousError {
    #[error("the rendezvous '{0}' is closed")]
    Closed(String),
    #[error("the rendezvous '{0}' timed out")]
    Timeout(String),
    #[error("the rendezvous '{0}' is closed, terminating pending rendezvous")]
    GracefulExit(String),
    #[error("the connection to the C10d store has failed: {0}")]
    Connection(String),
    #[error("the rendezvous state is corrupt: {0}")]
    State(String),
}

impl RendezvousError {
    /// A short name for the trace.
    pub fn kind(&self) -> &'static str {
        match self {
            RendezvousError::Closed(_) => "closed",
            RendezvousError::Timeout(_) => "timeout",
            RendezvousError::GracefulExit(_) => "graceful_exit",
            RendezvousError::Connection(_) => "store_unreachable",
            RendezvousError::State(_) => "state_error",
        }
    }
}

impl From<StoreError> for RendezvousError {
    fn from(e: StoreError) -> Self {
        RendezvousError::Connection(e.to_string())
    }
}

/// The round this node joined: its rank and the participants in rank order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RendezvousInfo {
    pub round: u64,
    pub rank: u32,
    pub world_size: u32,
    /// Node addresses (`node-N`), index = rank.
    pub participants: Vec<String>,
}

/// The state holder and its store client: torch's `_BackendRendezvousStateHolder`.
struct Holder {
    env: NodeEnv,
    node: NodeDesc,
    settings: RendezvousSettings,
    store: StoreClient,
    key: String,
    /// The synced state, shared with every node that read the same bytes; copied on write.
    state: Arc<RendezvousState>,
    token: Option<Value>,
    dirty: bool,
    last_sync_mono_us: Option<i64>,
    /// Events to record once the next write lands: a close or a heartbeat.
    pending_event: Option<EventKind>,
    /// The round this node last joined and its participants (for the opt-in fix
    /// `dead-participant-rejoin`).
    joined: Option<(u64, Vec<NodeDesc>)>,
    /// When this node saw each heartbeat stamp change (for the opt-in fix
    /// `monotonic-heartbeats`); empty without it.
    receipts: HeartbeatReceipts,
}

/// torch's `has_set`: whether the bytes now stored are the bytes written. The server
/// answers a write that landed with the very value sent; otherwise a canonical encoding is
/// injective, so equal bytes are equal states, and comparing the states spares encoding a
/// write that lost.
fn landed(stored: &Value, ours: &Value, synced: &SharedState) -> bool {
    if Value::same(stored, ours) {
        return true;
    }
    match ours.source::<RendezvousState>() {
        Some(state) if stored.bytes() != NULL_SENTINEL => *synced.state == *state,
        _ => stored == ours,
    }
}

/// One node's rendezvous handler.
pub struct RendezvousHandler {
    holder: Arc<Mutex<Holder>>,
    keep_alive: std::sync::Mutex<Option<crate::world::TaskHandle<()>>>,
}

impl RendezvousHandler {
    /// Connects to the store and makes sure the state key exists, as the c10d backend's
    /// constructor does.
    pub async fn create(
        env: NodeEnv,
        settings: RendezvousSettings,
    ) -> Result<Self, RendezvousError> {
        let mut store = StoreClient::connect(env.store_addr(), READ_TIMEOUT_US).await?;
        let key = settings.state_key();
        store
            .compare_set(&key, Value::from(&b""[..]), Value::from(NULL_SENTINEL))
            .await?;
        let node = NodeDesc::new(env.name.clone(), env.pid, 0);
        let holder = Holder {
            env,
            node,
            settings,
            store,
            key,
            state: Arc::default(),
            token: None,
            dirty: false,
            last_sync_mono_us: None,
            pending_event: None,
            joined: None,
            receipts: HeartbeatReceipts::default(),
        };
        Ok(RendezvousHandler {
            holder: Arc::new(Mutex::new(holder)),
            keep_alive: std::sync::Mutex::new(None),
        })
    }

    /// torch's `next_rendezvous()`: leave the old round, join the next, restart heartbeats.
    pub async fn next_rendezvous(&self) -> Result<RendezvousInfo, RendezvousError> {
        self.stop_heartbeats();
        let mut h = self.holder.lock().await;
        h.env
            .record(EventKind::RendezvousJoining { pid: h.env.pid });
        if h.state.round == 0 {
            let delay_us = h
                .env
                .rng("first-round-delay")
                .gen_range(0..=FIRST_ROUND_DELAY_US_MAX);
            time::sleep_us(delay_us).await;
        }
        let deadline = h.env.now_mono_us() + h.settings.join_timeout_us as i64;
        h.run(OpKind::Exit, deadline, false).await?;
        h.run(OpKind::Join, deadline, true).await?;
        let info = h.world();
        h.joined = Some((
            h.state.round,
            h.state.participants.keys().cloned().collect(),
        ));
        drop(h);
        self.start_heartbeats();
        Ok(info)
    }

    /// torch's `num_nodes_waiting()`: nodes on the wait list, from a (possibly cached) sync.
    pub async fn num_nodes_waiting(&self) -> Result<usize, RendezvousError> {
        let mut h = self.holder.lock().await;
        h.sync().await?;
        Ok(h.state.num_nodes_waiting() + h.dead_round_members())
    }

    /// The monotonic time until which the cached state is served without a read: a
    /// `num_nodes_waiting()` before then asks the store nothing. `None` before any sync, and
    /// while an op holds the state (it may sync at any moment; the caller must not wait).
    pub fn cache_fresh_until_mono_us(&self) -> Option<i64> {
        self.holder
            .try_lock()?
            .last_sync_mono_us
            .map(|last| last + CACHE_US)
    }

    /// The addresses of the nodes on the wait list, from a (possibly cached) sync. Not part
    /// of torch's handler: the agent fix `count-rejoined-failures` reads it.
    pub async fn waiting_addrs(&self) -> Result<Vec<String>, RendezvousError> {
        let mut h = self.holder.lock().await;
        h.sync().await?;
        Ok(h.state
            .wait_list
            .iter()
            .map(|n| n.addr.to_string())
            .collect())
    }

    /// torch's `is_closed()`.
    pub async fn is_closed(&self) -> Result<bool, RendezvousError> {
        let mut h = self.holder.lock().await;
        h.sync().await?;
        Ok(h.state.closed)
    }

    /// torch's `set_closed()`: runs the close op with the close timeout.
    pub async fn set_closed(&self) -> Result<(), RendezvousError> {
        let mut h = self.holder.lock().await;
        let deadline = h.env.now_mono_us() + h.settings.close_timeout_us as i64;
        h.run(OpKind::Close, deadline, false).await
    }

    /// torch's `shutdown()`: stops heartbeats and closes the rendezvous; false on failure.
    pub async fn shutdown(&self) -> bool {
        self.stop_heartbeats();
        self.set_closed().await.is_ok()
    }

    /// Stops the keep-alive timer (at the start of `next_rendezvous` and at shutdown).
    pub fn stop_heartbeats(&self) {
        if let Some(task) = self.keep_alive.lock().expect("timer lock").take() {
            task.abort();
        }
    }

    /// Starts the keep-alive timer: its first tick comes one interval from now.
    fn start_heartbeats(&self) {
        let holder = self.holder.clone();
        let task = spawn(async move {
            loop {
                let interval_us = holder.lock().await.settings.keep_alive_interval_us;
                time::sleep_us(interval_us).await;
                let mut h = holder.lock().await;
                let deadline = h.env.now_mono_us() + h.settings.heartbeat_timeout_us as i64;
                // torch logs a failed keep-alive and tries again at the next tick.
                let _ = h.run(OpKind::KeepAlive, deadline, false).await;
                // The sync may have changed the state the agent's monitor reads from cache.
                h.env.monitor_wake().notify();
            }
        });
        if let Some(old) = self.keep_alive.lock().expect("timer lock").replace(task) {
            old.abort();
        }
    }
}

impl Drop for RendezvousHandler {
    fn drop(&mut self) {
        self.stop_heartbeats();
    }
}

impl Holder {
    /// torch's `_DistributedRendezvousOpExecutor.run`: sync, decide, apply, until FINISH.
    async fn run(
        &mut self,
        op: OpKind,
        mut deadline_mono_us: i64,
        update_deadline: bool,
    ) -> Result<(), RendezvousError> {
        loop {
            self.sync().await?;
            let now_utc_us = self.env.now_utc_us();
            let now_mono_us = self.env.now_mono_us();
            let ctx = OpContext {
                node: &self.node,
                state: &self.state,
                settings: &self.settings,
            };
            let action = decide(op, &ctx, now_utc_us, now_mono_us, deadline_mono_us)
                .map_err(|e| RendezvousError::GracefulExit(e.run_id))?;
            match action {
                Action::Finish => return Ok(()),
                Action::ErrorClosed => {
                    return Err(RendezvousError::Closed(self.settings.run_id.clone()))
                }
                Action::ErrorTimeout => {
                    return Err(RendezvousError::Timeout(self.settings.run_id.clone()))
                }
                Action::Sync => time::sleep_us(SYNC_DELAY_US).await,
                _ => {
                    apply(
                        action,
                        Arc::make_mut(&mut self.state),
                        &self.node,
                        &self.settings,
                        now_utc_us,
                    );
                    if action == Action::RemoveFromRedundancyList && update_deadline {
                        // A redundant node may now take part: it gets a fresh join timeout.
                        deadline_mono_us = now_mono_us + self.settings.join_timeout_us as i64;
                    }
                    self.pending_event = match action {
                        Action::MarkRendezvousClosed => Some(EventKind::RendezvousClosed {
                            pid: self.env.pid,
                            round: self.state.round,
                        }),
                        Action::KeepAlive => Some(EventKind::Heartbeat { pid: self.env.pid }),
                        _ => None,
                    };
                    self.dirty = true;
                }
            }
        }
    }

    /// torch's `_BackendRendezvousStateHolder.sync`: write if dirty (CAS on the token), else
    /// read unless the cache is fresh; then sanitize. Returns whether a write landed.
    async fn sync(&mut self) -> Result<Option<bool>, RendezvousError> {
        let Some((bits, written)) = self.write_or_read().await? else {
            return Ok(None);
        };
        let synced = if *bits != *NULL_SENTINEL {
            let synced =
                shared::decode(&bits).map_err(|e| RendezvousError::State(e.to_string()))?;
            self.token = Some(bits.clone());
            synced
        } else {
            self.token = None;
            SharedState::new(Arc::default())
        };
        let has_set = written.map(|ours| landed(&bits, &ours, &synced));
        if has_set == Some(true) {
            if let Some(event) = self.pending_event.take() {
                self.env.record(event);
            }
        } else if has_set == Some(false) {
            self.pending_event = None;
        }
        self.dirty = false;
        self.last_sync_mono_us = Some(self.env.now_mono_us());
        let now_utc_us = self.env.now_utc_us();
        self.state = synced.state.clone();
        if self.settings.has_fix(FIX_MONOTONIC_HEARTBEATS) {
            let now_mono_us = self.env.now_mono_us();
            self.receipts.observe(&self.state, now_mono_us);
            let dead = self.receipts.expired(&self.settings, now_mono_us);
            if !dead.is_empty() {
                drop_nodes(Arc::make_mut(&mut self.state), &self.settings, &dead);
            }
        } else if synced.may_expire(&self.settings, now_utc_us) {
            sanitize(Arc::make_mut(&mut self.state), &self.settings, now_utc_us);
        }
        Ok(has_set)
    }

    /// The exchange with the store: a compare-and-set of this node's state when dirty, else
    /// a read, unless the last sync is under a second old. Returns the value now stored, and
    /// the value written, if any. The write is lazy: its bytes are made only if it lands.
    async fn write_or_read(&mut self) -> Result<Option<(Value, Option<Value>)>, RendezvousError> {
        if self.dirty {
            let ours = Value::lazy(Arc::clone(&self.state));
            let expected = self
                .token
                .clone()
                .unwrap_or_else(|| Value::from(NULL_SENTINEL));
            let stored = self
                .store
                .compare_set(&self.key, expected, ours.clone())
                .await?;
            return Ok(Some((stored, Some(ours))));
        }
        if let Some(last) = self.last_sync_mono_us {
            if last >= (self.env.now_mono_us() - CACHE_US).max(0) {
                return Ok(None);
            }
        }
        Ok(Some((self.store.get(&self.key).await?, None)))
    }

    /// With `dead-participant-rejoin`: how many members of the round this node joined are
    /// gone from the (sanitized) state while that round is still current. Always 0 without
    /// the fix, as in torch.
    fn dead_round_members(&self) -> usize {
        if !self.settings.has_fix(FIX_DEAD_PARTICIPANT_REJOIN) {
            return 0;
        }
        match &self.joined {
            Some((round, members)) if *round == self.state.round => members
                .iter()
                .filter(|m| !self.state.participants.contains_key(*m))
                .count(),
            _ => 0,
        }
    }

    /// torch's `_get_world`: this node's rank and the world, read from the synced state.
    fn world(&self) -> RendezvousInfo {
        let rank = self
            .state
            .participants
            .get(&self.node)
            .copied()
            .expect("a finished join is a participant");
        let mut by_rank: Vec<(u32, &NodeDesc)> = self
            .state
            .participants
            .iter()
            .map(|(n, r)| (*r, n))
            .collect();
        by_rank.sort();
        RendezvousInfo {
            round: self.state.round,
            rank,
            world_size: self.state.participants.len() as u32,
            participants: by_rank
                .into_iter()
                .map(|(_, n)| n.addr.to_string())
                .collect(),
        }
    }
}
