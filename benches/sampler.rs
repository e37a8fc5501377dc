//! Benchmarks of the hot sampler paths: torch's `randperm` at 10M and one 1M-item
//! load-balancing epoch.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use trainsim::sampler::{LoadBalancingSampler, TorchGenerator};

/// Items in the load-balancing benchmark.
const LOAD_BALANCING_ITEMS: u64 = 1_000_000;

fn randperm_10m(c: &mut Criterion) {
    let mut group = c.benchmark_group("randperm");
    group.sample_size(10);
    group.bench_function("randperm_10M", |b| {
        b.iter(|| {
            TorchGenerator::new(black_box(42))
                .randperm(10_000_000)
                .unwrap()
        })
    });
    group.finish();
}

fn load_balancing_epoch_1m(c: &mut Criterion) {
    // Complexities in 0..1000, drawn from a seeded generator so every run sees the same data.
    let complexities: Vec<i64> = TorchGenerator::new(7)
        .randint(1000, LOAD_BALANCING_ITEMS as usize)
        .unwrap()
        .into_iter()
        .map(|c| c as i64)
        .collect();
    let mut sampler = LoadBalancingSampler::new(complexities, 8, 0, true, 0, false, 0.1).unwrap();
    let mut group = c.benchmark_group("load_balancing");
    group.sample_size(10);
    group.bench_function("epoch_1M_items_8_ranks", |b| {
        let mut epoch = 0;
        b.iter(|| {
            epoch += 1;
            sampler.set_epoch(epoch);
            black_box(sampler.indices_all_ranks().unwrap())
        })
    });
    group.finish();
}

criterion_group!(benches, randperm_10m, load_balancing_epoch_1m);
criterion_main!(benches);
