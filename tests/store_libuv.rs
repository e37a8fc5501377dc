//! The store as torch 2.15's libuv server runs it: the bound on a request's values (the
//! connection closes), `get` as two requests, and the event loop's passes, which keep a
//! small request from waiting behind every byte of the large ones.

mod common;
#[path = "common/store_log.rs"]
mod store_log;

use common::done;
use store_log::*;
use trainsim::scenario::model::*;
use trainsim::store::{StoreStats, StoreStatsHandle, Value, PAYLOAD_BYTES_MAX};
use trainsim::world::time::{elapsed_us, sleep_us};
use trainsim::world::{NodeEnv, Programs};

/// `programs` whose store counts what it serves in `stats`.
fn counted<F, Fut>(stats: &StoreStatsHandle, agent: F) -> Programs
where
    F: Fn(NodeEnv) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = trainsim::world::AgentExit> + Send + 'static,
{
    let mut programs = common::programs(agent);
    programs.store = trainsim::runner::RunOptions::default()
        .programs_counting(std::sync::Arc::clone(stats))
        .store;
    programs
}

#[test]
fn a_value_over_eight_mib_resets_the_connection_and_it_stays_closed() {
    let log: Log = Default::default();
    let l = log.clone();
    let s = scenario(1, StoreHost::Dedicated, vec![]);
    run(
        &s,
        common::programs(move |env| {
            let log = l.clone();
            async move {
                let c = client(&env, 60 * SEC).await;
                let at_bound = Value::from(vec![b'a'; PAYLOAD_BYTES_MAX]);
                let over = Value::from(vec![b'b'; PAYLOAD_BYTES_MAX + 1]);
                let set = c.set("k", at_bound.clone()).await;
                note(&log, &env, format!("set at the bound: {set:?}"));
                let cas = c.compare_set("k", at_bound, over.clone()).await;
                note(&log, &env, format!("over: {cas:?}"));
                note(&log, &env, format!("next: {:?}", c.num_keys().await));
                let other = client(&env, 60 * SEC).await;
                note(
                    &log,
                    &env,
                    format!("set over: {:?}", other.set("j", over).await),
                );
                note(
                    &log,
                    &env,
                    format!("others: {:?}", client(&env, SEC).await.num_keys().await),
                );
                done()
            }
        }),
    );
    let seen: Vec<String> = entries(&log, 0).into_iter().map(|(w, _)| w).collect();
    assert_eq!(seen[0], "set at the bound: Ok(())");
    // What torch's client raises: the call that sent it meets the reset, every later call
    // on that connection a broken pipe; other connections are untouched.
    assert!(
        seen[1].starts_with("over: Err(Connection(\"Connection reset by peer"),
        "{seen:?}"
    );
    assert!(
        seen[2].starts_with("next: Err(Connection(\"Broken pipe"),
        "{seen:?}"
    );
    assert!(
        seen[3].starts_with("set over: Err(Connection(\"Connection reset by peer"),
        "{seen:?}"
    );
    assert_eq!(seen[4], "others: Ok(1)");
}

#[test]
fn a_get_is_a_wait_then_a_get() {
    let stats = StoreStatsHandle::default();
    let s = scenario(1, StoreHost::Dedicated, vec![]);
    run(
        &s,
        counted(&stats, |env| async move {
            let c = client(&env, 60 * SEC).await;
            c.set("key", b"value".to_vec()).await.unwrap();
            c.get("key").await.unwrap();
            done()
        }),
    );
    let stats: StoreStats = *stats.lock().unwrap();
    assert_eq!(
        stats.requests, 3,
        "a set, then a get's WAIT and GET: {stats:?}"
    );
    // set: command, key and value with their lengths, and its 1-byte acknowledgement; WAIT:
    // command, key count, key, and its 1-byte answer; GET: command, key, the value back.
    let set = 1 + (8 + 3) + (8 + 5) + 1;
    let wait = 1 + 8 + (8 + 3) + 1;
    let get = 1 + (8 + 3) + (8 + 5);
    assert_eq!(stats.wire_bytes, set + wait + get);
}

/// Eight clients send compare-and-sets of 400 kB at 10 s, and node 9 a small `get` 1 ms
/// later: when the get and the last compare-and-set end, in simulated microseconds after
/// 10 s.
fn small_get_among_large_writes() -> (u64, u64) {
    let log: Log = Default::default();
    let l = log.clone();
    let s = scenario(10, StoreHost::Dedicated, vec![]);
    run(
        &s,
        common::programs(move |env| {
            let log = l.clone();
            async move {
                let c = client(&env, 60 * SEC).await;
                if env.index == 0 {
                    c.set("state", vec![b'a'; 400_000]).await.unwrap();
                    c.set("small", b"x".to_vec()).await.unwrap();
                    return done();
                }
                sleep_us(10 * SEC - elapsed_us()).await;
                if env.index == 9 {
                    sleep_us(1_000).await;
                    c.get("small").await.unwrap();
                } else {
                    let stale = Value::from(vec![b'b'; 400_000]);
                    c.compare_set("state", stale.clone(), stale).await.unwrap();
                }
                note(&log, &env, format!("ended {}", elapsed_us() - 10 * SEC));
                done()
            }
        }),
    );
    let get = logged_us(&log, 9, "ended ");
    let last = (1..9).map(|n| logged_us(&log, n, "ended ")).max().unwrap();
    (get, last)
}

#[test]
fn a_small_get_waits_for_a_pass_not_for_every_large_write() {
    let (get_us, last_write_us) = small_get_among_large_writes();
    // Eight writes of 3.7 ms each (and more for eight sockets at once) hold the loop over
    // 30 ms; each of the get's two requests waits for the pass in progress and its turn in
    // the next, of 128 kB from each writer.
    assert!(
        last_write_us > 29_600,
        "the writes ended at {last_write_us} us"
    );
    assert!(
        get_us < last_write_us * 2 / 3,
        "the get ended at {get_us} us, the last write at {last_write_us} us"
    );
}
