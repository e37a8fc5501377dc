//! The async shell of torch's `DynamicRendezvousHandler` with the c10d backend: the state
//! holder (CAS on the encoded state, 1 s cache, sanitize on sync), the op executor loop,
//! `next_rendezvous`, the keep-alive timer, `num_nodes_waiting`, `is_closed`, `shutdown`.
//!
//! Every decision is the pure core's (`ops::decide`, `apply::apply`, `sanitize::sanitize`);
//! this file only moves state between them and the store, and sleeps.

use super::apply::apply;
use super::decoded_states::{DecodedStates, SharedState};
pub use super::error::RendezvousError;
use super::ops::{decide, Action, OpContext, OpKind};
use super::quiet_wait;
use super::sanitize::{drop_nodes, sanitize, HeartbeatReceipts};
use super::settings::{RendezvousFix, RendezvousSettings};
use super::skipped_beats;
use super::state::{nodes_at, NodeDesc, RendezvousState};
use crate::scenario::node::NodeIndex;
use crate::shared_list::SharedList;
use crate::sim_time::deadline_after_us;
use crate::store::cost::StoreCosts;
use crate::store::service::StoreClient;
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
pub const CACHE_US: i64 = 1_000_000;
/// `SYNC` waits this long before polling again (torch's `_delay(seconds=1)`).
pub const SYNC_DELAY_US: u64 = 1_000_000;
/// The first round's random start delay, up to 0.3 s, spreads the first joins.
const FIRST_ROUND_DELAY_US_MAX: u64 = 300_000;

/// The round this node joined: its rank and the participants in rank order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RendezvousInfo {
    pub round: u64,
    pub rank: u32,
    pub world_size: u32,
    /// The participants' nodes, index = rank; one list shared by the nodes of a world.
    pub participants: Arc<[NodeIndex]>,
    /// The rendezvous store's incarnation the round was agreed in: a restarted store starts
    /// a new rendezvous, whose round numbers start again.
    pub store_incarnation: u64,
    /// The bootstrap address (`MASTER_ADDR`/`MASTER_PORT`) the workers are given.
    pub master: MasterAddr,
}

/// torch's `RendezvousStoreInfo`: where the workers' process group meets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MasterAddr {
    /// A node address (`node-N`).
    pub addr: String,
    pub port: u16,
    /// Whether the agent at this address hosts the workers' store (TCPStore sharing);
    /// otherwise the workers' rank 0 hosts it.
    pub agent_hosted: bool,
}

impl std::fmt::Display for MasterAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.addr, self.port)
    }
}

/// The store keys rank 0 publishes its bootstrap address under, in the round's prefix.
const MASTER_ADDR_KEY: &str = "MASTER_ADDR";
const MASTER_PORT_KEY: &str = "MASTER_PORT";

/// What `next_rendezvous` keeps between rounds for the workers' bootstrap: the cached
/// address and the TCPStore server this agent hosts for its workers, once it hosts one.
#[derive(Default)]
struct Bootstrap {
    cached: Option<MasterAddr>,
    /// The port of the server this agent hosts, and its task.
    server: Option<(u16, crate::world::TaskHandle<()>)>,
}

impl Drop for Bootstrap {
    fn drop(&mut self) {
        // The server lives in the agent process and ends with it.
        if let Some((_, task)) = self.server.take() {
            task.abort();
        }
    }
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
    /// The run's decoded states, shared by every node of the run.
    decoded: Arc<DecodedStates>,
    token: Option<Value>,
    dirty: bool,
    last_sync_mono_us: Option<i64>,
    /// Events to record once the next write lands: a close or a heartbeat.
    pending_event: Option<EventKind>,
    /// With the opt-in fix `dead-participant-rejoin`: the round this node last joined and
    /// its participants (the list shared by the nodes that joined the same world).
    joined: Option<(u64, Arc<[NodeDesc]>)>,
    /// When this node saw each heartbeat stamp change (for the opt-in fix
    /// `monotonic-heartbeats`); empty without it.
    receipts: HeartbeatReceipts,
    /// Draws the waits after lost writes (`cas_backoff_max_seconds`), made at the first.
    backoff: Option<rand_chacha::ChaCha8Rng>,
}

