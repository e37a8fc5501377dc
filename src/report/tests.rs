//! Tests of the report: contract field order, summaries, `expect` checking, text layout.

use super::*;
use crate::check::testkit::*;
use crate::check::{check_all, BoundsKind, Status, Violation};
use crate::scenario::model::{CheckKind, Outcome, ReaderSection, Scenario};
use crate::sim_time::SimInstant;
use crate::trace::EventKind;

/// The contract's top-level report fields, in order (`goodput` is an addition).
const TOP_FIELDS: [&str; 15] = [
    "scenario",
    "file",
    "seed",
    "trace_hash",
    "sim_time_us",
    "events",
    "outcome",
    "rounds",
    "agents",
    "job",
    "reader",
    "invariants",
    "expect",
    "repro",
    "goodput",
];

fn report_of(scenario: &Scenario, events: Vec<crate::trace::Event>, end: RunEnd) -> Report {
    let trace = trace(events);
    let invariants = check_all(scenario, 1, &trace, &end);
    build(
        scenario,
        "scenarios/x.toml",
        7,
        &trace,
        &end,
        invariants,
        trace.hash_hex(),
    )
}

fn happy_report() -> Report {
    report_of(&scenario(), happy_run(3, 10), end(13, "succeeded"))
}

/// Asserts each `"key":` occurs in this order in `json`.
fn assert_in_order(json: &str, keys: &[&str]) {
    let mut from = 0;
    for key in keys {
        let needle = format!("\"{key}\":");
        let found = json[from..].find(&needle);
        assert!(found.is_some(), "{key} missing or out of order in {json}");
        from += found.unwrap() + needle.len();
    }
}

fn with_reader(mut s: Scenario) -> Scenario {
    s.reader = Some(ReaderSection {
        workers: 4,
        files: 12,
        records_per_file: 740,
        batch_size: 1024,
        repeat: false,
        check: CheckKind::Sum,
        broken_files: vec![],
        corrupt_records: vec![],
        truncated_files: vec![],
        parse_time: crate::sim_time::SimDuration::from_us(1),
        record_size_bytes: 368,
        fixes: vec![],
    });
    s
}

#[test]
fn json_has_the_contract_fields_in_order() {
    let json = report_of(
        &with_reader(scenario()),
        happy_run(3, 10),
        end(13, "succeeded"),
    )
    .to_json_line();
    assert!(!json.contains('\n'));
    assert!(json.starts_with("{\"scenario\":\"test\","), "{json}");
    assert_in_order(&json, &TOP_FIELDS);
    assert_in_order(
        &json,
        &[
            "rounds",
            "round",
            "completed_at_us",
            "participants",
            "world_size",
        ],
    );
    assert_in_order(&json, &["agents", "node", "restarts", "final_state"]);
    assert_in_order(&json, &["job", "steps_done", "samples_seen", "epochs"]);
    assert_in_order(&json, &["reader", "epochs", "invariants"]);
    assert_in_order(
        &json,
        &["invariants", "name", "status", "violations", "expect"],
    );
    assert_in_order(&json, &["expect", "met", "failures", "repro"]);
    assert_in_order(
        &json,
        &[
            "goodput",
            "ettr",
            "wall_us",
            "productive_us",
            "badput_us",
            "training_stopped_at_us",
            "fate",
        ],
    );
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(value.as_object().unwrap().len(), TOP_FIELDS.len());
    assert_eq!(
        value["reader"],
        serde_json::json!({"epochs": [], "stall_us": 0})
    );
    assert_eq!(value["repro"], "trainsim run scenarios/x.toml --seed 7");
}

#[test]
fn reader_is_omitted_without_a_reader_table() {
    let json = happy_report().to_json_line();
    assert!(!json.contains("\"reader\""));
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(value.as_object().unwrap().len(), TOP_FIELDS.len() - 1);
}

#[test]
fn summaries_of_a_clean_run() {
    let r = happy_report();
    assert_eq!(r.outcome, "succeeded");
    assert_eq!(r.sim_time_us, 13 * S);
    assert_eq!(r.events as usize, happy_run(3, 10).len());
    assert_eq!(r.trace_hash.len(), 64);
    assert_eq!(r.rounds.len(), 1);
    assert_eq!(r.rounds[0].completed_at_us, 2 * S);
    assert_eq!(r.rounds[0].participants, vec!["node-0", "node-1", "node-2"]);
    let states: Vec<&str> = r.agents.iter().map(|a| a.final_state.as_str()).collect();
    assert_eq!(states, vec!["SUCCEEDED"; 3]);
    // 10 steps × world 3 × nproc 8 × batch 4 = 960 samples; dataset len 1000.
    assert_eq!(
        r.job,
        JobSummary {
            steps_done: 10,
            samples_seen: 960,
            epochs: 0,
            steps_asked: 10,
        }
    );
    assert!(r.passed(), "{:?}", r.expect.failures);
    for inv in &r.invariants {
        assert_ne!(inv.status, Status::Violated, "{}", inv.name);
    }
}

