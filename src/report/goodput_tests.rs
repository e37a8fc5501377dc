//! Tests of the goodput accounting: each piece of the wall time lands on its cause and the
//! pieces add up.

use super::*;
use crate::check::testkit::*;
use crate::scenario::model::node_name;

const S: u64 = 1_000_000;

fn badput(g: &Goodput, cause: &str) -> u64 {
    g.badput_us[cause]
}

fn measured(scenario: &Scenario, events: Vec<Event>, end: RunEnd) -> Goodput {
    measure(scenario, &trace(events), &end)
}

#[test]
fn a_clean_run_loses_only_its_start() {
    let g = measured(&scenario(), happy_run(3, 10), end(13, "succeeded"));
    // Steps end at 3..=12 s; the first spans 2..3 s, from the workers' start.
    assert_eq!((g.wall_us, g.productive_us), (12 * S, 10 * S));
    assert_eq!(badput(&g, "rendezvous_restart"), 2 * S);
    assert_eq!(g.ettr, 0.833333);
    assert_eq!(g.fate, "training finished at 12 s: all 10 steps done");
    assert_eq!(g.badput_us.len(), CAUSES.len());
}

/// Steps 1..=7 from 3 s, a checkpoint at step 5, node-2 killed at 9.5 s, node-0's worker
/// fails at 10 s, the group restarts at 12 s from step 5 and does steps 6..=10 by 17 s.
fn killed_and_resumed() -> Vec<Event> {
    let mut events = round_zero(3);
    for i in 0..3 {
        events.push(e(2, &node_name(i), workers_started(100 + i, 0, i, 3)));
    }
    for s in 1..=7 {
        events.push(e(2 + s, "node-0", step(100, 0, s)));
        if s == 5 {
            events.push(e(2 + s, "node-0", checkpoint(100, s)));
        }
    }
    events.push(e_us(9 * S + S / 2, "", fault("kill")));
    events.push(e_us(9 * S + S / 2, "node-2", killed(102)));
    events.push(e(10, "node-0", restart(100, true, 1)));
    events.push(e(12, "node-0", workers_started(100, 1, 0, 2)));
    for s in 6..=10 {
        events.push(e(7 + s, "node-0", step(100, 1, s)));
    }
    events
}

#[test]
fn a_kill_costs_its_lost_steps_detection_and_restart() {
    let g = measured(&scenario(), killed_and_resumed(), end(18, "succeeded"));
    assert_eq!(g.wall_us, 17 * S);
    // Steps 1..=5 of the first group and 6..=10 of the second are kept.
    assert_eq!(g.productive_us, 10 * S);
    // Steps 6 and 7 done twice, and the step in progress from 9 s until the kill.
    assert_eq!(badput(&g, "wasted_progress"), 2 * S + S / 2);
    assert_eq!(badput(&g, "detection"), S / 2);
    // The first rendezvous (0..2 s) and the restart (10..12 s).
    assert_eq!(badput(&g, "rendezvous_restart"), 4 * S);
}

#[test]
fn a_failed_job_loses_its_steps_since_the_last_checkpoint_for_good() {
    let mut events = killed_and_resumed();
    events.truncate(events.len() - 5);
    events.push(e(13, "node-0", step(100, 1, 6)));
    events.push(e(14, "node-0", exited(100, AgentState::Failed)));
    let g = measured(&scenario(), events, end(15, "failed"));
    // The job failed for good when node-0's agent exited, at 14 s.
    assert_eq!(g.wall_us, 14 * S);
    assert_eq!(g.productive_us, 5 * S);
    assert_eq!(g.training_stopped_at_us, 14 * S);
    // Steps 7 (8..9 s) and 6 (its second try, the group's first step: one nominal step
    // long), last done after the checkpoint of step 5, are lost for good.
    let step_us = scenario().job.step_time.as_us();
    assert_eq!(badput(&g, "lost_when_failed"), S + step_us);
    // Step 6's first try, the step cut by the kill, and the one cut by the failure.
    assert_eq!(badput(&g, "wasted_progress"), 2 * S + S / 2);
    assert_eq!(
        g.fate,
        "training stopped for good at 14 s after step 6 of 10: node-0's agent failed: test"
    );
    let lost: u64 = g.badput_us.values().sum();
    assert_eq!(g.productive_us + lost, g.wall_us);
}

#[test]
fn too_few_agents_is_waiting_for_nodes() {
    let events = vec![
        e(0, "node-0", started(100)),
        e(1, "node-0", joining(100)),
        e(30, "node-0", exited(100, AgentState::Failed)),
    ];
    let g = measured(&scenario(), events, end(31, "failed"));
    assert_eq!(g.wall_us, 30 * S);
    assert_eq!(badput(&g, "waiting_for_nodes"), 30 * S);
    assert_eq!(g.ettr, 0.0);
}

#[test]
fn the_time_limit_names_the_last_progress() {
    let g = measured(&scenario(), happy_run(3, 4), end(100, "timed_out"));
    assert_eq!(g.wall_us, 100 * S);
    assert_eq!(g.training_stopped_at_us, 6 * S);
    assert!(g
        .fate
        .starts_with("the time limit ended the run with step 4 of 10 done"));
}

#[test]
fn a_blocking_checkpoint_write_is_its_own_cause() {
    let mut s = scenario();
    s.job.checkpoint_save_time = crate::sim_time::SimDuration::from_us(S / 4);
    let g = measured(&s, happy_run(3, 10), end(13, "succeeded"));
    // Step 6 follows the checkpoint of step 5; step 10's write ends the job.
    assert_eq!(badput(&g, "checkpoint_save"), S / 4);
    assert_eq!(g.productive_us, 10 * S - S / 4);
}
