//! The fault schedule: applies each scenario fault at its time to nodes, links, clocks, the
//! store and workers.

use super::state::World;
use super::{spawn, time, SharedValues};
use crate::scenario::model::{Fault, FaultKind, FaultName, NodeIndex, NodeRole, Signal, StoreHost};
use crate::sim_time::{SimDuration, SimInstant};
use crate::trace::{EventKind, TraceNode};
use madsim::runtime::Handle;
use std::sync::Arc;

/// Applies every fault at its time, in order.
pub(super) async fn apply_all(world: Arc<World>) {
    let is_start =
        |f: &Fault| matches!(f.kind, FaultKind::Start { .. } | FaultKind::Restart { .. });
    // The schedule's own count of the starts still to come, which `pending_starts` mirrors.
    let mut starts_left = world.scenario.faults.iter().filter(|f| is_start(f)).count();
    for fault in world.scenario.faults.clone() {
        // Until the fault, no client's request can meet it on its way out.
        super::net::set_calm_until_ns(fault.at.as_ns());
        // On the microsecond, as the trace reads the clock: the sleep ends on `fault.at`.
        let now = time::now_whole_us();
        if fault.at > now {
            time::sleep(fault.at.since(now)).await;
        }
        // Whoever slept through a quiet window wakes to meet the fault as torch would.
        world
            .state
            .lock()
            .expect("world lock")
            .quiet
            .disturb(time::now_whole_us(), super::quiet::Disturbance::Loss);
        match aimed(&world, &fault) {
            Ok(fault) => {
                let detail = apply(&world, &fault);
                let detail = match (fault.role, fault.kind.node()) {
                    (Some(role), Some(node)) => format!("{role} is {}: {detail}", NodeIndex(node)),
                    _ => detail,
                };
                world.recorder.record(
                    time::now_whole_us(),
                    fault.kind.node().map(TraceNode::node),
                    EventKind::FaultApplied {
                        fault: FaultName::from(&fault.kind),
                        detail,
                        role: fault.role,
                    },
                );
            }
            Err(skipped) => world.recorder.record(time::now_whole_us(), None, skipped),
        }
        if is_start(&fault) {
            starts_left -= 1;
            world
                .state
                .lock()
                .expect("world lock")
                .start_applied(starts_left);
            let _ = world.exits.unbounded_send(());
        }
    }
    super::net::set_calm_until_ns(u64::MAX);
}

/// The fault on the node its role names now (a fault naming its node is itself), or the
/// event that records it skipped when no node holds the role.
fn aimed(world: &World, fault: &Fault) -> Result<Fault, EventKind> {
    let Some(role) = fault.role else {
        return Ok(fault.clone());
    };
    let holder = match role {
        // The world placed the store; validation refuses `store_host` with a dedicated one.
        NodeRole::StoreHost => match world.scenario.cluster.store {
            StoreHost::Node(node) => Ok(node),
            StoreHost::Dedicated => Err("the store runs on a dedicated host".to_owned()),
        },
        _ => (world.programs.resolve_role)(role, &SharedValues(world)),
    };
    match holder {
        Ok(node) => {
            assert!(
                node < world.scenario.cluster.total_nodes(),
                "{role} resolved to node {node}, outside the cluster"
            );
            Ok(Fault {
                kind: fault.kind.on_node(node),
                ..fault.clone()
            })
        }
        Err(why) => Err(EventKind::FaultSkipped {
            fault: FaultName::from(&fault.kind),
            role,
            reason: format!("no node holds {role}: {why}"),
        }),
    }
}

