//! The rendezvous state's hot pure functions at 64, 1024 and 4096 nodes: encode, decode, the
//! shared (memoized) decode every node's sync goes through, and sanitize.
//!
//! `cargo bench --bench rendezvous`. The figures go in the README; no test asserts a time.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use std::hint::black_box;
use trainsim::rendezvous::decoded_states;
use trainsim::rendezvous::sanitize::sanitize;
use trainsim::rendezvous::settings::RendezvousSettings;
use trainsim::rendezvous::state::{NodeDesc, RendezvousState};

/// A complete round of `nodes` participants, each with a heartbeat, as a join storm ends.
fn full_round(nodes: u32) -> RendezvousState {
    let mut s = RendezvousState {
        round: 3,
        complete: true,
        ..Default::default()
    };
    for i in 0..nodes {
        let node = NodeDesc::new(format!("node-{i}"), 1000 + i, 0);
        s.participants.insert(node.clone(), i);
        s.last_heartbeats
            .insert(node, 1_700_000_000_000_000 + i64::from(i));
    }
    s
}

fn bench_state(c: &mut Criterion) {
    let mut group = c.benchmark_group("rendezvous_state");
    group.sample_size(20);
    let settings = RendezvousSettings::new("bench", 1, 4096);
    for nodes in [64u32, 1024, 4096] {
        let state = full_round(nodes);
        let bytes = state.encode();
        group.bench_with_input(BenchmarkId::new("encode", nodes), &state, |b, s| {
            b.iter(|| black_box(s).encode())
        });
        group.bench_with_input(BenchmarkId::new("decode", nodes), &bytes, |b, bytes| {
            b.iter(|| RendezvousState::decode(black_box(bytes)).expect("decodes"))
        });
        group.bench_with_input(
            BenchmarkId::new("shared_decode_hit", nodes),
            &trainsim::store::Value::from(bytes.clone()),
            |b, bytes| {
                let cache = decoded_states::DecodedStates::default();
                cache.decode(bytes).expect("decodes");
                b.iter(|| cache.decode(black_box(bytes)).expect("decodes"))
            },
        );
        // Nothing expires: what every sync pays, and what the shortcut skips.
        let now_us = 1_700_000_000_000_000;
        group.bench_with_input(BenchmarkId::new("sanitize_clone", nodes), &state, |b, s| {
            b.iter(|| {
                let mut copy = s.clone();
                sanitize(&mut copy, &settings, black_box(now_us));
                copy
            })
        });
        let synced = decoded_states::SharedState::new(std::sync::Arc::new(state.clone()));
        group.bench_with_input(BenchmarkId::new("may_expire", nodes), &synced, |b, s| {
            b.iter(|| s.may_expire(&settings, black_box(now_us)))
        });
    }
    group.finish();
}

criterion_group!(benches, bench_state);
criterion_main!(benches);
