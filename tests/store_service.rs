//! The c10d store served over the simulated network: every client call, blocking and timeouts, partitions, refused connections and lossy links.

mod common;
#[path = "common/store_log.rs"]
mod store_log;

use common::{done, programs};
use store_log::*;
use trainsim::scenario::model::*;
use trainsim::store::service::READ_TIMEOUT;

const READ_TIMEOUT_US: u64 = READ_TIMEOUT.as_us();
use trainsim::trace::EventKind;
use trainsim::world::time::{elapsed_us, sleep_us};
use trainsim::world::{AgentExit, NodeEnv};

/// What node 0 noted, in order, while `program` ran on every node of `s` with the shared log.
fn node0_notes<F, Fut>(s: &Scenario, program: F) -> Vec<String>
where
    F: Fn(NodeEnv, Log) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = AgentExit> + Send + 'static,
{
    let log: Log = Default::default();
    let shared = log.clone();
    run(s, programs(move |env| program(env, shared.clone())));
    entries(&log, 0).into_iter().map(|(w, _)| w).collect()
}

#[test]
fn set_get_and_add_over_the_network() {
    let seen = node0_notes(
        &scenario(1, StoreHost::Dedicated, vec![]),
        |env, log| async move {
            let c = client(&env, READ_TIMEOUT_US).await;
            c.set("a", b"1".to_vec()).await.unwrap();
            note(&log, &env, format!("get a = {:?}", c.get("a").await));
            c.set("a", b"2".to_vec()).await.unwrap();
            note(&log, &env, format!("get a again = {:?}", c.get("a").await));
            note(&log, &env, format!("add c 2 = {:?}", c.add("c", 2).await));
            note(&log, &env, format!("add c 3 = {:?}", c.add("c", 3).await));
            let add = c.add("c", -10).await;
            note(&log, &env, format!("add c -10 = {add:?}"));
            note(&log, &env, format!("get c = {:?}", c.get("c").await));
            c.set("t", b"x".to_vec()).await.unwrap();
            note(&log, &env, format!("add t = {:?}", c.add("t", 1).await));
            done()
        },
    );
    assert_eq!(
        seen,
        vec![
            "get a = Ok([49])",
            "get a again = Ok([50])",
            "add c 2 = Ok(2)",
            "add c 3 = Ok(5)",
            "add c -10 = Ok(-5)",
            "get c = Ok([45, 53])",
            "add t = Err(Refused(\"add on non-integer key 't'\"))",
        ]
    );
}

#[test]
fn check_multi_ops_and_delete_over_the_network() {
    let seen = node0_notes(
        &scenario(1, StoreHost::Dedicated, vec![]),
        |env, log| async move {
            let c = client(&env, READ_TIMEOUT_US).await;
            c.set("a", b"2".to_vec()).await.unwrap();
            let check = |names: &'static [&'static str]| c.check(keys(names));
            note(
                &log,
                &env,
                format!("check before = {:?}", check(&["m1", "m2"]).await),
            );
            let pairs = vec![("m1".into(), b"x".to_vec()), ("m2".into(), b"y".to_vec())];
            c.multi_set(pairs).await.unwrap();
            note(
                &log,
                &env,
                format!("check after = {:?}", check(&["m1", "m2"]).await),
            );
            note(
                &log,
                &env,
                format!("check partial = {:?}", check(&["m1", "zz"]).await),
            );
            let got = c.multi_get(keys(&["m2", "m1", "a"])).await;
            note(&log, &env, format!("multi_get = {got:?}"));
            note(
                &log,
                &env,
                format!("delete m1 = {:?}", c.delete_key("m1").await),
            );
            let again = c.delete_key("m1").await;
            note(&log, &env, format!("delete m1 again = {again:?}"));
            note(
                &log,
                &env,
                format!("check deleted = {:?}", check(&["m1"]).await),
            );
            note(
                &log,
                &env,
                format!("check kept = {:?}", check(&["m2"]).await),
            );
            done()
        },
    );
    assert_eq!(
        seen,
        vec![
            "check before = Ok(false)",
            "check after = Ok(true)",
            "check partial = Ok(false)",
            "multi_get = Ok([[121], [120], [50]])",
            "delete m1 = Ok(true)",
            "delete m1 again = Ok(false)",
            "check deleted = Ok(false)",
            "check kept = Ok(true)",
        ]
    );
}

