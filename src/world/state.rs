//! The world's bookkeeping: which process runs on which node, clocks, links, collectives,
//! checkpoint storage. Shared by the simulated tasks of one run (one thread, so a plain mutex).

use super::Programs;
use crate::scenario::model::{FaultKind, NodeIndex, Scenario};
use crate::sim_time::SimDuration;
use crate::trace::Recorder;
use futures::channel::{mpsc, oneshot};
use madsim::task::NodeId;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Mutex;

/// Wall clocks start at this UTC instant (2026-01-01T00:00:00Z) plus the node's skew, so
/// heartbeat times look like torch's.
pub const UTC_EPOCH_US: i64 = 1_767_225_600_000_000;
/// Monotonic clocks of different nodes start at different values, as after different boots.
pub const MONO_BASE_US_PER_NODE: i64 = 1_000_000_000;
/// The first pid handed out; later processes count up from it.
const PID_FIRST: u32 = 1000;
/// Free ports are handed out from here up (Linux's ephemeral range starts at 32768).
pub const PORT_FIRST: u16 = 32768;
/// ... and wrap around below this.
pub const PORT_LAST: u16 = 60999;
// A port a training script picks (`job.script_master_port`) is never handed out as free.
const _: () = assert!(crate::scenario::limits::SCRIPT_MASTER_PORT_MAX < PORT_FIRST);

/// Everything of one run the simulated tasks share.
pub struct World {
    pub scenario: Scenario,
    pub seed: u64,
    pub recorder: Recorder,
    pub store_addr: SocketAddr,
    pub programs: Programs,
    /// Tells the supervisor that a process ended (it then looks whether the run is over).
    pub exits: mpsc::UnboundedSender<()>,
    pub state: Mutex<WorldState>,
    /// Values the processes of the run share, by key (see `NodeEnv::shared`).
    pub shared: Mutex<BTreeMap<&'static str, std::sync::Arc<dyn std::any::Any + Send + Sync>>>,
    /// When the world changes by itself (see `segments::change_instants`).
    pub change_instants: Vec<crate::sim_time::SimInstant>,
    /// Whether steps may be settled in closed form (see `segments::segments_allowed`).
    pub segments_allowed: bool,
}

impl World {
    /// The run's shared value under `key`, created on first use (see `NodeEnv::shared`).
    pub fn shared_value<T: std::any::Any + Send + Sync + Default>(
        &self,
        key: &'static str,
    ) -> std::sync::Arc<T> {
        let mut slots = self.shared.lock().expect("shared lock");
        let slot = slots.entry(key).or_insert_with(|| {
            std::sync::Arc::new(T::default()) as std::sync::Arc<dyn std::any::Any + Send + Sync>
        });
        std::sync::Arc::clone(slot)
            .downcast::<T>()
            .unwrap_or_else(|_| panic!("shared slot {key} holds another type"))
    }
}

/// One node's slot.
pub struct NodeSlot {
    pub id: NodeId,
    /// False for a spare until its `start` fault.
    pub started: bool,
    /// The running agent process, if any.
    pub process: Option<Process>,
    /// A process is about to start (its init task has not run yet, or it waits out its
    /// relaunch delay).
    pub launching: bool,
    /// How many times torchrun was relaunched on this node (`agent.relaunch`).
    pub relaunches: u32,
    /// Its agent was ended from outside (killed, powered off, stopped) and no `start` or
    /// `restart` has brought the node back or replaced it since: a start still due may.
    pub down: bool,
    /// A `pause` fault froze the node's tasks and no `resume` or `start` has thawed them:
    /// its agent neither writes keep-alives nor acts, so its peers' view of it moves.
    pub paused: bool,
}

impl NodeSlot {
    pub fn new(id: NodeId, started: bool) -> Self {
        NodeSlot {
            id,
            started,
            process: None,
            launching: started,
            relaunches: 0,
            down: false,
            paused: false,
        }
    }

    /// A `start` or `restart` fault: a new agent process will start on node `node`, whose
    /// running process (if any) was killed first.
    pub fn launch_pending(&mut self, node: u32) {
        assert!(
            self.started && self.process.is_none(),
            "{} launches a new agent process (started: {}) while pid {:?} still runs there",
            NodeIndex(node),
            self.started,
            self.process.as_ref().map(|p| p.pid)
        );
        self.launching = true;
    }

