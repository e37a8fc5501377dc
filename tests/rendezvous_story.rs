//! The rendezvous's story on real runs: the steps the handlers took (torch's `_Action`s)
//! with the lists after each, kept beside the trace and out of its hash, and told by
//! `--explain`, the Perfetto trace and the page.

use std::path::Path;
use trainsim::report::explain;
use trainsim::runner::{Run, Told};
use trainsim::trace::story::{RendezvousAction, RendezvousOp};
mod common;
use common::{text, trainsim};

fn told(file: &str) -> Told {
    let scenario = trainsim::scenario::load(Path::new(file)).expect("the scenario loads");
    Run::of(&scenario, file)
        .deterministic_told()
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_node_beyond_max_nodes_is_parked_on_the_redundancy_list() {
    let run = told("scenarios/spare_beyond_max_nodes.toml");
    let steps = &run.story.rendezvous;
    let parked: Vec<_> = steps
        .iter()
        .filter(|s| s.action == RendezvousAction::AddToRedundancyList)
        .collect();
    assert_eq!(parked.len(), 1, "{steps:#?}");
    let parked = parked[0];
    assert_eq!(parked.op, RendezvousOp::Join);
    let lists = parked
        .lists
        .as_ref()
        .expect("a landed write keeps its lists");
    let participants: Vec<_> = lists.participants.iter().map(|m| m.node).collect();
    // The round was complete and full: three participants, and the fourth node parked.
    assert!(parked.complete && !parked.closed);
    assert_eq!(participants.len(), 3);
    assert!(!participants.contains(&parked.node));
    assert_eq!(lists.redundancy_list.len(), 1);
    assert_eq!(lists.redundancy_list[0].node, parked.node);
    assert_eq!(
        run.report.rounds[0].participants,
        participants
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        "the round the report tells"
    );
    // The round completed before the late node parked, and the close came last.
    let completed = steps
        .iter()
        .position(|s| s.complete)
        .expect("a completing step");
    let at = steps.iter().position(|s| std::ptr::eq(s, parked)).unwrap();
    assert!(completed < at);
    // Two agents that close at once both compute the same closed state, so the second's
    // compare-and-set answers its own bytes and it counts as landed, as in torch.
    let closes = steps
        .iter()
        .filter(|s| s.action == RendezvousAction::MarkRendezvousClosed)
        .count();
    assert!((1..=2).contains(&closes), "{closes} closes");
    let lines = explain::rendezvous_lines(&run.story);
    assert!(
        lines[0].ends_with(&format!(
            "; redundant: {}; closed at 01:41.734",
            parked.node
        )),
        "{lines:#?}"
    );
}

#[test]
fn the_story_leaves_the_trace_hash_alone() {
    let file = "scenarios/spare_beyond_max_nodes.toml";
    let run = told(file);
    assert!(!run.story.rendezvous.is_empty());
    let scenario = trainsim::scenario::load(Path::new(file)).unwrap();
    let (report, trace) = Run::of(&scenario, file).traced().unwrap();
    assert_eq!(report.trace_hash, trace.hash_hex());
    assert_eq!(run.report.trace_hash, report.trace_hash);
    assert_eq!(report.events, trace.events.len() as u64);
}

/// A restart loop: two nodes at max_nodes = 2, a worker of one of them crashing every 40 s,
/// 100 times.
fn restart_loop_file() -> std::path::PathBuf {
    let mut toml = String::from(
        "name = \"a restart loop\"\nseed = 1\ntime_limit = \"2h\"\n\
         [cluster]\nnodes = 2\ngpus_per_node = 1\n\
         [rendezvous]\nmin_nodes = 2\nmax_nodes = 2\n\
         [agent]\nmax_restarts = 1000\n\
         [job]\nsteps = 100000\nstep_time = \"100ms\"\nmodel_size = \"1MiB\"\n",
    );
    for i in 0..100 {
        toml.push_str(&format!(
            "[[faults]]\nat = \"{}s\"\nkind = \"worker_crash\"\nnode = \"node-{}\"\n\
             local_rank = 0\nexit_code = 1\n",
            30 + 40 * i,
            i % 2
        ));
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("rendezvous-story");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("restart_loop.toml");
    std::fs::write(&path, toml).unwrap();
    path
}

#[test]
fn a_restart_loop_of_a_hundred_rounds_explains_in_a_few_lines() {
    let path = restart_loop_file();
    let out = trainsim(&["run", path.to_str().unwrap(), "--explain"]);
    let stdout = text(&out.stdout);
    let section = stdout
        .split_once(&format!("\n{}\n", explain::RENDEZVOUS_TITLE))
        .map(|(_, s)| s)
        .unwrap_or_else(|| panic!("no rendezvous section:\n{stdout}"));
    let lines: Vec<&str> = section.lines().take_while(|l| !l.is_empty()).collect();
    assert!(
        lines.len() <= 20,
        "{} lines:\n{}",
        lines.len(),
        lines.join("\n")
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("  rounds 2-99 (98 rounds) went as round 1 did, until ")),
        "{section}"
    );
    assert!(
        lines.iter().any(|l| l.ends_with("round 1 opens")),
        "{section}"
    );
}

#[test]
fn the_perfetto_trace_has_a_rendezvous_track_and_a_list_counter() {
    let run = told("scenarios/spare_beyond_max_nodes.toml");
    let text = trainsim::trace::perfetto::chrome_trace_json(&run.trace, &run.story, "t");
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let events = json["traceEvents"].as_array().unwrap();
    let threads = events
        .iter()
        .filter(|e| e["name"] == "thread_name" && e["args"]["name"] == "rendezvous")
        .count();
    assert_eq!(threads, 4, "one rendezvous track per node");
    let parked: Vec<_> = events
        .iter()
        .filter(|e| e["ph"] == "i" && e["name"] == "ADD_TO_REDUNDANCY_LIST")
        .collect();
    assert_eq!(parked.len(), 1);
    let args = &parked[0]["args"];
    assert_eq!(args["op"], "join");
    assert_eq!(args["redundancy_list_count"], 1);
    assert_eq!(args["participants"].as_str().unwrap().split(' ').count(), 3);
    let counts: Vec<(u64, u64)> = events
        .iter()
        .filter(|e| e["ph"] == "C" && e["name"] == "rendezvous lists")
        .map(|e| {
            let n = |k: &str| e["args"][k].as_u64().unwrap();
            (n("wait_list"), n("redundancy_list"))
        })
        .collect();
    assert_eq!(
        counts,
        [(0, 0), (0, 1)],
        "the counter moves when a list grows"
    );
    assert_eq!(
        json["otherData"]["rendezvous_steps"],
        run.story.rendezvous.len()
    );
}

#[test]
fn the_page_lists_the_rendezvous_steps() {
    let file = "scenarios/spare_beyond_max_nodes.toml";
    let run = told(file);
    let scenario = trainsim::scenario::load(Path::new(file)).unwrap();
    let page = trainsim::report::html::page(&scenario, &run.report, &run.trace, &run.story);
    let section = page
        .split_once("<details id=\"rendezvous-lists\" open>")
        .map(|(_, s)| s.split_once("</details>").unwrap().0)
        .unwrap_or_else(|| panic!("no rendezvous lists section"));
    assert_eq!(section.matches("<tr class=\"rdzv-round\">").count(), 1);
    assert!(section.contains("data-action=\"ADD_TO_REDUNDANCY_LIST\""));
    assert!(section.contains("ADD_TO_REDUNDANCY_LIST (join)"));
    assert!(section.contains("href=\"#t="));
}
