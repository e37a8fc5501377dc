//! A store server that goes silent, as TCPStore's client meets it: a paused host still
//! acknowledges (TCP never gives up, calls without a timeout wait for it), a powered-off
//! host does not (TCP gives up after `tcp_retries2` retransmissions, not at the store's
//! timeout).

mod common;
#[path = "common/store_log.rs"]
mod store_log;

use common::{done, programs};
use std::future::Future;
use std::sync::Arc;
use store_log::*;
use trainsim::scenario::model::*;
use trainsim::store::service::StoreClient;
use trainsim::world::net::tcp_give_up;
use trainsim::world::time::{elapsed_us, sleep_us};
use trainsim::world::NodeEnv;

fn at(at_us: u64, kind: FaultKind) -> Fault {
    Fault::at(trainsim::sim_time::SimInstant::from_us(at_us), kind)
}

/// Runs `s` with node-0 hosting the store for `host_us` and node-1 its caller: a client with
/// a 3 s store timeout sets `k` at once, then runs `calls` at 20 s. Returns the log.
fn store_and_caller<F, Fut>(s: &Scenario, host_us: u64, calls: F) -> Log
where
    F: Fn(NodeEnv, StoreClient, Log) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let log: Log = Default::default();
    let l = log.clone();
    let calls = Arc::new(calls);
    run(
        s,
        programs(move |env| {
            let (log, calls) = (l.clone(), Arc::clone(&calls));
            async move {
                if env.index == 0 {
                    sleep_us(host_us).await;
                    return done();
                }
                let c = client(&env, 3 * SEC).await;
                c.set("k", b"v".to_vec()).await.unwrap();
                sleep_us(20 * SEC - elapsed_us()).await;
                calls(env, c, log).await;
                done()
            }
        }),
    );
    log
}

/// node-0 hosts the store and is paused from 10 s to 140 s; node-1 calls it at 20 s.
fn paused_store(call: &'static str) -> Log {
    let faults = vec![
        at(10 * SEC, FaultKind::Pause { node: 0 }),
        at(140 * SEC, FaultKind::Resume { node: 0 }),
    ];
    let s = scenario(2, StoreHost::Node(0), faults);
    store_and_caller(&s, 300 * SEC, move |env, c, log| async move {
        let result = match call {
            "compare_set" => format!(
                "{:?}",
                c.compare_set("k", b"v".to_vec(), b"w".to_vec()).await
            ),
            "add" => format!("{:?}", c.add("n", 1).await),
            "get" => format!("{:?}", c.get("missing").await),
            _ => format!("{:?}", c.set("k2", b"x".to_vec()).await),
        };
        note(&log, &env, format!("{call} = {result}"));
    })
}

#[test]
fn compare_set_and_add_wait_out_a_paused_store_and_succeed() {
    for call in ["compare_set", "add"] {
        let (result, at) = find(&paused_store(call), 1, call);
        assert!(result.contains("Ok("), "{result}");
        assert!(
            (140 * SEC..141 * SEC).contains(&at),
            "{call} returned at {at}, the store resumed at 140 s"
        );
    }
}

#[test]
fn a_get_on_a_paused_store_raises_its_timeout_only_once_the_store_answers_the_cancel() {
    let (result, at) = find(&paused_store("get"), 1, "get");
    assert_eq!(
        result,
        "get = Err(WaitTimeout { timeout_ms: 3000, keys: \"missing\" })"
    );
    assert!(
        (140 * SEC..141 * SEC).contains(&at),
        "the get raised at {at}, the store resumed at 140 s"
    );
}

#[test]
fn a_set_on_a_paused_store_returns_at_once() {
    let (result, at) = find(&paused_store("set"), 1, "set");
    assert_eq!(result, "set = Ok(())");
    assert!(at < 20 * SEC + 100_000, "the set returned at {at}");
}

/// node-0 hosts the store and is powered off at 10 s; node-1 calls `add` at 20 s, then
/// `check` at once after it fails. Returns (add's result, when, check's result, when).
fn powered_off_store(tcp_retries2: u32) -> (String, u64, String, u64) {
    let mut s = scenario(
        2,
        StoreHost::Node(0),
        vec![at(10 * SEC, FaultKind::PowerOff { node: 0 })],
    );
    s.cluster.tcp_retries2 = tcp_retries2;
    let log = store_and_caller(&s, 3_000 * SEC, |env, c, log| async move {
        note(&log, &env, format!("add = {:?}", c.add("n", 1).await));
        note(
            &log,
            &env,
            format!("check = {:?}", c.check(vec!["k".to_string()]).await),
        );
    });
    let (add, add_at) = find(&log, 1, "add");
    let (check, check_at) = find(&log, 1, "check");
    (add, add_at, check, check_at)
}

#[test]
fn a_powered_off_store_fails_calls_when_tcp_gives_up() {
    // 0.2 + 0.4 + ... + 6.4 s: the expiry after the 5th retransmission.
    let (add, at, check, check_at) = powered_off_store(5);
    assert!(
        add.contains("timed out: no acknowledgement after 5 retransmissions"),
        "{add}"
    );
    let gave_up_us = 20 * SEC + tcp_give_up(5).as_us();
    assert!(
        (gave_up_us..gave_up_us + 100_000).contains(&at),
        "add failed at {at}: 20 s + 12.6 s"
    );
    // The connection is dead: the next call fails at once, with the same error.
    assert!(check.contains("after 5 retransmissions"), "{check}");
    assert_eq!(check_at, at);
    // Linux's default 15: 204.6 s of doubling, then six times 120 s.
    let (add, at, _, _) = powered_off_store(15);
    assert!(add.contains("after 15 retransmissions"), "{add}");
    let gave_up_us = 20 * SEC + tcp_give_up(15).as_us();
    assert!(
        (gave_up_us..gave_up_us + 100_000).contains(&at),
        "add failed at {at}: 20 s + 924.6 s"
    );
}
