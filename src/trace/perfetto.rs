//! Chrome / Perfetto export: a run's trace as Trace Event Format JSON, to open in
//! ui.perfetto.dev or chrome://tracing.
//!
//! Each node is a process with an `agent` thread (agent lifetimes, with rendezvous attempts
//! nested inside, restarts as instants), a `workers` thread (worker-group lifetimes, with
//! coalesced step spans nested inside, checkpoints and failures as instants) and a `faults`
//! thread. A `cluster` process holds the whole run and faults that name no node. Heartbeats
//! are left out: they are the bulk of a trace and say nothing on a timeline.
//!
//! From the run's story (outside the trace's hash): a `rendezvous` thread per node with an
//! instant per rendezvous step, named by torch's `_Action`, and a `rendezvous lists`
//! counter of the wait list's and redundancy list's lengths on the `cluster` process.
//!
//! The export is a pure function of the trace, and JSON objects keep sorted keys, so the
//! same seed gives the same file byte for byte.

use super::{Event, EventKind, Story, Trace, TraceNode};
use crate::sim_time::SimInstant;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

mod reader;
mod rendezvous;
mod workers;

use workers::StepRun;

/// The Chrome pid of the `cluster` process; nodes follow from 2 in node order.
const CLUSTER_PID: u64 = 1;
/// Thread slots within a process; tids are `pid * TIDS_PER_PID + slot` so they are unique
/// across processes (Perfetto's JSON importer can merge threads that share a tid).
const TIDS_PER_PID: u64 = 10;
const AGENT: u64 = 1;
const WORKERS: u64 = 2;
const STORE: u64 = 3;
const FAULTS: u64 = 4;
const RUN: u64 = 1;

/// The trace and the story beside it as a Trace Event Format object: `{"traceEvents":
/// [...], "displayTimeUnit": "ms"}`.
///
/// `title` (for example the scenario name and seed) goes into `otherData`.
pub fn chrome_trace(trace: &Trace, story: &Story, title: &str) -> Value {
    let mut export = Export::new(trace, story);
    for event in &trace.events {
        export.event(event);
    }
    let end = trace.events.last().map_or(SimInstant::START, |e| e.at);
    export.close_all(end);
    export.story(story);
    let mut events = export.metadata();
    events.append(&mut export.out);
    json!({
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "title": title, "events": trace.events.len(), "trace_hash": trace.hash_hex(),
            "rendezvous_steps": story.rendezvous.len(),
        },
    })
}

/// [`chrome_trace`] as compact JSON text with a trailing newline.
pub fn chrome_trace_json(trace: &Trace, story: &Story, title: &str) -> String {
    let mut text = serde_json::to_string(&chrome_trace(trace, story, title))
        .expect("a JSON value always serializes");
    text.push('\n');
    text
}

/// A span opened by one event and closed by a later one.
#[derive(Debug, Clone)]
struct Open {
    start: SimInstant,
    name: String,
    args: Map<String, Value>,
}

/// What is open on one node.
#[derive(Debug, Default)]
struct NodeState {
    agent: Option<Open>,
    rendezvous: Option<Open>,
    group: Option<Open>,
    steps: Option<StepRun>,
    store: Option<Open>,
    /// Whether any store event happened here, so the thread gets a name.
    has_store: bool,
    /// Whether the story has a rendezvous step here, likewise.
    has_rendezvous: bool,
}

struct Export {
    /// Chrome pid by node, in node order.
    pids: BTreeMap<TraceNode, u64>,
    nodes: BTreeMap<TraceNode, NodeState>,
    out: Vec<Value>,
}

fn tid(pid: u64, slot: u64) -> u64 {
    pid * TIDS_PER_PID + slot
}

/// A span from its start to `end`; the format's `ts` and `dur` are microseconds.
fn complete(pid: u64, slot: u64, span: Open, end: SimInstant) -> Value {
    json!({
        "ph": "X", "pid": pid, "tid": tid(pid, slot), "name": span.name,
        "ts": span.start.as_us(), "dur": end.since(span.start).as_us(), "args": span.args,
    })
}

/// A metadata record: a process's (or with `tid`, a thread's) name or sort order.
fn meta(pid: u64, tid: Option<u64>, name: &str, args: Value) -> Value {
    let mut v = json!({ "ph": "M", "pid": pid, "name": name, "args": args });
    if let Some(tid) = tid {
        v["tid"] = json!(tid);
    }
    v
}

/// A moment on a thread; the format's `ts` is microseconds.
fn instant(pid: u64, slot: u64, at: SimInstant, name: String, args: Value) -> Value {
    json!({
        "ph": "i", "s": "t", "pid": pid, "tid": tid(pid, slot), "name": name,
        "ts": at.as_us(), "args": args,
    })
}

