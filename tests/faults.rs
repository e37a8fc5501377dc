//! The world's fault semantics, seen through the trace and through what simple agent programs observe: kill/restart, start, clock_skew, pause/resume, partition/heal, latency.

mod common;

use common::{done, programs};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use trainsim::scenario::model::*;
use trainsim::sim_time::SimDuration;
use trainsim::store::service::StoreClient;
use trainsim::trace::{Event, EventKind, Trace};
use trainsim::world::time::{elapsed_us, sleep_us};
use trainsim::world::{NodeEnv, Programs};

const SEED: u64 = 21;
const SEC: u64 = 1_000_000;
const MS: u64 = 1_000;

fn scenario(nodes: u32, spare_nodes: u32, faults: Vec<Fault>) -> Scenario {
    let mut s = trainsim::scenario::default_scenario("faults");
    s.seed = SEED;
    s.time_limit = SimDuration::from_us(3_600 * SEC);
    s.cluster.nodes = nodes;
    s.cluster.spare_nodes = spare_nodes;
    s.cluster.store = StoreHost::Dedicated;
    s.cluster.clock_skew_us = BTreeMap::new();
    s.network = Network {
        latency_min: SimDuration::from_us(1000),
        latency_max: SimDuration::from_us(2000),
        loss: 0.0,
        bandwidth_bits_per_sec: 100_000_000_000,
        store_host_bandwidth_bits_per_sec: 100_000_000_000,
    };
    s.faults = faults;
    s
}

fn at(at_us: u64, kind: FaultKind) -> Fault {
    Fault::at(trainsim::sim_time::SimInstant::from_us(at_us), kind)
}

/// An agent that does nothing for `us` of simulated time.
fn idle(us: u64) -> Programs {
    programs(move |_env| async move {
        sleep_us(us).await;
        done()
    })
}

fn run(s: &Scenario, programs: Programs) -> Trace {
    trainsim::world::simulate(s, SEED, programs)
        .expect("the run finishes")
        .trace
}

fn on<'a>(trace: &'a Trace, node: &str) -> Vec<&'a Event> {
    trace
        .events
        .iter()
        .filter(|e| e.node.is_some_and(|n| n.to_string() == node))
        .collect()
}

/// Samples (node, label, simulated time, value) taken by the programs.
type Log = Arc<Mutex<Vec<(u32, String, u64, i64)>>>;

fn note(log: &Log, env: &NodeEnv, label: &str, value: i64) {
    log.lock()
        .unwrap()
        .push((env.index, label.to_owned(), elapsed_us(), value));
}

fn samples(log: &Log, node: u32, label: &str) -> Vec<(u64, i64)> {
    log.lock()
        .unwrap()
        .iter()
        .filter(|(n, l, _, _)| *n == node && l == label)
        .map(|(_, _, t, v)| (*t, *v))
        .collect()
}

/// (time, pid) of each event on `node` that `pid_of` picks out, in trace order.
fn pids(trace: &Trace, node: &str, pid_of: fn(&EventKind) -> Option<u32>) -> Vec<(u64, u32)> {
    on(trace, node)
        .into_iter()
        .filter_map(|e| Some((e.at.as_us(), pid_of(&e.kind)?)))
        .collect()
}

fn started_pid(kind: &EventKind) -> Option<u32> {
    match kind {
        EventKind::AgentStarted { pid } => Some(*pid),
        _ => None,
    }
}

#[test]
fn kill_then_restart_gives_a_new_process_with_a_new_pid() {
    let s = scenario(
        2,
        0,
        vec![
            at(10 * SEC, FaultKind::Kill { node: 1 }),
            at(20 * SEC, FaultKind::Restart { node: 1 }),
        ],
    );
    let trace = run(&s, idle(60 * SEC));
    let kinds = on(&trace, "node-1");
    let started = pids(&trace, "node-1", started_pid);
    let killed = pids(&trace, "node-1", |k| match k {
        EventKind::AgentKilled { pid } => Some(*pid),
        _ => None,
    });
    let exited = pids(&trace, "node-1", |k| match k {
        EventKind::AgentExited { pid, .. } => Some(*pid),
        _ => None,
    });
    assert_eq!(started.len(), 2, "{kinds:?}");
    let (first_at, first_pid) = started[0];
    let (second_at, second_pid) = started[1];
    assert_eq!(first_at, 0);
    assert_eq!(
        killed,
        vec![(10 * SEC, first_pid)],
        "the first process is killed at 10 s"
    );
    assert!(
        (20 * SEC..20 * SEC + 10 * MS).contains(&second_at),
        "restarted at {second_at}"
    );
    assert_ne!(first_pid, second_pid, "a restarted node runs a new process");
    // The new pid is also no other node's pid.
    let node0_pids = pids(&trace, "node-0", started_pid);
    assert!(!node0_pids.iter().any(|(_, pid)| *pid == second_pid));
    // The killed process never exits by itself; the new one runs its full 60 s.
    assert_eq!(exited.len(), 1, "{kinds:?}");
    assert_eq!(exited[0].1, second_pid);
    assert!(exited[0].0 >= second_at + 60 * SEC);
}

