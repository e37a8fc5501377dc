//! `trainsim diff` as a user calls it: a scenario and its fixed twin differ in outcome,
//! restarts and verdicts, with the first different event; a run against itself does not;
//! a report file that holds a batch is refused.

mod common;
use common::{text, trainsim};

#[test]
fn a_bug_and_its_fixed_twin_differ_where_the_fix_acts() {
    let out = trainsim(&[
        "diff",
        "scenarios/rank0_dies_stale_master.toml",
        "scenarios/rank0_dies_stale_master_fixed.toml",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for line in [
        "outcome: A failed | B succeeded",
        "steps done: A 114 | B 600",
        "node-1 restarts: A 3 | B 1",
        "agent.bootstrap: A violated (3) | B held",
        "first different event (#",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
}

#[test]
fn a_run_and_its_own_report_do_not_differ_and_a_batch_file_is_refused() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("diff");
    std::fs::create_dir_all(&dir).unwrap();
    let one = trainsim(&[
        "run",
        "scenarios/late_joiner_next_round.toml",
        "--format",
        "json",
    ]);
    let report = dir.join("one.json");
    std::fs::write(&report, &one.stdout).unwrap();
    let report = report.to_str().unwrap();
    let out = trainsim(&["diff", report, report]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert!(text(&out.stdout).contains("no differences"));
    let batch = trainsim(&[
        "run",
        "scenarios/late_joiner_next_round.toml",
        "--seeds",
        "0..2",
        "--format",
        "json",
    ]);
    let batch_file = dir.join("batch.json");
    std::fs::write(&batch_file, &batch.stdout).unwrap();
    let out = trainsim(&["diff", batch_file.to_str().unwrap(), report]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("batch.json: holds 2 lines"));
}
