//! Tests of the `--explain` event log: what it tells, what it leaves out, and its bound.

use super::*;
use crate::check::testkit::*;
use crate::trace::AgentState;

#[test]
fn clock_reads_minutes_seconds_and_milliseconds() {
    assert_eq!(clock(SimInstant::from_us(0)), "00:00.000");
    assert_eq!(clock(SimInstant::from_us(62_923_237)), "01:02.923");
    assert_eq!(clock(SimInstant::from_us(3_599_999_999)), "59:59.999");
    assert_eq!(
        clock(SimInstant::from_us(3_600_000_000 + 61_500_000)),
        "1:01:01.500"
    );
}

#[test]
fn a_run_is_told_round_by_round_with_who_joined_and_left() {
    let mut events = round_zero(3);
    events.push(e(40, "node-2", fault("kill")));
    events.push(e(40, "node-2", killed(102)));
    events.push(e(45, "node-0", restart(100, false, 0)));
    for i in [0, 1] {
        events.push(e(
            50,
            &format!("node-{i}"),
            completed(100 + i, 1, i, &[0, 1]),
        ));
    }
    events.push(e(51, "node-3", started(103)));
    events.push(e(60, "node-0", checkpoint(100, 5)));
    events.push(e(60, "node-1", checkpoint(101, 5)));
    events.push(e(70, "node-0", exited(100, AgentState::Failed)));
    let lines = lines(&trace(events), 10);
    let told: Vec<&str> = lines.iter().map(String::as_str).collect();
    assert_eq!(
        told,
        vec![
            "00:00.000  node-0: agent process started (pid 100)",
            "00:00.000  node-1: agent process started (pid 101)",
            "00:00.000  node-2: agent process started (pid 102)",
            "00:02.000  rendezvous round 0 complete: world size 3 (node-0 node-1 node-2)",
            "00:40.000  node-2: fault kill: ",
            "00:40.000  node-2: agent process killed (SIGKILL or power loss)",
            "00:45.000  node-0: agent restarts its workers for a membership change (free): membership_change",
            "00:50.000  rendezvous round 1 complete: world size 2 (node-0 node-1); left: node-2",
            "00:51.000  node-3: agent process started (pid 103)",
            "01:00.000  checkpoint of step 5 written",
            "01:10.000  node-0: agent exited FAILED: test",
        ]
    );
}

#[test]
fn the_job_end_is_told_once_and_steps_are_left_out() {
    let lines = lines(&trace(happy_run(3, 10)), 10);
    let finished: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("training finished"))
        .collect();
    assert_eq!(finished.len(), 1, "{lines:#?}");
    assert!(finished[0].ends_with("training finished: step 10 of 10 done"));
    assert!(!lines.iter().any(|l| l.contains("step 3 ")), "{lines:#?}");
    let written = |l: &&String| l.contains("checkpoint of step") && l.ends_with(" written");
    assert_eq!(lines.iter().filter(written).count(), 2, "{lines:#?}");
    let fresh = lines
        .iter()
        .filter(|l| l.ends_with("training starts from step 0"))
        .count();
    assert_eq!(fresh, 3, "{lines:#?}");
}

#[test]
fn a_long_log_keeps_its_head_and_tail_and_says_where_the_rest_is() {
    let all: Vec<String> = (0..1_000).map(|i| format!("line {i}")).collect();
    let text = render(&all, "trainsim run x.toml --seed 1");
    let shown: Vec<&str> = text.lines().collect();
    assert_eq!(shown.len(), 1 + HEAD_LINES_MAX + 1 + TAIL_LINES_MAX);
    assert_eq!(shown[1], "  line 0");
    assert_eq!(shown.last(), Some(&"  line 999"));
    let skipped = 1_000 - HEAD_LINES_MAX - TAIL_LINES_MAX;
    assert_eq!(
        shown[1 + HEAD_LINES_MAX],
        format!(
            "  ... {skipped} more lines; every event is in the Perfetto trace: \
             trainsim run x.toml --seed 1 --trace run.json"
        )
    );
    let short = render(&all[..3], "r");
    assert_eq!(short, "what happened\n  line 0\n  line 1\n  line 2\n");
}
