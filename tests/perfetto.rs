//! The Chrome/Perfetto export of a run with a restart: it parses, names a process per node
//! with agent and workers threads, and shows the crash, the restart and the second round.

use serde_json::Value;
use std::path::Path;
mod common;
use common::trainsim_command;

fn export(file: &str) -> Value {
    let scenario = trainsim::scenario::load(Path::new(file)).expect("the scenario loads");
    let run = trainsim::runner::Run::of(&scenario, file)
        .told()
        .unwrap_or_else(|e| panic!("{e}"));
    let (trace, story, title) = (&run.trace, &run.story, &run.report.scenario);
    let text = trainsim::trace::perfetto::chrome_trace_json(trace, story, title);
    let again = trainsim::trace::perfetto::chrome_trace_json(trace, story, title);
    assert_eq!(text, again, "the export is a pure function of the trace");
    serde_json::from_str(&text).expect("the export is JSON")
}

fn named<'a>(events: &'a [Value], ph: &str, name: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["ph"] == ph && e["name"].as_str().is_some_and(|n| n.starts_with(name)))
        .collect()
}

#[test]
fn a_worker_crash_restart_shows_as_tracks_spans_and_instants() {
    let json = export("scenarios/worker_crash_restart.toml");
    assert_eq!(json["displayTimeUnit"], "ms");
    let events = json["traceEvents"].as_array().expect("traceEvents");
    let processes: Vec<&str> = named(events, "M", "process_name")
        .iter()
        .map(|e| e["args"]["name"].as_str().expect("a name"))
        .collect();
    assert_eq!(processes, ["cluster", "node-0", "node-1", "store"]);
    let threads: Vec<&str> = named(events, "M", "thread_name")
        .iter()
        .map(|e| e["args"]["name"].as_str().expect("a name"))
        .collect();
    assert_eq!(threads.iter().filter(|t| **t == "agent").count(), 3);
    assert_eq!(threads.iter().filter(|t| **t == "workers").count(), 3);
    // Every event sits on a named process.
    let pids: Vec<&Value> = named(events, "M", "process_name")
        .iter()
        .map(|e| &e["pid"])
        .collect();
    assert!(events.iter().all(|e| pids.contains(&&e["pid"])));
    // The crash, the counted restart on node-1 and the free one on node-0.
    assert_eq!(named(events, "i", "fault: worker_crash").len(), 1);
    assert!(!named(events, "i", "worker 3 failed").is_empty());
    assert_eq!(named(events, "i", "restart (counted)").len(), 1);
    assert!(!named(events, "i", "restart (membership change)").is_empty());
    // Two rounds of rendezvous on both nodes, and a worker group per round per node.
    assert_eq!(named(events, "X", "rendezvous round 0").len(), 2);
    assert_eq!(named(events, "X", "rendezvous round 1").len(), 2);
    assert!(named(events, "X", "workers round 1").len() >= 2);
    assert!(!named(events, "i", "resumed from step").is_empty());
    // Steps are coalesced into a few spans, so the file stays small.
    let steps = named(events, "X", "steps ");
    assert!(
        !steps.is_empty() && steps.len() < 20,
        "{} step spans",
        steps.len()
    );
    assert_eq!(named(events, "X", "run: succeeded").len(), 1);
    for e in named(events, "X", "") {
        assert!(e["ts"].is_u64() && e["dur"].is_u64(), "{e}");
    }
}

#[test]
fn run_trace_writes_the_file_and_refuses_several_runs() {
    let dir = std::env::temp_dir().join(format!("trainsim-perfetto-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("run.json");
    let out = trainsim_command()
        .args(["run", "scenarios/all_nodes_at_max.toml", "--trace"])
        .arg(&path)
        .output()
        .expect("runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("written")).expect("JSON");
    assert!(written["traceEvents"]
        .as_array()
        .is_some_and(|a| !a.is_empty()));
    let several = trainsim_command()
        .args([
            "run",
            "scenarios/all_nodes_at_max.toml",
            "--seeds",
            "1..3",
            "--trace",
        ])
        .arg(&path)
        .output()
        .expect("runs");
    assert_eq!(several.status.code(), Some(2));
}
