//! `trainsim check` as CI calls it: the suite's summary, JUnit, shards, determinism and
//! exit codes. Every scenario runs with its own seed only, to stay fast.

use std::path::{Path, PathBuf};
mod common;
use common::{text, trainsim};

/// A fresh directory for one test's files.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("trainsim-check-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn suite_files() -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir("scenarios")
        .expect("the scenarios/ directory exists")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .map(|p| p.display().to_string())
        .collect();
    files.sort();
    files
}

/// Three quick scenarios copied into `dir`, for tests that run a suite more than once.
fn small_suite(dir: &Path) -> Vec<String> {
    let names = [
        "all_nodes_at_max.toml",
        "too_few_nodes_join_timeout.toml",
        "worker_crash_restart.toml",
    ];
    names
        .iter()
        .map(|name| {
            let to = dir.join(name);
            std::fs::copy(Path::new("scenarios").join(name), &to).expect("copy a scenario");
            to.display().to_string()
        })
        .collect()
}

/// The file column of the summary table's rows (the header and count lines excluded).
fn listed_files(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .skip(1)
        .take_while(|l| !l.starts_with("check: ") && !l.starts_with("shard "))
        .map(|l| {
            l.split_whitespace()
                .next()
                .expect("a file column")
                .to_owned()
        })
        .collect()
}

#[test]
fn the_whole_suite_passes_lists_every_file_and_writes_junit() {
    let dir = temp_dir("suite");
    let xml_path = dir.join("report.xml");
    let out = trainsim(&[
        "check",
        "scenarios/",
        "--junit",
        xml_path.to_str().expect("utf-8"),
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    let files = suite_files();
    assert_eq!(listed_files(&stdout), files, "{stdout}");
    assert!(
        stdout
            .trim_end()
            .ends_with(&format!("check: {} passed, 0 failed", files.len())),
        "{stdout}"
    );
    let xml = std::fs::read_to_string(&xml_path).expect("the JUnit file exists");
    let report = quick_junit::Report::deserialize_from_str(&xml).expect("valid JUnit XML");
    let cases = &report.test_suites[0].test_cases;
    let names: Vec<String> = cases.iter().map(|c| c.name.as_str().to_owned()).collect();
    assert_eq!(names, files, "one testcase per scenario");
    assert!(cases
        .iter()
        .all(|c| matches!(c.status, quick_junit::TestCaseStatus::Success { .. })));
}

#[test]
fn two_shards_cover_every_file_exactly_once() {
    let dir = temp_dir("shards");
    let mut files = small_suite(&dir);
    files.sort();
    let dir = dir.to_str().expect("utf-8");
    let mut seen = Vec::new();
    for shard in ["1/2", "2/2"] {
        let out = trainsim(&["check", dir, "--shard", shard]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        seen.extend(listed_files(&text(&out.stdout)));
    }
    seen.sort();
    assert_eq!(seen, files);
}

#[test]
fn check_determinism_passes_on_a_scenario() {
    let out = trainsim(&[
        "check",
        "scenarios/all_nodes_at_max.toml",
        "--check-determinism",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let run = trainsim(&[
        "run",
        "scenarios/too_few_nodes_join_timeout.toml",
        "--check-determinism",
    ]);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
}

#[test]
fn bad_shard_specs_are_usage_errors() {
    for shard in ["0/2", "3/2", "1/0", "a/b", "2"] {
        let out = trainsim(&["check", "scenarios/", "--shard", shard]);
        assert_eq!(out.status.code(), Some(2), "--shard {shard}");
    }
}

#[test]
fn an_unreadable_file_stops_the_suite_before_any_run_with_exit_2() {
    let dir = temp_dir("unreadable");
    small_suite(&dir);
    let bad = dir.join("zz_bad.toml");
    std::fs::write(
        &bad,
        "name = \"bad\"\n[rendezvous]\nmin_nodes = 3\nmax_nodes = 2\n",
    )
    .expect("write");
    let out = trainsim(&["check", dir.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("zz_bad.toml:3:"),
        "{}",
        text(&out.stderr)
    );
    assert!(text(&out.stdout).is_empty(), "no run started");
    let empty = temp_dir("empty");
    let out = trainsim(&["check", empty.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_failing_scenario_exits_1_with_its_repro_line_in_the_summary_and_junit() {
    let dir = temp_dir("failing");
    let scenario = std::fs::read_to_string("scenarios/all_nodes_at_max.toml").expect("read");
    let file = dir.join("wrong_expect.toml");
    std::fs::write(
        &file,
        scenario.replace("final_world_size = 3", "final_world_size = 2"),
    )
    .expect("write");
    let xml_path = dir.join("junit.xml");
    let file = file.to_str().expect("utf-8");
    let out = trainsim(&["check", file, "--junit", xml_path.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    let repro = format!("trainsim run {file} --seed 1");
    assert_eq!(
        stdout.trim_end().lines().last(),
        Some(repro.as_str()),
        "{stdout}"
    );
    assert!(stdout.contains("FAIL"), "{stdout}");
    let xml = std::fs::read_to_string(&xml_path).expect("the JUnit file exists");
    let report = quick_junit::Report::deserialize_from_str(&xml).expect("valid JUnit XML");
    match &report.test_suites[0].test_cases[0].status {
        quick_junit::TestCaseStatus::NonSuccess { message, .. } => {
            let message = message.as_ref().expect("a failure message");
            assert!(message.as_str().ends_with(&repro), "{}", message.as_str());
        }
        other => panic!("expected a failure, got {other:?}"),
    }
}
