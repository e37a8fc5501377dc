//! The simulated world, and the only code that touches madsim: a fresh runtime per run on a
//! thread of its own (`run_thread`), nodes with addresses and processes, the network, per-node clocks, the fault
//! schedule, the shared checkpoint storage and the collective fabric.
//!
//! The world knows nothing of rendezvous, agents or the store's protocol: the runner hands
//! it the programs to run (`Programs`: an agent per node process, and the store server it
//! places at `STORE_PORT`), and each agent process gets a `NodeEnv` through which it reads its clocks,
//! records events and reaches the store, the collectives and the checkpoint. What code with
//! no `NodeEnv` in hand needs of the run (the network's registry, the clock, the counters)
//! is the run's `context`, installed on the run's thread for the run and no longer; a run
//! hands back its trace with what it measured beside it (`SimulatedRun`).

pub mod bare_madsim_floor;
pub mod collectives;
mod connect_backoff;
pub mod context;
pub mod env;
mod faults;
pub mod gpu;
pub mod interrupts;
pub mod net;
mod nic;
pub mod quiet;
#[cfg(test)]
mod reuse_tests;
pub mod rng;
pub mod run_thread;
pub mod segments;
mod state;
pub mod time;
pub mod wake;
mod wire;
mod workers;

pub use context::RunStats;
pub use env::NodeEnv;
pub use state::{Checkpoint, PORT_FIRST, PORT_LAST};

use crate::scenario::model::{node_name, FaultKind, NodeRole, Outcome, Scenario, StoreHost};
use crate::trace::node::STORE_NAME;
use crate::trace::{EventKind, Recorder, RunEnd, Trace, TraceNode};
use futures::future::BoxFuture;
use futures::StreamExt;
use state::{NodeSlot, WorldState};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How an agent process ended by itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentExit {
    /// The worker group's final state.
    pub state: crate::trace::AgentState,
    pub reason: crate::trace::ExitReason,
}

/// The store server's program: it listens on the address it is given, as the scenario says.
pub type StoreProgram = Arc<dyn Fn(SocketAddr, &Scenario) -> BoxFuture<'static, ()> + Send + Sync>;

/// Which node holds a role the programs give out (group rank 0 is the agents'), asked when
/// a fault aimed at that role fires, with the values the run's processes share; when no node
/// holds it, why not, in words for the trace. The world resolves `store_host` itself: it
/// placed the store.
pub type RoleResolver = Arc<dyn Fn(NodeRole, &SharedValues) -> Result<u32, String> + Send + Sync>;

/// A resolver for programs that give out no role: a fault aimed at one is skipped.
pub fn no_roles() -> RoleResolver {
    Arc::new(|role, _| Err(format!("the programs of this run give out no {role}")))
}

/// The values a run's processes share (see `NodeEnv::shared`), for a [`RoleResolver`].
pub struct SharedValues<'a>(pub(crate) &'a state::World);

impl SharedValues<'_> {
    /// The run's value under `key`, created on first use, as `NodeEnv::shared` gives it.
    pub fn get<T: std::any::Any + Send + Sync + Default>(&self, key: &'static str) -> Arc<T> {
        self.0.shared_value(key)
    }
}

/// The programs the world runs: an agent per node process, and the store server.
#[derive(Clone)]
pub struct Programs {
    pub agent: Arc<dyn Fn(NodeEnv) -> BoxFuture<'static, AgentExit> + Send + Sync>,
    /// The store server, given the address to listen on and the run's scenario.
    pub store: StoreProgram,
    /// Resolves the roles faults may aim at (`node = "rank0"`) when they fire.
    pub resolve_role: RoleResolver,
    /// Time every training step with its own timers and barrier instead of settling runs of
    /// steps in closed form (`job::segment`): the reference the closed form is tested against.
    pub step_by_step: bool,
    /// Simulate the agents' steady routine message by message even in quiet windows
    /// (`quiet`): the reference the fast-forward is tested against.
    pub exact_control_plane: bool,
}

/// The port the c10d store listens on, on its host (torchrun's default rendezvous port):
/// where the world places the store program it runs.
pub const STORE_PORT: u16 = crate::scenario::limits::RENDEZVOUS_STORE_PORT;

