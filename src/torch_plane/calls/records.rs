//! What torch's code told the trace (through the host's hooks on its methods), as the
//! model's agent records the same moments; and the rendezvous executor's steps, which go to
//! the run's story as the model's handler records them.

use super::super::node::Proc;
use super::super::workers::RoundSeen;
use super::StoreClient;
use crate::scenario::node::NodeIndex;
use crate::sim_time::SimDuration;
use crate::trace::story::{
    ListSizes, Member, RendezvousAction, RendezvousLists, RendezvousOp, RendezvousStep,
};
use crate::trace::{EventKind, RendezvousErrorKind, WorkerGroupState};
use serde_json::Value;
use std::str::FromStr;
use std::sync::Arc;

fn text(event: &Value, key: &str) -> String {
    event[key].as_str().unwrap_or("").to_owned()
}

fn int(event: &Value, key: &str) -> u64 {
    event[key].as_u64().unwrap_or(0)
}

/// The rendezvous backend's store client, once torch made one.
fn rendezvous_client(proc: &Proc) -> Option<StoreClient> {
    proc.state
        .lock()
        .expect("state lock")
        .rendezvous_store
        .clone()
}

/// The store incarnation the rendezvous backend's client reached (1 before it reached any).
async fn incarnation(proc: &Proc) -> u64 {
    match rendezvous_client(proc) {
        Some(client) => client.incarnation().await.unwrap_or(1),
        None => 1,
    }
}

/// Records one event the host reported.
pub async fn record(proc: &Proc, event: &Value) {
    let env = &proc.env;
    let pid = env.pid;
    match event["kind"].as_str().unwrap_or("") {
        "rendezvous_joining" => env.record(EventKind::RendezvousJoining { pid }),
        "rendezvous_completed" => completed(proc, event).await,
        "rendezvous_failed" => {
            proc.state.lock().expect("state lock").rendezvous_failed = true;
            env.record(EventKind::RendezvousFailed {
                pid,
                error: RendezvousErrorKind::from_str(&text(event, "error"))
                    .unwrap_or(RendezvousErrorKind::StateError),
                message: text(event, "message"),
            });
        }
        "rendezvous_closed" => {
            let store_incarnation = incarnation(proc).await;
            env.record(EventKind::RendezvousClosed {
                pid,
                round: int(event, "round"),
                store_incarnation,
            });
        }
        "worker_group_state" => group_state(proc, &text(event, "state")),
        "agent_restart" => restart(proc, event),
        "rendezvous_step" => rendezvous_step(proc, event),
        other => panic!(
            "torch's control plane on {}: unknown record {other:?}",
            env.name
        ),
    }
}