#[test]
fn agents_sort_by_index_and_track_kills_and_restarts() {
    let mut events = round_zero(2);
    events.push(e(5, "node-10", started(110)));
    events.push(e(6, "node-1", restart(101, true, 1)));
    events.push(e(6, "node-1", restart(101, false, 1)));
    events.push(e(7, "node-1", killed(101)));
    events.push(e(8, "node-0", killed(100)));
    events.push(e(9, "node-0", started(200)));
    events.push(e(10, "node-0", restart(200, true, 1)));
    let r = report_of(&scenario(), events, end(20, "timed_out"));
    let rows: Vec<(&str, u32, &str)> = r
        .agents
        .iter()
        .map(|a| (a.node.as_str(), a.restarts, a.final_state.as_str()))
        .collect();
    assert_eq!(
        rows,
        vec![
            ("node-0", 1, "RUNNING"),
            ("node-1", 1, "KILLED"),
            ("node-10", 0, "RUNNING")
        ]
    );
    let node_0 = &r.agents[0];
    assert_eq!((node_0.processes, node_0.membership_restarts), (2, 0));
    let node_1 = &r.agents[1];
    assert_eq!((node_1.processes, node_1.membership_restarts), (1, 1));
}

#[test]
fn agents_report_the_restart_count_group_state_and_exit_reason() {
    let mut events = round_zero(1);
    events.push(e(
        2,
        "node-0",
        EventKind::WorkersStarted {
            store_incarnation: 1,
            master: "node-0:32768".into(),
            pid: 100,
            round: 0,
            group_rank: 0,
            world_size: 1,
            restart_count: 2,
        },
    ));
    events.push(e(
        2,
        "node-0",
        EventKind::WorkerGroupState {
            pid: 100,
            state: crate::trace::WorkerGroupState::Healthy,
        },
    ));
    events.push(e(
        3,
        "node-0",
        EventKind::WorkerGroupState {
            pid: 100,
            state: crate::trace::WorkerGroupState::Failed,
        },
    ));
    events.push(e(
        3,
        "node-0",
        EventKind::AgentExited {
            pid: 100,
            state: crate::trace::AgentState::Failed,
            reason: "no restarts remain".into(),
        },
    ));
    let r = report_of(&scenario(), events, end(4, "failed"));
    let a = &r.agents[0];
    assert_eq!(a.restart_count, 2);
    assert_eq!(a.worker_group_state, "FAILED");
    assert_eq!(a.exit_reason, "no restarts remain");
}

#[test]
fn rounds_keep_the_earliest_completion_sorted_by_round() {
    let events = vec![
        e(9, "node-1", completed(101, 1, 0, &[1, 0])),
        e(10, "node-0", completed(100, 1, 1, &[1, 0])),
        e(2, "node-0", completed(100, 0, 0, &[0])),
    ];
    let rounds = super::rounds(&trace(events));
    let got: Vec<(u64, u64)> = rounds
        .iter()
        .map(|r| (r.round, r.completed_at_us))
        .collect();
    assert_eq!(got, vec![(0, 2 * S), (1, 9 * S)]);
}

#[test]
fn samples_add_up_over_nodes_and_repeat_after_rollback() {
    let mut s = scenario();
    s.job.dataset.len = 100;
    let mut events = happy_run(2, 7);
    events.push(e(20, "node-0", workers_started(100, 1, 0, 1)));
    events.push(e(20, "node-0", resumed(100, 5)));
    events.push(e(21, "node-0", step(100, 1, 6)));
    let r = report_of(&s, events, end(30, "timed_out"));
    // 7 steps at world 2 and one at world 1, 8 × 4 samples per rank each.
    assert_eq!(r.job.samples_seen, (7 * 2 + 1) * 32);
    assert_eq!(r.job.steps_done, 6);
    assert_eq!(r.job.epochs, 0, "no epoch was finished");
}

#[test]
fn epochs_count_distinct_finished_epochs() {
    let covered = |epoch| EventKind::EpochCovered {
        store_incarnation: 1,
        round: 0,
        epoch,
        world_size: 2,
        first_batch: 0,
        samples: 10,
        distinct: 10,
        ranks: 2,
        rank_samples_min: 5,
        rank_samples_max: 5,
    };
    let mut events = happy_run(2, 4);
    events.push(e(5, "node-0", covered(0)));
    events.push(e(6, "node-1", covered(0)));
    events.push(e(7, "node-1", covered(1)));
    let r = report_of(&scenario(), events, end(30, "succeeded"));
    assert_eq!(r.job.epochs, 2);
}

#[test]
fn expect_reports_each_unmet_item() {
    let mut s = scenario();
    s.expect.outcome = Some(Outcome::Failed);
    s.expect.rounds = Some((2, 3));
    s.expect.restarts.insert(1, 1);
    s.expect.final_world_size = Some(2);
    s.expect.violations = vec!["rendezvous.liveness".into(), "no.such".into()];
    let r = report_of(&s, happy_run(3, 10), end(13, "succeeded"));
    assert!(!r.passed());
    assert_eq!(
        r.expect.failures,
        vec![
            "expected outcome failed, got succeeded",
            "expected 2 to 3 completed rounds, got 1",
            "expected node-1 to restart 1 times, it restarted 0",
            "expected final world size 2, got 3 (round 0)",
            "expected rendezvous.liveness to be violated, it was held",
            "expected no.such to be violated, but no invariant has that name",
        ]
    );
}

