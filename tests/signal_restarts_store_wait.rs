//! A handled signal restarts the timeout of the main thread's store call in progress: the
//! TCPStore client retries its blocking read on EINTR with the full timeout again (measured
//! on torch 2.15.0: a 6 s `wait` interrupted at 1 s ended at 7.0 s). Seen here in the exit
//! barrier of `scenarios/sigterm_in_exit_barrier.toml`: node-0 and node-1 wait there from
//! about 62 s with a 300 s timeout; node-0 alone gets SIGTERM at 200 s.

use trainsim::runner::Run;
use trainsim::scenario::{self, Scenario};
use trainsim::trace::{AgentState, Event, EventKind, TraceNode};

const SEC: u64 = 1_000_000;
const FILE: &str = "scenarios/sigterm_in_exit_barrier.toml";

/// The scenario, its SIGTERM moved to `stop_at` (or dropped).
fn barrier_scenario(stop_at: Option<&str>) -> Scenario {
    let text = std::fs::read_to_string(FILE).expect("the scenario file");
    let stop = "[[faults]]\nat = \"200s\"\nkind = \"stop\"\nnode = \"node-0\"\n";
    assert!(text.contains(stop), "{FILE} stops node-0 at 200 s");
    let moved = match stop_at {
        Some(at) => stop.replace("200s", at),
        None => String::new(),
    };
    scenario::parse(&text.replace(stop, &moved), FILE).unwrap_or_else(|e| panic!("{e}"))
}

fn exit_of(events: &[Event], node: u32) -> (u64, AgentState) {
    events
        .iter()
        .filter(|e| e.node == Some(TraceNode::node(node)))
        .find_map(|e| match &e.kind {
            EventKind::AgentExited { state, .. } => Some((e.at.as_us(), *state)),
            _ => None,
        })
        .unwrap_or_else(|| panic!("node-{node}'s agent exits"))
}

fn exits(s: &Scenario) -> [(u64, AgentState); 2] {
    let (_, trace) = Run::of(s, FILE).traced().unwrap_or_else(|e| panic!("{e}"));
    [exit_of(&trace.events, 0), exit_of(&trace.events, 1)]
}

#[test]
fn unsignalled_agents_leave_the_barrier_when_its_timeout_runs_out() {
    let [(node0_us, node0), (node1_us, node1)] = exits(&barrier_scenario(None));
    assert_eq!(
        (node0, node1),
        (AgentState::Succeeded, AgentState::Succeeded)
    );
    for at in [node0_us, node1_us] {
        assert!((362 * SEC..363 * SEC).contains(&at), "{at} us");
    }
}

#[test]
fn a_sigterm_in_the_barrier_waits_its_full_timeout_again() {
    let [(node0_us, node0), (node1_us, _)] = exits(&barrier_scenario(Some("200s")));
    assert_eq!(node0, AgentState::Stopped);
    assert!(
        (500 * SEC..500 * SEC + SEC / 10).contains(&node0_us),
        "node-0 raises SignalException 300 s after the signal, not at 362 s: {node0_us} us"
    );
    assert!((362 * SEC..363 * SEC).contains(&node1_us), "{node1_us} us");
}

#[test]
fn a_sigterm_before_the_barrier_acts_at_once() {
    // At 50 s node-0's workers are still running (the monitor looks every 30 s): the main
    // thread sleeps, in no store call, and the handler's SignalException comes at once.
    let [(node0_us, node0), _] = exits(&barrier_scenario(Some("50s")));
    assert_eq!(node0, AgentState::Stopped);
    assert!((50 * SEC..51 * SEC).contains(&node0_us), "{node0_us} us");
}