async fn completed(proc: &Proc, event: &Value) {
    let env = &proc.env;
    let participants: Arc<[NodeIndex]> = event["participants"]
        .as_array()
        .map(|names| {
            names
                .iter()
                .map(|name| {
                    let name = name.as_str().unwrap_or("");
                    name.parse().unwrap_or_else(|_| {
                        panic!(
                            "torch's rendezvous on {} named a participant {name:?}",
                            env.name
                        )
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let store_incarnation = incarnation(proc).await;
    let round = RoundSeen {
        round: int(event, "round"),
        rank: u32::try_from(int(event, "rank")).unwrap_or(u32::MAX),
        world_size: u32::try_from(int(event, "world_size")).unwrap_or(u32::MAX),
        participants,
        store_incarnation,
    };
    env.record(EventKind::RendezvousCompleted {
        pid: env.pid,
        round: round.round,
        rank: round.rank,
        world_size: round.world_size,
        participants: Arc::clone(&round.participants),
        store_incarnation,
    });
    if let Some(rank0) = round.participants.first() {
        crate::agent::rank0::round_completed(env, store_incarnation, round.round, rank0.0);
    }
    proc.state.lock().expect("state lock").round = Some(round);
}

/// `[[addr, pid], ...]` as list entries; an address that names no node is left out.
fn members(value: &Value) -> Vec<Member> {
    let entries = value.as_array().map(Vec::as_slice).unwrap_or_default();
    entries
        .iter()
        .filter_map(|entry| {
            let node: NodeIndex = entry[0].as_str()?.parse().ok()?;
            let pid = u32::try_from(entry[1].as_u64()?).ok()?;
            Some(Member { node, pid })
        })
        .collect()
}

/// One step of torch's rendezvous executor, for the run's story. It is stamped when the
/// node decided it (`decided_mono_s`, the node's monotonic clock then), as the model's
/// handler stamps its steps. Nothing here waits: a record must not move the simulation.
fn rendezvous_step(proc: &Proc, event: &Value) {
    let env = &proc.env;
    let (Some(op), Some(action)) = (
        RendezvousOp::from_name(event["op"].as_str().unwrap_or("")),
        RendezvousAction::from_torch_name(event["action"].as_str().unwrap_or("")),
    ) else {
        panic!(
            "torch's control plane on {}: a rendezvous step {event}",
            env.name
        );
    };
    let now = crate::world::time::now_whole_us();
    let decided_us =
        crate::sim_time::secs_f64_as_us_f64(event["decided_mono_s"].as_f64().unwrap_or(0.0));
    let ago_us = (env.now_mono_us() as f64 - decided_us).max(0.0);
    let at = now.before(SimDuration::from_us_f64_rounded(ago_us));
    let size =
        |i: usize| u32::try_from(event["sizes"][i].as_u64().unwrap_or(0)).unwrap_or(u32::MAX);
    let client = rendezvous_client(proc);
    let step = RendezvousStep {
        at,
        node: NodeIndex(env.index),
        pid: env.pid,
        op,
        action,
        store_incarnation: client
            .and_then(|c| futures::FutureExt::now_or_never(c.incarnation()).flatten())
            .unwrap_or(0),
        round: int(event, "round"),
        complete: event["complete"].as_bool().unwrap_or(false),
        closed: event["closed"].as_bool().unwrap_or(false),
        dropped: members(&event["dropped"]),
        sizes: ListSizes {
            participants: size(0),
            wait_list: size(1),
            redundancy_list: size(2),
        },
        lists: None,
    };
    env.record_rendezvous_step(step, || RendezvousLists {
        participants: members(&event["participants"]),
        wait_list: members(&event["wait_list"]),
        redundancy_list: members(&event["redundancy_list"]),
    });
}

fn group_state(proc: &Proc, name: &str) {
    // torch's UNKNOWN (pids that do not match) has no place in the trace's states.
    let Ok(state) = WorkerGroupState::from_str(name) else {
        return;
    };
    let mut st = proc.state.lock().expect("state lock");
    match state {
        WorkerGroupState::Succeeded => st.stop_reason = Some("succeeded"),
        WorkerGroupState::Failed if st.stop_reason.is_none() => {
            st.stop_reason = Some("no restarts remain");
        }
        _ => {}
    }
    drop(st);
    proc.env.record(EventKind::WorkerGroupState {
        pid: proc.env.pid,
        state,
    });
}

fn restart(proc: &Proc, event: &Value) {
    let counted = event["counted"].as_bool().unwrap_or(false);
    let reason = text(event, "reason");
    proc.state.lock().expect("state lock").stop_reason = Some(if counted {
        "a worker failed"
    } else {
        "membership change"
    });
    proc.env.record(EventKind::AgentRestart {
        pid: proc.env.pid,
        counted,
        restart_count: u32::try_from(int(event, "restart_count")).unwrap_or(u32::MAX),
        reason,
    });
}

/// torch's rendezvous errors by class, as the trace names their kinds.
const ERROR_KINDS: &[(&str, RendezvousErrorKind)] = &[
    (
        "RendezvousGracefulExitError",
        RendezvousErrorKind::GracefulExit,
    ),
    ("RendezvousClosedError", RendezvousErrorKind::Closed),
    ("RendezvousTimeoutError", RendezvousErrorKind::Timeout),
    (
        "RendezvousConnectionError",
        RendezvousErrorKind::StoreUnreachable,
    ),
    ("RendezvousStateError", RendezvousErrorKind::StateError),
    // A store call of the agent's own (the rank exchange, the bootstrap address) that fails
    // ends it as the model's agent ends on the same store error: the store unreachable.
    ("DistStoreError", RendezvousErrorKind::StoreUnreachable),
    ("DistNetworkError", RendezvousErrorKind::StoreUnreachable),
];

/// The agent exits on a rendezvous error raised outside `next_rendezvous` (the monitor's
/// `num_nodes_waiting`, the exit's `shutdown`): recorded as the model's agent records every
/// rendezvous error that ends it.
pub fn exit_on_rendezvous_error(proc: &Proc, error: &str, message: &str) {
    let Some((_, kind)) = ERROR_KINDS.iter().find(|(name, _)| *name == error) else {
        return;
    };
    if std::mem::take(&mut proc.state.lock().expect("state lock").rendezvous_failed) {
        return;
    }
    proc.env.record(EventKind::RendezvousFailed {
        pid: proc.env.pid,
        error: *kind,
        message: message.to_owned(),
    });
}
