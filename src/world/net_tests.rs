//! The registry's and the reply cache's assertions: a broken bind or cache stops the run.

use super::*;

const ADDR: &str = "10.0.0.1:29500";

#[test]
fn a_port_is_bound_again_once_its_server_died() {
    let mut r = Registry::default();
    let addr = ADDR.parse().unwrap();
    let first = r.bind(addr);
    r.died(first);
    let second = r.bind(addr);
    assert_eq!(r.incarnations[&second].generation, 2);
}

#[test]
#[should_panic(expected = "10.0.0.1:29500 bound again (bind 2) while incarnation Some(1) listens")]
fn a_second_bind_of_a_live_port_stops_the_run() {
    let mut r = Registry::default();
    let addr = ADDR.parse().unwrap();
    r.bind(addr);
    r.bind(addr);
}

#[test]
#[should_panic(expected = "request 7 entered the reply cache twice")]
fn a_request_cached_twice_stops_the_run() {
    let mut cache = ReplyCache::default();
    cache.insert_pending(7);
    cache.insert_pending(7);
}
