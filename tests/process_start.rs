//! Process start times: an agent joins the rendezvous only after `agent.start_time` (plus its
//! seeded jitter), and a worker group trains only after `job.worker_start_time`.

use std::path::Path;
use trainsim::scenario::{self, Scenario};
use trainsim::sim_time::SimDuration;
use trainsim::trace::{Event, EventKind, TraceNode};

const SEC: u64 = 1_000_000;

fn all_nodes_at_max() -> Scenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/all_nodes_at_max.toml");
    scenario::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

fn events(scenario: &Scenario) -> Vec<Event> {
    let (report, trace) = trainsim::runner::Run::of(scenario, "all_nodes_at_max.toml")
        .traced()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.outcome, "succeeded", "{}", report.repro);
    trace.events
}

/// When each node's agent first called `next_rendezvous()`, by node.
fn first_joins_us(events: &[Event]) -> Vec<u64> {
    let mut joins: Vec<(TraceNode, u64)> = Vec::new();
    for e in events {
        if let (EventKind::RendezvousJoining { .. }, Some(node)) = (&e.kind, e.node) {
            if !joins.iter().any(|&(n, _)| n == node) {
                joins.push((node, e.at.as_us()));
            }
        }
    }
    joins.sort();
    joins.into_iter().map(|(_, at_us)| at_us).collect()
}

fn first_step_us(events: &[Event]) -> u64 {
    events
        .iter()
        .find_map(|e| e.kind.each_step(e.at).next())
        .expect("the job trains")
        .at
        .as_us()
}

fn last_round_completion_us(events: &[Event]) -> u64 {
    events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::RendezvousCompleted { .. }))
        .map(|e| e.at.as_us())
        .max()
        .expect("round 0 completes")
}

#[test]
fn agents_join_after_their_start_time() {
    let mut s = all_nodes_at_max();
    s.agent.start_time = SimDuration::from_us(5 * SEC);
    let joins = first_joins_us(&events(&s));
    assert_eq!(joins.len(), 3);
    // Every agent waits the same 5 s; its first connect may still back off a little.
    assert!(
        joins.iter().all(|&at| (5 * SEC..6 * SEC).contains(&at)),
        "{joins:?}"
    );
}

#[test]
fn a_start_jitter_spreads_the_agents_within_it() {
    let mut s = all_nodes_at_max();
    s.agent.start_time = SimDuration::from_us(5 * SEC);
    s.agent.start_time_jitter = SimDuration::from_us(3 * SEC);
    let joins = first_joins_us(&events(&s));
    assert!(
        joins.iter().all(|&at| (5 * SEC..9 * SEC).contains(&at)),
        "{joins:?}"
    );
    let spread_us = joins.iter().max().unwrap() - joins.iter().min().unwrap();
    assert!(
        spread_us > 100_000,
        "three draws from 3 s landed together: {joins:?}"
    );
    // The draws come from the run's seed: the same seed gives the same joins.
    assert_eq!(joins, first_joins_us(&events(&s)));
}

#[test]
fn workers_train_only_after_their_start_time() {
    let mut s = all_nodes_at_max();
    let events_at_once = events(&s);
    let at_once_us = first_step_us(&events_at_once) - last_round_completion_us(&events_at_once);
    s.job.worker_start_time = SimDuration::from_us(4 * SEC);
    let events_later = events(&s);
    let later_us = first_step_us(&events_later) - last_round_completion_us(&events_later);
    // The bootstrap's own store round trips draw other latencies in the two runs, so the
    // shift is 4 s give or take a few milliseconds.
    assert!(
        later_us > at_once_us + 3_900_000 && later_us < at_once_us + 4_100_000,
        "first step {later_us} us after the round, {at_once_us} us without a start time"
    );
}
