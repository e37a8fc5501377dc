//! The calls torch's Python makes into the simulated world, served: sleeps, waits on locks
//! and threads, the store client, the workers, identity, and what the trace records.

use super::node::Proc;
use super::workers::{self, RoundSeen, WorkerEnv, Workers};
use crate::job::bootstrap::AgentStoreRule;
use crate::job::WorkerStatus;
use crate::sim_time::SimDuration;
use crate::store::cost::StoreCosts;
use crate::store::service::{StoreClient, StoreError};
use crate::trace::EventKind;
use crate::world::net::{CallCpu, ReplyCpu};
use crate::world::time;
use base64::Engine;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What one torchrun process's threads share beside their Python.
#[derive(Default)]
pub struct ProcState {
    /// The store clients torch made, by handle (index + 1).
    stores: Vec<StoreClient>,
    /// The rendezvous backend's client (the first made to the c10d store's address).
    rendezvous_store: Option<StoreClient>,
    round: Option<RoundSeen>,
    pub(super) workers: Option<Workers>,
    /// Why the workers stop next, from what the agent just decided.
    stop_reason: Option<&'static str>,
    /// The last worker failure, as the model's agent words it.
    pub(super) last_failure: Option<String>,
    /// `next_rendezvous` raised, and the trace has it.
    rendezvous_failed: bool,
    highest_step: Arc<AtomicU64>,
}

/// Whether SIGTERM cuts the call short (a sleep or a wait) rather than waiting for its end
/// (a store call, which the TCPStore client retries on EINTR).
pub fn interruptible(message: &Value) -> bool {
    matches!(message["call"].as_str(), Some("sleep" | "park"))
}

fn seconds(value: &Value) -> SimDuration {
    let s = value.as_f64().unwrap_or(0.0).max(0.0);
    SimDuration::from_us_f64_rounded(crate::sim_time::secs_f64_as_us_f64(s))
}

/// Serves one call; the reply the thread is resumed with.
pub async fn serve(proc: &Arc<Proc>, message: &Value) -> Value {
    let env = &proc.env;
    match message["call"].as_str().unwrap_or("") {
        "sleep" => {
            time::sleep(seconds(&message["s"])).await;
            json!({})
        }
        "park" => park(proc, message).await,
        "unpark" => {
            proc.run.unpark(message["key"].as_str().unwrap_or(""));
            json!({})
        }
        "spawn" => {
            proc.spawn_thread(message["child"].as_u64().expect("a spawned thread's id"));
            json!({})
        }
        "free_port" => json!({"port": env.free_port()}),
        "store_connect" => store_connect(proc, message).await,
        "store" => store_call(proc, message).await,
        "workers_start" => workers_start(proc, message),
        "workers_poll" => workers_poll(proc),
        "workers_close" => workers_close(proc).await,
        "record" => {
            record(proc, &message["event"]).await;
            json!({})
        }
        other => panic!(
            "torch's control plane on {}: unknown call {other:?}",
            env.name
        ),
    }
}

async fn park(proc: &Proc, message: &Value) -> Value {
    let woken = proc.run.park(message["key"].as_str().unwrap_or(""));
    match message["timeout_s"].as_f64() {
        None => json!({"woken": woken.await.is_ok()}),
        Some(_) => {
            let within = time::timeout(seconds(&message["timeout_s"]), woken).await;
            json!({"woken": matches!(within, Some(Ok(())))})
        }
    }
}

fn store_error(e: &StoreError) -> Value {
    let kind = match e {
        StoreError::WaitTimeout { .. } => "timeout",
        StoreError::Connection(_) => "network",
        StoreError::Refused(_) => "refused",
    };
    json!({"error": kind, "message": e.to_string()})
}

/// Where `host:port` is in the world: a node by name, or the dedicated store.
fn resolve(proc: &Proc, host: &str, port: u16) -> Option<SocketAddr> {
    if host == crate::trace::node::STORE_NAME {
        return Some(proc.env.store_addr());
    }
    proc.env.resolve(host, port)
}