/// torch's `has_set`: whether the bytes now stored are the bytes written. The server
/// answers a write that landed with the very value sent; otherwise a canonical encoding is
/// injective, so equal bytes are equal states, and comparing the states spares encoding a
/// write that lost. Bytes of different lengths differ, and both lengths are known without
/// encoding (the store counted them), so most lost writes need no comparison of states.
fn landed(stored: &Value, ours: &Value, synced: &SharedState) -> bool {
    if Value::same(stored, ours) {
        return true;
    }
    match ours.source::<RendezvousState>() {
        Some(state) if !is_null_sentinel(stored) => {
            stored.len() == ours.len() && *synced.state == *state
        }
        _ => stored == ours,
    }
}

/// Whether a stored value is torch's null sentinel. A written state never is, and reading
/// its bytes to find that out would encode it: every sync did, for every state it read.
fn is_null_sentinel(value: &Value) -> bool {
    value.source::<RendezvousState>().is_none() && value.bytes() == NULL_SENTINEL
}

/// One node's rendezvous handler.
pub struct RendezvousHandler {
    holder: Arc<Mutex<Holder>>,
    keep_alive: std::sync::Mutex<Option<KeepAlive>>,
    /// The agent process's one store client, shared with the holder.
    store: StoreClient,
    bootstrap: Mutex<Bootstrap>,
}

/// The running keep-alive timer: its task, and whether a keep-alive is in flight.
struct KeepAlive {
    task: crate::world::TaskHandle<()>,
    in_flight: Arc<std::sync::atomic::AtomicBool>,
    done: Arc<crate::world::wake::Wake>,
}

impl RendezvousHandler {
    /// Connects to the store and makes sure the state key exists, as the c10d backend's
    /// constructor does.
    pub async fn create(
        env: NodeEnv,
        settings: RendezvousSettings,
        store: StoreClient,
    ) -> Result<Self, RendezvousError> {
        if let Err(e) = settings.validate() {
            panic!("a rendezvous handler was given settings the scenario check refuses: {e}");
        }
        let key = settings.state_key();
        store
            .compare_set(&key, Value::from(&b""[..]), Value::from(NULL_SENTINEL))
            .await?;
        let node = NodeDesc::new(env.name.clone(), env.pid, 0);
        let decoded = env.shared::<DecodedStates>("rendezvous/decoded_states");
        let holder = Holder {
            decoded,
            env,
            node,
            settings,
            store: store.clone(),
            key,
            state: Arc::default(),
            token: None,
            dirty: false,
            last_sync_mono_us: None,
            pending_event: None,
            joined: None,
            receipts: HeartbeatReceipts::default(),
            backoff: None,
        };
        Ok(RendezvousHandler {
            holder: Arc::new(Mutex::new(holder)),
            keep_alive: std::sync::Mutex::new(None),
            store,
            bootstrap: Mutex::new(Bootstrap::default()),
        })
    }

    /// torch's `next_rendezvous()`: leave the old round, join the next, restart heartbeats.
    pub async fn next_rendezvous(&self) -> Result<RendezvousInfo, RendezvousError> {
        self.stop_heartbeats().await;
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
        let deadline = deadline_after_us(h.env.now_mono_us(), h.settings.join_timeout_us);
        h.run(OpKind::Exit, deadline, false).await?;
        assert!(
            !h.state.is_participant(&h.node),
            "the exit op finished with {} still a participant of round {}",
            h.node,
            h.state.round
        );
        h.run(OpKind::Join, deadline, true).await?;
        assert!(
            h.state.join_finished(&h.node),
            "the join op finished with {} not a participant of a complete round {} \
             (complete {}, participant {})",
            h.node,
            h.state.round,
            h.state.complete,
            h.state.is_participant(&h.node)
        );
        let (round, rank, world_size, participants) = h.state.world_of(&h.node, &h.settings);
        let participants = (h
            .env
            .shared::<SharedList<NodeIndex>>("rendezvous/world_nodes"))
        .intern(nodes_at(participants.iter().map(String::as_str))?);
        if h.settings.has_fix(RendezvousFix::DeadParticipantRejoin) {
            // The members this node was told of: those of the completed world with
            // `world-at-completion`, so one sanitize dropped before this read still counts.
            let members = h.state.world().keys().cloned().collect();
            let members = (h
                .env
                .shared::<SharedList<NodeDesc>>("rendezvous/joined_members"))
            .intern(members);
            h.joined = Some((h.state.round, members));
        }
        let env = h.env.clone();
        drop(h);
        self.start_heartbeats();
        let master = self.bootstrap_address(&env, round, rank).await?;
        Ok(RendezvousInfo {
            round,
            rank,
            world_size,
            participants,
            store_incarnation: self.store.incarnation().await.unwrap_or(0),
            master,
        })
    }

