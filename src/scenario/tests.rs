//! Unit tests of the scenario module: the contract's example, the defaults, and the
//! round trip `parse(to_toml(s)) == s` over hand-made and generated scenarios.

use super::model::*;
use super::*;
use crate::sim_time::{SimDuration, SimInstant};

/// `v` microseconds, as the model holds spans.
fn us(v: u64) -> SimDuration {
    SimDuration::from_us(v)
}
use proptest::prelude::*;

/// The example of the contract, every section and key spelled out.
pub const EXAMPLE: &str = r#"
name = "late joiner lands in the next round"
description = "free text"
seed = 1
time_limit = "2h"

[cluster]
nodes = 3
spare_nodes = 1
gpus_per_node = 8
gpu = "h100"
store = "node-0"
clock_skew = { node-2 = "3s" }

[network]
latency = ["1ms", "5ms"]
loss = 0.0
bandwidth = "100Gbps"

[rendezvous]
min_nodes = 2
max_nodes = 3
join_timeout = "600s"
last_call_timeout = "30s"
close_timeout = "30s"
heartbeat_timeout = "5s"
keep_alive_interval = "5s"
keep_alive_max_attempt = 3
fixes = []

[agent]
nproc_per_node = 8
max_restarts = 0
monitor_interval = "100ms"
exit_barrier_timeout = "300s"

[job]
steps = 500
step_time = "200ms"
model_size = "1GiB"
checkpoint_every = 50

[job.dataset]
len = 100000
complexity = { dist = "uniform", min = 1, max = 100 }

[job.sampler]
kind = "distributed"
shuffle = true
seed = 0
drop_last = false
random_level = 0.0
batch_size = 32

[reader]
workers = 4
files = 12
records_per_file = 740
batch_size = 1024
repeat = false
check = "sum"
broken_files = [3]
corrupt_records = [[5, 17]]

[[faults]]
at = "45s"
kind = "kill"
node = "node-2"

[expect]
outcome = "succeeded"
rounds = { min = 2, max = 3 }
restarts = { node-1 = 1 }
final_world_size = 3
violations = []
"#;

#[test]
fn the_contract_example_parses() {
    let s = parse(EXAMPLE, "example.toml").unwrap();
    assert_eq!(s.cluster.total_nodes(), 4);
    assert_eq!(s.cluster.clock_skew_us.get(&2), Some(&3_000_000));
    assert_eq!((s.rendezvous.min_nodes, s.rendezvous.max_nodes), (2, 3));
    assert_eq!(
        s.job.dataset.complexity,
        Complexity::Uniform { min: 1, max: 100 }
    );
    assert_eq!(s.reader.as_ref().unwrap().corrupt_records, vec![(5, 17)]);
    assert_eq!(
        s.faults,
        vec![Fault {
            at: SimInstant::from_us(45_000_000),
            kind: FaultKind::Kill { node: 2 },
            role: None,
        }]
    );
    assert_eq!(s.expect.rounds, Some((2, 3)));
    // The reader is built: the checked parse takes it, with the cost defaults.
    let r = parse(EXAMPLE, "example.toml").unwrap().reader.unwrap();
    assert_eq!((r.parse_time, r.record_size_bytes), (us(1), 368));
    assert!(r.fixes.is_empty());
}

#[test]
fn reader_fixes_and_costs_are_checked_where_they_stand() {
    let text = |extra: &str| format!("name = \"r\"\n[reader]\nworkers = 2\nfiles = 4\n{extra}");
    let s = parse(
        &text("parse_time = \"3us\"\nrecord_size = \"1KiB\"\nfixes = [\"empty-batch-is-end-marker\"]\n"),
        "r.toml",
    )
    .unwrap();
    let r = s.reader.clone().unwrap();
    assert_eq!((r.parse_time, r.record_size_bytes), (us(3), 1024));
    assert_eq!(
        r.fixes,
        vec![crate::fixes::ReaderFix::EmptyBatchIsEndMarker]
    );
    assert_eq!(parse(&to_toml(&s), "again.toml"), Ok(s));
    let e = parse(&text("fixes = [\"x\"]\n"), "r.toml").unwrap_err();
    assert_eq!(
        (e.field.as_str(), e.line, e.column),
        ("reader.fixes[0]", 5, 10),
        "{e}"
    );
    assert!(e.message.contains("not a known reader fix"), "{e}");
    let e = parse("name = \"r\"\n[reader]\nworkers = 5\nfiles = 4\n", "r.toml").unwrap_err();
    assert_eq!((e.field.as_str(), e.line), ("reader.workers", 3), "{e}");
    let e = parse(&text("record_size = \"0B\"\n"), "r.toml").unwrap_err();
    assert_eq!(e.field, "reader.record_size", "{e}");
}