/// Applies one fault now and describes what it did.
fn apply(world: &Arc<World>, fault: &Fault) -> String {
    let handle = Handle::current();
    match &fault.kind {
        FaultKind::Kill { node } => kill(world, &handle, *node, Death::ProcessesKilled),
        FaultKind::PowerOff { node } => kill(world, &handle, *node, Death::PowerOff),
        FaultKind::Stop { node } => stop(world, *node),
        FaultKind::Signal { node, signal } => user_signal(world, *node, *signal),
        FaultKind::Restart { node } | FaultKind::Start { node } => start(world, &handle, *node),
        FaultKind::Pause { node } => {
            set_paused(world, *node, true);
            handle.pause(node_id(world, *node));
            format!("{} paused", NodeIndex(*node))
        }
        FaultKind::Resume { node } => {
            set_paused(world, *node, false);
            handle.resume(node_id(world, *node));
            format!("{} resumed", NodeIndex(*node))
        }
        FaultKind::Partition { groups } => partition(world, groups),
        FaultKind::Heal => heal(world),
        FaultKind::ClogLink { from, to } => clog_link(world, *from, *to),
        FaultKind::UnclogLink { from, to } => unclog_link(world, *from, *to),
        FaultKind::Latency {
            latency_min,
            latency_max,
            duration,
        } => {
            let change = NetChange::Latency(*latency_min, *latency_max);
            change_network_for(world, change, *duration);
            format!(
                "latency {}..{} us",
                latency_min.as_us(),
                latency_max.as_us()
            )
        }
        FaultKind::Loss {
            probability,
            duration,
        } => {
            change_network_for(world, NetChange::Loss(*probability), *duration);
            format!("loss {probability}")
        }
        FaultKind::ClockSkew { node, offset_us } => {
            let mut st = world.state.lock().expect("world lock");
            let skew = st.step_clock(*node, *offset_us);
            format!(
                "{} wall clock stepped by {offset_us} us (offset now {skew} us)",
                NodeIndex(*node)
            )
        }
        FaultKind::WorkerCrash {
            node,
            local_rank,
            exit_code,
        } => worker_crash(world, *node, *local_rank, *exit_code),
        FaultKind::StoreCrash => store_crash(world, &handle),
        FaultKind::GpuSlow {
            node,
            gpu,
            factor,
            duration,
        } => gpu_slow(world, *node, *gpu, *factor, *duration),
        FaultKind::GpuFail { node, gpu } => gpu_fail(world, *node, *gpu),
    }
}

/// `clog_link`: the one-way link drops everything, and the world remembers it clogged.
fn clog_link(world: &World, from: u32, to: u32) -> String {
    cut_link(from, to, true);
    world
        .state
        .lock()
        .expect("world lock")
        .clogged
        .insert((from, to));
    format!(
        "link {} -> {} drops everything",
        NodeIndex(from),
        NodeIndex(to)
    )
}

/// `unclog_link`: the one-way link carries traffic again.
fn unclog_link(world: &Arc<World>, from: u32, to: u32) -> String {
    cut_link(from, to, false);
    world
        .state
        .lock()
        .expect("world lock")
        .clogged
        .remove(&(from, to));
    release_held_collectives(world);
    format!("link {} -> {} restored", NodeIndex(from), NodeIndex(to))
}

/// `start` and `restart`: a new agent process (killing a running one first).
fn start(world: &Arc<World>, handle: &Handle, node: u32) -> String {
    let (id, running) = {
        let mut st = world.state.lock().expect("world lock");
        let slot = &mut st.nodes[node as usize];
        slot.started = true;
        // madsim's restart thaws a paused node's new tasks.
        slot.paused = false;
        let started = (slot.id, slot.process.is_some());
        st.gpus.reset_node(node);
        // Workers a signal orphaned die with the node's processes too.
        (started.0, started.1 || st.workers.runs_on(node))
    };
    if running {
        kill(world, handle, node, Death::ProcessesKilled);
    }
    let mut st = world.state.lock().expect("world lock");
    st.nodes[node as usize].launch_pending(node);
    st.brought_back(node);
    drop(st);
    super::net::set_host_down(super::node_ip(node), false);
    handle.restart(id);
    format!("{} starts a new agent process", NodeIndex(node))
}

/// `heal`: every link a partition or clog cut works again.
fn heal(world: &Arc<World>) -> String {
    let links: Vec<(u32, u32)> =
        std::mem::take(&mut world.state.lock().expect("world lock").clogged)
            .into_iter()
            .collect();
    for (a, b) in &links {
        cut_link(*a, *b, false);
    }
    release_held_collectives(world);
    format!("{} cut links restored", links.len())
}

