//! The run's story on the command line: the verdict and replay line of every report,
//! `--explain`, `run DIR`, compound durations, and outputs checked before any run.

use std::path::PathBuf;
mod common;
use common::{text, trainsim};
use trainsim::report::explain;

fn temp_dir(label: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("trainsim-story-{label}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

const PASSING: &str = "scenarios/all_nodes_at_max.toml";

#[test]
fn a_passing_run_leads_with_its_job_and_verdict_and_ends_with_its_replay_line() {
    let out = trainsim(&["run", PASSING]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.trim_end().lines().collect();
    assert!(lines[1].starts_with("job      finished: "), "{stdout}");
    assert!(
        lines.contains(&"verdict  as expected (job finished, no violations)"),
        "{stdout}"
    );
    assert_eq!(
        lines.last(),
        Some(&"trainsim run scenarios/all_nodes_at_max.toml --seed 1")
    );
}

#[test]
fn explain_tells_the_run_after_the_report() {
    let out = trainsim(&["run", "scenarios/late_joiner_next_round.toml", "-v"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let (log, rounds) = stdout
        .split_once("\nwhat happened\n")
        .and_then(|(_, log)| log.split_once(&format!("\n{}\n", explain::RENDEZVOUS_TITLE)))
        .unwrap_or_else(|| panic!("no event log and rendezvous story:\n{stdout}"));
    assert!(log.contains("  01:00.000  node-2: fault start: "), "{log}");
    assert!(
        log.contains(
            "rendezvous round 1 complete: world size 3 (node-0 node-1 node-2); joined: node-2"
        ),
        "{log}"
    );
    assert!(log.contains("node-0: agent exited FAILED: "), "{log}");
    assert!(log.trim_end().ends_with("run ended: failed"), "{log}");
    // The rendezvous round by round: the late joiner waits for round 1.
    assert!(
        rounds.starts_with("  round 0: participants node-0 node-1, marked complete at 00:30.303"),
        "{rounds}"
    );
    assert!(
        rounds.contains("\n    01:00.203  node-2: ADD_TO_WAIT_LIST (join)\n"),
        "{rounds}"
    );
    assert!(
        rounds.contains("\n  round 1: participants node-0 node-1 node-2, marked complete at "),
        "{rounds}"
    );
    let json = trainsim(&[
        "run",
        "scenarios/late_joiner_next_round.toml",
        "--explain",
        "--format",
        "json",
    ]);
    assert_eq!(json.status.code(), Some(2));
}

#[test]
fn an_unwritable_output_is_refused_before_any_run() {
    for flag in ["--html", "--trace", "--write-scenario"] {
        let out = trainsim(&["run", PASSING, flag, "/nonexistent-trainsim/x.out"]);
        assert_eq!(out.status.code(), Some(2), "{flag}");
        assert!(out.stdout.is_empty(), "{flag} ran: {}", text(&out.stdout));
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains(&format!("{flag} /nonexistent-trainsim/x.out")),
            "{stderr}"
        );
    }
    let out = trainsim(&["check", PASSING, "--junit", "/nonexistent-trainsim/j.xml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    assert!(text(&out.stderr).contains("--junit /nonexistent-trainsim/j.xml"));
}

#[test]
fn run_of_a_directory_runs_its_scenarios_in_name_order() {
    let dir = temp_dir("dir");
    let scenario = std::fs::read_to_string(PASSING).expect("read");
    std::fs::write(dir.join("b.toml"), &scenario).expect("write");
    // Compound durations are read wherever a duration is.
    let a = scenario.replacen("time_limit = \"30m\"", "time_limit = \"29m60s\"", 1);
    assert_ne!(a, scenario, "the scenario sets time_limit = \"30m\"");
    std::fs::write(dir.join("a.toml"), a).expect("write");
    std::fs::write(dir.join("notes.txt"), "not a scenario").expect("write");
    let out = trainsim(&["run", dir.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let replays: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("trainsim run "))
        .collect();
    assert_eq!(replays.len(), 2, "{stdout}");
    assert!(
        replays[0].contains("a.toml") && replays[1].contains("b.toml"),
        "{stdout}"
    );
    let empty = temp_dir("empty");
    let out = trainsim(&["run", empty.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("holds no *.toml scenario files"));
}

#[test]
fn a_bad_compound_duration_is_located() {
    let dir = temp_dir("duration");
    let scenario = std::fs::read_to_string(PASSING).expect("read");
    let bad = scenario.replacen("time_limit = \"30m\"", "time_limit = \"30s10m\"", 1);
    let file = dir.join("bad.toml");
    std::fs::write(&file, bad).expect("write");
    let out = trainsim(&["run", file.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("bad.toml:10:"), "{stderr}");
    assert!(stderr.contains("time_limit"), "{stderr}");
    assert!(stderr.contains("from larger units to smaller"), "{stderr}");
}

#[test]
fn a_batch_shows_each_passing_seed_in_one_line_then_the_goodput_over_them() {
    let out = trainsim(&[
        "run",
        "scenarios/late_joiner_next_round.toml",
        "--seeds",
        "0..3",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<&str> = stdout.lines().collect();
    for (seed, line) in lines.iter().take(3).enumerate() {
        assert!(line.starts_with(&format!("seed {seed} ")), "{line}");
        assert!(
            line.contains("ETTR") && line.contains("as expected (job failed"),
            "{line}"
        );
    }
    assert!(lines[3].starts_with("goodput over 3 seeds"), "{stdout}");
}
