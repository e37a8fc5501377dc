//! What an agent process sees of the world: its identity, its clocks, the store's address,
//! signals (graceful stop, crashed workers), the collective fabric and checkpoint storage.

use super::quiet::Disturbance;
use super::state::{Checkpoint, Process, World, MONO_BASE_US_PER_NODE, UTC_EPOCH_US};
use super::{rng, spawn, time};
use crate::scenario::model::{
    node_name, NodeIndex, Relaunch, Scenario, StoreHost, RELAUNCH_DELAY_CAP,
};
use crate::sim_time::{clock_reading_us, SimDuration, SimInstant};
use crate::trace::{AgentState, EventKind, TraceNode};
use futures::channel::oneshot;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::net::SocketAddr;
use std::sync::Arc;

/// One agent process's handle on the world.
#[derive(Clone)]
pub struct NodeEnv {
    world: Arc<World>,
    pub index: u32,
    pub name: String,
    pub pid: u32,
}

/// One GPU of a node at one moment (see [`NodeEnv::gpus_now`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpuNow {
    /// Lost to a `gpu_fail`.
    pub failed: bool,
    /// The product of the `gpu_slow` windows in force (1.0 without one).
    pub slowdown: f64,
}

/// The body of every node's init: start an agent process if the node is meant to run one,
/// and again after each exit that `agent.relaunch` relaunches.
pub(super) async fn process_main(world: Arc<World>, index: u32) {
    while let Some(exit) = run_process(&world, index).await {
        let Some(delay) = relaunch_delay(&world, index, exit) else {
            break;
        };
        time::sleep(delay).await;
    }
    // madsim ends every task of a node whose init returns. Workers orphaned by a signal
    // that ended their agent outlive it: the node stays up for them until the run ends
    // (they keep it going while they train) or the node is killed.
    let orphans = world
        .state
        .lock()
        .expect("world lock")
        .workers
        .runs_on(index);
    if orphans {
        std::future::pending::<()>().await;
    }
}

/// Whether torchrun is relaunched on `index` after its agent process exited with `exit`,
/// and after how long; a relaunch is pending from now, so the run does not end meanwhile.
fn relaunch_delay(world: &World, index: u32, exit: AgentState) -> Option<SimDuration> {
    let agent = &world.scenario.agent;
    let relaunched = match agent.relaunch {
        Relaunch::Never => false,
        Relaunch::OnFailure => exit != AgentState::Succeeded,
        Relaunch::Always => true,
    };
    let mut st = world.state.lock().expect("world lock");
    let slot = &mut st.nodes[index as usize];
    if !relaunched || slot.relaunches >= agent.relaunch_max {
        return None;
    }
    // The kubelet's back-off: the delay doubles with each relaunch, up to its cap.
    let doublings = slot.relaunches.min(16);
    slot.relaunches += 1;
    slot.launch_pending(index);
    let delay = agent.relaunch_delay.saturating_mul(1 << doublings);
    Some(delay.min(RELAUNCH_DELAY_CAP))
}

/// Notes the end of process `pid` on node `index`; returns the store it hosted, if any.
fn process_ended(
    world: &World,
    index: u32,
    pid: u32,
    state: AgentState,
) -> Option<super::TaskHandle<()>> {
    let mut st = world.state.lock().expect("world lock");
    if state == AgentState::Succeeded {
        st.any_succeeded = true;
    }
    // Its heartbeat stops: the moments until the others see it expire are simulated.
    st.quiet.disturb(time::now_whole_us(), Disturbance::Loss);
    let slot = &mut st.nodes[index as usize];
    let process = slot.exit(index, pid);
    // An agent stopped by a `stop` (SIGTERM) or ended by a signal it has no handler for
    // was ended from outside, as a killed one.
    slot.down = process
        .as_ref()
        .is_some_and(|p| p.stop_requested || p.fatal_signal.is_some());
    process.and_then(|p| p.store_task)
}

/// One agent process on node `index`, from its launch to its exit; `None` when the node
/// runs none (a spare before its start).
async fn run_process(world: &Arc<World>, index: u32) -> Option<AgentState> {
    let pid = {
        let mut st = world.state.lock().expect("world lock");
        if !st.nodes[index as usize].launch(index) {
            return None;
        }
        let pid = st.next_pid;
        st.next_pid = pid.checked_add(1).expect("pids run out past u32::MAX");
        st.nodes[index as usize].process = Some(Process {
            pid,
            stop_requested: false,
            stop_signal: None,
            fatal_signal: None,
            stop_waiters: Vec::new(),
            worker_crash: None,
            store_task: None,
            monitor_wake: Arc::default(),
            quiet: false,
        });
        // A new process acts at once: whoever slept through a quiet window wakes.
        st.quiet.disturb(time::now_whole_us(), Disturbance::Change);
        pid
    };
    let env = NodeEnv {
        world: world.clone(),
        index,
        name: node_name(index),
        pid,
    };
    env.end_orphans();
    env.record(EventKind::AgentStarted { pid });
    // Python starts and imports torch before torchrun does anything, the store it may host
    // included.
    let agent = &world.scenario.agent;
    env.process_start("agent-start", agent.start_time, agent.start_time_jitter)
        .await;
    if world.scenario.cluster.store == StoreHost::Node(index) {
        // TCPStore runs inside the host's agent process and dies with it.
        let task = spawn((world.programs.store)(world.store_addr, &world.scenario));
        env.record(EventKind::StoreStarted);
        if let Some(p) = world.state.lock().expect("world lock").nodes[index as usize]
            .process
            .as_mut()
        {
            p.store_task = Some(task);
        }
    }
    let exit = (world.programs.agent)(env.clone()).await;
    if let Some(task) = process_ended(world, index, pid, exit.state) {
        task.abort();
        env.record(EventKind::StoreDied {
            reason: "its host agent process exited".into(),
        });
    }
    env.record(EventKind::AgentExited {
        pid,
        state: exit.state,
        reason: exit.reason,
    });
    let _ = world.exits.unbounded_send(());
    Some(exit.state)
}