    /// The bootstrap address for this round, as torch 2.15's `next_rendezvous` gets it. With
    /// TCPStore sharing (the default) an agent builds it on its first rendezvous and keeps
    /// it, rebuilding only when it is rank 0 without a server of its own: a non-rank-0 agent
    /// keeps the address of its first round's rank 0, even after that node died. Without
    /// sharing every round's rank 0 publishes a fresh address. The fix
    /// `refresh-master-addr` rebuilds it every round.
    async fn bootstrap_address(
        &self,
        env: &NodeEnv,
        round: u64,
        rank: u32,
    ) -> Result<MasterAddr, RendezvousError> {
        let settings = self.holder.lock().await.settings.clone();
        let prefix = settings.round_store_prefix(round);
        if !env.scenario().agent.share_store {
            let port = env.free_port();
            return self.build_master(env, &prefix, rank, port, false).await;
        }
        let mut bootstrap = self.bootstrap.lock().await;
        let refresh = settings.has_fix(RendezvousFix::RefreshMasterAddr);
        if bootstrap.cached.is_none() || (rank == 0 && bootstrap.server.is_none()) || refresh {
            let mut port = 0;
            if rank == 0 {
                if bootstrap.server.is_none() {
                    let port = env.free_port();
                    bootstrap.server = Some((port, env.serve_store(port)));
                    env.record(EventKind::WorkerStoreStarted { pid: env.pid, port });
                }
                let (server_port, _) = bootstrap
                    .server
                    .as_ref()
                    .expect("rank 0 started its server above");
                port = *server_port;
            }
            bootstrap.cached = Some(self.build_master(env, &prefix, rank, port, true).await?);
        }
        Ok(bootstrap.cached.clone().expect("built above"))
    }

