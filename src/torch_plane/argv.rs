//! The torchrun command line each node runs, from the scenario: what a user would type.

use crate::scenario::model::{Scenario, StoreHost, RUN_ID};
use crate::sim_time::SimDuration;
use crate::trace::node::STORE_NAME;
use crate::world::STORE_PORT;
use std::collections::BTreeMap;

/// torch reads the rendezvous timeouts as whole seconds (`get_as_int`).
fn whole_seconds(span: SimDuration, key: &str) -> Result<u64, String> {
    if span.subsec_us() != 0 {
        return Err(format!(
            "rendezvous.{key}: torch reads it as whole seconds, and {} s is not",
            span.as_secs_f64()
        ));
    }
    Ok(span.as_secs())
}

/// Where the c10d store is, as torchrun's `--rdzv-endpoint` names it.
pub fn store_endpoint(scenario: &Scenario) -> String {
    match scenario.cluster.store {
        StoreHost::Node(index) => {
            format!("{}:{STORE_PORT}", crate::scenario::model::node_name(index))
        }
        StoreHost::Dedicated => format!("{STORE_NAME}:{STORE_PORT}"),
    }
}

/// `torchrun`'s arguments for node `index` (the training script is never run: the seam
/// starts the simulated workers instead).
pub fn torchrun_args(scenario: &Scenario, index: u32) -> Result<Vec<String>, String> {
    let rdzv = &scenario.rendezvous;
    let agent = &scenario.agent;
    let is_host = u32::from(scenario.cluster.store == StoreHost::Node(index));
    let spans = [
        ("join_timeout", rdzv.join_timeout),
        ("last_call_timeout", rdzv.last_call_timeout),
        ("close_timeout", rdzv.close_timeout),
        ("heartbeat_timeout", rdzv.heartbeat_timeout),
        ("keep_alive_interval", rdzv.keep_alive_interval),
        ("read_timeout", rdzv.read_timeout),
    ];
    let mut conf = spans
        .into_iter()
        .map(|(key, span)| Ok(format!("{key}={}", whole_seconds(span, key)?)))
        .collect::<Result<Vec<_>, String>>()?;
    conf.push(format!(
        "keep_alive_max_attempt={}",
        rdzv.keep_alive_max_attempt
    ));
    conf.push(format!("is_host={is_host}"));
    if !rdzv.cas_backoff_max.is_zero() {
        conf.push(format!(
            "cas_backoff_max_seconds={}",
            rdzv.cas_backoff_max.as_secs_f64()
        ));
    }
    Ok(vec![
        "--nnodes".into(),
        format!("{}:{}", rdzv.min_nodes, rdzv.max_nodes),
        "--nproc-per-node".into(),
        agent.nproc_per_node.to_string(),
        "--max-restarts".into(),
        agent.max_restarts.to_string(),
        "--monitor-interval".into(),
        agent.monitor_interval.as_secs_f64().to_string(),
        "--rdzv-backend".into(),
        "c10d".into(),
        "--rdzv-endpoint".into(),
        store_endpoint(scenario),
        "--rdzv-id".into(),
        RUN_ID.into(),
        "--rdzv-conf".into(),
        conf.join(","),
        "--local-addr".into(),
        crate::scenario::model::node_name(index),
        "train.py".into(),
    ])
}

/// The environment every torchrun of the run shares, from the scenario.
pub fn run_env(scenario: &Scenario) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    env.insert(
        "TORCH_DISABLE_SHARE_RDZV_TCP_STORE".to_owned(),
        if scenario.agent.share_store { "0" } else { "1" }.to_owned(),
    );
    if scenario.agent.worker_identical {
        env.insert("TORCH_ELASTIC_WORKER_IDENTICAL".to_owned(), "1".to_owned());
    }
    env
}

/// Why a scenario cannot run on torch's own control plane, before any run starts: named
/// fixes are the model's (real torch has none), and torch reads its timeouts in seconds.
pub fn refusal(scenario: &Scenario) -> Option<String> {
    if !scenario.rendezvous.fixes.is_empty() || !scenario.agent.fixes.is_empty() {
        return Some(
            "fixes: named fixes are the model's; torch's own code runs as it is (drop them, or \
             lay the fix over torch with --torch-elastic-src)"
                .to_owned(),
        );
    }
    torchrun_args(scenario, 0).err()
}