    /// The node's init task runs on node `node`: the pending launch is over; returns
    /// whether an agent process starts (a spare's first boot starts none).
    pub fn launch(&mut self, node: u32) -> bool {
        // One agent process at a time, and a started node's launch was pending from its
        // boot or its `start`/`restart` fault until now.
        assert!(
            self.process.is_none() && (self.launching || !self.started),
            "{} launches an agent (launch pending: {}) while pid {:?} runs there",
            NodeIndex(node),
            self.launching,
            self.process.as_ref().map(|p| p.pid)
        );
        self.launching = false;
        self.started
    }

    /// Agent process `pid` on node `node` exited by itself; hands back its slot.
    pub fn exit(&mut self, node: u32, pid: u32) -> Option<Process> {
        let process = self.process.take();
        // A killed process never gets here: its task died with it.
        assert_eq!(
            process.as_ref().map(|p| p.pid),
            Some(pid),
            "pid {pid} of {} exits, but the node holds another process",
            NodeIndex(node)
        );
        process
    }
}

/// An agent process on a node.
pub struct Process {
    pub pid: u32,
    /// A graceful stop (SIGTERM) was asked for.
    pub stop_requested: bool,
    /// The signal the agent's handler caught, when a stop came with another than SIGTERM
    /// (a user signal in `agent.signals_to_handle`): the agent stops its workers with it.
    pub stop_signal: Option<crate::scenario::model::Signal>,
    /// A signal torchrun has no handler for arrived: its default action ends the process.
    pub fatal_signal: Option<crate::scenario::model::Signal>,
    /// Woken by a stop, a handled signal or a fatal one.
    pub stop_waiters: Vec<oneshot::Sender<()>>,
    /// A `worker_crash` hit this process's workers: (local_rank, exit_code).
    pub worker_crash: Option<(u32, i32)>,
    /// The store server task this process hosts.
    pub store_task: Option<madsim::task::JoinHandle<()>>,
    /// Wakes the agent's monitor when something its next tick would see has changed.
    pub monitor_wake: std::sync::Arc<super::wake::Wake>,
    /// The agent only repeats its steady routine (see `super::quiet`).
    pub quiet: bool,
}

/// A training checkpoint on shared storage: the global step and where in the data the job
/// was (the world stores it; the job decides what it means).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Checkpoint {
    pub step: u64,
    pub epoch: u64,
    pub batch_in_epoch: u64,
    /// The world size (in ranks) the job trained with when it wrote the checkpoint.
    pub world_size: u64,
}

/// The mutable part of the world.
pub struct WorldState {
    pub nodes: Vec<NodeSlot>,
    pub dedicated_store: Option<NodeId>,
    /// The store task on the dedicated node (the hosted one lives in `Process`).
    pub dedicated_store_alive: bool,
    /// Wall-clock offset per node index.
    pub skew_us: BTreeMap<u32, i64>,
    /// Directed links cut by partitions or clogs, by node index.
    pub clogged: BTreeSet<(u32, u32)>,
    pub next_pid: u32,
    /// The next free port handed out (torch's `get_free_port`), counting up per run.
    pub next_port: u16,
    /// Faults still to come that start a process (`start`, `restart`).
    pub pending_starts: usize,
    /// `Scenario::end_with_job`: a start still to come is waited for only while a node is
    /// down.
    pub end_with_job: bool,
    /// Whether some agent exited SUCCEEDED.
    pub any_succeeded: bool,
    /// The last checkpoint, on storage every node shares.
    pub checkpoint: Checkpoint,
    /// A training script's signal handler asked for a checkpoint after the step in progress
    /// (`job.checkpoint_on_signal`); the group's rank 0 takes it.
    pub checkpoint_requested: bool,
    /// What faults did to the GPUs.
    pub gpus: super::gpu::Gpus,
    /// The workers' process groups and their all-reduce barriers.
    pub collectives: super::collectives::Collectives,
    /// The network's latency range and loss now, and how many times each was changed
    /// (so a timed fault restores only what no later fault replaced).
    pub latency: (SimDuration, SimDuration),
    pub loss: f64,
    pub latency_generation: u64,
    pub loss_generation: u64,
    /// Worker groups pooling compute times for runs of steps settled in closed form.
    pub segments: super::segments::Segments,
    /// Quiet windows, in which the agents' steady routine is fast-forwarded.
    pub quiet: super::quiet::QuietBoard,
    /// The worker groups running on each node, orphans included.
    pub workers: super::workers::LiveWorkers,
}