/// A run that could not finish: the harness itself failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum HarnessError {
    #[error("the simulation panicked: {0}")]
    Panic(String),
    /// The scenario could not become a run (its failure process drew past a bound).
    #[error("{0}")]
    Input(String),
    #[error(
        "the run recorded more than {0} events, or step events holding more than {steps} training steps",
        steps = crate::trace::STEPS_MAX
    )]
    EventsOverBound(usize),
    #[error("the run cost more than {max} simulator events (timers and messages)")]
    SimEventsOverBound { max: u64 },
}

/// The most simulator events (timers armed: sleeps and messages) one run may cost: about
/// 210 simulated hours of `trainsim bench`'s 64-node reference job, which costs about 262 a
/// simulated second and under 2 µs of wall time each (some 6 minutes for the bound).
pub const SIM_EVENTS_MAX: u64 = 200_000_000;

/// A spawned simulated task; dropping it detaches, `abort()` ends it.
pub type TaskHandle<T> = madsim::task::JoinHandle<T>;

/// Spawns a task on the current simulated node.
pub fn spawn<F>(future: F) -> madsim::task::JoinHandle<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    madsim::task::spawn(future)
}

/// The IP address of node index `i` (10.0.x.y); the dedicated store is 10.255.0.1.
///
/// The last byte is the index's low byte plus one, wrapping: the last node of each 256
/// takes the `.0` of its block (node 255 is 10.0.0.0), which no other node has. Maps keyed
/// by address iterate in this order, so another scheme would change what runs do.
pub fn node_ip(i: u32) -> IpAddr {
    let low = ((i & 0xff) as u8).wrapping_add(1);
    IpAddr::V4(Ipv4Addr::new(10, 0, (i >> 8) as u8, low))
}

/// The node index whose address [`node_ip`] gives as `ip`, for the nodes a scenario may
/// have (`NODES_MAX`); `None` for any other address (the dedicated store's).
pub(crate) fn node_index_of_ip(ip: IpAddr) -> Option<u32> {
    let IpAddr::V4(v4) = ip else {
        return None;
    };
    let [10, 0, high, low] = v4.octets() else {
        return None;
    };
    let index = u32::from(high) << 8 | u32::from(low.wrapping_sub(1));
    (index < crate::scenario::limits::NODES_MAX).then_some(index)
}

fn dedicated_store_ip() -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 255, 0, 1))
}

/// What a finished run hands back: its trace and how it ended, and beside them what it
/// measured.
#[derive(Debug, Clone)]
pub struct SimulatedRun {
    pub trace: Trace,
    /// The story recorded beside the trace (outside its hash).
    pub story: crate::trace::Story,
    pub end: RunEnd,
    pub stats: RunStats,
}

/// Runs one scenario with one seed on a fresh runtime, on a thread of its own.
pub fn simulate(
    scenario: &Scenario,
    seed: u64,
    programs: Programs,
) -> Result<SimulatedRun, HarnessError> {
    simulate_bounded(scenario, seed, programs, SIM_EVENTS_MAX)
}

/// Like [`simulate`], stopping the run with an error past `sim_events_max` simulator events.
pub fn simulate_bounded(
    scenario: &Scenario,
    seed: u64,
    programs: Programs,
    sim_events_max: u64,
) -> Result<SimulatedRun, HarnessError> {
    let scenario = scenario.clone();
    match run_thread::run(move || run_on_this_thread(scenario, seed, programs, sim_events_max)) {
        Ok((_, true)) => Err(HarnessError::SimEventsOverBound {
            max: sim_events_max,
        }),
        Ok((run, false)) if run.trace.truncated => {
            Err(HarnessError::EventsOverBound(crate::trace::EVENTS_MAX))
        }
        Ok((run, false)) => Ok(run),
        Err(payload) => Err(HarnessError::Panic(panic_message(&payload))),
    }
}