impl NodeEnv {
    pub(super) fn world(&self) -> &World {
        &self.world
    }

    pub fn scenario(&self) -> &Scenario {
        &self.world.scenario
    }

    /// This node, as the trace names it.
    pub fn trace_node(&self) -> TraceNode {
        TraceNode::node(self.index)
    }

    /// Records an event on this node at `at`, a moment already passed: a step settled in
    /// closed form. The trace puts it in time order when the run ends.
    pub fn record_at(&self, at: SimInstant, kind: EventKind) {
        self.world
            .recorder
            .record(at, Some(self.trace_node()), kind);
    }

    /// Records an event on this node at the current simulated time.
    pub fn record(&self, kind: EventKind) {
        self.world
            .recorder
            .record(time::now_whole_us(), Some(self.trace_node()), kind);
    }

    /// Records a step of this node's rendezvous handler in the run's story (outside the
    /// trace), with the lists `lists` makes if they fit the story's bound.
    pub fn record_rendezvous_step(
        &self,
        step: crate::trace::RendezvousStep,
        lists: impl FnOnce() -> crate::trace::story::RendezvousLists,
    ) {
        self.world.recorder.record_rendezvous_step(step, lists);
    }

    /// The node's wall clock (what `datetime.now(timezone.utc)` reads), skew included.
    pub fn now_utc_us(&self) -> i64 {
        let skew = self
            .world
            .state
            .lock()
            .expect("world lock")
            .skew_us
            .get(&self.index)
            .copied()
            .unwrap_or(0);
        clock_reading_us(UTC_EPOCH_US.saturating_add(skew), time::now())
    }

    /// The node's monotonic clock (what `time.monotonic()` reads).
    pub fn now_mono_us(&self) -> i64 {
        clock_reading_us(
            MONO_BASE_US_PER_NODE * (i64::from(self.index) + 1),
            time::now(),
        )
    }

    /// A random stream private to this process, derived from the run seed.
    pub fn rng(&self, purpose: &str) -> ChaCha8Rng {
        rng::stream(
            self.world.seed,
            &format!("{}/{}/{purpose}", self.name, self.pid),
        )
    }

    /// Waits while a process starts (Python, its imports): `start_time` plus a uniform draw
    /// below `jitter` (in whole microseconds) from this process's `purpose` stream. Sets no
    /// timer when both are zero, so scenarios without start times draw nothing and schedule
    /// nothing extra.
    pub async fn process_start(&self, purpose: &str, start_time: SimDuration, jitter: SimDuration) {
        let extra = if jitter.as_us() > 0 {
            SimDuration::from_us(self.rng(purpose).gen_range(0..jitter.as_us()))
        } else {
            SimDuration::ZERO
        };
        let start = start_time.saturating_add(extra);
        if !start.is_zero() {
            time::sleep(start).await;
        }
    }

    /// The run's seed, for draws every process must agree on (the dataset).
    pub fn run_seed(&self) -> u64 {
        self.world.seed
    }

    /// Where the c10d store listens.
    pub fn store_addr(&self) -> SocketAddr {
        self.world.store_addr
    }

    /// A port no other server of the run was given (torch's `get_free_port`).
    pub fn free_port(&self) -> u16 {
        self.world
            .state
            .lock()
            .expect("world lock")
            .take_free_port()
    }

    /// Starts a TCPStore server in this process on `port` of this node. It serves until the
    /// handle is aborted or the process dies.
    pub fn serve_store(&self, port: u16) -> super::TaskHandle<()> {
        let addr = SocketAddr::new(super::node_ip(self.index), port);
        let server = (self.world.programs.store)(addr, &self.world.scenario);
        spawn(server)
    }

    /// The socket address of the node named `addr` (`node-N`) at `port`; `None` for a name
    /// that is no node of the run.
    pub fn resolve(&self, addr: &str, port: u16) -> Option<SocketAddr> {
        let NodeIndex(index) = addr.parse().ok()?;
        (index < self.world.scenario.cluster.total_nodes())
            .then(|| SocketAddr::new(super::node_ip(index), port))
    }

