//! A signal torchrun has no handler for (SIGUSR1 without `--signals-to-handle`) ends the
//! agent by its default action and leaves its workers running, orphaned: they keep the run
//! going until they exit by themselves, die with their node, or a relaunch ends them.

use trainsim::runner::Run;
use trainsim::scenario::{self, Scenario};
use trainsim::trace::{AgentState, Event, EventKind, ExitReason, TraceNode};

const SEC: u64 = 1_000_000;

/// Two nodes (node-0 hosts the store), 300 steps of 200 ms, and SIGUSR1 to `warned` at 30 s.
fn warned(warned: &[&str], extra: &str) -> Scenario {
    let faults: String = warned
        .iter()
        .map(|node| {
            format!("[[faults]]\nat = \"30s\"\nkind = \"signal\"\nnode = \"{node}\"\nsignal = \"SIGUSR1\"\n")
        })
        .collect();
    let text = format!(
        "name = \"warned\"\ntime_limit = \"1h\"\n[cluster]\nnodes = 2\n[agent]\nmax_restarts = 1\n{extra}\n\
         [job]\nsteps = 300\nstep_time = \"200ms\"\ncheckpoint_every = 50\n{faults}"
    );
    scenario::parse(&text, "warned.toml").unwrap_or_else(|e| panic!("{e}"))
}

fn run(s: &Scenario) -> (String, Vec<Event>) {
    let (report, trace) = Run::of(s, "warned.toml")
        .traced()
        .unwrap_or_else(|e| panic!("{e}"));
    (report.outcome, trace.events)
}

fn on(node: u32) -> impl Fn(&&Event) -> bool {
    move |e: &&Event| e.node == Some(TraceNode::node(node))
}

/// The moments of node `node`'s steps.
fn steps_us(events: &[Event], node: u32) -> Vec<u64> {
    events
        .iter()
        .filter(on(node))
        .filter(|e| matches!(e.kind, EventKind::Step { .. }))
        .map(|e| e.at.as_us())
        .collect()
}

/// When node `node`'s workers were recorded stopped for a reason with `words` in it.
fn stopped_us(events: &[Event], node: u32, words: &str) -> Option<u64> {
    events.iter().filter(on(node)).find_map(|e| match &e.kind {
        EventKind::WorkersStopped { reason, .. } if reason.contains(words) => Some(e.at.as_us()),
        _ => None,
    })
}

fn exit_of(events: &[Event], node: u32) -> Option<(u64, AgentState, ExitReason)> {
    events.iter().filter(on(node)).find_map(|e| match &e.kind {
        EventKind::AgentExited { state, reason, .. } => {
            Some((e.at.as_us(), *state, reason.clone()))
        }
        _ => None,
    })
}

#[test]
fn orphans_of_a_node_that_hosts_no_store_train_to_the_end_beside_the_others() {
    let (outcome, events) = run(&warned(&["node-1"], ""));
    let (at, state, reason) = exit_of(&events, 1).expect("node-1's agent exits");
    assert_eq!((at, state), (30 * SEC, AgentState::Failed));
    assert_eq!(
        trainsim::trace::ExitReason::default_action_exit_code(&reason.to_string()),
        Some(-10),
        "{reason}"
    );
    let last = *steps_us(&events, 1).last().expect("node-1 trained");
    assert!(
        last > 60 * SEC,
        "node-1's orphans trained on: last step at {last} us"
    );
    // node-0's agent sees its workers succeed and exits SUCCEEDED (after waiting out the
    // exit barrier for the dead agent): the job finished.
    assert_eq!(outcome, "succeeded");
    assert_eq!(
        exit_of(&events, 0).map(|e| e.1),
        Some(AgentState::Succeeded)
    );
}

#[test]
fn a_warning_to_the_store_host_ends_the_job_at_once() {
    let (outcome, events) = run(&warned(&["node-0"], ""));
    assert_eq!(outcome, "failed");
    let (at, state, _) = exit_of(&events, 1).expect("node-1's agent exits");
    assert_eq!(state, AgentState::Failed);
    assert!(
        at < 32 * SEC,
        "node-1's agent fails on the dead store at {at} us"
    );
    let stopped = stopped_us(&events, 0, "exited by themselves");
    assert!(
        stopped.is_some(),
        "node-0's orphans exit when their ring breaks"
    );
}

#[test]
fn orphans_with_no_agent_left_keep_the_run_going_until_they_finish() {
    let (outcome, events) = run(&warned(&["node-0", "node-1"], ""));
    // No agent saw the end, so none succeeded; the orphans trained every step anyway.
    assert_eq!(outcome, "failed");
    assert_eq!(steps_us(&events, 0).len(), steps_us(&events, 1).len());
    let steps = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Step { step, .. } => Some(*step),
            _ => None,
        })
        .max();
    assert_eq!(steps, Some(300));
}

#[test]
fn a_relaunch_restarts_the_container_and_ends_the_orphans() {
    let s = warned(
        &["node-1"],
        "relaunch = \"on_failure\"\nrelaunch_delay = \"5s\"\nrelaunch_max = 1",
    );
    let (_, events) = run(&s);
    assert_eq!(stopped_us(&events, 1, "relaunch"), Some(35 * SEC));
}

#[test]
fn a_restart_of_the_node_ends_its_orphans_and_the_run_still_ends() {
    let s = warned(
        &["node-1"],
        "[[faults]]\nat = \"40s\"\nkind = \"restart\"\nnode = \"node-1\"\n",
    );
    let (outcome, events) = run(&s);
    assert_eq!(
        stopped_us(&events, 1, "died with their node"),
        Some(40 * SEC)
    );
    let restarted = events.iter().filter(on(1)).any(|e| {
        matches!(&e.kind, EventKind::AgentStarted { pid } if *pid != 1000)
            && e.at.as_us() == 40 * SEC
    });
    assert!(restarted, "node-1 runs a new agent from 40 s");
    // The run ends by itself (this job then fails in its next round, as a plain kill and
    // restart of node-1 makes it), not at the time limit with the dead orphans counted.
    assert_eq!(outcome, "failed");
}
