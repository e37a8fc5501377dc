//! Faults aimed at a role (`node = "rank0"`, `node = "store_host"`): each resolves to the node
//! holding the role when it fires, the trace names that node, and a role no node holds yet
//! skips the fault instead of hitting one.

use trainsim::runner::Run;
use trainsim::scenario::model::NodeRole;
use trainsim::scenario::{self, Scenario};
use trainsim::trace::{Event, EventKind, TraceNode};

const SEC: u64 = 1_000_000;

/// Three nodes on a dedicated store whose survivors re-form when rank 0 dies (gloo fails the
/// collective at once; refresh-master-addr gives them a live master), and `faults`.
fn three_nodes(faults: &str) -> Scenario {
    let text = format!(
        "name = \"roles\"\nseed = 1\ntime_limit = \"1h\"\n[cluster]\nnodes = 3\nstore = \"dedicated\"\n\
         [rendezvous]\nmin_nodes = 2\nmax_nodes = 3\nfixes = [\"refresh-master-addr\"]\n\
         [agent]\nmax_restarts = 3\n[job]\nsteps = 900\ncollective_timeout = \"60s\"\nbackend = \"gloo\"\n{faults}"
    );
    scenario::parse(&text, "roles.toml").unwrap_or_else(|e| panic!("{e}"))
}

fn events(s: &Scenario) -> Vec<Event> {
    let (_, trace) = Run::of(s, "roles.toml")
        .traced()
        .unwrap_or_else(|e| panic!("{e}"));
    trace.events
}

/// The fault events (applied or skipped) at `at_us`.
fn faults_at(events: &[Event], at_us: u64) -> Vec<&Event> {
    events
        .iter()
        .filter(|e| e.at.as_us() == at_us)
        .filter(|e| {
            matches!(
                e.kind,
                EventKind::FaultApplied { .. } | EventKind::FaultSkipped { .. }
            )
        })
        .collect()
}

/// Rank 0 of the latest round completed before `at_us`, as the trace tells it.
fn rank0_before(events: &[Event], at_us: u64) -> Option<String> {
    events
        .iter()
        .filter(|e| e.at.as_us() < at_us)
        .filter_map(|e| match &e.kind {
            EventKind::RendezvousCompleted { participants, .. } => {
                participants.first().map(ToString::to_string)
            }
            _ => None,
        })
        .next_back()
}

#[test]
fn a_rank0_fault_hits_the_node_that_holds_rank_0_when_it_fires() {
    // node-0 holds rank 0 of round 0; killed by name at 40 s, the survivors' round makes
    // node-1 rank 0, and the `rank0` crash at 150 s must hit node-1, not node-0.
    let s = three_nodes(
        "[[faults]]\nat = \"40s\"\nkind = \"kill\"\nnode = \"node-0\"\n\
         [[faults]]\nat = \"150s\"\nkind = \"worker_crash\"\nnode = \"rank0\"\nlocal_rank = 0\n",
    );
    let events = events(&s);
    assert_eq!(rank0_before(&events, 40 * SEC).as_deref(), Some("node-0"));
    assert_eq!(
        rank0_before(&events, 150 * SEC).as_deref(),
        Some("node-1"),
        "the survivors re-formed before the second fault, rank 0 moved"
    );
    let fired = faults_at(&events, 150 * SEC);
    let [fault] = fired.as_slice() else {
        panic!("one fault at 150 s: {fired:?}");
    };
    assert_eq!(fault.node, Some(TraceNode::node(1)), "{fault:?}");
    let EventKind::FaultApplied { role, detail, .. } = &fault.kind else {
        panic!("applied: {fault:?}");
    };
    assert_eq!(*role, Some(NodeRole::Rank0));
    assert!(detail.starts_with("rank0 is node-1: "), "{detail}");
    let crashed = events.iter().any(|e| {
        e.at.as_us() > 150 * SEC
            && e.node == Some(TraceNode::node(1))
            && matches!(e.kind, EventKind::WorkerFailed { .. })
    });
    assert!(crashed, "node-1's worker failed after the fault");
}

#[test]
fn a_rank0_fault_before_any_round_completed_is_skipped_and_recorded() {
    let s = three_nodes("[[faults]]\nat = \"0s\"\nkind = \"kill\"\nnode = \"rank0\"\n");
    let events = events(&s);
    let fired = faults_at(&events, 0);
    let [fault] = fired.as_slice() else {
        panic!("one fault at 0 s: {fired:?}");
    };
    assert_eq!(fault.node, None);
    let EventKind::FaultSkipped { role, reason, .. } = &fault.kind else {
        panic!("skipped: {fault:?}");
    };
    assert_eq!(*role, NodeRole::Rank0);
    assert!(
        reason.contains("no rendezvous round has completed"),
        "{reason}"
    );
    let killed = events
        .iter()
        .any(|e| matches!(e.kind, EventKind::AgentKilled { .. }));
    assert!(!killed, "nothing was killed");
}

#[test]
fn a_store_host_fault_hits_the_node_hosting_the_store() {
    let text = "name = \"store host\"\nseed = 1\ntime_limit = \"30m\"\n[cluster]\nnodes = 3\nstore = \"node-1\"\n\
                [job]\nsteps = 300\n[[faults]]\nat = \"30s\"\nkind = \"kill\"\nnode = \"store_host\"\n";
    let s = scenario::parse(text, "store_host.toml").unwrap_or_else(|e| panic!("{e}"));
    let events = events(&s);
    let fired = faults_at(&events, 30 * SEC);
    let [fault] = fired.as_slice() else {
        panic!("one fault at 30 s: {fired:?}");
    };
    assert_eq!(fault.node, Some(TraceNode::node(1)), "{fault:?}");
    assert!(
        matches!(
            fault.kind,
            EventKind::FaultApplied {
                role: Some(NodeRole::StoreHost),
                ..
            }
        ),
        "{fault:?}"
    );
    let store_died = events.iter().any(|e| {
        e.at.as_us() == 30 * SEC
            && e.node == Some(TraceNode::node(1))
            && matches!(e.kind, EventKind::StoreDied { .. })
    });
    assert!(store_died, "the store died with node-1's agent");
}
