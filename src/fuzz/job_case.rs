//! proptest strategies that draw whole scenarios for the `job` target: the training job's
//! data and hardware rather than the rendezvous.
//!
//! A case draws 1–4 nodes (plus 0–1 spare) of 1–4 GPUs, a dataset of 1–2,000 samples with a
//! constant, uniform or lognormal cost, either sampler with its shuffle and `drop_last`,
//! a per-rank batch of 1–32, 5–150 steps with checkpoints every 1–40, and a swarm-style plan
//! of job faults within 0–60 s: stragglers (`gpu_slow`), lost GPUs, worker crashes,
//! kill-and-restart, graceful stops and late starts. The time limit (1 h) leaves a liveness
//! phase after the last fault. Every value is within the validation bounds; a test asserts
//! each case round-trips through `to_toml` and `parse`.

use super::strategy::Case;
use crate::scenario;
use crate::scenario::model::{Complexity, Fault, FaultKind, FaultName, SamplerKind};
use crate::sim_time::{SimDuration, SimInstant};
use proptest::prelude::*;

/// The job fault kinds, in the order of the enabled-kinds mask's bits.
pub const JOB_FAULT_KINDS: [FaultName; 6] = [
    FaultName::GpuSlow,
    FaultName::GpuFail,
    FaultName::WorkerCrash,
    FaultName::Restart,
    FaultName::Stop,
    FaultName::Start,
];

/// Latest fault time, in microseconds (60 s).
const FAULT_AT_MAX: SimInstant = SimInstant::from_us(60_000_000);

/// One drawn fault: which enabled kind, where, when, how long and how slow.
#[derive(Debug, Clone, PartialEq)]
struct JobFaultDraw {
    kind_pick: usize,
    node: u32,
    gpu: u32,
    at_ms: u64,
    span_ms: u64,
    factor_tenths: u32,
}

fn fault_draw() -> impl Strategy<Value = JobFaultDraw> {
    (
        0usize..JOB_FAULT_KINDS.len(),
        0u32..8,
        0u32..8,
        0u64..=FAULT_AT_MAX.since_start().as_ms(),
        1u64..=30_000,
        11u32..=50,
    )
        .prop_map(
            |(kind_pick, node, gpu, at_ms, span_ms, factor_tenths)| JobFaultDraw {
                kind_pick,
                node,
                gpu,
                at_ms,
                span_ms,
                factor_tenths,
            },
        )
}

fn complexity() -> impl Strategy<Value = Complexity> {
    prop_oneof![
        (1u64..=4).prop_map(|value| Complexity::Constant { value }),
        (1u64..=10, 0u64..=90).prop_map(|(min, spread)| Complexity::Uniform {
            min,
            max: min + spread
        }),
        (1u64..=20, 1u32..=15).prop_map(|(median, sigma_tenths)| Complexity::Lognormal {
            median: median as f64,
            sigma: f64::from(sigma_tenths) / 10.0,
        }),
    ]
}

/// Whole job cases; parts are drawn independently and made consistent afterwards, so
/// shrinking simplifies each on its own.
pub fn case() -> impl Strategy<Value = Case> {
    (
        (1u32..=4, 0u32..=1, 1u32..=4, 0u32..=3),
        (
            1u64..=2_000,
            complexity(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
        ),
        (1u64..=32, 5u64..=150, 1u64..=40, 10u64..=200),
        1u8..(1 << JOB_FAULT_KINDS.len()),
        proptest::collection::vec(fault_draw(), 0..=4),
        any::<u64>(),
    )
        .prop_map(|(shape, data, steps, mask, draws, seed)| {
            let (nodes, spares, gpus, max_restarts) = shape;
            let (len, complexity, balanced, shuffle, drop_last) = data;
            let (batch_size, steps, checkpoint_every, step_ms) = steps;
            let mut s = scenario::default_scenario("fuzz job case");
            s.time_limit = SimDuration::from_ms(3_600_000);
            s.cluster.nodes = nodes;
            s.cluster.spare_nodes = spares;
            s.cluster.gpus_per_node = gpus;
            s.cluster.store = scenario::model::StoreHost::Dedicated;
            s.agent.nproc_per_node = gpus;
            s.agent.max_restarts = max_restarts;
            s.rendezvous.min_nodes = 1;
            s.rendezvous.max_nodes = nodes + spares;
            s.job.steps = steps;
            s.job.step_time = SimDuration::from_ms(step_ms);
            s.job.model_size_bytes = 16 << 20;
            s.job.checkpoint_every = checkpoint_every;
            s.job.dataset.len = len;
            s.job.dataset.complexity = complexity;
            s.job.sampler.kind = if balanced {
                SamplerKind::LoadBalancing
            } else {
                SamplerKind::Distributed
            };
            s.job.sampler.shuffle = shuffle;
            s.job.sampler.drop_last = drop_last;
            s.job.sampler.batch_size = batch_size;
            s.faults = fault_plan(nodes, spares, gpus, mask, &draws);
            s.faults.sort_by_key(|f| f.at);
            Case {
                scenario: s,
                seed: seed >> 1,
            }
        })
}

/// Turns draws into valid faults among the kinds `mask` enables.
fn fault_plan(nodes: u32, spares: u32, gpus: u32, mask: u8, draws: &[JobFaultDraw]) -> Vec<Fault> {
    let enabled: Vec<FaultName> = JOB_FAULT_KINDS
        .iter()
        .enumerate()
        .filter(|(i, _)| mask & (1 << i) != 0)
        .map(|(_, k)| *k)
        .collect();
    let mut spare_started = false;
    let mut out = Vec::new();
    for d in draws {
        let at_time = SimInstant::from_start(SimDuration::from_ms(d.at_ms));
        let later_time = at_time
            .after(SimDuration::from_ms(d.span_ms))
            .min(FAULT_AT_MAX);
        let node = d.node % nodes;
        let gpu = d.gpu % gpus;
        let at = |kind| Fault::at(at_time, kind);
        match enabled[d.kind_pick % enabled.len()] {
            FaultName::GpuSlow => out.push(at(FaultKind::GpuSlow {
                node,
                gpu,
                factor: f64::from(d.factor_tenths) / 10.0,
                duration: SimDuration::from_ms(d.span_ms),
            })),
            FaultName::GpuFail => out.push(at(FaultKind::GpuFail { node, gpu })),
            FaultName::WorkerCrash => out.push(at(FaultKind::WorkerCrash {
                node,
                local_rank: gpu,
                exit_code: 1,
            })),
            FaultName::Restart => {
                out.push(at(FaultKind::Kill { node }));
                out.push(Fault::at(later_time, FaultKind::Restart { node }));
            }
            FaultName::Stop => out.push(at(FaultKind::Stop { node })),
            FaultName::Start if spares > 0 && !spare_started => {
                spare_started = true;
                out.push(at(FaultKind::Start { node: nodes }));
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_drawn_job_scenario_round_trips_through_toml() {
        crate::fuzz::strategy::assert_cases_round_trip(super::case(), 11);
    }
}
