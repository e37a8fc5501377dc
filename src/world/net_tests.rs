//! The registry's and the reply cache's assertions: a broken bind or cache stops the run.

use super::*;

const ADDR: &str = "10.0.0.1:29500";

#[test]
fn a_port_is_bound_again_once_its_server_died() {
    let mut r = Registry::default();
    let addr = ADDR.parse().unwrap();
    let first = r.bind(addr, std::sync::Weak::new());
    r.died(first);
    let second = r.bind(addr, std::sync::Weak::new());
    assert_eq!(r.incarnations[&second].generation, 2);
}

#[test]
#[should_panic(expected = "10.0.0.1:29500 bound again (bind 2) while incarnation Some(1) listens")]
fn a_second_bind_of_a_live_port_stops_the_run() {
    let mut r = Registry::default();
    let addr = ADDR.parse().unwrap();
    r.bind(addr, std::sync::Weak::new());
    r.bind(addr, std::sync::Weak::new());
}

#[test]
#[should_panic(expected = "request 7 entered the reply cache twice")]
fn a_request_cached_twice_stops_the_run() {
    let mut cache = ReplyCache::default();
    cache.insert_pending(7);
    cache.insert_pending(7);
}

#[test]
fn a_request_in_service_is_never_forgotten_however_many_are_answered() {
    let mut cache = ReplyCache::default();
    cache.insert_pending(1);
    for id in 2..(REPLY_CACHE_MAX as u64 + 10) {
        cache.insert_pending(id);
        cache.answer(id, Box::new(id));
    }
    assert!(
        matches!(cache.entries.get(&1), Some(None)),
        "still being served"
    );
    assert!(
        !cache.entries.contains_key(&2),
        "the oldest answered reply is forgotten"
    );
    assert_eq!(cache.answered.len(), REPLY_CACHE_MAX);
    cache.answer(1, Box::new(1u64));
    assert!(matches!(cache.entries.get(&1), Some(Some(_))));
}

#[test]
#[should_panic(expected = "request 3 was answered twice")]
fn a_request_answered_twice_stops_the_run() {
    let mut cache = ReplyCache::default();
    cache.insert_pending(3);
    cache.answer(3, Box::new(3u64));
    cache.answer(3, Box::new(3u64));
}

#[test]
fn tcp_gives_up_where_linux_does() {
    // Linux's `retransmits_timed_out` with the RTO at its 200 ms floor: doubling to 120 s.
    assert_eq!(tcp_give_up(0).as_us(), 200_000);
    assert_eq!(tcp_give_up(5).as_us(), 12_600_000);
    assert_eq!(tcp_give_up(15).as_us(), 924_600_000);
    // Data lost at 40 s is sent again at 40.2, 40.6, 41.4, …, 142.2 and 244.6 s.
    let at = |s: u64| SimInstant::from_us(s * 1_000_000);
    let next = |now| next_retransmission(at(40), now).as_us();
    assert_eq!(next(at(40)), 40_200_000);
    assert_eq!(next(at(41)), 41_400_000);
    assert_eq!(next(at(180)), 244_600_000);
    assert_eq!(tcp_give_up(16).as_us(), 1_044_600_000);
}

impl super::WireSize for u64 {
    fn wire_bytes(&self) -> u64 {
        8
    }
}

#[test]
#[should_panic(expected = "a cut link in a run whose servers keep no replies for resent requests")]
fn a_link_cut_in_a_run_declared_drop_free_stops_the_run() {
    let r = Registry::default();
    r.assert_drops_possible(true, "a cut link");
}

#[test]
fn a_run_that_may_drop_lets_links_be_cut_and_restored() {
    let r = Registry {
        drops_possible: true,
        ..Registry::default()
    };
    r.assert_drops_possible(true, "a cut link");
    Registry::default().assert_drops_possible(false, "a restored link");
}