/// torch constructs a `TCPStore`: with `is_master`, its server first (on a free port for
/// port 0), unless the world already serves the c10d store there; then a client.
async fn store_connect(proc: &Proc, message: &Value) -> Value {
    let env = &proc.env;
    let host = message["host"].as_str().unwrap_or("");
    let mut port = u16::try_from(message["port"].as_u64().unwrap_or(0)).unwrap_or(0);
    let is_master = message["is_master"].as_bool().unwrap_or(false);
    if is_master && port == 0 {
        port = env.free_port();
    }
    let Some(addr) = resolve(proc, host, port) else {
        return json!({"error": "network", "message": format!("unknown host {host}")});
    };
    if is_master && addr != env.store_addr() {
        let server = env.serve_store(port);
        env.record(EventKind::WorkerStoreStarted { pid: env.pid, port });
        // The server lives as long as the process: it is one of the process's tasks.
        std::mem::forget(server);
    }
    let client = match StoreClient::connect(addr, seconds(&message["timeout_s"])).await {
        Ok(client) => client,
        Err(e) => return store_error(&e),
    };
    let mut state = proc.state.lock().expect("state lock");
    if addr == env.store_addr() && state.rendezvous_store.is_none() {
        state.rendezvous_store = Some(client.clone());
    }
    state.stores.push(client);
    json!({"store": state.stores.len(), "port": port})
}

/// The CPU time torch's Python spends around a read or write of the rendezvous state, which
/// the simulator cannot see (time stands still while Python runs): pickling and encoding the
/// `written` bytes before, decoding the state read after, at the rates the model charges
/// its own agents (`store::cost`). At 128 nodes that is 0.4 ms a state, enough to starve
/// heartbeats; other keys cost nothing here.
fn state_cpu(proc: &Proc, key: &str, written: usize) -> CallCpu {
    let state = &proc.rendezvous_state;
    if key != state.key {
        return CallCpu::default();
    }
    CallCpu {
        before_ns: if written > 0 {
            state.costs.state_encode_ns(written)
        } else {
            0
        },
        after: Some(Arc::clone(&state.decoding)),
    }
}

/// What reading and writing the rendezvous state costs a torchrun process, made once.
pub struct StateCosts {
    /// The key torch's c10d rendezvous backend keeps its state under.
    key: String,
    costs: StoreCosts,
    decoding: ReplyCpu,
}

impl StateCosts {
    pub fn of(scenario: &crate::scenario::model::Scenario) -> Self {
        let costs = StoreCosts::scaled(scenario.cluster.store_cost_scale);
        StateCosts {
            key: format!("torch.rendezvous.{}", crate::scenario::model::RUN_ID),
            costs,
            decoding: costs.state_decoding(),
        }
    }
}

fn bytes_of(value: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(value.as_str().unwrap_or(""))
        .unwrap_or_default()
}

fn b64(value: &[u8]) -> Value {
    json!(base64::engine::general_purpose::STANDARD.encode(value))
}