#[test]
fn compare_set_follows_tcpstore_over_the_network() {
    let seen = node0_notes(
        &scenario(1, StoreHost::Node(0), vec![]),
        |env, log| async move {
            let c = client(&env, READ_TIMEOUT_US).await;
            // Absent key, non-empty expected: answers `expected`, sets nothing.
            note(
                &log,
                &env,
                format!("{:?}", c.compare_set("k", b"x", b"y").await),
            );
            note(&log, &env, format!("{:?}", c.check(keys(&["k"])).await));
            // Absent key, empty expected: sets.
            note(
                &log,
                &env,
                format!("{:?}", c.compare_set("k", b"", b"a").await),
            );
            note(&log, &env, format!("{:?}", c.get("k").await));
            // Present key, not equal: unchanged, answers the current value.
            note(
                &log,
                &env,
                format!("{:?}", c.compare_set("k", b"zz", b"b").await),
            );
            note(&log, &env, format!("{:?}", c.get("k").await));
            // Present key, empty expected is not a wildcard.
            note(
                &log,
                &env,
                format!("{:?}", c.compare_set("k", b"", b"c").await),
            );
            // Present key, equal: sets.
            note(
                &log,
                &env,
                format!("{:?}", c.compare_set("k", b"a", b"b").await),
            );
            note(&log, &env, format!("{:?}", c.get("k").await));
            done()
        },
    );
    let v = |s: &str| format!("Ok({:?})", s.as_bytes());
    assert_eq!(
        seen,
        vec![
            v("x"),
            "Ok(false)".into(),
            v("a"),
            v("a"),
            v("a"),
            v("a"),
            v("a"),
            v("b"),
            v("b")
        ]
    );
}

#[test]
fn blocking_get_wait_and_multi_get_return_after_another_nodes_set() {
    let log: Log = Default::default();
    let l = log.clone();
    let s = scenario(2, StoreHost::Dedicated, vec![]);
    run(
        &s,
        programs(move |env| {
            let log = l.clone();
            async move {
                let c = client(&env, READ_TIMEOUT_US).await;
                if env.index == 0 {
                    sleep_us(5 * SEC).await;
                    note(&log, &env, "set late".into());
                    c.set("late", b"v".to_vec()).await.unwrap();
                    sleep_us(5 * SEC).await;
                    c.set("w1", b"1".to_vec()).await.unwrap();
                    sleep_us(5 * SEC).await;
                    note(&log, &env, "set w2".into());
                    c.set("w2", b"2".to_vec()).await.unwrap();
                } else {
                    note(&log, &env, format!("get late = {:?}", c.get("late").await));
                    note(
                        &log,
                        &env,
                        format!("wait = {:?}", c.wait(keys(&["w1", "w2"])).await),
                    );
                    // Both keys exist by now; a second client on the same node works alongside.
                    let other = client(&env, READ_TIMEOUT_US).await;
                    note(
                        &log,
                        &env,
                        format!(
                            "multi_get = {:?}",
                            other.multi_get(keys(&["w1", "w2"])).await
                        ),
                    );
                }
                done()
            }
        }),
    );
    let (_, set_late) = find(&log, 0, "set late");
    let (_, set_w2) = find(&log, 0, "set w2");
    let (got, got_at) = find(&log, 1, "get late");
    assert_eq!(got, "get late = Ok([118])");
    assert!(
        got_at >= set_late && got_at < set_late + SEC,
        "get returned at {got_at}, the set was at {set_late}"
    );
    let (waited, waited_at) = find(&log, 1, "wait");
    assert_eq!(waited, "wait = Ok(())");
    assert!(
        waited_at >= set_w2 && waited_at < set_w2 + SEC,
        "wait returned at {waited_at}, w2 was set at {set_w2}"
    );
    assert_eq!(find(&log, 1, "multi_get").0, "multi_get = Ok([[49], [50]])");
}

#[test]
fn get_of_a_key_that_never_comes_raises_tcpstores_wait_timeout() {
    let log: Log = Default::default();
    let l = log.clone();
    let s = scenario(1, StoreHost::Dedicated, vec![]);
    run(
        &s,
        programs(move |env| {
            let log = l.clone();
            async move {
                let c = client(&env, 2 * SEC).await;
                c.set("other", b"x".to_vec()).await.unwrap();
                let start = elapsed_us();
                let r = c.get("never").await;
                note(&log, &env, format!("started {start}"));
                note(&log, &env, format!("get = {r:?}"));
                // The client still works afterwards.
                note(
                    &log,
                    &env,
                    format!("get other = {:?}", c.get("other").await),
                );
                done()
            }
        }),
    );
    let (started, _) = find(&log, 0, "started");
    let start: u64 = started.trim_start_matches("started ").parse().unwrap();
    let (got, at) = find(&log, 0, "get =");
    // TCPStore's doWait: the wait times out, the client cancels it and reads the server's
    // answer (one round trip), then raises.
    assert_eq!(
        got,
        "get = Err(WaitTimeout { timeout_ms: 2000, keys: \"never\" })"
    );
    assert!(
        at >= start + 2 * SEC && at < start + 2 * SEC + 100_000,
        "the get gave up at {at}, started at {start}"
    );
    assert_eq!(find(&log, 0, "get other").0, "get other = Ok([120])");
}

