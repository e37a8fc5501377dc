//! What store tests share: a small cluster around the real store, and a log of what each
//! node's program saw and when.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use trainsim::scenario::model::*;
use trainsim::sim_time::SimDuration;
use trainsim::store::service::StoreClient;
use trainsim::trace::Trace;
use trainsim::world::time::elapsed_us;
use trainsim::world::{NodeEnv, Programs};

pub const SEED: u64 = 11;
pub const SEC: u64 = 1_000_000;

pub fn scenario(nodes: u32, store: StoreHost, faults: Vec<Fault>) -> Scenario {
    let mut s = trainsim::scenario::default_scenario("store-service");
    s.seed = SEED;
    s.time_limit = SimDuration::from_us(3_600 * SEC);
    s.cluster.nodes = nodes;
    s.cluster.spare_nodes = 0;
    s.cluster.store = store;
    s.cluster.clock_skew_us = BTreeMap::new();
    s.network = Network {
        latency_min: SimDuration::from_us(1000),
        latency_max: SimDuration::from_us(5000),
        loss: 0.0,
        bandwidth_bits_per_sec: 100_000_000_000,
        store_host_bandwidth_bits_per_sec: 100_000_000_000,
    };
    s.faults = faults;
    s
}

pub fn run(s: &Scenario, programs: Programs) -> (Trace, trainsim::trace::RunEnd) {
    let run = trainsim::world::simulate(s, SEED, programs).expect("the run finishes");
    (run.trace, run.end)
}

/// A shared log of what the programs saw: (node, what, simulated time).
pub type Log = Arc<Mutex<Vec<(u32, String, u64)>>>;

pub fn note(log: &Log, env: &NodeEnv, what: String) {
    log.lock().unwrap().push((env.index, what, elapsed_us()));
}

pub fn entries(log: &Log, node: u32) -> Vec<(String, u64)> {
    log.lock()
        .unwrap()
        .iter()
        .filter(|(n, _, _)| *n == node)
        .map(|(_, w, t)| (w.clone(), *t))
        .collect()
}

pub fn find(log: &Log, node: u32, prefix: &str) -> (String, u64) {
    entries(log, node)
        .into_iter()
        .find(|(w, _)| w.starts_with(prefix))
        .unwrap_or_else(|| {
            panic!(
                "node-{node} logged nothing starting with {prefix:?}; log: {:?}",
                log.lock().unwrap()
            )
        })
}

/// The time node `node` logged as `{prefix}{microseconds}`.
pub fn logged_us(log: &Log, node: u32, prefix: &str) -> u64 {
    let (what, _) = find(log, node, prefix);
    let number = what.trim_start_matches(prefix);
    number
        .parse()
        .unwrap_or_else(|e| panic!("node-{node} logged {what:?}, not a time in us: {e}"))
}

pub async fn client(env: &NodeEnv, timeout_us: u64) -> StoreClient {
    StoreClient::connect(env.store_addr(), SimDuration::from_us(timeout_us))
        .await
        .expect("a client binds")
}

pub fn keys(names: &[&str]) -> Vec<String> {
    names.iter().map(|k| k.to_string()).collect()
}