/// Whether the wire may drop a message in a run of `scenario`: it loses messages from the
/// start, or a fault sets a loss or cuts a link. A host that powers off drops nothing: its
/// connections go silent, and nothing sent on them is ever answered by another process.
fn wire_may_drop(scenario: &Scenario) -> bool {
    scenario.network.loss > 0.0
        || scenario.faults.iter().any(|fault| {
            matches!(
                fault.kind,
                FaultKind::Loss { .. } | FaultKind::Partition { .. } | FaultKind::ClogLink { .. }
            )
        })
}

/// Runs the scenario on a fresh runtime with a fresh run context on this thread; with it,
/// whether the run passed its bound on simulator events.
///
/// Locals drop in reverse order, on a panic too: the time handle is forgotten first, then
/// the runtime drops its tasks (whose drops still reach the run context), then the context
/// leaves the thread.
fn run_on_this_thread(
    scenario: Scenario,
    seed: u64,
    programs: Programs,
    sim_events_max: u64,
) -> (SimulatedRun, bool) {
    let context = context::install(sim_events_max);
    let store_ip = match scenario.cluster.store {
        StoreHost::Node(index) => node_ip(index),
        StoreHost::Dedicated => dedicated_store_ip(),
    };
    net::configure(net::NetConfig {
        seed,
        latency: (scenario.network.latency_min, scenario.network.latency_max),
        loss: scenario.network.loss,
        drops_possible: wire_may_drop(&scenario),
        tcp_retries2: scenario.cluster.tcp_retries2,
        bandwidth_bits_per_sec: scenario.network.bandwidth_bits_per_sec,
        store_host: (store_ip, scenario.network.store_host_bandwidth_bits_per_sec),
    });
    // The network is `wire`'s, not madsim's: madsim's own network carries nothing.
    let runtime = madsim::runtime::Runtime::with_seed_and_config(seed, madsim::Config::default());
    let _leave_run = time::LeaveRunOnDrop;
    let recorder = Recorder::new();
    let run_recorder = recorder.clone();
    let end = runtime.block_on(async move {
        time::enter_run();
        supervise(scenario, seed, programs, run_recorder).await
    });
    let (trace, story) = recorder.finish_with_story();
    let run = SimulatedRun {
        trace,
        story,
        end,
        stats: context.stats(),
    };
    (run, context.over_bound())
}