#[test]
fn a_get_cut_off_past_its_timeout_raises_it_only_once_delivered() {
    let log: Log = Default::default();
    let l = log.clone();
    let faults = vec![
        Fault {
            at: trainsim::sim_time::SimInstant::from_us(SEC),
            kind: FaultKind::Partition {
                groups: vec![vec![0], vec![1]],
            },
            role: None,
        },
        Fault {
            at: trainsim::sim_time::SimInstant::from_us(100 * SEC),
            kind: FaultKind::Heal,
            role: None,
        },
    ];
    let s = scenario(2, StoreHost::Node(0), faults);
    run(
        &s,
        programs(move |env| {
            let log = l.clone();
            async move {
                if env.index == 0 {
                    // The store lives in this process: keep it up.
                    sleep_us(200 * SEC).await;
                    return done();
                }
                let c = client(&env, READ_TIMEOUT_US).await;
                note(
                    &log,
                    &env,
                    format!("before = {:?}", c.set("k", b"1".to_vec()).await),
                );
                sleep_us(2 * SEC).await;
                note(&log, &env, format!("start {}", elapsed_us()));
                note(&log, &env, format!("during = {:?}", c.get("k").await));
                sleep_us(110 * SEC - elapsed_us()).await;
                note(&log, &env, format!("after = {:?}", c.get("k").await));
                done()
            }
        }),
    );
    assert_eq!(find(&log, 1, "before").0, "before = Ok(())");
    let (start, _) = find(&log, 1, "start");
    let start: u64 = start.trim_start_matches("start ").parse().unwrap();
    // The get is never acknowledged while the link is cut: TCP retransmits it from 200 ms,
    // doubling, and TCPStore's timeout cannot end a request still queued in the stream. The
    // retransmission 102.2 s after it was first sent, after the heal at 100 s, delivers it,
    // 42 s past its timeout: the client cancels and raises.
    let (during, at) = find(&log, 1, "during");
    assert!(
        during.starts_with("during = Err(WaitTimeout { timeout_ms: 60000"),
        "{during}"
    );
    assert!(
        at >= start + 102_200_000 && at < start + 102_200_000 + 100_000,
        "raised at {at}, started at {start}"
    );
    assert_eq!(
        find(&log, 1, "after").0,
        "after = Ok([49])",
        "the healed link carries calls again"
    );
}

#[test]
fn a_dead_store_process_on_a_live_host_refuses_at_once() {
    let log: Log = Default::default();
    let l = log.clone();
    let s = scenario(
        2,
        StoreHost::Node(0),
        vec![Fault {
            at: trainsim::sim_time::SimInstant::from_us(5 * SEC),
            kind: FaultKind::StoreCrash,
            role: None,
        }],
    );
    let (trace, _) = run(
        &s,
        programs(move |env| {
            let log = l.clone();
            async move {
                if env.index == 0 {
                    sleep_us(30 * SEC).await;
                    return done();
                }
                let c = client(&env, READ_TIMEOUT_US).await;
                note(
                    &log,
                    &env,
                    format!("before = {:?}", c.set("k", b"1".to_vec()).await),
                );
                sleep_us(10 * SEC).await;
                note(&log, &env, format!("start {}", elapsed_us()));
                note(&log, &env, format!("after = {:?}", c.get("k").await));
                // A new connection is retried after TCPStore's backoff (500 ms, ×1.5 a
                // try, ±50 %) until a try is refused past its timeout.
                let fresh = client(&env, 3 * SEC).await;
                note(&log, &env, format!("fresh start {}", elapsed_us()));
                note(&log, &env, format!("fresh = {:?}", fresh.get("k").await));
                done()
            }
        }),
    );
    assert!(trace
        .events
        .iter()
        .any(|e| matches!(&e.kind, EventKind::StoreDied { reason } if reason == "store_crash")));
    assert_eq!(find(&log, 1, "before").0, "before = Ok(())");
    let start = logged_us(&log, 1, "start ");
    let (after, at) = find(&log, 1, "after");
    assert!(
        // An established connection to a dead server process is reset, not refused.
        after.starts_with("after = Err(Connection(") && after.contains("reset by peer"),
        "{after}"
    );
    assert!(at - start < 100_000, "reset after {} us", at - start);
    let fresh_start = logged_us(&log, 1, "fresh start ");
    let (fresh, fresh_at) = find(&log, 1, "fresh =");
    assert!(fresh.contains("refused"), "{fresh}");
    // The tries land at the running sums of the delays; the first past 3 s fails, and the
    // delay before it is at most 1.5 × 500 ms × 1.5^4 (about 3.8 s).
    assert!(
        fresh_at - fresh_start > 3 * SEC && fresh_at - fresh_start < 7 * SEC,
        "a new connection retried for {} us",
        fresh_at - fresh_start
    );
}

