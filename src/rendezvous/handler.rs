//! The async shell of torch's `DynamicRendezvousHandler` with the c10d backend:
//! `next_rendezvous`, the workers' bootstrap address, the keep-alive timer,
//! `num_nodes_waiting`, `is_closed`, `shutdown`. The state holder and the op executor loop
//! it drives (CAS on the encoded state, 1 s cache, sanitize on sync) are in `holder`.
//!
//! Every decision is the pure core's (`ops::decide`, `apply::apply`, `sanitize::sanitize`);
//! this file only moves state between them and the store, and sleeps.

use super::decoded_states::DecodedStates;
pub use super::error::RendezvousError;
use super::ops::OpKind;
use super::sanitize::HeartbeatReceipts;
use super::settings::{RendezvousFix, RendezvousSettings};
use super::skipped_beats;
use super::state::{nodes_at, NodeDesc};
use crate::scenario::node::NodeIndex;
use crate::shared_list::SharedList;
use crate::sim_time::{deadline_after, SimDuration, SimInstant};
use crate::store::cost::StoreCosts;
use crate::store::service::StoreClient;
use crate::store::Value;
use crate::trace::EventKind;
use crate::world::{spawn, time, NodeEnv};
use futures::lock::Mutex;
use rand::Rng;
use std::sync::Arc;

mod holder;
mod planned_write;
use holder::{Holder, NULL_SENTINEL};
pub use holder::{CACHE, KEEP_ALIVE_TAIL, SYNC_DELAY};

/// The first round's random start delay, up to 0.3 s, spreads the first joins.
const FIRST_ROUND_DELAY_MAX: SimDuration = SimDuration::from_ms(300);

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
        let costs = StoreCosts::scaled(env.scenario().cluster.store_cost_scale);
        let holder = Holder {
            decoded,
            costs,
            decoding: costs.state_decoding(),
            env,
            node_bytes: crate::rendezvous::encoded_len::node_bytes(&node),
            node,
            settings: Arc::new(settings),
            store: store.clone(),
            key,
            synced: Arc::default(),
            token: None,
            unwritten: None,
            last_sync_mono_us: None,
            skipped_read_mono_us: None,
            pending_event: None,
            pending_step: None,
            dropped_at_sync: Vec::new(),
            story_incarnation: None,
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
        if h.state().round == 0 {
            // Drawn in whole microseconds, as the seeded runs always drew it.
            let delay_us = h
                .env
                .rng("first-round-delay")
                .gen_range(0..=FIRST_ROUND_DELAY_MAX.as_us());
            time::sleep(SimDuration::from_us(delay_us)).await;
        }
        let deadline = deadline_after(h.env.now_mono_us(), h.settings.join_timeout);
        h.run(OpKind::Exit, deadline, false).await?;
        assert!(
            !h.state().is_participant(&h.node),
            "the exit op finished with {} still a participant of round {}",
            h.node,
            h.state().round
        );
        h.run(OpKind::Join, deadline, true).await?;
        assert!(
            h.state().join_finished(&h.node),
            "the join op finished with {} not a participant of a complete round {} \
             (complete {}, participant {})",
            h.node,
            h.state().round,
            h.state().complete,
            h.state().is_participant(&h.node)
        );
        let (round, rank, world_size, participants) = h.state().world_of(&h.node, &h.settings);
        let participants = (h
            .env
            .shared::<SharedList<NodeIndex>>("rendezvous/world_nodes"))
        .intern(nodes_at(participants.iter().map(String::as_str))?);
        if h.settings.has_fix(RendezvousFix::DeadParticipantRejoin) {
            // The members this node was told of: those of the completed world with
            // `world-at-completion`, so one sanitize dropped before this read still counts.
            let members = h.state().world().keys().cloned().collect();
            let members = (h
                .env
                .shared::<SharedList<NodeDesc>>("rendezvous/joined_members"))
            .intern(members);
            h.joined = Some((h.state().round, members));
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
        Ok(h.state().num_nodes_waiting() + h.dead_round_members())
    }

    /// The monotonic time until which the cached state is served without a read: a
    /// `num_nodes_waiting()` before then asks the store nothing. `None` before any sync, and
    /// while an op holds the state (it may sync at any moment; the caller must not wait).
    pub fn cache_fresh_until_mono_us(&self) -> Option<i64> {
        self.holder
            .try_lock()?
            .last_sync_mono_us
            .map(|last| deadline_after(last, CACHE))
    }

    /// Counts the cached reads of the state that the monitor, ticking every `grid` from
    /// `ticks_from`, skipped in the quiet window it just woke from, as if it had made them.
    /// Nothing while an op holds the state: its sync is under way.
    pub fn count_skipped_reads(&self, ticks_from: SimInstant, grid: SimDuration) {
        if let Some(mut h) = self.holder.try_lock() {
            h.count_skipped_reads(ticks_from, grid);
        }
    }

    /// The nodes on the wait list, from a (possibly cached) sync. Not part of torch's
    /// handler: the agent fix `count-rejoined-failures` reads it.
    pub async fn waiting_nodes(&self) -> Result<Vec<NodeIndex>, RendezvousError> {
        let mut h = self.holder.lock().await;
        h.sync().await?;
        nodes_at(h.state().wait_list.iter().map(|n| &*n.addr))
    }

    /// torch's `is_closed()`.
    pub async fn is_closed(&self) -> Result<bool, RendezvousError> {
        let mut h = self.holder.lock().await;
        h.sync().await?;
        Ok(h.state().closed)
    }

    /// torch's `set_closed()`: runs the close op with the close timeout.
    pub async fn set_closed(&self) -> Result<(), RendezvousError> {
        let mut h = self.holder.lock().await;
        let deadline = deadline_after(h.env.now_mono_us(), h.settings.close_timeout);
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

    /// Ends the keep-alive timer as the agent process exits: its thread is a daemon whose
    /// finalizer does not run at interpreter exit (`_PeriodicTimer`'s `atexit = False`), so a
    /// keep-alive in flight dies with the process instead of being waited for.
    pub fn abandon_heartbeats(&self) {
        if let Some(timer) = self.keep_alive.lock().expect("timer lock").take() {
            timer.task.abort();
        }
    }

    /// Starts the keep-alive timer: its first tick comes one interval from now.
    fn start_heartbeats(&self) {
        let holder = self.holder.clone();
        let in_flight = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let done = Arc::new(crate::world::wake::Wake::default());
        let (flag, finished) = (in_flight.clone(), done.clone());
        let task = spawn(async move {
            loop {
                let (interval, env, writer) = {
                    let h = holder.lock().await;
                    let writer = skipped_beats::writer_id(&h.node);
                    (h.settings.keep_alive_interval, h.env.clone(), writer)
                };
                time::sleep(interval).await;
                skipped_beats::skip_through_window(&env, writer, interval).await;
                flag.store(true, std::sync::atomic::Ordering::Relaxed);
                finished.clear();
                let mut h = holder.lock().await;
                let deadline = deadline_after(h.env.now_mono_us(), h.settings.heartbeat_timeout);
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
        self.abandon_heartbeats();
    }
}
