//! `agent.relaunch`: torchrun relaunched on a node after its agent exits, as a Kubernetes
//! `restartPolicy` does, with the kubelet's doubling back-off and a limit; a node killed
//! while its relaunch waits runs nothing, and the run still ends.

use trainsim::runner::Run;
use trainsim::scenario::{self, Scenario};
use trainsim::trace::{Event, EventKind, TraceNode};

const SEC: u64 = 1_000_000;

/// One node that can never form a round (min_nodes 2): its agent fails at the 5 s join
/// timeout every time it runs.
fn lonely(extra: &str) -> Scenario {
    let text = format!(
        "name = \"lonely\"\ntime_limit = \"1h\"\n[cluster]\nnodes = 2\n[rendezvous]\nmin_nodes = 2\nmax_nodes = 2\njoin_timeout = \"5s\"\n[agent]\nrelaunch = \"on_failure\"\nrelaunch_delay = \"10s\"\nrelaunch_max = 3\n{extra}"
    );
    scenario::parse(&text, "lonely.toml").unwrap_or_else(|e| panic!("{e}"))
}

fn run(s: &Scenario) -> (String, Vec<Event>) {
    let (report, trace) = Run::of(s, "lonely.toml")
        .traced()
        .unwrap_or_else(|e| panic!("{e}"));
    (report.outcome, trace.events)
}

/// When node-1's agent processes started.
fn starts_us(events: &[Event]) -> Vec<u64> {
    events
        .iter()
        .filter(|e| e.node == Some(TraceNode::node(1)))
        .filter(|e| matches!(e.kind, EventKind::AgentStarted { .. }))
        .map(|e| e.at.as_us())
        .collect()
}

#[test]
fn a_failed_agent_is_relaunched_with_a_doubling_delay_up_to_the_limit() {
    // node-0 is powered off at once, so node-1 waits alone and fails every time.
    let s = lonely("[[faults]]\nat = \"0s\"\nkind = \"power_off\"\nnode = \"node-0\"\n");
    let (outcome, events) = run(&s);
    assert_eq!(outcome, "failed");
    let starts = starts_us(&events);
    assert_eq!(starts.len(), 4, "one launch and 3 relaunches: {starts:?}");
    let exits: Vec<u64> = events
        .iter()
        .filter(|e| e.node == Some(TraceNode::node(1)))
        .filter(|e| matches!(e.kind, EventKind::AgentExited { .. }))
        .map(|e| e.at.as_us())
        .collect();
    assert_eq!(exits.len(), 4, "every process exits by itself: {exits:?}");
    // From each exit to the next launch: 10, 20, 40 s (the store on the dead node-0 fails
    // each process when its client gives up).
    let waits: Vec<u64> = exits.iter().zip(&starts[1..]).map(|(e, s)| s - e).collect();
    assert_eq!(waits, vec![10 * SEC, 20 * SEC, 40 * SEC]);
}

#[test]
fn a_node_killed_while_its_relaunch_waits_runs_nothing_and_the_run_ends() {
    let s = lonely(
        "[[faults]]\nat = \"0s\"\nkind = \"power_off\"\nnode = \"node-0\"\n\
         [[faults]]\nat = \"8s\"\nkind = \"kill\"\nnode = \"node-1\"\n",
    );
    let (outcome, events) = run(&s);
    assert_eq!(outcome, "failed");
    assert_eq!(starts_us(&events).len(), 1);
}

#[test]
fn never_is_torchrun_alone() {
    let mut s = lonely("[[faults]]\nat = \"0s\"\nkind = \"power_off\"\nnode = \"node-0\"\n");
    s.agent.relaunch = trainsim::scenario::model::Relaunch::Never;
    let (_, events) = run(&s);
    assert_eq!(starts_us(&events).len(), 1);
}