#[test]
fn a_dead_store_with_a_blocked_request_pending_still_refuses() {
    let log: Log = Default::default();
    let l = log.clone();
    let s = scenario(
        3,
        StoreHost::Node(0),
        vec![Fault {
            at: trainsim::sim_time::SimInstant::from_us(5 * SEC),
            kind: FaultKind::StoreCrash,
            role: None,
        }],
    );
    run(
        &s,
        programs(move |env| {
            let log = l.clone();
            async move {
                match env.index {
                    0 => sleep_us(200 * SEC).await,
                    1 => {
                        // Blocks in the server until the store dies.
                        let c = client(&env, 150 * SEC).await;
                        note(&log, &env, format!("blocked = {:?}", c.get("never").await));
                    }
                    _ => {
                        let c = client(&env, READ_TIMEOUT_US).await;
                        note(
                            &log,
                            &env,
                            format!("before = {:?}", c.set("k", b"1".to_vec()).await),
                        );
                        sleep_us(10 * SEC).await;
                        note(&log, &env, format!("start {}", elapsed_us()));
                        note(&log, &env, format!("after = {:?}", c.get("k").await));
                    }
                }
                done()
            }
        }),
    );
    assert_eq!(find(&log, 2, "before").0, "before = Ok(())");
    let start = logged_us(&log, 2, "start ");
    let (after, at) = find(&log, 2, "after");
    assert!(
        after.contains("reset by peer"),
        "{after} (after {} us)",
        at - start
    );
    assert!(at - start < 100_000, "reset after {} us", at - start);
}

#[test]
fn with_thirty_percent_loss_every_call_takes_effect_exactly_once() {
    let log: Log = Default::default();
    let l = log.clone();
    let mut s = scenario(2, StoreHost::Dedicated, vec![]);
    s.network.loss = 0.3;
    run(
        &s,
        programs(move |env| {
            let log = l.clone();
            async move {
                let c = client(&env, READ_TIMEOUT_US).await;
                let mut seen = Vec::new();
                for _ in 0..50 {
                    seen.push(
                        c.add("counter", 1)
                            .await
                            .expect("add succeeds despite loss"),
                    );
                }
                for i in 0..20 {
                    let key = format!("n{}-{i}", env.index);
                    c.set(&key, vec![i as u8])
                        .await
                        .expect("set succeeds despite loss");
                    assert_eq!(
                        c.get(&key)
                            .await
                            .expect("get succeeds despite loss")
                            .bytes(),
                        [i as u8]
                    );
                }
                note(&log, &env, format!("{seen:?}"));
                // Read the total once both nodes are surely done.
                sleep_us((300 * SEC).saturating_sub(elapsed_us())).await;
                note(&log, &env, format!("final {:?}", c.add("counter", 0).await));
                done()
            }
        }),
    );
    let mut all: Vec<i64> = Vec::new();
    for node in 0..2 {
        let (seen, at) = entries(&log, node)
            .into_iter()
            .next()
            .expect("node-{node} logged");
        assert!(at < 300 * SEC, "node-{node} took until {at} us");
        let seen: Vec<i64> = seen
            .trim_matches(['[', ']'])
            .split(", ")
            .map(|v| v.parse().unwrap())
            .collect();
        assert_eq!(seen.len(), 50);
        assert!(
            seen.windows(2).all(|w| w[0] < w[1]),
            "node-{node}'s adds must see increasing counts: {seen:?}"
        );
        all.extend(seen);
        assert_eq!(find(&log, node, "final").0, "final Ok(100)");
    }
    all.sort();
    assert_eq!(
        all,
        (1..=100).collect::<Vec<i64>>(),
        "every add counted once, none twice"
    );
}
