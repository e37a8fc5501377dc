//! `measure_store.py storm` in the simulator: N clients sending failing compare-and-sets of
//! 400 kB back to back and one client sending small `get`s every 10 ms, for 10 s after a
//! 3 s warm-up, on loopback-like links. The medians and p99 of both, set against torch
//! 2.15's (docs/fidelity.md, "What the store costs"); `--nocapture` prints them.

mod common;
#[path = "common/store_log.rs"]
mod store_log;

use common::done;
use store_log::*;
use trainsim::scenario::model::*;
use trainsim::sim_time::SimDuration;
use trainsim::store::Value;
use trainsim::world::time::{elapsed_us, sleep_us};

/// The storm was measured on a machine whose server took 0.57 of the calibration's time for
/// a compare-and-set of 400 kB (2.11 ms against 3.7 ms, `measure_store.py server` the same
/// hour): the store's costs are scaled to match.
const STORM_COST_SCALE: f64 = 0.57;
const WARM_UP_US: u64 = 3 * SEC;
const WINDOW_US: u64 = 10 * SEC;

/// The latencies (µs) of every call that started and ended inside the window: the
/// compare-and-sets' and the gets'.
fn storm(clients: u32) -> (Vec<u64>, Vec<u64>) {
    let log: Log = Default::default();
    let l = log.clone();
    let mut s = scenario(clients + 2, StoreHost::Dedicated, vec![]);
    s.network.latency_min = SimDuration::from_us(30);
    s.network.latency_max = SimDuration::from_us(60);
    s.time_limit = SimDuration::from_us(WARM_UP_US + WINDOW_US + 30 * SEC);
    s.cluster.store_cost_scale = STORM_COST_SCALE;
    run(
        &s,
        common::programs(move |env| {
            let log = l.clone();
            async move {
                let c = client(&env, 600 * SEC).await;
                if env.index == 0 {
                    c.set("v", vec![b'a'; 400_000]).await.unwrap();
                    c.set("g", b"x".to_vec()).await.unwrap();
                    return done();
                }
                sleep_us(SEC).await;
                let stale = Value::from(vec![b'b'; 400_000]);
                let end_us = SEC + WARM_UP_US + WINDOW_US;
                while elapsed_us() < end_us {
                    let started = elapsed_us();
                    match env.index {
                        1 => {
                            c.get("g").await.unwrap();
                        }
                        _ => {
                            c.compare_set("v", stale.clone(), stale.clone())
                                .await
                                .unwrap();
                        }
                    }
                    let ended = elapsed_us();
                    if started >= SEC + WARM_UP_US && ended <= end_us {
                        note(&log, &env, format!("{}", ended - started));
                    }
                    if env.index == 1 {
                        sleep_us(10_000).await;
                    }
                }
                done()
            }
        }),
    );
    let log = log.lock().unwrap();
    let of = |getter: bool| -> Vec<u64> {
        let mut v: Vec<u64> = log
            .iter()
            .filter(|(n, _, _)| (*n == 1) == getter)
            .map(|(_, w, _)| w.parse().unwrap())
            .collect();
        v.sort_unstable();
        v
    };
    (of(false), of(true))
}

fn quantile_ms(sorted: &[u64], q: f64) -> f64 {
    let i = ((q * sorted.len() as f64) as usize).min(sorted.len() - 1);
    (sorted[i] as f64 / 100.0).round() / 10.0
}

#[test]
fn a_storm_of_large_writes_holds_small_gets_a_fraction_of_their_time() {
    for clients in [16, 64, 256] {
        let (cas, gets) = storm(clients);
        let (cas_p50, get_p50) = (quantile_ms(&cas, 0.5), quantile_ms(&gets, 0.5));
        println!(
            "storm clients={clients} compare_sets={} gets={} compare_set_ms_p50={cas_p50} \
             compare_set_ms_p99={} get_ms_p50={get_p50} get_ms_p99={}",
            cas.len(),
            gets.len(),
            quantile_ms(&cas, 0.99),
            quantile_ms(&gets, 0.99)
        );
        // torch 2.15 on 2 cores: the get's median is 0.28 to 0.46 of the write's (one run at
        // each size); the model's, 0.5 to 0.65 (docs/fidelity.md says why). Serving in
        // arrival order made it as long as the write's.
        assert!(
            get_p50 < 0.7 * cas_p50 && get_p50 > 0.1 * cas_p50,
            "{clients} clients: get p50 {get_p50} ms, compare-and-set p50 {cas_p50} ms"
        );
    }
}
