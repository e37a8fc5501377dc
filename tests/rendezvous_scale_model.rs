//! `conformance/measure_rendezvous_scale.py` in the model: N nodes joining round 0 at once
//! (min = max = N) through one store, with and without torch's `cas_backoff_max_seconds`,
//! on loopback-like links and a store scaled to the measuring machine; and the model's two
//! claims at scale with torch's defaults. Slow (minutes), so ignored by default:
//! `cargo test --release --test rendezvous_scale_model -- --ignored --nocapture` prints one
//! line per run, which docs/fidelity.md ("Rendezvous at scale, measured") sets against torch.

use trainsim::bench::workloads;
use trainsim::runner::{Run, RunOptions};
use trainsim::sim_time::SimDuration;
use trainsim::trace::EventKind;

/// The measuring machine's server took 0.57 of the calibration's time for a compare-and-set
/// of 400 kB (`measure_store.py server`, the same hour as the real runs).
const MACHINE_COST_SCALE: f64 = 0.57;

/// Runs one round of `nodes` and prints what it cost.
fn one_round(label: &str, scenario: &trainsim::scenario::model::Scenario) {
    let options = RunOptions {
        sim_events_max: Some(120_000_000),
        ..RunOptions::default()
    };
    let run = Run::of(scenario, "scale.toml").seed(1).options(options);
    let (simulated, store) = run.simulate_measured();
    let simulated = simulated.expect("the run finishes within its bound");
    let report = run
        .check(&simulated.trace, &simulated.end)
        .expect("the run is checked");
    let formed = report
        .rounds
        .first()
        .map(|r| (r.world_size, r.completed_at_us));
    // From the first join to the first and last agent through round 0, in seconds.
    let at = |kind: fn(&EventKind) -> bool| -> Vec<f64> {
        let events = simulated.trace.events.iter().filter(|e| kind(&e.kind));
        events.map(|e| e.at.as_ns() as f64 / 1e9).collect()
    };
    let joins = at(|k| matches!(k, EventKind::RendezvousJoining { .. }));
    let done = at(|k| matches!(k, EventKind::RendezvousCompleted { .. }));
    let first_join = joins.first().copied().unwrap_or(0.0);
    let since = |t: Option<&f64>| t.map(|t| format!("{:.2}", t - first_join));
    println!(
        "{label}: nodes={} outcome={} round0={formed:?} joins_spread_s={:.2} \
         first_returned_s={:?} last_returned_s={:?} compare_sets={} landed={} \
         store_busy_s={:.1} sim_time_s={:.1}",
        scenario.cluster.nodes,
        report.outcome.as_str(),
        joins.last().copied().unwrap_or(0.0) - first_join,
        since(done.first()),
        since(done.last()),
        store.compare_sets,
        store.compare_sets_landed,
        store.busy_ns as f64 / 1e9,
        report.sim_time_us as f64 / 1e6
    );
}

#[test]
#[ignore]
fn rounds_of_64_to_256_nodes_on_the_measuring_machine() {
    for nodes in [64, 128, 256] {
        for backoff in [None, Some("1s")] {
            let mut s = workloads::scale(nodes, backoff);
            s.network.latency_min = SimDuration::from_us(30);
            s.network.latency_max = SimDuration::from_us(60);
            s.cluster.store_cost_scale = MACHINE_COST_SCALE;
            one_round(&format!("localhost backoff={backoff:?}"), &s);
        }
    }
}

#[test]
#[ignore]
fn the_claims_at_scale() {
    // The bench's 1 024-node round (heartbeat expiry raised), and one with torch's defaults.
    one_round("bench 1024", &workloads::scale(1024, None));
    for nodes in [1024, 2000] {
        let mut s = workloads::scale(nodes, None);
        s.rendezvous.keep_alive_max_attempt = 3;
        one_round("torch defaults", &s);
    }
}
