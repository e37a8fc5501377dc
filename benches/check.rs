//! The checks' share of a run: every invariant judged over the bench's reference trace
//! (64 nodes × 8 GPUs, one simulated hour), simulated once and checked repeatedly.
//!
//! `cargo bench --bench check`. No test asserts a time.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use trainsim::bench::{workloads, BENCH_SEED};
use trainsim::runner::Run;

fn check_reference(c: &mut Criterion) {
    let scenario = workloads::reference();
    let one = Run::of(&scenario, workloads::REFERENCE_FILE).seed(BENCH_SEED);
    let run = one.simulate().expect("the reference run simulates");
    let mut group = c.benchmark_group("check");
    group.sample_size(10);
    group.bench_function("reference", |b| {
        b.iter(|| black_box(one.check(&run.trace, &run.end).expect("the checks run")))
    });
    group.finish();
}

criterion_group!(benches, check_reference);
criterion_main!(benches);