#[test]
fn a_spare_starts_only_at_its_start_fault() {
    let log: Log = Default::default();
    let l = log.clone();
    let s = scenario(2, 1, vec![at(15 * SEC, FaultKind::Start { node: 2 })]);
    let trace = run(
        &s,
        programs(move |env| {
            let log = l.clone();
            async move {
                note(&log, &env, "ran", 0);
                sleep_us(30 * SEC).await;
                done()
            }
        }),
    );
    let node2 = on(&trace, "node-2");
    let first = node2.first().expect("node-2 did something");
    assert!(
        matches!(first.kind, EventKind::FaultApplied { .. })
            || matches!(first.kind, EventKind::AgentStarted { .. }),
        "{first:?}"
    );
    assert!(
        node2.iter().all(|e| e.at.as_us() >= 15 * SEC),
        "nothing on the spare before its start: {node2:?}"
    );
    let started: Vec<u64> = node2
        .iter()
        .filter(|e| matches!(e.kind, EventKind::AgentStarted { .. }))
        .map(|e| e.at.as_us())
        .collect();
    assert_eq!(started.len(), 1);
    assert!(
        (15 * SEC..15 * SEC + 10 * MS).contains(&started[0]),
        "started at {}",
        started[0]
    );
    let ran = samples(&log, 2, "ran");
    assert_eq!(ran.len(), 1, "the spare's program ran once");
    assert!(ran[0].0 >= 15 * SEC);
    assert_eq!(samples(&log, 0, "ran").len(), 1);
    assert_eq!(samples(&log, 0, "ran")[0].0, 0);
}

/// Notes how far the node's wall clock (`utc-elapsed`) and monotonic clock (`mono-elapsed`)
/// are from the simulated time elapsed.
fn note_clock_offsets(log: &Log, env: &NodeEnv) {
    let elapsed = elapsed_us() as i64;
    note(log, env, "utc-elapsed", env.now_utc_us() - elapsed);
    note(log, env, "mono-elapsed", env.now_mono_us() - elapsed);
}

#[test]
fn clock_skew_moves_the_wall_clock_of_one_node_only() {
    let log: Log = Default::default();
    let l = log.clone();
    let mut s = scenario(
        3,
        0,
        vec![
            at(
                10 * SEC,
                FaultKind::ClockSkew {
                    node: 1,
                    offset_us: 5 * SEC as i64,
                },
            ),
            at(
                12 * SEC,
                FaultKind::ClockSkew {
                    node: 2,
                    offset_us: -3 * SEC as i64,
                },
            ),
        ],
    );
    s.cluster.clock_skew_us.insert(2, 7 * SEC as i64);
    run(
        &s,
        programs(move |env| {
            let log = l.clone();
            async move {
                note_clock_offsets(&log, &env);
                sleep_us(20 * SEC).await;
                note_clock_offsets(&log, &env);
                done()
            }
        }),
    );
    let offsets = |node| {
        samples(&log, node, "utc-elapsed")
            .into_iter()
            .map(|(_, v)| v)
            .collect::<Vec<i64>>()
    };
    let (n0, n1, n2) = (offsets(0), offsets(1), offsets(2));
    let base = n0[0];
    assert_eq!(n0, vec![base, base], "node-0 has no skew");
    assert_eq!(
        n1,
        vec![base, base + 5 * SEC as i64],
        "node-1 stepped by +5 s"
    );
    assert_eq!(
        n2,
        vec![base + 7 * SEC as i64, base + 4 * SEC as i64],
        "node-2 starts 7 s ahead, then steps back 3 s"
    );
    // The monotonic clock ignores the skew.
    for node in 0..3 {
        let mono: Vec<i64> = samples(&log, node, "mono-elapsed")
            .into_iter()
            .map(|(_, v)| v)
            .collect();
        assert_eq!(
            mono[0], mono[1],
            "node-{node}'s monotonic clock was stepped"
        );
    }
}