/// `gpu_slow`: a slowdown window on one GPU, from now.
fn gpu_slow(world: &World, node: u32, gpu: u32, factor: f64, duration: SimDuration) -> String {
    let now = super::time::now_whole_us();
    let mut st = world.state.lock().expect("world lock");
    st.gpus.slow_down(node, gpu, factor, now, duration);
    let lasting = match duration.as_us() {
        0 => "for the rest of the run".to_owned(),
        us => format!("for {us} us"),
    };
    format!(
        "{} gpu {gpu} computes {factor}x slower {lasting}",
        NodeIndex(node)
    )
}

/// `gpu_fail`: the GPU is lost (Xid 79) and the worker pinned to it dies with exit code 1, as
/// a CUDA error raised in the training script ends it.
fn gpu_fail(world: &World, node: u32, gpu: u32) -> String {
    let gpus_per_node = world.scenario.cluster.gpus_per_node;
    let nproc = world.scenario.agent.nproc_per_node;
    let mut st = world.state.lock().expect("world lock");
    st.gpus.fail(node, gpu);
    let worker = (0..nproc).find(|r| super::gpu::gpu_of_local_rank(*r, gpus_per_node) == gpu);
    match (st.nodes[node as usize].process.as_mut(), worker) {
        (Some(p), Some(local_rank)) => {
            p.worker_crash = Some((local_rank, super::gpu::GPU_LOST_EXIT_CODE));
            p.monitor_wake.notify();
            format!(
                "gpu {gpu} lost (Xid 79); worker {local_rank} of pid {} dies",
                p.pid
            )
        }
        _ => format!("gpu {gpu} lost (Xid 79); no worker runs on it"),
    }
}

/// `worker_crash`: the agent's next monitor tick sees the worker failed.
fn worker_crash(world: &World, node: u32, local_rank: u32, exit_code: i32) -> String {
    let mut st = world.state.lock().expect("world lock");
    match st.nodes[node as usize].process.as_mut() {
        Some(p) => {
            p.worker_crash = Some((local_rank, exit_code));
            p.monitor_wake.notify();
            format!(
                "worker {local_rank} of pid {} exits with {exit_code}",
                p.pid
            )
        }
        None => "no agent runs there; nothing crashed".to_owned(),
    }
}

fn set_paused(world: &World, node: u32, paused: bool) {
    world.state.lock().expect("world lock").nodes[node as usize].paused = paused;
}

fn node_id(world: &World, node: u32) -> madsim::task::NodeId {
    world.state.lock().expect("world lock").nodes[node as usize].id
}

/// How a node's processes die.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Death {
    /// SIGKILL on a live host (a killed pod): the kernel resets their connections at once.
    ProcessesKilled,
    /// The host vanishes: nothing answers, not even a reset, until it is restarted.
    PowerOff,
}

fn kill(world: &Arc<World>, handle: &Handle, node: u32, death: Death) -> String {
    let ip = super::node_ip(node);
    if death == Death::PowerOff {
        // Down first, so the servers dying with it go silent rather than reset.
        super::net::set_host_down(ip, true);
    }
    let (id, process, orphans) = {
        let mut st = world.state.lock().expect("world lock");
        let slot = &mut st.nodes[node as usize];
        let process = slot.process.take();
        // A killed agent, or one about to be relaunched, did not end the job: a `start` or
        // `restart` may still bring the node back.
        slot.down |= process.is_some() || slot.launching;
        // A launch still pending (a relaunch waiting out its delay) dies with the node's
        // tasks: nothing will start there until a `start` or `restart`.
        slot.launching = false;
        let id = slot.id;
        let workers_pid = st.workers.killed_with_node(node);
        st.withdraw(node, death == Death::ProcessesKilled);
        // Workers whose agent a signal ended, killed now with their node.
        let orphans = workers_pid.filter(|pid| process.as_ref().is_none_or(|p| p.pid != *pid));
        (id, process, orphans)
    };
    handle.kill(id);
    super::net::processes_died_on(ip);
    let Some(process) = process else {
        return killed_without_agent(world, node, death, orphans);
    };
    let at = time::now_whole_us();
    let name = TraceNode::node(node);
    world
        .recorder
        .record(at, Some(name), EventKind::AgentKilled { pid: process.pid });
    if process.store_task.is_some() {
        world.recorder.record(
            at,
            Some(name),
            EventKind::StoreDied {
                reason: match death {
                    Death::PowerOff => "its host was powered off".into(),
                    Death::ProcessesKilled => "its host agent process was killed".into(),
                },
            },
        );
    }
    let _ = world.exits.unbounded_send(());
    match death {
        Death::PowerOff => format!("{} powered off (pid {} gone)", NodeIndex(node), process.pid),
        Death::ProcessesKilled => format!("{} killed (pid {})", NodeIndex(node), process.pid),
    }
}