    /// Waits until a graceful stop (SIGTERM) reaches this process.
    pub async fn stop_signal(&self) {
        let rx = {
            let mut st = self.world.state.lock().expect("world lock");
            let Some(p) = self.process_mut(&mut st) else {
                return;
            };
            if p.stop_requested || p.fatal_signal.is_some() {
                return;
            }
            let (tx, rx) = oneshot::channel();
            p.stop_waiters.push(tx);
            rx
        };
        let _ = rx.await;
    }

    /// A worker of this process crashed: `(local_rank, exit_code)`.
    pub fn worker_crash(&self) -> Option<(u32, i32)> {
        let mut st = self.world.state.lock().expect("world lock");
        self.process_mut(&mut st).and_then(|p| p.worker_crash)
    }

    /// The wake-up of this process's agent monitor: notified when a worker crash, a worker
    /// group's end or a rendezvous sync may have changed what the monitor's next tick sees.
    /// A process that is gone gets a wake nobody waits on.
    pub fn monitor_wake(&self) -> Arc<super::wake::Wake> {
        let mut st = self.world.state.lock().expect("world lock");
        self.process_mut(&mut st)
            .map(|p| Arc::clone(&p.monitor_wake))
            .unwrap_or_default()
    }

    /// Forgets a crash once the agent has restarted its workers.
    pub fn clear_worker_crash(&self) {
        let mut st = self.world.state.lock().expect("world lock");
        if let Some(p) = self.process_mut(&mut st) {
            p.worker_crash = None;
        }
    }

    pub(super) fn process_mut<'a>(
        &self,
        st: &'a mut super::state::WorldState,
    ) -> Option<&'a mut Process> {
        st.nodes[self.index as usize]
            .process
            .as_mut()
            .filter(|p| p.pid == self.pid)
    }

    /// The last checkpointed step on shared storage.
    pub fn checkpoint_step(&self) -> u64 {
        self.checkpoint().step
    }

    /// The last checkpoint on shared storage (all zero before the first).
    pub fn checkpoint(&self) -> Checkpoint {
        self.world.state.lock().expect("world lock").checkpoint
    }

    /// Whether a training script's signal handler asked for a checkpoint since the last
    /// look; looking takes the request.
    pub fn take_checkpoint_request(&self) -> bool {
        std::mem::take(
            &mut self
                .world
                .state
                .lock()
                .expect("world lock")
                .checkpoint_requested,
        )
    }

    /// The signal this process's agent caught to stop, when not SIGTERM.
    pub fn stop_signal_caught(&self) -> Option<crate::scenario::model::Signal> {
        let mut st = self.world.state.lock().expect("world lock");
        self.process_mut(&mut st).and_then(|p| p.stop_signal)
    }

    /// The signal without a handler in torchrun that ended this process, if one came.
    pub fn fatal_signal(&self) -> Option<crate::scenario::model::Signal> {
        let mut st = self.world.state.lock().expect("world lock");
        self.process_mut(&mut st).and_then(|p| p.fatal_signal)
    }

    /// Writes a checkpoint.
    pub fn write_checkpoint(&self, checkpoint: Checkpoint) {
        self.world.state.lock().expect("world lock").checkpoint = checkpoint;
    }

    /// The slowdown of this node's `gpu` now (1.0 when no `gpu_slow` is in force).
    pub fn gpu_slowdown(&self, gpu: u32) -> f64 {
        let now = time::now_whole_us();
        self.world
            .state
            .lock()
            .expect("world lock")
            .gpus
            .slowdown(self.index, gpu, now)
    }

    /// Whether this node's `gpu` was lost to a `gpu_fail`.
    pub fn gpu_failed(&self, gpu: u32) -> bool {
        self.world
            .state
            .lock()
            .expect("world lock")
            .gpus
            .is_failed(self.index, gpu)
    }

    /// Every GPU `0..gpus` of this node now, read under one lock at one instant: a step
    /// looks at each local rank's GPU, and one read per step is cheaper than two per rank.
    /// Same answers as [`Self::gpu_failed`] and [`Self::gpu_slowdown`] at this moment.
    pub fn gpus_now(&self, gpus: u32) -> Vec<GpuNow> {
        let now = time::now_whole_us();
        let mut st = self.world.state.lock().expect("world lock");
        (0..gpus)
            .map(|gpu| GpuNow {
                failed: st.gpus.is_failed(self.index, gpu),
                slowdown: st.gpus.slowdown(self.index, gpu, now),
            })
            .collect()
    }

    /// The network's mean one-way latency now, `latency` faults included.
    /// In whole microseconds, rounded down.
    pub fn latency_mean(&self) -> SimDuration {
        let (min, max) = self.world.state.lock().expect("world lock").latency;
        let (min, max) = (min.as_us(), max.as_us());
        SimDuration::from_us(min / 2 + max / 2 + (min % 2 + max % 2) / 2)
    }

    /// A value every process of the run shares (caches of pure results, the sample ledger),
    /// created on first use. The world only keeps it; the caller gives it meaning.
    pub fn shared<T: std::any::Any + Send + Sync + Default>(&self, key: &'static str) -> Arc<T> {
        self.world.shared_value(key)
    }
}