impl WorldState {
    pub fn new(scenario: &Scenario) -> Self {
        let pending_starts = scenario
            .faults
            .iter()
            .filter(|f| matches!(f.kind, FaultKind::Start { .. } | FaultKind::Restart { .. }))
            .count();
        WorldState {
            nodes: Vec::new(),
            dedicated_store: None,
            dedicated_store_alive: true,
            skew_us: scenario.cluster.clock_skew_us.clone(),
            clogged: BTreeSet::new(),
            next_pid: PID_FIRST,
            next_port: PORT_FIRST,
            pending_starts,
            end_with_job: scenario.end_with_job,
            any_succeeded: false,
            checkpoint: Checkpoint::default(),
            checkpoint_requested: false,
            gpus: super::gpu::Gpus::default(),
            collectives: super::collectives::Collectives::new(
                super::collectives::Spread::of_backend(scenario.job.backend),
            ),
            latency: (scenario.network.latency_min, scenario.network.latency_max),
            loss: scenario.network.loss,
            latency_generation: 0,
            loss_generation: 0,
            segments: Default::default(),
            quiet: Default::default(),
            workers: Default::default(),
        }
    }

    /// Whether a quiet window may be open now: every live agent process is quiet, none is
    /// launching, no node is paused, and the network is as the scenario set it, without a
    /// cut link.
    pub fn calm(&self, scenario: &Scenario) -> bool {
        let mut processes = 0;
        for node in &self.nodes {
            // A paused node's heartbeat ages in its peers' eyes while it sleeps: simulated
            // message by message until it resumes and the settle time has passed.
            if node.launching || node.paused {
                return false;
            }
            if let Some(p) = &node.process {
                if !p.quiet {
                    return false;
                }
                processes += 1;
            }
        }
        let network = &scenario.network;
        processes > 0
            && self.clogged.is_empty()
            && self.loss == 0.0
            && self.latency == (network.latency_min, network.latency_max)
    }

    /// How far apart the nodes' wall clocks are: the latest offset minus the earliest, a node
    /// without one counting as zero.
    fn clock_spread(&self) -> SimDuration {
        let unskewed = (self.skew_us.len() < self.nodes.len()).then_some(0);
        let offsets = || self.skew_us.values().copied().chain(unskewed);
        let (Some(latest_us), Some(earliest_us)) = (offsets().max(), offsets().min()) else {
            return SimDuration::ZERO;
        };
        SimDuration::from_us(latest_us.abs_diff(earliest_us))
    }

    /// Whether a quiet window is open now (opening one if it may).
    pub fn quiet_window_open(&mut self, scenario: &Scenario) -> bool {
        let calm = self.calm(scenario);
        let clock_spread = self.clock_spread();
        self.quiet
            .window_open(super::time::now_whole_us(), calm, clock_spread)
    }

    /// A `start` or `restart` fault was applied; `starts_left` more are in the schedule.
    pub fn start_applied(&mut self, starts_left: usize) {
        self.pending_starts = self
            .pending_starts
            .checked_sub(1)
            .expect("every start and restart fault was counted when the run began");
        assert_eq!(
            self.pending_starts, starts_left,
            "pending starts disagree with the starts left in the fault schedule"
        );
    }

    /// A `store_crash`: takes the store task a hosting agent process runs, and the
    /// dedicated store's node while its store is alive (the store is dead afterwards).
    pub fn take_store(&mut self) -> (Option<madsim::task::JoinHandle<()>>, Option<NodeId>) {
        let hosted = self
            .nodes
            .iter_mut()
            .find_map(|n| n.process.as_mut().and_then(|p| p.store_task.take()));
        let dedicated = self.dedicated_store.filter(|_| self.dedicated_store_alive);
        self.dedicated_store_alive = false;
        // The run has one c10d store: hosted by one agent process or on its own node.
        let hosted_left = self
            .nodes
            .iter()
            .filter(|n| n.process.as_ref().is_some_and(|p| p.store_task.is_some()))
            .count();
        assert!(
            hosted_left == 0 && !(hosted.is_some() && dedicated.is_some()),
            "a store crash found more than one store: {hosted_left} more hosted, a dedicated \
             one alive: {}",
            dedicated.is_some()
        );
        (hosted, dedicated)
    }

    /// A `clock_skew` fault steps node `node`'s wall clock by `offset_us`; returns the
    /// node's offset now.
    pub fn step_clock(&mut self, node: u32, offset_us: i64) -> i64 {
        let skew = self.skew_us.entry(node).or_insert(0);
        *skew = skew.checked_add(offset_us).unwrap_or_else(|| {
            panic!(
                "{} wall clock offset {skew} us overflows when stepped by {offset_us} us",
                NodeIndex(node)
            )
        });
        *skew
    }