#[test]
fn a_paused_node_makes_no_progress_until_resumed() {
    let log: Log = Default::default();
    let l = log.clone();
    let s = scenario(
        2,
        0,
        vec![
            at(10 * SEC, FaultKind::Pause { node: 1 }),
            at(20 * SEC, FaultKind::Resume { node: 1 }),
        ],
    );
    run(
        &s,
        programs(move |env| {
            let log = l.clone();
            async move {
                for i in 0..30 {
                    note(&log, &env, "tick", i);
                    sleep_us(SEC).await;
                }
                done()
            }
        }),
    );
    let ticks0 = samples(&log, 0, "tick");
    let ticks1 = samples(&log, 1, "tick");
    assert_eq!(ticks0.len(), 30);
    assert_eq!(
        ticks1.len(),
        30,
        "the paused node finishes after it resumes"
    );
    let paused = |t: u64| t > 10 * SEC + 10 * MS && t < 20 * SEC;
    assert!(
        ticks0.iter().any(|(t, _)| paused(*t)),
        "node-0 kept running"
    );
    assert!(
        !ticks1.iter().any(|(t, _)| paused(*t)),
        "node-1 ran while paused: {ticks1:?}"
    );
    // After the resume node-1 is ten seconds behind node-0.
    assert!(
        ticks1[29].0 >= ticks0[29].0 + 9 * SEC,
        "node-1 ended at {}, node-0 at {}",
        ticks1[29].0,
        ticks0[29].0
    );
}

/// Calls the store every second with a short timeout; logs 1 for success, 0 for failure.
fn prober(log: Log, probes: i64, timeout_us: u64) -> Programs {
    programs(move |env| {
        let log = log.clone();
        async move {
            let c = StoreClient::connect(env.store_addr(), SimDuration::from_us(timeout_us))
                .await
                .expect("a client binds");
            for i in 0..probes {
                let start = elapsed_us();
                // An `add` reads its reply (a `set` reads none), with no timeout: a probe
                // lasts one round trip, or until a cut link heals.
                let ok = c.add(&format!("{}-{i}", env.name), 1).await.is_ok();
                let rtt = elapsed_us() - start;
                note(&log, &env, "ok", ok as i64);
                note(&log, &env, "rtt", rtt as i64);
                note(&log, &env, "start", start as i64);
                sleep_us(SEC.saturating_sub(rtt)).await;
            }
            done()
        }
    })
}

/// (start time, ok, round trip) of each probe of `node`.
fn probes(log: &Log, node: u32) -> Vec<(u64, bool, u64)> {
    let ok = samples(log, node, "ok");
    let rtt = samples(log, node, "rtt");
    let start = samples(log, node, "start");
    (0..ok.len())
        .map(|i| (start[i].1 as u64, ok[i].1 == 1, rtt[i].1 as u64))
        .collect()
}

/// `others` on every node but node-0, whose agent only idles for a minute (it hosts the
/// store).
fn idle_on_node_0(others: Programs) -> Programs {
    let host = idle(60 * SEC);
    Programs {
        agent: Arc::new(move |env| {
            if env.index == 0 {
                (host.agent)(env)
            } else {
                (others.agent)(env)
            }
        }),
        ..others
    }
}

#[test]
fn partition_cuts_the_named_links_and_heal_restores_them() {
    let log: Log = Default::default();
    // The store is on node-0: node-1 is cut off from it, node-2 stays with it.
    let mut s = scenario(
        3,
        0,
        vec![
            at(
                10 * SEC,
                FaultKind::Partition {
                    groups: vec![vec![0, 2], vec![1]],
                },
            ),
            at(20 * SEC, FaultKind::Heal),
        ],
    );
    s.cluster.store = StoreHost::Node(0);
    let trace = run(&s, idle_on_node_0(prober(log.clone(), 30, 500 * MS)));
    let details: Vec<&str> = trace
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::FaultApplied { detail, .. } => Some(detail.as_str()),
            _ => None,
        })
        .collect();
    let expected = ["2 groups, 4 directed links cut", "4 cut links restored"];
    assert_eq!(details, expected);
    // TCPStore's `add` has no timeout: node-1's probe that meets the cut waits in TCP's
    // retransmissions and ends only after the heal; none ends inside the partition.
    let cut_off = probes(&log, 1);
    assert!(cut_off.iter().all(|(_, ok, _)| *ok), "{cut_off:?}");
    for (start, _, rtt) in &cut_off {
        let end = start + rtt;
        assert!(
            end <= 10 * SEC + 10 * MS || end >= 20 * SEC,
            "node-1 reached the store at {end} through the partition"
        );
    }
    assert!(
        cut_off
            .iter()
            .any(|(start, _, rtt)| *start < 20 * SEC && start + rtt >= 20 * SEC),
        "a probe under way at the cut waits for the heal: {cut_off:?}"
    );
    // node-2 is on the store's side: never cut off (its first probe may wait out a connect
    // retry while the store binds).
    let with_store = probes(&log, 2);
    assert!(
        with_store.len() == 30
            && with_store.iter().all(|(_, ok, _)| *ok)
            && with_store.iter().skip(1).all(|(_, _, rtt)| *rtt < 100 * MS),
        "{with_store:?}"
    );
    assert!(
        probes(&log, 2).iter().all(|(_, ok, _)| *ok),
        "node-2 is on the store's side"
    );
}

