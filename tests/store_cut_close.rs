//! A store server that dies while a link to its client is cut, as the real kernel has it:
//! the close crosses the link from the server's host to the client's like any packet, so a
//! cut there drops it. The client hears of the death when a copy gets through: a
//! retransmission of the close by the server's host, or a reset answering the client's own
//! next retransmission once both directions are open; with neither, TCP gives up.

mod common;
#[path = "common/store_log.rs"]
mod store_log;

use common::{done, programs};
use store_log::*;
use trainsim::scenario::model::*;
use trainsim::sim_time::{SimDuration, SimInstant};
use trainsim::store::service::StoreClient;
use trainsim::world::net::tcp_give_up;
use trainsim::world::time::{elapsed_us, sleep_us};
use trainsim::world::NodeEnv;

/// The store host's agent (and the store with it) exits at 60 s.
const STORE_DIES_US: u64 = 60 * SEC;
/// How long a reset takes to come back.
const RESET_US: u64 = 2_000;

fn at(at_us: u64, kind: FaultKind) -> Fault {
    Fault::at(SimInstant::from_us(at_us), kind)
}

fn cut_off() -> FaultKind {
    FaultKind::Partition {
        groups: vec![vec![0], vec![1]],
    }
}

/// node-0 hosts the store until 60 s; node-1 runs `client_side`, and what that returns is
/// logged with when. Returns it.
fn beside_dying_store<F, Fut>(s: &Scenario, client_side: F) -> (String, u64)
where
    F: Fn(NodeEnv) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = String> + Send + 'static,
{
    let log: Log = Default::default();
    let l = log.clone();
    run(
        s,
        programs(move |env| {
            let (log, client_side) = (l.clone(), client_side.clone());
            async move {
                if env.index == 0 {
                    sleep_us(STORE_DIES_US).await;
                    return done();
                }
                let what = client_side(env.clone()).await;
                note(&log, &env, what);
                done()
            }
        }),
    );
    entries(&log, 1).into_iter().next().expect("node-1 logged")
}

/// node-1 connects at once and calls `add` at 20 s, with `faults` and `tcp_retries2`.
/// Returns what the `add` gave and when.
fn add_across(faults: Vec<Fault>, tcp_retries2: u32) -> (String, u64) {
    let mut s = scenario(2, StoreHost::Node(0), faults);
    s.cluster.tcp_retries2 = tcp_retries2;
    beside_dying_store(&s, |env| async move {
        let c = client(&env, 3 * SEC).await;
        c.set("k", b"v".to_vec()).await.unwrap();
        sleep_us(20 * SEC - elapsed_us()).await;
        format!("add = {:?}", c.add("n", 1).await)
    })
}

/// The moment of the retransmission of data first sent at `sent_us` that comes first at or
/// after `after_us` (the RTO doubling from 200 ms; all below its 120 s ceiling here).
fn retransmission_after(sent_us: u64, after_us: u64) -> u64 {
    let mut rto_us = 200_000;
    let mut at_us = sent_us + rto_us;
    while at_us < after_us {
        rto_us *= 2;
        at_us += rto_us;
    }
    at_us
}

fn assert_reset_at(add: &(String, u64), expected_us: u64, why: &str) {
    let (result, at_us) = add;
    assert!(result.contains("reset by peer"), "{result}");
    assert!(
        (expected_us..expected_us + 10_000).contains(at_us),
        "the add failed at {at_us} us, {why} at {expected_us} us"
    );
}

#[test]
fn a_close_dropped_by_a_partition_never_reaches_the_client_and_tcp_gives_up() {
    let add = add_across(vec![at(10 * SEC, cut_off())], 8);
    assert!(add.0.contains("after 8 retransmissions"), "{}", add.0);
    let gave_up_us = 20 * SEC + tcp_give_up(8).as_us();
    assert!(
        add.1 > STORE_DIES_US && (gave_up_us..gave_up_us + 100_000).contains(&add.1),
        "the add failed at {} us, TCP gives up at {gave_up_us} us",
        add.1
    );
}

#[test]
fn a_heal_lets_the_dead_hosts_next_retransmission_of_the_close_through() {
    // The store's host sends its close again 0.2, 0.6, ... 51.0 s after the death.
    let add = add_across(
        vec![at(10 * SEC, cut_off()), at(100 * SEC, FaultKind::Heal)],
        15,
    );
    let close_us = retransmission_after(STORE_DIES_US, 100 * SEC);
    assert_eq!(close_us, 111 * SEC);
    assert_reset_at(&add, close_us + RESET_US, "its close's retransmission came");
}

#[test]
fn a_heal_after_the_host_stopped_sending_the_close_meets_a_reset_at_the_next_retransmission() {
    // The close's last copy left at 111 s; the add's request, first sent at 20 s, is sent
    // again at 71.0 s and 122.2 s.
    let add = add_across(
        vec![at(10 * SEC, cut_off()), at(115 * SEC, FaultKind::Heal)],
        15,
    );
    let retransmitted_us = retransmission_after(20 * SEC, 115 * SEC);
    assert_eq!(retransmitted_us, 122_200_000);
    assert_reset_at(
        &add,
        retransmitted_us + RESET_US,
        "its request was sent again",
    );
}

#[test]
fn a_close_crosses_the_open_direction_of_a_clogged_link() {
    // node-1's packets to node-0 vanish; node-0's close still reaches node-1 at its death.
    let add = add_across(
        vec![at(10 * SEC, FaultKind::ClogLink { from: 1, to: 0 })],
        15,
    );
    assert_reset_at(&add, STORE_DIES_US + RESET_US, "the store died");
}

#[test]
fn a_close_on_a_clogged_direction_waits_for_the_unclog() {
    // The add reaches the store, whose answers are dropped; the close is dropped too until
    // the unclog at 80 s lets its retransmission at 85.4 s through.
    let unclog = FaultKind::UnclogLink { from: 0, to: 1 };
    let faults = vec![
        at(10 * SEC, FaultKind::ClogLink { from: 0, to: 1 }),
        at(80 * SEC, unclog),
    ];
    let add = add_across(faults, 15);
    let close_us = retransmission_after(STORE_DIES_US, 80 * SEC);
    assert_eq!(close_us, 85_400_000);
    assert_reset_at(&add, close_us + RESET_US, "its close's retransmission came");
}

#[test]
fn a_connect_across_a_cut_link_times_out_instead_of_being_refused_or_bound() {
    let s = scenario(2, StoreHost::Node(0), vec![at(0, cut_off())]);
    let (set, at_us) = beside_dying_store(&s, |env| async move {
        sleep_us(SEC).await;
        let timeout = SimDuration::from_us(3 * SEC);
        let c = StoreClient::connect(env.store_addr(), timeout).await;
        format!("set = {:?}", c.unwrap().set("k", b"v".to_vec()).await)
    });
    assert!(set.contains("no reply"), "{set}");
    assert!((4 * SEC..4 * SEC + 100_000).contains(&at_us), "{at_us}");
}