#[test]
fn defaults_are_torchs_and_the_contracts() {
    let s = parse("name = \"d\"\n", "d.toml").unwrap();
    assert_eq!(s, default_scenario("d"));
    assert_eq!((s.seed, s.time_limit), (0, us(7_200_000_000)));
    assert_eq!(
        (
            s.cluster.nodes,
            s.cluster.spare_nodes,
            s.cluster.gpus_per_node
        ),
        (1, 0, 8)
    );
    assert_eq!(s.cluster.gpu.name, "h100");
    assert_eq!(s.cluster.store, StoreHost::Node(0));
    // Linux's default retransmission limit.
    assert_eq!(s.cluster.tcp_retries2, 15);
    assert_eq!(
        (s.network.latency_min, s.network.latency_max, s.network.loss),
        (us(1_000), us(5_000), 0.0)
    );
    let r = &s.rendezvous;
    assert_eq!((r.min_nodes, r.max_nodes), (1, 1));
    assert_eq!(
        (r.join_timeout, r.last_call_timeout, r.close_timeout),
        (us(600_000_000), us(30_000_000), us(30_000_000))
    );
    assert_eq!(
        (
            r.heartbeat_timeout,
            r.keep_alive_interval,
            r.keep_alive_max_attempt
        ),
        (us(5_000_000), us(5_000_000), 3)
    );
    // torch's cas_backoff_max_seconds defaults to 0: no backoff.
    assert_eq!(r.cas_backoff_max, SimDuration::ZERO);
    // The c10d backend's read_timeout defaults to TCPStore's 60 s.
    assert_eq!(r.read_timeout, us(60_000_000));
    let a = &s.agent;
    assert_eq!(
        (
            a.nproc_per_node,
            a.max_restarts,
            a.monitor_interval,
            a.exit_barrier_timeout
        ),
        (8, 0, us(100_000), us(300_000_000))
    );
    assert_eq!(
        (
            s.job.steps,
            s.job.step_time,
            s.job.model_size_bytes,
            s.job.checkpoint_every
        ),
        (500, us(200_000), 1 << 30, 50)
    );
    assert_eq!(
        s.job.dataset,
        Dataset {
            len: 100_000,
            complexity: Complexity::Constant { value: 1 }
        }
    );
    assert_eq!(s.job.sampler.batch_size, 32);
    assert!(s.job.sampler.shuffle && !s.job.sampler.drop_last);
}

#[test]
fn node_bounds_follow_torchrun_nnodes() {
    let one = |extra: &str| {
        parse(
            &format!("name = \"n\"\n[cluster]\nnodes = 4\n[rendezvous]\n{extra}"),
            "n.toml",
        )
        .unwrap()
    };
    let r = one("").rendezvous;
    assert_eq!((r.min_nodes, r.max_nodes), (4, 4));
    let r = one("min_nodes = 2\n").rendezvous;
    assert_eq!((r.min_nodes, r.max_nodes), (2, 2));
    let r = one("max_nodes = 6\n").rendezvous;
    assert_eq!((r.min_nodes, r.max_nodes), (6, 6));
    assert_eq!(one("[agent]\n").agent.nproc_per_node, 8);
}

