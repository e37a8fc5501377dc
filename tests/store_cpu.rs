//! CPU a store client spends around a call (torch's rendezvous encoding the state it writes
//! and decoding the state it reads), folded into the call's messages: the same moments as
//! spending it apart, no timer of its own, a request whose client went away before it left
//! never arriving, and a reply that landed counting as received whatever comes after.

mod common;

use common::{done, programs};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use trainsim::scenario::model::*;
use trainsim::sim_time::{SimDuration, SimInstant};
use trainsim::store::service::StoreClient;
use trainsim::store::Value;
use trainsim::world::net::CallCpu;
use trainsim::world::time::{elapsed_ns, sleep_us, spend_cpu_ns};
use trainsim::world::{NodeEnv, Programs, SimulatedRun};

const SEED: u64 = 5;
const MS_NS: u64 = 1_000_000;
const BEFORE_NS: u64 = 3 * MS_NS;
const AFTER_NS: u64 = 2 * MS_NS;

/// One agent node and a dedicated store, one fixed latency, no store costs but the
/// client's own.
fn scenario(faults: Vec<Fault>) -> Scenario {
    let mut s = trainsim::scenario::default_scenario("store cpu");
    s.seed = SEED;
    s.time_limit = SimDuration::from_secs(60);
    s.cluster.nodes = 1;
    s.cluster.store = StoreHost::Dedicated;
    s.cluster.store_cost_scale = 0.0;
    s.cluster.clock_skew_us = BTreeMap::new();
    s.network.latency_min = SimDuration::from_us(1_000);
    s.network.latency_max = SimDuration::from_us(1_000);
    s.faults = faults;
    s
}

fn run(s: &Scenario, programs: Programs) -> SimulatedRun {
    trainsim::world::simulate(s, SEED, programs).expect("the run finishes")
}

fn cpu() -> CallCpu {
    CallCpu {
        before_ns: BEFORE_NS,
        after: Some(Arc::new(|_reply| AFTER_NS)),
    }
}

async fn client(env: &NodeEnv) -> StoreClient {
    let store = StoreClient::connect(env.store_addr(), SimDuration::from_secs(10))
        .await
        .expect("the store listens");
    // Bound by a first call: CPU is folded only into calls of a bound connection.
    store.check(keys("bound")).await.expect("a check");
    store
}

fn keys(key: &str) -> Arc<[String]> {
    Arc::from(vec![key.to_owned()])
}

fn pair(desired: &str) -> (Value, Value) {
    (Value::from(&b""[..]), Value::from(desired.as_bytes()))
}

type Log = Arc<Mutex<Vec<u64>>>;

/// An agent that makes `calls` compare-and-sets, spending the CPU around each folded into
/// the call or apart, and logs each call's duration in nanoseconds.
fn compare_sets(log: Log, calls: usize, folded: bool) -> Programs {
    programs(move |env| {
        let log = log.clone();
        async move {
            sleep_us(10_000).await;
            let store = client(&env).await;
            for i in 0..calls {
                let key = format!("k{i}");
                let start = elapsed_ns();
                if folded {
                    store
                        .compare_set_costing(&key, pair("v"), cpu())
                        .await
                        .unwrap();
                } else {
                    spend_cpu_ns(BEFORE_NS).await;
                    let (expected, desired) = pair("v");
                    store.compare_set(&key, expected, desired).await.unwrap();
                    spend_cpu_ns(AFTER_NS).await;
                }
                log.lock().unwrap().push(elapsed_ns() - start);
            }
            done()
        }
    })
}

#[test]
fn cpu_folded_into_a_call_keeps_its_moments_and_costs_no_timer() {
    let s = scenario(Vec::new());
    let (folded, apart) = (Log::default(), Log::default());
    let folded_run = run(&s, compare_sets(folded.clone(), 5, true));
    let apart_run = run(&s, compare_sets(apart.clone(), 5, false));
    let folded = folded.lock().unwrap().clone();
    let apart = apart.lock().unwrap().clone();
    assert_eq!(folded.len(), 5);
    // madsim moves the clock on by 50 to 100 ns at every task it runs.
    for (f, a) in folded.iter().zip(&apart) {
        assert!(
            f.abs_diff(*a) < 2_000,
            "each call lasts as long: {folded:?} {apart:?}"
        );
    }
    assert!(
        folded[0] >= BEFORE_NS + AFTER_NS + 2 * MS_NS,
        "the CPU and both trips: {folded:?}"
    );
    assert_eq!(
        folded_run.stats.sim_events + 2 * 5,
        apart_run.stats.sim_events,
        "two timers fewer per call"
    );
}

/// An agent whose client starts a compare-and-set of key `gone` spending `before_ns` on it,
/// and goes away 20 ms into the call; a second client then logs whether the key is set.
fn client_goes_away(log: Log, before_ns: u64) -> Programs {
    programs(move |env| {
        let log = log.clone();
        async move {
            sleep_us(10_000).await;
            let attempt = Box::pin(async {
                let store = client(&env).await;
                let cpu = CallCpu {
                    before_ns,
                    after: None,
                };
                store.compare_set_costing("gone", pair("v"), cpu).await
            });
            let deadline = Box::pin(sleep_us(20_000));
            let _ = futures::future::select(attempt, deadline).await;
            sleep_us(100_000).await;
            let reader = client(&env).await;
            let set = reader.check(keys("gone")).await.unwrap();
            log.lock().unwrap().push(u64::from(set));
            done()
        }
    })
}

#[test]
fn a_request_never_leaves_a_client_that_went_away_while_spending_cpu_on_it() {
    let s = scenario(Vec::new());
    let (late, early) = (Log::default(), Log::default());
    // The binding check takes about 2 ms: 50 ms of CPU outlast the client, 5 ms do not.
    run(&s, client_goes_away(late.clone(), 50 * MS_NS));
    run(&s, client_goes_away(early.clone(), 5 * MS_NS));
    assert_eq!(*late.lock().unwrap(), vec![0], "never left");
    assert_eq!(
        *early.lock().unwrap(),
        vec![1],
        "left before its client went"
    );
}

#[test]
fn a_reply_that_landed_is_received_though_the_store_dies_while_it_is_decoded() {
    // The get leaves at 20 ms and some, lands about 2 ms later; its 50 ms of decoding
    // outlast the store, which dies at 30 ms.
    let crash = Fault::at(SimInstant::from_us(30_000), FaultKind::StoreCrash);
    let s = scenario(vec![crash]);
    let log = Log::default();
    let logged = log.clone();
    let reader = programs(move |env| {
        let log = logged.clone();
        async move {
            sleep_us(10_000).await;
            let store = client(&env).await;
            store.set("k", Value::from(&b"v"[..])).await.unwrap();
            sleep_us(10_000).await;
            let decode = CallCpu {
                before_ns: 0,
                after: Some(Arc::new(|_reply| 50 * MS_NS)),
            };
            let got = store.get_costing("k", decode).await;
            log.lock().unwrap().push(u64::from(got.is_ok()));
            log.lock().unwrap().push(elapsed_ns());
            done()
        }
    });
    run(&s, reader);
    let log = log.lock().unwrap().clone();
    assert_eq!(log[0], 1, "received");
    assert!(log[1] > 70 * MS_NS, "after its decoding: {log:?}");
}