/// The text of a caught panic.
pub fn panic_message(payload: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

/// Builds the nodes, applies the faults and waits for the run to end.
async fn supervise(
    scenario: Scenario,
    seed: u64,
    programs: Programs,
    recorder: Recorder,
) -> RunEnd {
    let (exits_tx, mut exits_rx) = futures::channel::mpsc::unbounded::<()>();
    let store_addr = match scenario.cluster.store {
        StoreHost::Node(i) => SocketAddr::new(node_ip(i), STORE_PORT),
        StoreHost::Dedicated => SocketAddr::new(dedicated_store_ip(), STORE_PORT),
    };
    let world = Arc::new(state::World {
        scenario: scenario.clone(),
        seed,
        recorder: recorder.clone(),
        store_addr,
        programs: programs.clone(),
        exits: exits_tx,
        state: Mutex::new(WorldState {
            quiet: quiet::QuietBoard::new(quiet::allowed(&scenario, programs.exact_control_plane)),
            ..WorldState::new(&scenario)
        }),
        shared: Mutex::new(std::collections::BTreeMap::new()),
        change_instants: segments::change_instants(&scenario),
        segments_allowed: segments::segments_allowed(&scenario, programs.step_by_step),
    });
    create_nodes(&world);
    let faults = spawn(faults::apply_all(world.clone()));
    let time_limit = Duration::from_nanos(scenario.time_limit.as_ns());
    let exits = async {
        loop {
            if world.state.lock().expect("world lock").run_is_over() {
                break;
            }
            if exits_rx.next().await.is_none() {
                break;
            }
        }
    };
    // Past its bound on simulator events the run ends here; `simulate` reports the bound.
    let ended = madsim::time::timeout(
        time_limit,
        futures::future::select(pin!(exits), pin!(time::sim_events_bound_reached())),
    )
    .await
    .map(|_| ());
    faults.abort();
    let ended_at = time::now_whole_us();
    let outcome = match ended {
        Err(_) => Outcome::TimedOut,
        Ok(()) if world.state.lock().expect("world lock").any_succeeded => Outcome::Succeeded,
        Ok(()) => Outcome::Failed,
    };
    recorder.record(
        ended_at,
        None,
        EventKind::RunEnded {
            outcome: outcome.as_str().to_owned(),
        },
    );
    RunEnd { ended_at, outcome }
}

/// Creates the dedicated store machine (if any) and every node, spares included, so every
/// address exists from the start. A spare's init finds `started == false` and runs nothing.
fn create_nodes(world: &Arc<state::World>) {
    let handle = madsim::runtime::Handle::current();
    let scenario = &world.scenario;
    if scenario.cluster.store == StoreHost::Dedicated {
        let store_program = world.programs.store.clone();
        let store_scenario = scenario.clone();
        let rec = world.recorder.clone();
        let store_addr = world.store_addr;
        let node = handle
            .create_node()
            .name(STORE_NAME)
            .ip(dedicated_store_ip())
            .init(move || {
                rec.record(
                    time::now_whole_us(),
                    Some(TraceNode::Store),
                    EventKind::StoreStarted,
                );
                store_program(store_addr, &store_scenario)
            })
            .build();
        net::register_host(node.id(), dedicated_store_ip());
        world.state.lock().expect("world lock").dedicated_store = Some(node.id());
    }
    for index in 0..scenario.cluster.total_nodes() {
        let starts_now = index < scenario.cluster.nodes;
        let w = world.clone();
        let node = handle
            .create_node()
            .name(node_name(index))
            .ip(node_ip(index))
            .init(move || env::process_main(w.clone(), index))
            .build();
        net::register_host(node.id(), node_ip(index));
        let mut st = world.state.lock().expect("world lock");
        st.nodes.push(NodeSlot::new(node.id(), starts_now));
    }
}

#[cfg(test)]
mod node_ip_tests {
    use super::*;
    use std::collections::BTreeSet;

    /// Every node a scenario may have gets its own address, never the dedicated store's,
    /// and with overflow checks on (a debug build) none of them panics.
    #[test]
    fn every_node_has_its_own_address() {
        let nodes = crate::scenario::limits::NODES_MAX;
        let addresses: BTreeSet<IpAddr> = (0..nodes).map(node_ip).collect();
        assert_eq!(addresses.len(), nodes as usize);
        assert!(!addresses.contains(&dedicated_store_ip()));
        assert_eq!(node_ip(0), IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)));
        assert_eq!(node_ip(255), IpAddr::V4(Ipv4Addr::new(10, 0, 0, 0)));
        assert_eq!(node_ip(256), IpAddr::V4(Ipv4Addr::new(10, 0, 1, 1)));
    }

    #[test]
    fn a_nodes_address_gives_its_index_back_and_no_other_does() {
        for i in 0..crate::scenario::limits::NODES_MAX {
            assert_eq!(node_index_of_ip(node_ip(i)), Some(i));
        }
        assert_eq!(node_index_of_ip(dedicated_store_ip()), None);
        assert_eq!(
            node_index_of_ip(IpAddr::V4(Ipv4Addr::new(10, 0, 255, 7))),
            None
        );
        assert_eq!(
            node_index_of_ip(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1))),
            None
        );
        assert_eq!(
            node_index_of_ip(IpAddr::V6(std::net::Ipv6Addr::LOCALHOST)),
            None
        );
    }
}

#[cfg(test)]
mod wire_drop_tests {
    use super::*;

    fn shipped(file: &str) -> Scenario {
        let text = std::fs::read_to_string(format!("scenarios/{file}")).expect("shipped");
        crate::scenario::parse(&text, file).expect("it parses")
    }

    /// Servers keep replies for resent requests exactly in runs whose wire may drop one.
    #[test]
    fn only_loss_and_cut_links_make_the_wire_drop() {
        assert!(wire_may_drop(&shipped("lossy_network_retransmits.toml")));
        assert!(wire_may_drop(&shipped("partition_then_heal.toml")));
        assert!(!wire_may_drop(&shipped("worker_crash_restart.toml")));
        assert!(!wire_may_drop(&crate::scenario::default_scenario("plain")));
    }
}