#[test]
fn latency_with_a_duration_is_restored_afterwards() {
    let log: Log = Default::default();
    let s = scenario(
        1,
        0,
        vec![at(
            10 * SEC,
            FaultKind::Latency {
                latency_min: SimDuration::from_us(50 * MS),
                latency_max: SimDuration::from_us(60 * MS),
                duration: Some(SimDuration::from_us(10 * SEC)),
            },
        )],
    );
    run(&s, prober(log.clone(), 30, 5 * SEC));
    let p = probes(&log, 0);
    assert!(p.iter().all(|(_, ok, _)| *ok));
    let rtt = |from: u64, to: u64| {
        p.iter()
            .filter(|(t, _, _)| *t >= from && *t < to)
            .map(|(_, _, r)| *r)
            .collect::<Vec<u64>>()
    };
    // The first probe may wait out a connect retry while the store binds: skip it.
    let before = rtt(SEC / 2, 10 * SEC);
    let during = rtt(10 * SEC + 10 * MS, 20 * SEC - 200 * MS);
    let after = rtt(20 * SEC + 10 * MS, 40 * SEC);
    assert!(!before.is_empty() && !during.is_empty() && !after.is_empty());
    assert!(before.iter().all(|r| *r < 20 * MS), "before: {before:?}");
    assert!(during.iter().all(|r| *r >= 100 * MS), "during: {during:?}");
    assert!(after.iter().all(|r| *r < 20 * MS), "after: {after:?}");
}

#[test]
fn latency_without_a_duration_stays() {
    let log: Log = Default::default();
    let s = scenario(
        1,
        0,
        vec![at(
            10 * SEC,
            FaultKind::Latency {
                latency_min: SimDuration::from_us(50 * MS),
                latency_max: SimDuration::from_us(60 * MS),
                duration: None,
            },
        )],
    );
    run(&s, prober(log.clone(), 30, 5 * SEC));
    let late: Vec<u64> = probes(&log, 0)
        .into_iter()
        .filter(|(t, _, _)| *t > 11 * SEC)
        .map(|(_, _, r)| r)
        .collect();
    assert!(
        late.len() > 10 && late.iter().all(|r| *r >= 100 * MS),
        "{late:?}"
    );
}

#[test]
fn the_end_of_a_loss_fault_leaves_a_latency_fault_alone() {
    let log: Log = Default::default();
    let s = scenario(
        1,
        0,
        vec![
            at(
                5 * SEC,
                FaultKind::Latency {
                    latency_min: SimDuration::from_us(50 * MS),
                    latency_max: SimDuration::from_us(60 * MS),
                    duration: None,
                },
            ),
            at(
                10 * SEC,
                FaultKind::Loss {
                    probability: 0.0,
                    duration: Some(SimDuration::from_us(2 * SEC)),
                },
            ),
        ],
    );
    run(&s, prober(log.clone(), 30, 5 * SEC));
    let late: Vec<u64> = probes(&log, 0)
        .into_iter()
        .filter(|(t, _, _)| *t > 13 * SEC)
        .map(|(_, _, r)| r)
        .collect();
    assert!(
        late.len() > 10 && late.iter().all(|r| *r >= 100 * MS),
        "the latency fault was undone at 12 s: {late:?}"
    );
}

#[test]
fn a_timed_latency_fault_restores_the_latency_before_it() {
    let log: Log = Default::default();
    let s = scenario(
        1,
        0,
        vec![
            at(
                5 * SEC,
                FaultKind::Latency {
                    latency_min: SimDuration::from_us(50 * MS),
                    latency_max: SimDuration::from_us(60 * MS),
                    duration: None,
                },
            ),
            at(
                10 * SEC,
                FaultKind::Latency {
                    latency_min: SimDuration::from_us(200 * MS),
                    latency_max: SimDuration::from_us(210 * MS),
                    duration: Some(SimDuration::from_us(5 * SEC)),
                },
            ),
        ],
    );
    run(&s, prober(log.clone(), 30, 5 * SEC));
    let p = probes(&log, 0);
    let during: Vec<u64> = p
        .iter()
        .filter(|(t, _, _)| *t > 10 * SEC && *t < 14 * SEC)
        .map(|(_, _, r)| *r)
        .collect();
    assert!(
        during.iter().all(|r| *r >= 400 * MS),
        "the timed fault did not apply: {during:?}"
    );
    let late: Vec<u64> = p
        .iter()
        .filter(|(t, _, _)| *t > 16 * SEC)
        .map(|(_, _, r)| *r)
        .collect();
    assert!(
        late.len() > 5 && late.iter().all(|r| *r >= 100 * MS && *r < 400 * MS),
        "not back to the 50 ms latency: {late:?}"
    );
}