fn open(start: SimInstant, name: String, args: Value) -> Option<Open> {
    let Value::Object(args) = args else {
        unreachable!("span args are always built with json!({{...}})")
    };
    Some(Open { start, name, args })
}

impl Export {
    fn new(trace: &Trace, story: &Story) -> Self {
        let steps = story.rendezvous.iter().map(|s| TraceNode::Node(s.node));
        let nodes: std::collections::BTreeSet<TraceNode> = trace
            .events
            .iter()
            .filter_map(|e| e.node)
            .chain(steps)
            .collect();
        let pids = nodes.into_iter().zip(CLUSTER_PID + 1..).collect();
        Export {
            pids,
            nodes: BTreeMap::new(),
            out: Vec::new(),
        }
    }

    /// Process and thread names and sort orders, so tracks read top to bottom.
    fn metadata(&self) -> Vec<Value> {
        let mut out = vec![
            meta(
                CLUSTER_PID,
                None,
                "process_name",
                json!({ "name": "cluster" }),
            ),
            meta(
                CLUSTER_PID,
                None,
                "process_sort_index",
                json!({ "sort_index": 0 }),
            ),
            meta(
                CLUSTER_PID,
                Some(tid(CLUSTER_PID, RUN)),
                "thread_name",
                json!({ "name": "run" }),
            ),
            meta(
                CLUSTER_PID,
                Some(tid(CLUSTER_PID, FAULTS)),
                "thread_name",
                json!({ "name": "faults" }),
            ),
        ];
        for (node, &pid) in &self.pids {
            self.node_metadata(*node, pid, &mut out);
        }
        out
    }

    /// A node's process and the threads it uses: the store's and the rendezvous's only
    /// where something happened on them.
    fn node_metadata(&self, node: TraceNode, pid: u64, out: &mut Vec<Value>) {
        let name = node.to_string();
        out.push(meta(pid, None, "process_name", json!({ "name": name })));
        out.push(meta(
            pid,
            None,
            "process_sort_index",
            json!({ "sort_index": pid }),
        ));
        let has_store = self.nodes.get(&node).is_some_and(|n| n.has_store);
        let has_rendezvous = self.nodes.get(&node).is_some_and(|n| n.has_rendezvous);
        for (slot, name) in [
            (AGENT, "agent"),
            (WORKERS, "workers"),
            (STORE, "store"),
            (FAULTS, "faults"),
            (rendezvous::RENDEZVOUS, "rendezvous"),
        ] {
            let unused = match slot {
                STORE => !has_store,
                rendezvous::RENDEZVOUS => !has_rendezvous,
                _ => false,
            };
            if unused {
                continue;
            }
            let t = tid(pid, slot);
            out.push(meta(pid, Some(t), "thread_name", json!({ "name": name })));
            out.push(meta(
                pid,
                Some(t),
                "thread_sort_index",
                json!({ "sort_index": slot }),
            ));
        }
    }

    fn event(&mut self, event: &Event) {
        let at = event.at;
        let Some(node) = event.node else {
            self.cluster_event(at, &event.kind);
            return;
        };
        let pid = self.pids[&node];
        match &event.kind {
            EventKind::AgentStarted { .. }
            | EventKind::AgentExited { .. }
            | EventKind::AgentKilled { .. }
            | EventKind::AgentRestart { .. } => self.agent_event(node, pid, at, &event.kind),
            EventKind::RendezvousJoining { .. }
            | EventKind::RendezvousCompleted { .. }
            | EventKind::RendezvousFailed { .. }
            | EventKind::RendezvousClosed { .. } => {
                self.rendezvous_event(node, pid, at, &event.kind)
            }
            EventKind::WorkersStarted { .. }
            | EventKind::WorkersStopped { .. }
            | EventKind::WorkerFailed { .. }
            | EventKind::Step { .. }
            | EventKind::Checkpoint { .. }
            | EventKind::ResumedFromCheckpoint { .. } => {
                self.worker_event(node, pid, at, &event.kind)
            }
            EventKind::StoreStarted | EventKind::StoreDied { .. } => {
                self.store_event(node, pid, at, &event.kind)
            }
            EventKind::WorkerStoreStarted { port, .. } => self.out.push(instant(
                pid,
                STORE,
                at,
                "workers' store".to_owned(),
                json!({ "port": port }),
            )),
            EventKind::FaultApplied { fault, detail, .. } => self.out.push(instant(
                pid,
                FAULTS,
                at,
                format!("fault: {fault}"),
                json!({ "detail": detail }),
            )),
            EventKind::WorkerGroupState { state, .. } => {
                let name = format!("worker group {state}");
                self.out.push(instant(pid, AGENT, at, name, json!({})));
            }
            EventKind::Heartbeat { .. }
            | EventKind::RanksAssigned { .. }
            | EventKind::EpochStarted { .. }
            | EventKind::EpochCovered { .. }
            | EventKind::ReaderBuffer { .. }
            | EventKind::ReaderSkipped { .. } => {}
            EventKind::ReaderBatch { .. }
            | EventKind::ReaderEndOfData { .. }
            | EventKind::ReaderWorkerFailed { .. }
            | EventKind::ReaderHang { .. } => self.reader_event(pid, at, &event.kind),
            EventKind::RunEnded { .. } | EventKind::FaultSkipped { .. } => {
                self.cluster_event(at, &event.kind)
            }
        }
    }

