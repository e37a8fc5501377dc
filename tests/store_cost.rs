//! What the store costs: its one event loop serves requests one at a time, each for its
//! calibrated time, and its host's link carries every request and reply at its bandwidth.

mod common;
#[path = "common/store_log.rs"]
mod store_log;

use common::{done, programs};
use store_log::*;
use trainsim::scenario::model::*;
use trainsim::store::Value;
use trainsim::world::time::{elapsed_us, sleep_us};

const CLIENTS: u32 = 8;
/// The calibrated server time of a compare-and-set of 400 kB values (store::cost).
const COMPARE_SET_400K_US: u64 = 3_700;

/// Every node but node-0 calls at 10 s; node-0 prepares the store at 1 s. Returns when the
/// first call started and the last one ended, in simulated microseconds.
fn burst(s: &Scenario, call: &'static str) -> (u64, u64) {
    let log: Log = Default::default();
    let l = log.clone();
    run(
        s,
        programs(move |env| {
            let log = l.clone();
            async move {
                let c = client(&env, 60 * SEC).await;
                if env.index == 0 {
                    sleep_us(SEC).await;
                    c.set("state", vec![b'a'; 400_000]).await.unwrap();
                    return done();
                }
                sleep_us(10 * SEC - elapsed_us()).await;
                let started = elapsed_us();
                match call {
                    "compare_set" => {
                        let stale = Value::from(vec![b'b'; 400_000]);
                        let ours = Value::from(vec![b'c'; 400_000]);
                        c.compare_set("state", stale, ours).await.unwrap();
                    }
                    _ => {
                        c.get("state").await.unwrap();
                    }
                }
                note(&log, &env, format!("started {started}"));
                note(&log, &env, "ended".into());
                done()
            }
        }),
    );
    let (mut first, mut last) = (u64::MAX, 0);
    for node in 1..=CLIENTS {
        let (started, _) = find(&log, node, "started");
        let (_, ended_us) = find(&log, node, "ended");
        let started_us: u64 = started["started ".len()..].parse().unwrap();
        first = first.min(started_us);
        last = last.max(ended_us);
    }
    (first, last)
}

/// From the first call to the last reply of `call` at every client, in microseconds, on a
/// store of this scale behind a link of this speed.
fn span_us(
    store_cost_scale: f64,
    store_host_bandwidth_bits_per_sec: u64,
    call: &'static str,
) -> u64 {
    let mut s = scenario(CLIENTS + 1, StoreHost::Dedicated, vec![]);
    s.cluster.store_cost_scale = store_cost_scale;
    s.network.store_host_bandwidth_bits_per_sec = store_host_bandwidth_bits_per_sec;
    let (first, last) = burst(&s, call);
    last - first
}

#[test]
fn the_event_loop_serves_compare_and_sets_one_at_a_time() {
    // Eight requests arriving within 4 ms of each other queue behind one another.
    let span = span_us(1.0, 100_000_000_000, "compare_set");
    assert!(
        span >= u64::from(CLIENTS) * COMPARE_SET_400K_US,
        "{CLIENTS} compare-and-sets of 400 kB took {span} us from first call to last reply"
    );
    let span = span_us(0.0, 100_000_000_000, "compare_set");
    assert!(
        span < 11_000,
        "a free store answers within two latencies and the bytes' time, took {span} us"
    );
}

#[test]
fn the_store_hosts_link_carries_every_reply_in_turn() {
    // 100 Mbps: a 400 kB reply takes 32 ms on the store host's link.
    let span = span_us(0.0, 100_000_000, "get");
    assert!(
        span >= u64::from(CLIENTS) * 32_000,
        "{CLIENTS} gets of 400 kB through 100 Mbps took {span} us"
    );
    let span = span_us(0.0, 100_000_000_000, "get");
    // A get is two round trips (WAIT, then GET) of 1 to 5 ms each way.
    assert!(
        span < 21_000,
        "at 100 Gbps the link is no bottleneck, took {span} us"
    );
}