    /// torch's `RendezvousStoreInfo.build`: rank 0 publishes its address and `port` in the
    /// round's keys; every rank reads them back (blocking gets, on the shared client).
    async fn build_master(
        &self,
        env: &NodeEnv,
        prefix: &str,
        rank: u32,
        port: u16,
        agent_hosted: bool,
    ) -> Result<MasterAddr, RendezvousError> {
        let addr_key = format!("{prefix}/{MASTER_ADDR_KEY}");
        let port_key = format!("{prefix}/{MASTER_PORT_KEY}");
        if rank == 0 {
            self.store
                .set(&addr_key, env.name.as_bytes().to_vec())
                .await?;
            self.store
                .set(&port_key, port.to_string().into_bytes())
                .await?;
        }
        let addr = self.store.get(&addr_key).await?;
        let port = self.store.get(&port_key).await?;
        let text = |v: &Value| String::from_utf8_lossy(v.bytes()).into_owned();
        Ok(MasterAddr {
            addr: text(&addr),
            port: text(&port)
                .parse()
                .map_err(|_| RendezvousError::State(format!("MASTER_PORT is {}", text(&port))))?,
            agent_hosted,
        })
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

    /// The nodes on the wait list, from a (possibly cached) sync. Not part of torch's
    /// handler: the agent fix `count-rejoined-failures` reads it.
    pub async fn waiting_nodes(&self) -> Result<Vec<NodeIndex>, RendezvousError> {
        let mut h = self.holder.lock().await;
        h.sync().await?;
        nodes_at(h.state.wait_list.iter().map(|n| &*n.addr))
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
        let deadline = deadline_after_us(h.env.now_mono_us(), h.settings.close_timeout_us);
        h.run(OpKind::Close, deadline, false).await
    }

    /// torch's `shutdown()`: stops heartbeats and closes the rendezvous; false on failure.
    pub async fn shutdown(&self) -> bool {
        self.stop_heartbeats().await;
        self.set_closed().await.is_ok()
    }

    /// Stops the keep-alive timer (at the start of `next_rendezvous` and at shutdown). As
    /// `_PeriodicTimer.cancel()` joins its thread, a keep-alive in flight (which may be
    /// waiting behind a blocking call on the shared store client) is waited for.
    pub async fn stop_heartbeats(&self) {
        let Some(timer) = self.keep_alive.lock().expect("timer lock").take() else {
            return;
        };
        if timer.in_flight.load(std::sync::atomic::Ordering::Relaxed) {
            timer.done.notified().await;
        }
        timer.task.abort();
    }

    /// Starts the keep-alive timer: its first tick comes one interval from now.
    fn start_heartbeats(&self) {
        let holder = self.holder.clone();
        let in_flight = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let done = Arc::new(crate::world::wake::Wake::default());
        let (flag, finished) = (in_flight.clone(), done.clone());
        let task = spawn(async move {
            loop {
                let (interval_us, env, writer) = {
                    let h = holder.lock().await;
                    let writer = skipped_beats::writer_id(&h.node);
                    (h.settings.keep_alive_interval_us, h.env.clone(), writer)
                };
                time::sleep_us(interval_us).await;
                skipped_beats::skip_through_window(&env, writer, interval_us).await;
                flag.store(true, std::sync::atomic::Ordering::Relaxed);
                finished.clear();
                let mut h = holder.lock().await;
                let deadline =
                    deadline_after_us(h.env.now_mono_us(), h.settings.heartbeat_timeout_us);
                // torch logs a failed keep-alive and tries again at the next tick.
                let _ = h.run(OpKind::KeepAlive, deadline, false).await;
                // The sync may have changed the state the agent's monitor reads from cache.
                h.env.monitor_wake().notify();
                drop(h);
                flag.store(false, std::sync::atomic::Ordering::Relaxed);
                finished.notify();
            }
        });
        let timer = KeepAlive {
            task,
            in_flight,
            done,
        };
        if let Some(old) = self.keep_alive.lock().expect("timer lock").replace(timer) {
            old.task.abort();
        }
    }
}

impl Drop for RendezvousHandler {
    fn drop(&mut self) {
        if let Some(timer) = self.keep_alive.lock().expect("timer lock").take() {
            timer.task.abort();
        }
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
            if self.sync().await? == Some(false) {
                self.back_off().await;
            }
            let now_utc_us = self.env.now_utc_us();
            let now_mono_us = self.env.now_mono_us();
            let ctx = OpContext {
                node: &self.node,
                state: &self.state,
                settings: &self.settings,
            };
            let decided = decide(op, &ctx, now_utc_us, now_mono_us, deadline_mono_us);
            let Ok(action) = decided else {
                self.env.set_quiet(false, 0);
                return decided
                    .map(|_| ())
                    .map_err(|e| RendezvousError::GracefulExit(e.run_id));
            };
            if op == OpKind::Join
                && self
                    .wait_slept_through_window(action, deadline_mono_us)
                    .await
            {
                continue;
            }
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
                    assert!(action.mutates_state(), "{action} reached the write path");
                    let (round, complete) = (self.state.round, self.state.complete);
                    apply(
                        action,
                        Arc::make_mut(&mut self.state),
                        &self.node,
                        &self.settings,
                        now_utc_us,
                    );
                    if (self.state.round, self.state.complete) != (round, complete) {
                        // A round completed or reopened: check the whole state, O(nodes).
                        self.state.assert_well_formed(&self.settings);
                    }
                    if action == Action::RemoveFromRedundancyList && update_deadline {
                        // A redundant node may now take part: it gets a fresh join timeout.
                        deadline_mono_us =
                            deadline_after_us(now_mono_us, self.settings.join_timeout_us);
                    }
                    self.pending_event = match action {
                        Action::MarkRendezvousClosed => Some(EventKind::RendezvousClosed {
                            pid: self.env.pid,
                            round: self.state.round,
                            // Filled in when the write lands (the client is bound by then).
                            store_incarnation: 0,
                        }),
                        Action::KeepAlive => Some(EventKind::Heartbeat { pid: self.env.pid }),
                        _ => None,
                    };
                    self.dirty = true;
                }
            }
        }
    }

    /// A join's wait: a routine step sleeps through a quiet window when one is open (true);
    /// any other step of the join announces that this process acts.
    async fn wait_slept_through_window(&self, action: Action, deadline_mono_us: i64) -> bool {
        if !quiet_wait::is_routine(OpKind::Join, action, &self.state) {
            self.env.set_quiet(false, 0);
            return false;
        }
        let (env, node, settings) = (&self.env, &self.node, &self.settings);
        let outcome =
            quiet_wait::wait(env, node, settings, &self.state, action, deadline_mono_us).await;
        outcome == quiet_wait::WaitOutcome::Slept
    }

    /// torch's backoff after a write that lost (`cas_backoff_max_seconds`; off by default).
    async fn back_off(&mut self) {
        let max_us = self.settings.cas_backoff_max_us;
        if max_us == 0 {
            return;
        }
        let env = &self.env;
        let rng = self.backoff.get_or_insert_with(|| env.rng("cas-backoff"));
        if let Some(delay_us) = crate::rendezvous::backoff::delay_after_lost_write_us(max_us, rng) {
            time::sleep_us(delay_us).await;
        }
    }

    /// torch's `_BackendRendezvousStateHolder.sync`: write if dirty (CAS on the token), else
    /// read unless the cache is fresh; then sanitize. Returns whether a write landed.
    async fn sync(&mut self) -> Result<Option<bool>, RendezvousError> {
        let Some((bits, written)) = self.write_or_read().await? else {
            return Ok(None);
        };
        let synced = if !is_null_sentinel(&bits) {
            let synced = self
                .decoded
                .decode(&bits)
                .map_err(|e| RendezvousError::State(e.to_string()))?;
            self.token = Some(bits.clone());
            synced
        } else {
            self.token = None;
            SharedState::new(Arc::default())
        };
        let has_set = written.map(|ours| landed(&bits, &ours, &synced));
        if has_set == Some(true) {
            if let Some(mut event) = self.pending_event.take() {
                if let EventKind::RendezvousClosed {
                    store_incarnation, ..
                } = &mut event
                {
                    *store_incarnation = self.store.incarnation().await.unwrap_or(0);
                }
                self.env.record(event);
            }
        } else if has_set == Some(false) {
            self.pending_event = None;
        }
        self.dirty = false;
        self.last_sync_mono_us = Some(self.env.now_mono_us());
        let now_utc_us = self.env.now_utc_us();
        self.state = synced.state.clone();
        skipped_beats::apply(&self.env, &mut self.state, &synced);
        if self.settings.has_fix(RendezvousFix::MonotonicHeartbeats) {
            let now_mono_us = self.env.now_mono_us();
            self.receipts.observe(&self.state, now_mono_us);
            let dead = self.receipts.expired(&self.settings, now_mono_us);
            if !dead.is_empty() {
                drop_nodes(Arc::make_mut(&mut self.state), &self.settings, &dead);
                self.state.assert_well_formed(&self.settings);
            }
        } else if synced.may_expire(&self.settings, now_utc_us) {
            let dead = sanitize(Arc::make_mut(&mut self.state), &self.settings, now_utc_us);
            if !dead.is_empty() {
                // A node died: rare, so the whole state is checked, O(nodes).
                self.state.assert_well_formed(&self.settings);
            }
        }
        Ok(has_set)
    }

    /// The exchange with the store: a compare-and-set of this node's state when dirty, else
    /// a read, unless the last sync is under a second old. Returns the value now stored, and
    /// the value written, if any. The write is lazy: its bytes are made only if it lands.
    async fn write_or_read(&mut self) -> Result<Option<(Value, Option<Value>)>, RendezvousError> {
        let costs = StoreCosts::scaled(self.env.scenario().cluster.store_cost_scale);
        if self.dirty {
            // The state was copied from the token's (the state last read) and changed a
            // little: its length is counted from the token's by what changed.
            let ours = match &self.token {
                Some(token) => Value::lazy_from(Arc::clone(&self.state), token),
                None => Value::lazy(Arc::clone(&self.state)),
            };
            let expected = self
                .token
                .clone()
                .unwrap_or_else(|| Value::from(NULL_SENTINEL));
            // torch pickles and base64-encodes the state before the write, and decodes the
            // state it gets back: CPU time that grows with the nodes.
            time::spend_cpu_ns(costs.state_encode_ns(ours.len())).await;
            let stored = self
                .store
                .compare_set(&self.key, expected, ours.clone())
                .await?;
            time::spend_cpu_ns(costs.state_decode_ns(stored.len())).await;
            return Ok(Some((stored, Some(ours))));
        }
        if let Some(last) = self.last_sync_mono_us {
            if last >= (self.env.now_mono_us() - CACHE_US).max(0) {
                return Ok(None);
            }
        }
        let stored = self.store.get(&self.key).await?;
        time::spend_cpu_ns(costs.state_decode_ns(stored.len())).await;
        Ok(Some((stored, None)))
    }

    /// With `dead-participant-rejoin`: how many members of the round this node joined are
    /// gone from the (sanitized) state while that round is still current. Always 0 without
    /// the fix, as in torch.
    fn dead_round_members(&self) -> usize {
        if !self.settings.has_fix(RendezvousFix::DeadParticipantRejoin) {
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
}