#[test]
fn expect_met_when_everything_matches() {
    let mut s = scenario();
    s.expect.outcome = Some(Outcome::Succeeded);
    s.expect.rounds = Some((1, 1));
    s.expect.restarts.insert(0, 0);
    s.expect.restarts.insert(3, 0);
    s.expect.final_world_size = Some(3);
    let r = report_of(&s, happy_run(3, 10), end(13, "succeeded"));
    assert!(r.expect.met, "{:?}", r.expect.failures);
    assert_eq!(exit_code(&[r.clone(), r]), 0);
}

#[test]
fn unexpected_and_expected_violations() {
    let trace = trace(happy_run(3, 10));
    let end = end(13, "succeeded");
    let mut invariants = check_all(&scenario(), 1, &trace, &end);
    invariants[2].status = Status::Violated;
    invariants[2].violations = vec![
        Violation::new(
            SimInstant::from_us(2 * S),
            Some(TraceNode::node(0)),
            BoundsKind::AboveMax,
            "too big",
        ),
        Violation::new(
            SimInstant::from_us(3 * S),
            Some(TraceNode::node(1)),
            BoundsKind::AboveMax,
            "too big again",
        ),
    ];
    let r = build(
        &scenario(),
        "f.toml",
        1,
        &trace,
        &end,
        invariants.clone(),
        trace.hash_hex(),
    );
    assert_eq!(
        r.expect.failures,
        vec!["rendezvous.bounds was violated: too big (and 1 more)"]
    );
    assert_eq!(exit_code(&[r]), 1);
    let mut s = scenario();
    s.expect.violations = vec!["rendezvous.bounds".into()];
    let r = build(&s, "f.toml", 1, &trace, &end, invariants, trace.hash_hex());
    assert!(r.passed(), "{:?}", r.expect.failures);
    assert_eq!(exit_code(&[]), 0);
}

#[test]
fn final_world_size_without_rounds() {
    let mut s = scenario();
    s.expect.final_world_size = Some(2);
    let r = report_of(&s, vec![], end(1, "failed"));
    assert_eq!(
        r.expect.failures,
        vec!["expected final world size 2, but no round completed"]
    );
}

#[test]
fn text_of_a_failed_run_ends_with_the_repro_line() {
    let mut s = scenario();
    s.expect.outcome = Some(Outcome::TimedOut);
    let mut events = round_zero(3);
    events.push(e(45, "node-2", fault("kill")));
    events.push(e(45, "node-2", killed(102)));
    let r = report_of(&s, events, end(700, "timed_out"));
    let text = r.to_text();
    assert_eq!(
        text.lines().last(),
        Some("trainsim run scenarios/x.toml --seed 7")
    );
    assert!(text.contains("VIOLATED  rendezvous.liveness"), "{text}");
    assert!(
        text.contains("on node-0: node-0 stayed in round 0"),
        "{text}"
    );
    assert!(text.contains("node-2            0     0  KILLED"), "{text}");
    assert!(
        text.contains("  - rendezvous.liveness was violated"),
        "{text}"
    );
    let verdict = text.lines().find(|l| l.starts_with("verdict  "));
    assert!(
        verdict.is_some_and(|l| l.starts_with("verdict  UNEXPECTED (job timed out, ")),
        "{text}"
    );
    assert!(
        text.contains("why      ") || text.contains("ends     "),
        "{text}"
    );
}

#[test]
fn text_of_a_passing_run() {
    let text = happy_report().to_text();
    assert_eq!(
        text.lines().last(),
        Some("trainsim run scenarios/x.toml --seed 7")
    );
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[1].starts_with("job      finished: training ended at "),
        "{text}"
    );
    assert!(lines[1].ends_with("with all 10 steps done"), "{text}");
    assert!(lines[2].starts_with("goodput  ETTR "), "{text}");
    assert_eq!(
        lines[3],
        "verdict  as expected (job finished, no violations)"
    );
    assert!(
        text.contains("outcome  succeeded; the simulation ended at 13 s"),
        "{text}"
    );
    assert!(text.contains("node-0 node-1 node-2"), "{text}");
    assert!(text.contains("  held      rendezvous.agreement"), "{text}");
    assert!(text.contains("  n/a       reader.terminates"), "{text}");
}

#[test]
fn repro_quotes_files_the_shell_would_split() {
    assert_eq!(
        repro_line("scenarios/a-b_c.toml", 3),
        "trainsim run scenarios/a-b_c.toml --seed 3"
    );
    assert_eq!(
        repro_line("my dir/x.toml", 3),
        "trainsim run 'my dir/x.toml' --seed 3"
    );
    assert_eq!(
        repro_line("it's.toml", 3),
        r"trainsim run 'it'\''s.toml' --seed 3"
    );
}