/// The end of a `kill` or `power_off` of a node that ran no agent: only workers its agent
/// left orphaned may have been running there; they kept the run going, and it may now be
/// over.
fn killed_without_agent(world: &World, node: u32, death: Death, orphans: Option<u32>) -> String {
    let orphans = orphans.map(|pid| {
        world.recorder.record(
            time::now_whole_us(),
            Some(TraceNode::node(node)),
            EventKind::WorkersStopped {
                pid,
                reason: "orphaned, they died with their node".into(),
            },
        );
        format!("; the orphaned workers of pid {pid} died with it")
    });
    let _ = world.exits.unbounded_send(());
    let orphans = orphans.unwrap_or_default();
    match death {
        Death::PowerOff => format!(
            "{} powered off (no agent was running){orphans}",
            NodeIndex(node)
        ),
        Death::ProcessesKilled => format!("{}: no agent was running{orphans}", NodeIndex(node)),
    }
}

fn stop(world: &World, node: u32) -> String {
    let mut st = world.state.lock().expect("world lock");
    match st.nodes[node as usize].process.as_mut() {
        Some(p) => {
            p.stop_requested = true;
            for waiter in p.stop_waiters.drain(..) {
                let _ = waiter.send(());
            }
            format!("SIGTERM to pid {}", p.pid)
        }
        None => "no agent runs there".to_owned(),
    }
}

/// `signal`: a user signal to the node's torchrun. An agent told to handle it stops its
/// workers with it, as SIGTERM's handler does; one not told dies by the signal's default
/// action at once, and its workers (each in a session of its own) never see it and train on,
/// orphaned (`super::workers`). The store it hosts dies with it. A training script that
/// checkpoints on the signal asks for a checkpoint when it reaches its workers.
fn user_signal(world: &World, node: u32, signal: Signal) -> String {
    let handled = world.scenario.agent.signals_to_handle.contains(&signal);
    let mut st = world.state.lock().expect("world lock");
    let Some(p) = st.nodes[node as usize].process.as_mut() else {
        return "no agent runs there".to_owned();
    };
    let pid = p.pid;
    for waiter in p.stop_waiters.drain(..) {
        let _ = waiter.send(());
    }
    if !handled {
        p.fatal_signal = Some(signal);
        return format!(
            "{signal} to pid {pid}: torchrun has no handler for it and dies by it (exit -{}); \
             its workers, in sessions of their own, never see it and train on",
            signal.number()
        );
    }
    p.stop_requested = true;
    p.stop_signal = Some(signal);
    let checkpoints = world.scenario.job.checkpoint_on_signal == Some(signal);
    st.checkpoint_requested |= checkpoints;
    format!(
        "{signal} to pid {pid}: torchrun handles it (--signals-to-handle) and sends it to its \
         workers{}",
        if checkpoints {
            ", whose script checkpoints on it"
        } else {
            ", whose script has no handler for it: they die at once"
        }
    )
}

/// After links come back: an all-reduce a cut link held back with every rank arrived goes on
/// when the held sender's next retransmission gets through (its RTO doubling from 200 ms
/// since the hold), unless TCP gave up on the connection before the links came back.
fn release_held_collectives(world: &Arc<World>) {
    let now = time::now();
    let held = {
        let st = world.state.lock().expect("world lock");
        let clogged = &st.clogged;
        st.collectives
            .held_back(|nodes| super::state::links_connected(clogged, nodes))
    };
    let give_up = super::net::tcp_give_up(world.scenario.cluster.tcp_retries2);
    for (key, since_ns) in held {
        let since = SimInstant::from_ns(since_ns);
        if now.since(since) > give_up {
            continue;
        }
        let at = super::net::next_retransmission(since, now);
        let world = world.clone();
        spawn(async move {
            time::sleep(at.since(time::now())).await;
            let mut st = world.state.lock().expect("world lock");
            let st = &mut *st;
            let clogged = &st.clogged;
            st.collectives
                .release_if_connected(key, |nodes| super::state::links_connected(clogged, nodes));
        });
    }
}