    /// Faults that name no node, and the end of the run.
    fn cluster_event(&mut self, at: SimInstant, kind: &EventKind) {
        match kind {
            EventKind::FaultApplied { fault, detail, .. } => self.out.push(instant(
                CLUSTER_PID,
                FAULTS,
                at,
                format!("fault: {fault}"),
                json!({ "detail": detail }),
            )),
            EventKind::FaultSkipped {
                fault,
                role,
                reason,
            } => self.out.push(instant(
                CLUSTER_PID,
                FAULTS,
                at,
                format!("fault skipped: {fault} {role}"),
                json!({ "detail": reason }),
            )),
            EventKind::RunEnded { outcome } => {
                self.close_all(at);
                let span = open(
                    SimInstant::START,
                    format!("run: {outcome}"),
                    json!({ "outcome": outcome }),
                );
                self.push_span(CLUSTER_PID, RUN, span, at);
            }
            other => self.out.push(instant(
                CLUSTER_PID,
                RUN,
                at,
                other.type_name().to_owned(),
                json!({}),
            )),
        }
    }

    fn state(&mut self, node: TraceNode) -> &mut NodeState {
        self.nodes.entry(node).or_default()
    }

    fn push_span(&mut self, pid: u64, slot: u64, span: Option<Open>, end: SimInstant) {
        if let Some(span) = span {
            self.out.push(complete(pid, slot, span, end));
        }
    }

    /// Closes everything open on a node whose agent process ended (exit, kill, run end).
    fn close_node(&mut self, node: TraceNode, pid: u64, end: SimInstant, why: &str) {
        let mut rendezvous = self.state(node).rendezvous.take();
        if let Some(r) = rendezvous.as_mut() {
            r.name = format!("{} (interrupted)", r.name);
        }
        self.push_span(pid, AGENT, rendezvous, end);
        self.close_group(node, pid, end, why);
        let agent = self.state(node).agent.take();
        self.push_span(pid, AGENT, agent, end);
    }

    fn close_all(&mut self, end: SimInstant) {
        let nodes: Vec<(TraceNode, u64)> = self.pids.iter().map(|(&n, &p)| (n, p)).collect();
        for (node, pid) in nodes {
            self.close_node(node, pid, end, "run ended");
            let store = self.state(node).store.take();
            self.push_span(pid, STORE, store, end);
        }
    }

    fn agent_event(&mut self, node: TraceNode, pid: u64, at: SimInstant, kind: &EventKind) {
        match kind {
            EventKind::AgentStarted { pid: os_pid } => {
                self.close_node(node, pid, at, "agent restarted");
                let name = format!("agent pid {os_pid}");
                self.state(node).agent = open(at, name, json!({ "pid": os_pid }));
            }
            EventKind::AgentExited { state, reason, .. } => {
                if let Some(agent) = self.state(node).agent.as_mut() {
                    agent.name = format!("{}: {state}", agent.name);
                    agent.args.insert("state".to_owned(), json!(state));
                    agent.args.insert("reason".to_owned(), json!(reason));
                }
                self.close_node(node, pid, at, "agent exited");
            }
            EventKind::AgentKilled { .. } => {
                if let Some(agent) = self.state(node).agent.as_mut() {
                    agent.name = format!("{}: KILLED", agent.name);
                    agent.args.insert("state".to_owned(), json!("KILLED"));
                }
                self.close_node(node, pid, at, "agent killed");
                self.out
                    .push(instant(pid, AGENT, at, "killed".to_owned(), json!({})));
            }
            EventKind::AgentRestart {
                counted,
                restart_count,
                reason,
                ..
            } => {
                let what = if *counted {
                    "counted"
                } else {
                    "membership change"
                };
                let args =
                    json!({ "counted": counted, "restart_count": restart_count, "reason": reason });
                let name = format!("restart ({what})");
                self.out.push(instant(pid, AGENT, at, name, args));
            }
            _ => unreachable!("agent_event gets agent events only"),
        }
    }

