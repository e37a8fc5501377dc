//! The collectives' barriers, departures and spread, without a simulator.

use super::*;

fn block(first: u64, count: u64, world_size: u64) -> RankBlock {
    RankBlock {
        first,
        count,
        world_size,
    }
}

#[test]
fn a_world_is_covered_only_by_all_of_its_ranks() {
    assert!(covers_world([block(8, 8, 16), block(0, 8, 16)]));
    assert!(!covers_world([block(8, 8, 16)]));
    assert!(!covers_world([block(0, 8, 24), block(16, 8, 24)]));
    assert!(!covers_world([block(0, 8, 16), block(8, 8, 24)]));
    assert!(!covers_world(std::iter::empty()));
}

#[test]
fn a_barrier_waits_for_every_rank_of_the_world() {
    let mut c = Collectives::default();
    let all = |_: &[u32]| true;
    // Node 2 sees itself alone, but its ranks are 16..24 of a world of 24.
    assert!(matches!(
        c.arrive((1, 1), 2, block(16, 8, 24), all, 0),
        Arrival::Wait(_)
    ));
    assert!(matches!(
        c.arrive((1, 1), 0, block(0, 8, 24), all, 0),
        Arrival::Wait(_)
    ));
    assert!(matches!(
        c.arrive((1, 1), 1, block(8, 8, 24), all, 0),
        Arrival::Released
    ));
}

#[test]
fn a_closed_member_fails_the_waiters_and_every_later_arrival() {
    let mut c = Collectives::default();
    let all = |_: &[u32]| true;
    c.join(1, 0, block(0, 1, 2));
    c.join(1, 1, block(1, 1, 2));
    let Arrival::Wait(mut rx) = c.arrive((1, 1), 0, block(0, 1, 2), all, 0) else {
        panic!("one rank of two cannot release");
    };
    assert_eq!(c.withdraw(1, true, 5_000), vec![1]);
    assert!(matches!(
        rx.try_recv(),
        Ok(Some(BarrierEnd::PeerClosed {
            member: 1,
            at_ns: 5_000
        }))
    ));
    assert!(matches!(
        c.arrive((1, 2), 0, block(0, 1, 2), all, 0),
        Arrival::Failed(CollectiveError::PeerClosed { member: 1, .. })
    ));
    assert_eq!(c.depart(1, true, 6_000), Vec::<u64>::new(), "departs once");
}

#[test]
fn a_silent_member_only_takes_its_arrival_back() {
    let mut c = Collectives::default();
    let all = |_: &[u32]| true;
    c.join(1, 0, block(0, 1, 2));
    c.join(1, 1, block(1, 1, 2));
    let _ = c.arrive((1, 1), 1, block(1, 1, 2), all, 0);
    c.withdraw(1, false, 5_000);
    assert!(matches!(
        c.arrive((1, 1), 0, block(0, 1, 2), all, 0),
        Arrival::Wait(_)
    ));
    assert!(matches!(
        c.watch(1, None),
        Err(Departure {
            member: 1,
            closed: false,
            ..
        })
    ));
}

#[test]
fn a_barrier_a_cut_link_held_goes_on_once_connected() {
    let mut c = Collectives::default();
    let cut = |_: &[u32]| false;
    let all = |_: &[u32]| true;
    let _ = c.arrive((1, 1), 0, block(0, 1, 2), cut, 1_000);
    assert!(
        c.held_back(all).is_empty(),
        "one rank is not a held barrier"
    );
    let Arrival::Wait(mut rx) = c.arrive((1, 1), 1, block(1, 1, 2), cut, 2_000) else {
        panic!("a cut link holds the barrier");
    };
    assert!(c.held_back(cut).is_empty(), "still cut");
    assert_eq!(c.held_back(all), vec![((1, 1), 2_000)]);
    c.release_if_connected((1, 1), cut);
    assert!(rx.try_recv().expect("open").is_none());
    c.release_if_connected((1, 1), all);
    assert!(matches!(rx.try_recv(), Ok(Some(BarrierEnd::Released))));
}