/// Cuts (or restores) the directed link between two nodes.
fn cut_link(from: u32, to: u32, cut: bool) {
    super::net::set_link_cut(super::node_ip(from), super::node_ip(to), cut);
}

fn partition(world: &World, groups: &[Vec<u32>]) -> String {
    let mut cut = 0;
    for (gi, a_group) in groups.iter().enumerate() {
        for (gj, b_group) in groups.iter().enumerate() {
            if gi == gj {
                continue;
            }
            for a in a_group {
                for b in b_group {
                    cut_link(*a, *b, true);
                    world
                        .state
                        .lock()
                        .expect("world lock")
                        .clogged
                        .insert((*a, *b));
                    cut += 1;
                }
            }
        }
    }
    format!("{} groups, {cut} directed links cut", groups.len())
}

/// One network parameter a fault sets.
#[derive(Debug, Clone, Copy, PartialEq)]
enum NetChange {
    Latency(SimDuration, SimDuration),
    Loss(f64),
}

/// Applies `change`; with a duration, puts back what that parameter was before it when the
/// duration ends, unless a later fault changed the same parameter meanwhile.
fn change_network_for(world: &Arc<World>, change: NetChange, duration: Option<SimDuration>) {
    let (previous, generation) = {
        let mut st = world.state.lock().expect("world lock");
        let previous = match change {
            NetChange::Latency(..) => NetChange::Latency(st.latency.0, st.latency.1),
            NetChange::Loss(_) => NetChange::Loss(st.loss),
        };
        (previous, record_change(&mut st, change))
    };
    apply_change(change);
    let Some(duration) = duration else {
        return;
    };
    let world = world.clone();
    spawn(async move {
        time::sleep(duration).await;
        let mut st = world.state.lock().expect("world lock");
        let current = match previous {
            NetChange::Latency(..) => st.latency_generation,
            NetChange::Loss(_) => st.loss_generation,
        };
        if current == generation {
            record_change(&mut st, previous);
            apply_change(previous);
        }
    });
}

/// Notes the new value in the world state; returns that parameter's new generation.
fn record_change(st: &mut super::state::WorldState, change: NetChange) -> u64 {
    match change {
        NetChange::Latency(min, max) => {
            st.latency = (min, max);
            st.latency_generation += 1;
            st.latency_generation
        }
        NetChange::Loss(p) => {
            st.loss = p;
            st.loss_generation += 1;
            st.loss_generation
        }
    }
}

fn apply_change(change: NetChange) {
    match change {
        NetChange::Latency(min, max) => super::net::set_latency(min, max),
        NetChange::Loss(p) => super::net::set_loss(p),
    }
}

fn store_crash(world: &Arc<World>, handle: &Handle) -> String {
    let (hosted, dedicated) = world.state.lock().expect("world lock").take_store();
    let store_node = match world.scenario.cluster.store {
        crate::scenario::model::StoreHost::Node(i) => TraceNode::node(i),
        crate::scenario::model::StoreHost::Dedicated => TraceNode::Store,
    };
    let alive = hosted.is_some() || dedicated.is_some();
    if let Some(task) = hosted {
        task.abort();
    }
    if let Some(id) = dedicated {
        // The store process dies on its live machine: its connections reset at once.
        handle.kill(id);
        super::net::processes_died_on(world.store_addr.ip());
    }
    if alive {
        world.recorder.record(
            time::now_whole_us(),
            Some(store_node),
            EventKind::StoreDied {
                reason: "store_crash".into(),
            },
        );
        "the store died with its in-memory state".to_owned()
    } else {
        "the store was already down".to_owned()
    }
}
