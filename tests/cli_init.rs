//! `trainsim init`, `list` and `completions` as a user calls them: the starting scenario
//! runs and passes as written over several seeds, for either backend and an elastic range.

use std::path::PathBuf;
mod common;
use common::{text, trainsim};

/// A fresh directory under the target dir for this test's files.
fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch dir");
    dir
}

#[test]
fn the_starting_scenario_passes_as_written() {
    let dir = scratch("init-passes");
    let cases: [&[&str]; 3] = [
        &[],
        &[
            "--nodes",
            "6",
            "--min-nodes",
            "4",
            "--max-nodes",
            "8",
            "--gpus",
            "4",
        ],
        &["--nodes", "3", "--backend", "gloo"],
    ];
    for (i, flags) in cases.iter().enumerate() {
        let file = dir.join(format!("job{i}.toml"));
        let path = file.to_str().unwrap();
        let mut args = vec!["init", path];
        args.extend_from_slice(flags);
        let out = trainsim(&args);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let run = trainsim(&["run", path, "--seeds", "0..3"]);
        assert_eq!(
            run.status.code(),
            Some(0),
            "{flags:?}: {}{}",
            text(&run.stdout),
            text(&run.stderr)
        );
    }
}

#[test]
fn init_keeps_an_existing_file_and_refuses_a_range_that_cannot_be() {
    let dir = scratch("init-refuses");
    let file = dir.join("job.toml");
    std::fs::write(&file, "mine").unwrap();
    let out = trainsim(&["init", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--force"));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine");
    let out = trainsim(&["init", "--nodes", "3", "--min-nodes", "5"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--min-nodes"));
}

#[test]
fn list_prints_one_line_per_name_and_completions_a_script() {
    let out = trainsim(&["list", "invariants"]);
    assert_eq!(out.status.code(), Some(0));
    let lines = text(&out.stdout);
    assert!(lines
        .lines()
        .next()
        .unwrap()
        .starts_with("rendezvous.agreement"));
    assert!(lines.contains("agent.bootstrap"));
    let out = trainsim(&["list", "faults"]);
    assert!(text(&out.stdout).contains("worker_crash"));
    let out = trainsim(&["list", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    let out = trainsim(&["completions", "bash"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).contains("trainsim"));
}

#[test]
fn the_schema_is_json_that_describes_every_key_and_list_keys_prints_them() {
    let out = trainsim(&["schema"]);
    assert_eq!(out.status.code(), Some(0));
    let schema: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        schema["additionalProperties"],
        serde_json::Value::Bool(false)
    );
    assert!(
        schema["$defs"]["RawRendezvous"]["properties"]["min_nodes"]["description"]
            .as_str()
            .is_some_and(|d| !d.is_empty())
    );
    let keys = text(&trainsim(&["list", "keys"]).stdout);
    assert!(keys.lines().any(|l| l.starts_with("rendezvous.min_nodes ")));
    assert!(keys.lines().any(|l| l.starts_with("faults.local_rank ")));
}
