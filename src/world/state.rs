//! The world's bookkeeping: which process runs on which node, clocks, links, collectives,
//! checkpoint storage. Shared by the simulated tasks of one run (one thread, so a plain mutex).

use super::Programs;
use crate::scenario::model::{FaultKind, Scenario};
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
    /// When the world changes by itself (see `segments::change_instants_us`).
    pub change_instants_us: Vec<u64>,
    /// Whether steps may be settled in closed form (see `segments::segments_allowed`).
    pub segments_allowed: bool,
}

/// One node's slot.
pub struct NodeSlot {
    pub id: NodeId,
    /// False for a spare until its `start` fault.
    pub started: bool,
    /// The running agent process, if any.
    pub process: Option<Process>,
    /// A process is about to start (its init task has not run yet).
    pub launching: bool,
}

impl NodeSlot {
    pub fn new(id: NodeId, started: bool) -> Self {
        NodeSlot {
            id,
            started,
            process: None,
            launching: started,
        }
    }
}

/// An agent process on a node.
pub struct Process {
    pub pid: u32,
    /// A graceful stop (SIGTERM) was asked for.
    pub stop_requested: bool,
    pub stop_waiters: Vec<oneshot::Sender<()>>,
    /// A `worker_crash` hit this process's workers: (local_rank, exit_code).
    pub worker_crash: Option<(u32, i32)>,
    /// The store server task this process hosts.
    pub store_task: Option<madsim::task::JoinHandle<()>>,
    /// Wakes the agent's monitor when something its next tick would see has changed.
    pub monitor_wake: std::sync::Arc<super::wake::Wake>,
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

/// One step's all-reduce among a group: who arrived, and who waits (told whether it
/// completed).
#[derive(Default)]
pub struct Barrier {
    pub arrived: BTreeSet<u32>,
    pub waiters: Vec<oneshot::Sender<bool>>,
}

/// A worker group's collectives: its members, and the members whose workers are gone with
/// their connections reset (gloo fails the others' collectives at once then).
#[derive(Default)]
pub struct CollectiveGroup {
    pub members: Vec<u32>,
    pub reset: BTreeSet<u32>,
    /// Members whose workers left the group (stopped or dead): it completes no more steps.
    pub departed: BTreeSet<u32>,
    /// Members settling a run of steps in closed form, told when a member departs.
    pub watchers: Vec<oneshot::Sender<super::segments::Departure>>,
}

/// Most worker groups whose collectives are remembered at once; the oldest go first.
const COLLECTIVE_GROUPS_MAX: usize = 4096;

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
    /// Whether some agent exited SUCCEEDED.
    pub any_succeeded: bool,
    /// The last checkpoint, on storage every node shares.
    pub checkpoint: Checkpoint,
    /// What faults did to the GPUs.
    pub gpus: super::gpu::Gpus,
    /// All-reduce barriers by (group key, step).
    pub barriers: BTreeMap<(u64, u64), Barrier>,
    /// Worker groups by group key, for the gloo backend's resets.
    pub collective_groups: BTreeMap<u64, CollectiveGroup>,
    /// The network's latency range and loss now, and how many times each was changed
    /// (so a timed fault restores only what no later fault replaced).
    pub latency_us: (u64, u64),
    pub loss: f64,
    pub latency_generation: u64,
    pub loss_generation: u64,
    /// Worker groups pooling compute times for runs of steps settled in closed form.
    pub segments: super::segments::Segments,
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
            any_succeeded: false,
            checkpoint: Checkpoint::default(),
            gpus: super::gpu::Gpus::default(),
            barriers: BTreeMap::new(),
            collective_groups: BTreeMap::new(),
            latency_us: (
                scenario.network.latency_us_min,
                scenario.network.latency_us_max,
            ),
            loss: scenario.network.loss,
            latency_generation: 0,
            loss_generation: 0,
            segments: Default::default(),
        }
    }

    /// The run is over when no agent runs and no fault will start one.
    pub fn run_is_over(&self) -> bool {
        self.pending_starts == 0
            && self
                .nodes
                .iter()
                .all(|n| n.process.is_none() && !n.launching)
    }

    /// Removes `node` from every unfinished all-reduce (its workers died or were stopped).
    /// With `reset`, its workers' connections reset (they died on a live host): a backend
    /// that sees resets fails its peers' collectives at once (`fail_on_reset`).
    pub fn withdraw(&mut self, node: u32, reset: bool, fail_on_reset: bool) {
        for barrier in self.barriers.values_mut() {
            barrier.arrived.remove(&node);
        }
        self.depart(node, false);
        if reset && fail_on_reset {
            let groups: Vec<u64> = self
                .collective_groups
                .iter_mut()
                .filter(|(_, g)| g.members.contains(&node))
                .map(|(key, g)| {
                    g.reset.insert(node);
                    *key
                })
                .collect();
            let failed: Vec<(u64, u64)> = self
                .barriers
                .keys()
                .filter(|(key, _)| groups.contains(key))
                .copied()
                .collect();
            for key in failed {
                let barrier = self.barriers.remove(&key).expect("listed above");
                for waiter in barrier.waiters {
                    let _ = waiter.send(false);
                }
            }
        }
        self.barriers.retain(|_, b| !b.arrived.is_empty());
    }

    /// Marks `node` departed from every group it is a member of, and tells those groups'
    /// members that settle steps in closed form. `arrivals_stand`: the workers vanished
    /// without taking back their arrivals at barriers (their task was dropped).
    pub fn depart(&mut self, node: u32, arrivals_stand: bool) {
        let at_ns = super::time::elapsed_ns();
        let departure = super::segments::Departure {
            member: node,
            at_ns,
            arrivals_stand,
        };
        let mut groups = Vec::new();
        for (key, group) in self.collective_groups.iter_mut() {
            if group.members.contains(&node) {
                group.departed.insert(node);
                for watcher in group.watchers.drain(..) {
                    let _ = watcher.send(departure);
                }
                groups.push(*key);
            }
        }
        self.segments.member_left(&groups);
    }

    /// Whether some member's workers left `group`.
    pub fn group_has_departures(&self, group: u64) -> bool {
        self.collective_groups
            .get(&group)
            .is_some_and(|g| !g.departed.is_empty())
    }

    /// Registers a worker group's members on its first collective.
    pub fn collective_group(&mut self, key: u64, members: &[u32]) -> &CollectiveGroup {
        if !self.collective_groups.contains_key(&key) {
            while self.collective_groups.len() >= COLLECTIVE_GROUPS_MAX {
                self.collective_groups.pop_first();
            }
        }
        self.collective_groups
            .entry(key)
            .or_insert_with(|| CollectiveGroup {
                members: members.to_vec(),
                ..CollectiveGroup::default()
            })
    }

    /// Whether every pair of `members` can reach each other.
    pub fn connected(&self, members: &[u32]) -> bool {
        members.iter().all(|a| {
            members
                .iter()
                .all(|b| a == b || !self.clogged.contains(&(*a, *b)))
        })
    }
}