    /// Hands out the next free port (torch's `get_free_port`), wrapping around the range.
    pub fn take_free_port(&mut self) -> u16 {
        let port = self.next_port;
        assert!(
            (PORT_FIRST..=PORT_LAST).contains(&port),
            "the next free port {port} is outside the ephemeral range"
        );
        self.next_port = if port >= PORT_LAST {
            PORT_FIRST
        } else {
            port + 1
        };
        port
    }

    /// The run is over when no agent runs or is about to (a relaunch waiting out its delay
    /// is), no orphaned workers train, and no `start` or `restart` is still due. With `end_with_job`, a start still due
    /// is waited for only while a node taken down has not been brought back or replaced:
    /// once none is down and every agent has exited, the job has ended, and the faults and
    /// replacements due after that moment (a failure process draws them to the end of the
    /// time limit) are never applied.
    pub fn run_is_over(&self) -> bool {
        let none_left = self
            .nodes
            .iter()
            .all(|n| n.process.is_none() && !n.launching)
            // With no agent left, a running group is orphaned: it trains on.
            && self.workers.is_empty();
        let job_ended = self.end_with_job && !self.nodes.iter().any(|n| n.down);
        none_left && (self.pending_starts == 0 || job_ended)
    }

    /// A `start` or `restart` of `node` was applied: the node is back, or, when it was not
    /// down (a spare's start), it replaces the first node that is.
    pub fn brought_back(&mut self, node: u32) {
        let slot = &mut self.nodes[node as usize];
        if std::mem::take(&mut slot.down) {
            return;
        }
        if let Some(replaced) = self.nodes.iter_mut().find(|n| n.down) {
            replaced.down = false;
        }
    }

    /// Removes `node` from every unfinished all-reduce: its workers died or were stopped.
    /// `closed`: they died on a live host, so their connections closed (see
    /// [`super::collectives::Collectives::withdraw`]). Closed-form gathers of its groups
    /// decline.
    pub fn withdraw(&mut self, node: u32, closed: bool) {
        let now_ns = super::time::elapsed_ns();
        let groups = self.collectives.withdraw(node, closed, now_ns);
        self.segments.member_left(&groups);
    }

    /// Marks `node` departed from every group it joined and tells those groups' members
    /// that settle steps in closed form.
    pub fn depart(&mut self, node: u32, closed: bool) {
        let now_ns = super::time::elapsed_ns();
        let groups = self.collectives.depart(node, closed, now_ns);
        self.segments.member_left(&groups);
    }

    /// Whether every pair of `members` can reach each other.
    pub fn connected(&self, members: &[u32]) -> bool {
        links_connected(&self.clogged, members)
    }
}