fn keys_of(message: &Value) -> Vec<String> {
    message["keys"]
        .as_array()
        .map(|keys| {
            keys.iter()
                .filter_map(|k| k.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// One store call on the client torch holds.
async fn store_call(proc: &Proc, message: &Value) -> Value {
    let handle = message["store"].as_u64().unwrap_or(0) as usize;
    let client = {
        let state = proc.state.lock().expect("state lock");
        state.stores.get(handle.wrapping_sub(1)).cloned()
    };
    let Some(client) = client else {
        panic!(
            "torch's control plane on {}: no store {handle}",
            proc.env.name
        );
    };
    let key = message["key"].as_str().unwrap_or("");
    // A call that waits for keys carries the timeout torch's `Store` holds at that moment.
    if !message["timeout_s"].is_null() {
        client.set_timeout(seconds(&message["timeout_s"]));
    }
    let result = match message["op"].as_str().unwrap_or("") {
        "set" => client
            .set(key, bytes_of(&message["value"]))
            .await
            .map(|()| json!({})),
        "get" => client
            .get_costing(key, state_cpu(proc, key, 0))
            .await
            .map(|v| json!({"value": b64(&v)})),
        "add" => {
            let amount = message["amount"].as_i64().unwrap_or(0);
            client.add(key, amount).await.map(|n| json!({"int": n}))
        }
        "compare_set" => {
            let (expected, desired) = (
                bytes_of(&message["expected"]),
                bytes_of(&message["desired"]),
            );
            let cpu = state_cpu(proc, key, desired.len());
            client
                .compare_set_costing(key, (expected.into(), desired.into()), cpu)
                .await
                .map(|v| json!({"value": b64(&v)}))
        }
        "wait" => client.wait(keys_of(message)).await.map(|()| json!({})),
        "check" => client
            .check(keys_of(message))
            .await
            .map(|b| json!({"bool": b})),
        "delete_key" => client.delete_key(key).await.map(|b| json!({"bool": b})),
        "num_keys" => client.num_keys().await.map(|n| json!({"int": n})),
        "multi_get" => client
            .multi_get(keys_of(message))
            .await
            .map(|values| json!({"values": values.iter().map(|v| b64(v)).collect::<Vec<_>>()})),
        "multi_set" => {
            let values = message["values"].as_array().cloned().unwrap_or_default();
            let entries = keys_of(message)
                .into_iter()
                .zip(values.iter().map(bytes_of))
                .collect();
            client.multi_set(entries).await.map(|()| json!({}))
        }
        other => panic!("torch's control plane: unknown store op {other:?}"),
    };
    result.unwrap_or_else(|e| store_error(&e))
}

/// The worker pids an agent process hands out start at its own pid times this, so no two
/// processes of a run share one.
const WORKER_PIDS_PER_AGENT: u64 = 4096;

fn workers_start(proc: &Proc, message: &Value) -> Value {
    let envs: Vec<WorkerEnv> = serde_json::from_value(message["envs"].clone())
        .unwrap_or_else(|e| panic!("torch's control plane: worker environments: {e}"));
    let mut state = proc.state.lock().expect("state lock");
    let Some(round) = state.round.clone() else {
        panic!(
            "torch's agent on {} started workers before any round",
            proc.env.name
        );
    };
    let highest_step = Arc::clone(&state.highest_step);
    let (major, minor) = proc.run.torch_release();
    let rule = AgentStoreRule::of_torch(major, minor);
    let mutants = &proc.run.mutants;
    match workers::start(&proc.env, &round, &envs, &highest_step, mutants, rule) {
        Ok(workers) => state.workers = Some(workers),
        Err(why) => panic!("torch's agent on {}: {why}", proc.env.name),
    }
    proc.signal_handler.store(true, Ordering::Relaxed);
    let pids: Vec<u64> = (0..envs.len() as u64)
        .map(|i| u64::from(proc.env.pid) * WORKER_PIDS_PER_AGENT + i)
        .collect();
    json!({"pids": pids})
}

/// Whether this process's workers run now, as `workers_poll` would answer (a crash the world
/// injected counts as not running, so the poll that reports it makes its round trip).
pub fn workers_running(proc: &Proc) -> bool {
    let state = proc.state.lock().expect("state lock");
    state
        .workers
        .as_ref()
        .is_some_and(|w| w.poll(&proc.env) == WorkerStatus::Healthy)
}

fn workers_poll(proc: &Proc) -> Value {
    let mut state = proc.state.lock().expect("state lock");
    let Some(workers) = state.workers.as_ref() else {
        return json!({"state": "running"});
    };
    match workers.poll(&proc.env) {
        WorkerStatus::Healthy => json!({"state": "running"}),
        WorkerStatus::Succeeded => json!({"state": "succeeded"}),
        WorkerStatus::Failed {
            local_rank,
            exit_code,
            reason,
        } => {
            proc.env.record(EventKind::WorkerFailed {
                pid: proc.env.pid,
                local_rank,
                exit_code,
                reason: reason.clone(),
            });
            proc.env.clear_worker_crash();
            state.last_failure = Some(format!("worker {local_rank} failed ({reason})"));
            json!({"state": "failed", "failures": [{"local_rank": local_rank, "exit_code": exit_code}]})
        }
    }
}

async fn workers_close(proc: &Proc) -> Value {
    let (workers, reason) = {
        let mut state = proc.state.lock().expect("state lock");
        (state.workers.take(), state.stop_reason.take())
    };
    if let Some(workers) = workers {
        workers
            .stop(
                &proc.env,
                reason.unwrap_or("the agent shut down its workers"),
            )
            .await;
    }
    json!({})
}

mod records;
pub use records::exit_on_rendezvous_error;
use records::record;