/// A ring of five nodes, one rank each, under gloo's spread; every node but `dead` waits
/// at the barrier of step 1.
fn ring_of_five_waiting(dead: u32) -> (Collectives, Vec<(u32, oneshot::Receiver<BarrierEnd>)>) {
    let mut c = Collectives::new(Spread::RingNeighbours);
    let all = |_: &[u32]| true;
    for node in 0..5 {
        c.join(1, node, block(node as u64, 1, 5));
    }
    let waiting = (0..5)
        .filter(|n| *n != dead)
        .map(
            |node| match c.arrive((1, 1), node, block(node as u64, 1, 5), all, 0) {
                Arrival::Wait(rx) => (node, rx),
                _ => panic!("four ranks of five cannot release"),
            },
        )
        .collect();
    (c, waiting)
}

fn failed(waiting: &mut [(u32, oneshot::Receiver<BarrierEnd>)]) -> Vec<u32> {
    let mut out = Vec::new();
    for (node, rx) in waiting.iter_mut() {
        if matches!(rx.try_recv(), Ok(Some(BarrierEnd::PeerClosed { .. }))) {
            out.push(*node);
        }
    }
    out
}

#[test]
fn under_gloo_a_death_reaches_the_ring_neighbours_then_spreads_by_exits() {
    let (mut c, mut waiting) = ring_of_five_waiting(2);
    c.withdraw(2, true, 1_000);
    assert_eq!(
        failed(&mut waiting),
        vec![1, 3],
        "the dead rank's two neighbours"
    );
    // Rank 1's process exits: rank 0, its other neighbour, fails; rank 4 waits on.
    c.withdraw(1, true, 2_000);
    assert_eq!(failed(&mut waiting), vec![0]);
    assert!(
        matches!(
            c.arrive((1, 2), 4, block(4, 1, 5), |_: &[u32]| true, 2_000),
            Arrival::Wait(_)
        ),
        "rank 4's neighbours 3 and 0 are alive: it waits"
    );
    c.withdraw(3, true, 3_000);
    assert_eq!(failed(&mut waiting), vec![4]);
}

#[test]
fn under_nccl_a_death_reaches_everyone_at_once() {
    let mut c = Collectives::new(Spread::Everyone);
    let all = |_: &[u32]| true;
    for node in 0..4 {
        c.join(1, node, block(node as u64, 1, 4));
    }
    let mut waiting: Vec<_> = (1..4)
        .map(
            |node| match c.arrive((1, 1), node, block(node as u64, 1, 4), all, 0) {
                Arrival::Wait(rx) => (node, rx),
                _ => panic!("three ranks of four cannot release"),
            },
        )
        .collect();
    c.withdraw(0, true, 1_000);
    assert_eq!(failed(&mut waiting), vec![1, 2, 3]);
}

#[test]
fn a_ring_watch_hears_only_departures_that_reach_it() {
    let mut c = Collectives::new(Spread::RingNeighbours);
    for node in 0..5 {
        c.join(7, node, block(node as u64, 1, 5));
    }
    let Ok(mut far) = c.watch(7, Some(0)) else {
        panic!("nobody left yet");
    };
    let Ok(mut any) = c.watch(7, None) else {
        panic!("nobody left yet");
    };
    c.depart(2, true, 1_000);
    assert!(
        far.try_recv().expect("open").is_none(),
        "rank 2 is not rank 0's neighbour"
    );
    assert!(matches!(
        any.try_recv(),
        Ok(Some(Departure { member: 2, .. }))
    ));
    c.depart(1, true, 2_000);
    assert!(matches!(
        far.try_recv(),
        Ok(Some(Departure { member: 1, .. }))
    ));
    assert!(
        c.watch(7, Some(4)).is_ok(),
        "4's neighbours 3 and 0 are alive"
    );
    c.depart(3, false, 3_000);
    assert!(matches!(
        c.watch(7, Some(0)),
        Err(Departure {
            member: 1,
            closed: true,
            ..
        })
    ));
}