/// One fault of every kind, out of time order.
const ALL_FAULTS: &str = r#"name = "all faults"
time_limit = "1h"
[cluster]
nodes = 3
spare_nodes = 2
[[faults]]
at = "1s"
kind = "start"
node = "node-3"
[[faults]]
at = "2s"
kind = "kill"
node = "node-3"
[[faults]]
at = "3s"
kind = "restart"
node = "node-3"
[[faults]]
at = "0.5s"
kind = "stop"
node = "node-1"
[[faults]]
at = "4s"
kind = "pause"
node = "node-2"
[[faults]]
at = "5s"
kind = "resume"
node = "node-2"
[[faults]]
at = "6s"
kind = "partition"
groups = [["node-0", "node-1"], ["node-2"]]
[[faults]]
at = "7s"
kind = "heal"
[[faults]]
at = "8s"
kind = "clog_link"
from = "node-0"
to = "node-1"
[[faults]]
at = "9s"
kind = "unclog_link"
from = "node-0"
to = "node-1"
[[faults]]
at = "10s"
kind = "latency"
latency = ["10ms", "20ms"]
duration = "30s"
[[faults]]
at = "11s"
kind = "loss"
probability = 0.25
[[faults]]
at = "12s"
kind = "clock_skew"
node = "node-1"
offset = "-2s"
[[faults]]
at = "13s"
kind = "gpu_slow"
node = "node-0"
gpu = 7
factor = 2.5
duration = "1m"
[[faults]]
at = "14s"
kind = "gpu_fail"
node = "node-0"
gpu = 3
[[faults]]
at = "15s"
kind = "worker_crash"
node = "node-2"
local_rank = 5
exit_code = -9
[[faults]]
at = "16s"
kind = "store_crash"
"#;

#[test]
fn every_fault_kind_parses() {
    let text = ALL_FAULTS;
    let s = parse(text, "f.toml").unwrap();
    let kinds: Vec<&str> = s.faults.iter().map(|f| f.kind.name()).collect();
    assert_eq!(kinds.len(), 17);
    assert_eq!(kinds[0], "stop", "faults are sorted by time");
    assert!(s.faults.contains(&Fault {
        at: SimInstant::from_us(12_000_000),
        kind: FaultKind::ClockSkew {
            node: 1,
            offset_us: -2_000_000
        },
        role: None,
    }));
    let slow = FaultKind::GpuSlow {
        node: 0,
        gpu: 7,
        factor: 2.5,
        duration: us(60_000_000),
    };
    assert!(s.faults.iter().any(|f| f.kind == slow));
    assert_eq!(parse(&to_toml(&s), "again.toml"), Ok(s.clone()));
    assert_eq!(parse(text, "f.toml"), Ok(s), "GPU faults are built");
}

#[test]
fn a_fault_names_a_kind_and_only_the_keys_it_takes() {
    let with = |fault: &str| {
        let text = format!("name = \"f\"\n[cluster]\nnodes = 2\n[[faults]]\nat = \"1s\"\n{fault}");
        parse(&text, "f.toml").unwrap_err()
    };
    let e = with("kind = \"meteor\"\n");
    assert_eq!((e.field.as_str(), e.line), ("faults[0].kind", 6), "{e}");
    assert!(
        e.message
            .starts_with("`meteor` is not a fault kind (one of: kill, power_off, stop,"),
        "{e}"
    );
    let e = with("kind = \"store_crash\"\nnode = \"node-1\"\n");
    assert_eq!(e.field, "faults[0].node", "{e}");
    assert!(e.message.contains("it takes: no other keys"), "{e}");
    let e = with("kind = \"worker_crash\"\nnode = \"node-1\"\n");
    assert!(
        e.message
            .contains("a `worker_crash` fault needs `local_rank`"),
        "{e}"
    );
}

#[test]
fn custom_gpu_profiles_and_dists_round_trip() {
    let text = r#"name = "custom"
[cluster]
nodes = 2
store = "dedicated"
[cluster.gpu_profile]
name = "l4"
memory = "24GiB"
h2d_bandwidth = "128Gbps"
d2d_bandwidth = "512Gbps"
compute_speed = 0.15
[job.dataset]
len = 4
complexity = { dist = "list", values = [1, 2, 3, 4] }
[job.sampler]
kind = "load_balancing"
random_level = 0.5
[expect]
outcome = "timed_out"
rounds = 2
violations = ["rendezvous.liveness"]
"#;
    let s = parse(text, "c.toml").unwrap();
    assert_eq!(s.cluster.gpu.memory_bytes, 24 << 30);
    assert_eq!(s.cluster.store, StoreHost::Dedicated);
    assert_eq!(parse(&to_toml(&s), "again.toml"), Ok(s));
}