/// Whether every pair of `members` can reach each other past the `clogged` links.
pub fn links_connected(clogged: &BTreeSet<(u32, u32)>, members: &[u32]) -> bool {
    members.iter().all(|a| {
        members
            .iter()
            .all(|b| a == b || !clogged.contains(&(*a, *b)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn world_state() -> WorldState {
        WorldState::new(&crate::scenario::default_scenario("state"))
    }

    /// A node slot, with a node id from a throwaway madsim runtime.
    fn slot(started: bool) -> NodeSlot {
        let runtime = madsim::runtime::Runtime::new();
        let id = runtime.block_on(async {
            madsim::runtime::Handle::current()
                .create_node()
                .build()
                .id()
        });
        NodeSlot::new(id, started)
    }

    fn process(pid: u32) -> Process {
        Process {
            pid,
            stop_requested: false,
            stop_signal: None,
            fatal_signal: None,
            stop_waiters: Vec::new(),
            worker_crash: None,
            store_task: None,
            monitor_wake: Default::default(),
            quiet: false,
        }
    }

    #[test]
    fn a_node_launches_exits_and_launches_again() {
        let mut s = slot(true);
        assert!(s.launch(0));
        s.process = Some(process(1000));
        assert_eq!(s.exit(0, 1000).map(|p| p.pid), Some(1000));
        s.launch_pending(0);
        assert!(s.launch(0));
        assert!(
            !slot(false).launch(1),
            "a spare's first boot starts nothing"
        );
    }

    #[test]
    #[should_panic(
        expected = "node-2 launches a new agent process (started: true) while pid Some(1000) still runs there"
    )]
    fn a_launch_over_a_running_process_stops_the_run() {
        let mut s = slot(true);
        s.process = Some(process(1000));
        s.launch_pending(2);
    }

    #[test]
    #[should_panic(expected = "pid 1001 of node-0 exits, but the node holds another process")]
    fn an_exit_of_a_replaced_process_stops_the_run() {
        let mut s = slot(true);
        s.process = Some(process(1000));
        s.exit(0, 1001);
    }

    #[test]
    #[should_panic(expected = "every start and restart fault was counted when the run began")]
    fn a_start_nobody_counted_stops_the_run() {
        world_state().start_applied(0);
    }

    #[test]
    fn a_start_still_due_is_awaited_only_for_a_node_taken_down() {
        let mut st = world_state();
        st.end_with_job = true;
        st.pending_starts = 2;
        st.nodes.extend([slot(true), slot(true), slot(false)]);
        st.nodes[0].process = Some(process(1000));
        st.nodes[1].launching = false;
        assert!(!st.run_is_over(), "an agent runs");
        st.nodes[0].process = None;
        st.nodes[0].launching = false;
        assert!(st.run_is_over(), "every agent exited: the job has ended");
        st.nodes[1].down = true;
        assert!(
            !st.run_is_over(),
            "node-1 was killed: its restart is awaited"
        );
        st.nodes[1].launching = true;
        assert!(!st.run_is_over(), "a relaunch is pending");
        st.nodes[1].launching = false;
        st.brought_back(2);
        assert!(!st.nodes[1].down, "the spare's start replaces node-1");
        assert!(st.run_is_over(), "nothing is down any more");
        st.end_with_job = false;
        assert!(
            !st.run_is_over(),
            "without end_with_job every start is waited for"
        );
        st.nodes[1].down = true;
        st.pending_starts = 0;
        assert!(st.run_is_over(), "no start will come");
    }

    #[test]
    fn a_paused_node_keeps_the_control_plane_from_being_calm() {
        let scenario = crate::scenario::default_scenario("state");
        let mut st = WorldState::new(&scenario);
        st.nodes.extend([slot(true), slot(true)]);
        for (pid, node) in (1000..).zip(st.nodes.iter_mut()) {
            node.launching = false;
            node.process = Some(Process {
                quiet: true,
                ..process(pid)
            });
        }
        assert!(st.calm(&scenario), "two quiet agents, a calm network");
        st.nodes[1].paused = true;
        assert!(
            !st.calm(&scenario),
            "a paused node's heartbeat ages in its peer's eyes"
        );
        st.nodes[1].paused = false;
        assert!(st.calm(&scenario), "resumed");
    }

    #[test]
    fn free_ports_wrap_around_the_range() {
        let mut st = world_state();
        st.next_port = PORT_LAST;
        assert_eq!(st.take_free_port(), PORT_LAST);
        assert_eq!(st.take_free_port(), PORT_FIRST);
    }

    #[test]
    #[should_panic(expected = "the next free port 80 is outside the ephemeral range")]
    fn a_port_outside_the_range_stops_the_run() {
        let mut st = world_state();
        st.next_port = 80;
        st.take_free_port();
    }

    #[test]
    #[should_panic(expected = "node-1 wall clock offset")]
    fn a_clock_stepped_past_its_range_stops_the_run() {
        let mut st = world_state();
        assert_eq!(st.step_clock(1, i64::MAX - 1), i64::MAX - 1);
        st.step_clock(1, 2);
    }

    #[test]
    fn the_clock_spread_counts_a_node_without_an_offset_as_zero() {
        let scenario = crate::scenario::default_scenario("state");
        let mut st = WorldState::new(&scenario);
        st.nodes.extend([slot(true), slot(true), slot(true)]);
        assert_eq!(st.clock_spread(), SimDuration::ZERO);
        st.step_clock(1, 3_000_000);
        assert_eq!(
            st.clock_spread(),
            SimDuration::from_secs(3),
            "node-0 and node-2 read 0"
        );
        st.step_clock(2, -2_000_000);
        assert_eq!(st.clock_spread(), SimDuration::from_secs(5));
        st.step_clock(0, 1_000_000);
        assert_eq!(
            st.clock_spread(),
            SimDuration::from_secs(5),
            "every node has an offset: no zero counts"
        );
        st.step_clock(2, 3_000_000);
        assert_eq!(st.clock_spread(), SimDuration::from_secs(2));
    }
}
