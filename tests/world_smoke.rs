//! Runs hand-built scenarios through the world, independent of the scenario parser.

use std::collections::BTreeMap;
use trainsim::scenario::model::*;

fn scenario(nodes: u32, min: u32, max: u32) -> Scenario {
    Scenario {
        name: "smoke".into(),
        description: String::new(),
        seed: 1,
        time_limit_us: 3_600_000_000,
        cluster: Cluster {
            nodes,
            spare_nodes: 1,
            gpus_per_node: 8,
            gpu: GpuProfile {
                name: "h100".into(),
                memory_bytes: 80 << 30,
                h2d_bits_per_sec: 400_000_000_000,
                d2d_bits_per_sec: 7_200_000_000_000,
                compute_speed: 1.0,
            },
            store: StoreHost::Node(0),
            clock_skew_us: BTreeMap::new(),
        },
        network: Network {
            latency_us_min: 1000,
            latency_us_max: 5000,
            loss: 0.0,
            bandwidth_bits_per_sec: 100_000_000_000,
        },
        rendezvous: RendezvousConfig {
            min_nodes: min,
            max_nodes: max,
            join_timeout_us: 600_000_000,
            last_call_timeout_us: 30_000_000,
            close_timeout_us: 30_000_000,
            heartbeat_timeout_us: 5_000_000,
            keep_alive_interval_us: 5_000_000,
            keep_alive_max_attempt: 3,
            fixes: vec![],
        },
        agent: AgentConfig {
            nproc_per_node: 8,
            max_restarts: 0,
            monitor_interval_us: 100_000,
            exit_barrier_timeout_us: 300_000_000,
        },
        job: JobConfig {
            steps: 100,
            step_time_us: 200_000,
            model_size_bytes: 1 << 30,
            checkpoint_every: 50,
            dataset: Dataset {
                len: 100_000,
                complexity: Complexity::Constant { value: 1 },
            },
            sampler: SamplerConfig {
                kind: SamplerKind::Distributed,
                shuffle: true,
                seed: 0,
                drop_last: false,
                random_level: 0.0,
                batch_size: 32,
            },
        },
        reader: None,
        faults: vec![],
        expect: Expect::default(),
    }
}

fn run(s: &Scenario, seed: u64) -> (trainsim::trace::Trace, trainsim::trace::RunEnd) {
    trainsim::world::simulate(s, seed, trainsim::runner::programs()).expect("the run finishes")
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