fn node_of(total: u32) -> impl Strategy<Value = u32> {
    0..total
}

fn fault_kind(nodes: u32, total: u32, gpus: u32, nproc: u32) -> BoxedStrategy<FaultKind> {
    let dur = prop_oneof![Just(None), (1u64..100_000_000).prop_map(|d| Some(us(d)))];
    let any_node = move || node_of(total);
    // Two distinct nodes; a one-node cluster has no link, so it gets `heal` instead.
    let link = move |clog: bool| {
        (any_node(), 1..total.max(2)).prop_map(move |(from, k)| match (total, clog) {
            (1, _) => FaultKind::Heal,
            (_, true) => FaultKind::ClogLink {
                from,
                to: (from + k) % total,
            },
            (_, false) => FaultKind::UnclogLink {
                from,
                to: (from + k) % total,
            },
        })
    };
    prop_oneof![
        any_node().prop_map(|node| FaultKind::Kill { node }),
        any_node().prop_map(|node| FaultKind::Stop { node }),
        node_of(nodes).prop_map(|node| FaultKind::Restart { node }),
        any_node().prop_map(|node| FaultKind::Pause { node }),
        any_node().prop_map(|node| FaultKind::Resume { node }),
        Just(FaultKind::Heal),
        Just(FaultKind::StoreCrash),
        link(true),
        link(false),
        (0u64..1_000_000, 0u64..1_000_000, dur.clone()).prop_map(|(a, b, d)| FaultKind::Latency {
            latency_min: us(a.min(b)),
            latency_max: us(a.max(b)),
            duration: d
        }),
        (0.0f64..=1.0, dur).prop_map(|(probability, duration)| FaultKind::Loss {
            probability,
            duration
        }),
        (any_node(), -1_000_000_000i64..1_000_000_000)
            .prop_map(|(node, offset_us)| FaultKind::ClockSkew { node, offset_us }),
        (any_node(), 0..gpus, 1.0f64..100.0, 1u64..1_000_000_000).prop_map(
            |(node, gpu, factor, duration_us)| FaultKind::GpuSlow {
                node,
                gpu,
                factor,
                duration: us(duration_us)
            }
        ),
        (any_node(), 0..gpus).prop_map(|(node, gpu)| FaultKind::GpuFail { node, gpu }),
        (any_node(), 0..nproc, prop_oneof![1i32..255, -64i32..0]).prop_map(
            |(node, local_rank, exit_code)| FaultKind::WorkerCrash {
                node,
                local_rank,
                exit_code
            }
        ),
        proptest::sample::subsequence((0..total).collect::<Vec<_>>(), 1..=total as usize).prop_map(
            |nodes| FaultKind::Partition {
                groups: nodes.chunks(2).map(|c| c.to_vec()).collect()
            }
        ),
    ]
    .boxed()
}

fn complexity(len: u64) -> BoxedStrategy<Complexity> {
    prop_oneof![
        (1u64..1000).prop_map(|value| Complexity::Constant { value }),
        (1u64..1000, 1u64..1000).prop_map(|(a, b)| Complexity::Uniform {
            min: a.min(b),
            max: a.max(b)
        }),
        (1.0f64..1000.0, 0.0f64..3.0)
            .prop_map(|(median, sigma)| Complexity::Lognormal { median, sigma }),
        proptest::collection::vec(1u64..1000, len as usize)
            .prop_map(|values| Complexity::List { values }),
    ]
    .boxed()
}

