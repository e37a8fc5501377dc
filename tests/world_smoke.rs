//! Runs hand-built scenarios through the world, independent of the scenario parser.

use trainsim::scenario::model::*;

fn scenario(nodes: u32, min: u32, max: u32) -> Scenario {
    let mut s = trainsim::scenario::default_scenario("smoke");
    s.seed = 1;
    s.time_limit = trainsim::sim_time::SimDuration::from_secs(3_600);
    s.cluster.nodes = nodes;
    s.cluster.spare_nodes = 1;
    s.rendezvous.min_nodes = min;
    s.rendezvous.max_nodes = max;
    s.job.steps = 100;
    s
}

fn run(s: &Scenario, seed: u64) -> (trainsim::trace::Trace, trainsim::trace::RunEnd) {
    let run =
        trainsim::world::simulate(s, seed, trainsim::runner::RunOptions::default().programs())
            .expect("the run finishes");
    (run.trace, run.end)
}

#[test]
fn three_nodes_train_to_the_end() {
    let s = scenario(3, 3, 3);
    let (trace, end) = run(&s, 1);
    for line in trace
        .canonical_lines()
        .iter()
        .filter(|l| !l.contains("\"step\"") && !l.contains("heartbeat"))
    {
        eprintln!("{line}");
    }
    assert_eq!(end.outcome, Outcome::Succeeded, "{end:?}");
}

#[test]
fn same_seed_same_trace_other_seed_other_trace() {
    let s = scenario(3, 2, 3);
    let (a, _) = run(&s, 7);
    let (b, _) = run(&s, 7);
    let (c, _) = run(&s, 8);
    assert_eq!(a.hash_hex(), b.hash_hex());
    assert_ne!(a.hash_hex(), c.hash_hex());
}
