//! Whole-run speed: how long one scenario takes to simulate, check and report.
//!
//! `cargo bench --bench simulate`. The figures go in the README; no test asserts a time.

use criterion::{criterion_group, criterion_main, Criterion};
use trainsim::scenario;

/// A cluster of `nodes` that all join at once, train 200 steps and finish.
fn cluster_scenario(nodes: u32) -> scenario::Scenario {
    let text = format!(
        "name = \"bench {nodes} nodes\"\nseed = 1\ntime_limit = \"1h\"\n\
         [cluster]\nnodes = {nodes}\n\
         [rendezvous]\nmin_nodes = {min}\nmax_nodes = {nodes}\n\
         [job]\nsteps = 200\nstep_time = \"200ms\"\n",
        min = nodes / 2
    );
    scenario::parse(&text, "bench.toml").expect("the bench scenario is valid")
}

fn bench_runs(c: &mut Criterion) {
    let mut group = c.benchmark_group("simulate");
    group.sample_size(10);
    let late_joiner =
        scenario::load("scenarios/late_joiner_next_round.toml".as_ref()).expect("scenario");
    group.bench_function("late_joiner_next_round", |b| {
        b.iter(|| {
            trainsim::runner::Run::of(&late_joiner, "late_joiner_next_round.toml")
                .seed(5)
                .report()
                .expect("runs")
        })
    });
    for nodes in [32, 128] {
        let s = cluster_scenario(nodes);
        group.bench_function(format!("{nodes}_nodes_200_steps"), |b| {
            b.iter(|| {
                trainsim::runner::Run::of(&s, "bench.toml")
                    .seed(1)
                    .report()
                    .expect("runs")
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_runs);
criterion_main!(benches);