/// The default cluster with the generated sizes and skews; `flag` picks the short TCP
/// retry count and a dedicated store over one on the last node.
fn generated_cluster(
    (nodes, spare, gpus): (u32, u32, u32),
    skew: std::collections::BTreeMap<u32, i64>,
    flag: bool,
) -> Cluster {
    let mut cluster = default_scenario("generated").cluster;
    cluster.nodes = nodes;
    cluster.spare_nodes = spare;
    cluster.gpus_per_node = gpus;
    cluster.clock_skew_us = skew;
    cluster.tcp_retries2 = if flag { 5 } else { 15 };
    cluster.one_machine = flag;
    cluster.store = if flag {
        StoreHost::Dedicated
    } else {
        StoreHost::Node(nodes - 1)
    };
    cluster
}

/// The settings a generated scenario sets off their defaults when its `flag` is up.
fn flag_settings(s: &mut Scenario, flag: bool) {
    s.rendezvous.cas_backoff_max = us(if flag { 1_500_000 } else { 0 });
    s.rendezvous.read_timeout = us(if flag { 20_000_000 } else { 60_000_000 });
    s.agent.worker_identical = flag;
    s.job.init_method = if flag {
        InitMethod::Tcp
    } else {
        InitMethod::Env
    };
    s.job.script_master_port = flag.then_some(12_355);
    if flag {
        s.agent.fixes = vec![crate::fixes::AgentFix::SharedRestartCount];
        s.rendezvous.fixes = [crate::fixes::RendezvousFix::DeadParticipantRejoin].into();
    }
}

/// Generated scenarios within the bounds (the fuzzer's view of the model).
fn scenario() -> impl Strategy<Value = Scenario> {
    (1u32..6, 0u32..3, 1u32..9, 1u64..40)
        .prop_flat_map(|(nodes, spare, gpus, len)| {
            let total = nodes + spare;
            let faults = proptest::collection::vec(
                (0u64..3_600_000_000, fault_kind(nodes, total, gpus, gpus))
                    .prop_map(|(at_us, kind)| Fault::at(SimInstant::from_us(at_us), kind)),
                0..8,
            );
            let skew = proptest::collection::btree_map(0..total, -5_000_000i64..5_000_000, 0..3);
            let restarts = proptest::collection::btree_map(0..total, 0u32..5, 0..3);
            let scalars = (
                any::<u32>(),
                1u64..1_000_000,
                0.0f64..=1.0,
                1u64..(1 << 40),
                1u32..4,
                0u32..4,
            );
            (
                Just((nodes, spare, gpus, len)),
                faults,
                skew,
                restarts,
                complexity(len),
                scalars,
                any::<bool>(),
            )
        })
        .prop_map(
            |((nodes, spare, gpus, len), mut faults, skew, restarts, complexity, scalars, flag)| {
                let (seed, step_us, loss, model_bytes, min_nodes, extra) = scalars;
                let mut s = default_scenario("generated");
                s.seed = u64::from(seed);
                s.description = if flag {
                    "a \"quoted\"\ndescription".into()
                } else {
                    String::new()
                };
                s.cluster = generated_cluster((nodes, spare, gpus), skew, flag);
                s.network.loss = loss;
                s.rendezvous.min_nodes = min_nodes;
                s.rendezvous.max_nodes = min_nodes + extra;
                flag_settings(&mut s, flag);
                s.agent.nproc_per_node = gpus;
                s.job.step_time = us(step_us);
                // Gradients must fit in one GPU's memory.
                s.job.model_size_bytes = model_bytes.min(s.cluster.gpu.memory_bytes);
                s.job.dataset = Dataset { len, complexity };
                faults.sort_by_key(|f| f.at);
                s.faults = faults;
                s.expect.restarts = restarts;
                s.expect.rounds = flag.then_some((1, 1 + u64::from(extra)));
                s.torch = (extra % 2 == 1).then(|| crate::scenario::model::TorchSection {
                    python: "venv/bin/python \"3\"".into(),
                    elastic_src: flag.then(|| "../pytorch".into()),
                });
                s
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn generated_scenarios_round_trip(s in scenario()) {
        let text = to_toml(&s);
        prop_assert_eq!(parse(&text, "generated.toml"), Ok(s), "{}", text);
    }
}