    fn rendezvous_event(&mut self, node: TraceNode, pid: u64, at: SimInstant, kind: &EventKind) {
        match kind {
            EventKind::RendezvousJoining { .. } => {
                let stale = self.state(node).rendezvous.take();
                self.push_span(pid, AGENT, stale, at);
                self.state(node).rendezvous = open(at, "rendezvous".to_owned(), json!({}));
            }
            EventKind::RendezvousCompleted {
                round,
                rank,
                world_size,
                participants,
                ..
            } => {
                let mut span = self.state(node).rendezvous.take();
                if let Some(s) = span.as_mut() {
                    s.name = format!("rendezvous round {round}: rank {rank} of {world_size}");
                    s.args.insert("round".to_owned(), json!(round));
                    s.args
                        .insert("participants".to_owned(), json!(participants));
                }
                self.push_span(pid, AGENT, span, at);
            }
            EventKind::RendezvousFailed { error, message, .. } => {
                let mut span = self.state(node).rendezvous.take();
                if let Some(s) = span.as_mut() {
                    s.name = format!("rendezvous failed: {error}");
                    s.args.insert("message".to_owned(), json!(message));
                }
                self.push_span(pid, AGENT, span, at);
            }
            EventKind::RendezvousClosed { round, .. } => {
                let name = format!("rendezvous closed (round {round})");
                self.out.push(instant(pid, AGENT, at, name, json!({})));
            }
            _ => unreachable!("rendezvous_event gets rendezvous events only"),
        }
    }

    fn store_event(&mut self, node: TraceNode, pid: u64, at: SimInstant, kind: &EventKind) {
        self.state(node).has_store = true;
        match kind {
            EventKind::StoreStarted => {
                let stale = self.state(node).store.take();
                self.push_span(pid, STORE, stale, at);
                self.state(node).store = open(at, "store".to_owned(), json!({}));
            }
            EventKind::StoreDied { reason } => {
                let mut span = self.state(node).store.take();
                if let Some(s) = span.as_mut() {
                    s.args.insert("died".to_owned(), json!(reason));
                }
                self.push_span(pid, STORE, span, at);
                let name = "store died".to_owned();
                self.out
                    .push(instant(pid, STORE, at, name, json!({ "reason": reason })));
            }
            _ => unreachable!("store_event gets store events only"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(at_us: u64, node: Option<&str>, kind: EventKind) -> Event {
        Event {
            at: SimInstant::from_us(at_us),
            node: node.map(|n| n.parse().expect("node-N or store")),
            kind,
        }
    }

    /// Step `step` of round 0, at `at_us`, by the workers of agent pid 7 on `node`.
    fn step_of_pid_7(node: Option<&str>, at_us: u64, step: u64) -> Event {
        let kind = EventKind::Step {
            pid: 7,
            round: 0,
            step,
            epoch: 0,
            samples: 0,
            trained: Default::default(),
            run: Default::default(),
        };
        ev(at_us, node, kind)
    }

    #[test]
    fn consecutive_steps_become_one_span_inside_the_group() {
        let n = Some("node-0");
        let trace = Trace {
            events: vec![
                ev(0, n, EventKind::AgentStarted { pid: 7 }),
                ev(
                    10,
                    n,
                    EventKind::WorkersStarted {
                        store_incarnation: 1,
                        master: "node-0:32768".into(),
                        pid: 7,
                        round: 0,
                        group_rank: 0,
                        world_size: 1,
                        restart_count: 0,
                    },
                ),
                step_of_pid_7(n, 20, 1),
                step_of_pid_7(n, 30, 2),
                step_of_pid_7(n, 40, 3),
                ev(
                    50,
                    None,
                    EventKind::RunEnded {
                        outcome: "timed_out".to_owned(),
                    },
                ),
            ],
            truncated: false,
        };
        let v = chrome_trace(&trace, &Story::default(), "t");
        let events = v["traceEvents"].as_array().expect("array");
        let steps: Vec<&Value> = events.iter().filter(|e| e["name"] == "steps 1-3").collect();
        assert_eq!(steps.len(), 1);
        assert_eq!(steps[0]["ts"], 10);
        assert_eq!(steps[0]["dur"], 30);
        let group = events
            .iter()
            .find(|e| e["name"] == "workers round 0: rank 0 of 1")
            .expect("a group span");
        assert_eq!(group["dur"], 40);
        assert!(events.iter().any(|e| e["name"] == "run: timed_out"));
    }
}
