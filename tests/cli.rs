//! The `trainsim` binary as users and CI call it: exit codes, located errors, repro lines.

use std::process::Output;
mod common;
use common::{text, trainsim, trainsim_command};

#[test]
fn a_passing_scenario_exits_0_with_its_repro_line_in_json() {
    let out = trainsim(&["run", "scenarios/all_nodes_at_max.toml", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report: serde_json::Value =
        serde_json::from_str(text(&out.stdout).trim()).expect("one JSON line");
    assert_eq!(
        report["repro"],
        "trainsim run scenarios/all_nodes_at_max.toml --seed 1"
    );
    assert_eq!(report["outcome"], "succeeded");
}

#[test]
fn seeds_range_prints_one_line_per_seed() {
    let out = trainsim(&[
        "run",
        "scenarios/all_nodes_at_max.toml",
        "--seeds",
        "3..=5",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let seeds: Vec<u64> = text(&out.stdout)
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).expect("JSON")["seed"]
                .as_u64()
                .expect("seed")
        })
        .collect();
    assert_eq!(seeds, vec![3, 4, 5]);
}

#[test]
fn a_failed_expectation_exits_1_and_ends_with_the_repro_line() {
    let dir = std::env::temp_dir().join(format!("trainsim-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("wrong_expect.toml");
    let scenario = std::fs::read_to_string("scenarios/all_nodes_at_max.toml").expect("scenario");
    std::fs::write(
        &file,
        scenario.replace("final_world_size = 3", "final_world_size = 2"),
    )
    .expect("write");
    let out = trainsim(&["run", file.to_str().expect("utf-8 path"), "--seed", "9"]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    let last = stdout.trim_end().lines().last().expect("output");
    assert!(
        last.starts_with("trainsim run ") && last.ends_with("--seed 9"),
        "{stdout}"
    );
}

#[test]
fn an_unreadable_scenario_exits_2_naming_file_line_and_field() {
    let dir = std::env::temp_dir().join(format!("trainsim-cli-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("bad.toml");
    std::fs::write(
        &file,
        "name = \"bad\"\n[rendezvous]\nmin_nodes = 3\nmax_nodes = 2\n",
    )
    .expect("write");
    let out = trainsim(&["run", file.to_str().expect("utf-8 path")]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("bad.toml:3:") && stderr.contains("rendezvous.min_nodes"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    let missing = trainsim(&["run", "scenarios/no_such_file.toml"]);
    assert_eq!(missing.status.code(), Some(2));
}

#[test]
fn a_gpu_the_node_does_not_have_is_refused_with_exit_2() {
    let dir = std::env::temp_dir().join(format!("trainsim-cli-gpu-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("gpu_fail.toml");
    let gpu_fail =
        "name = \"g\"\n[[faults]]\nat = \"1s\"\nkind = \"gpu_fail\"\nnode = \"node-0\"\ngpu = 8\n";
    std::fs::write(&file, gpu_fail).expect("write");
    let out = trainsim(&["run", file.to_str().expect("utf-8 path")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("faults[0].gpu"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn bad_usage_exits_2() {
    assert_eq!(trainsim(&["run"]).status.code(), Some(2));
    assert_eq!(
        trainsim(&["run", "x.toml", "--seeds", "5..2"])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(trainsim(&["frobnicate"]).status.code(), Some(2));
}

#[test]
fn parity_over_the_public_vectors_passes() {
    let mut args = vec!["parity".to_string()];
    for f in [
        "randperm",
        "randint",
        "distributed_sampler",
        "load_balancing_sampler",
        "assign_ranks",
        "rendezvous",
        "sanitize",
    ] {
        args.push(format!("tests/data/parity/{f}.jsonl"));
    }
    let out = trainsim_command().args(&args).output().expect("runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout)
            .trim_end()
            .ends_with("parity: 1039 passed, 0 failed"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn sample_answers_which_indices_a_rank_saw() {
    let out = trainsim(&[
        "sample",
        "distributed",
        "--dataset-len",
        "20",
        "--world-size",
        "4",
        "--rank",
        "1",
        "--epoch",
        "3",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "rank 1: 12 5 17 19 0");
}

/// `trainsim run … | head`: the reader goes away before the output is written. The command
/// ends quietly, with the exit code it would have had.
#[test]
fn a_closed_stdout_ends_the_command_quietly() {
    for args in [
        &["run", "scenarios/all_nodes_at_max.toml", "--seeds", "0..3"][..],
        &["check", "scenarios/all_nodes_at_max.toml"][..],
    ] {
        let mut child = trainsim_command()
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("the binary runs");
        // Close the read end at once, as `head -0` would.
        drop(child.stdout.take());
        let out = child.wait_with_output().expect("it ends");
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

#[test]
fn every_subcommand_help_has_an_example() {
    for sub in [
        "run", "check", "fuzz", "parity", "bench", "sample", "conform",
    ] {
        let out = trainsim(&[sub, "--help"]);
        assert_eq!(out.status.code(), Some(0), "{sub}");
        let help = text(&out.stdout);
        assert!(
            help.contains("Examples:"),
            "{sub} --help has no example:\n{help}"
        );
        assert!(help.contains(&format!("trainsim {sub} ")), "{sub}: {help}");
    }
    let merge = text(&trainsim(&["fuzz", "merge", "--help"]).stdout);
    assert!(
        merge.contains("Examples:") && merge.contains("trainsim fuzz merge "),
        "{merge}"
    );
}

#[test]
fn run_without_a_file_lists_the_scenarios_and_is_a_usage_error() {
    let out = trainsim(&["run"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("give a scenario file"), "{stderr}");
    assert!(
        stderr.contains("scenarios/late_joiner_next_round.toml")
            && stderr.contains("a late joiner lands in the next round"),
        "{stderr}"
    );
}

#[test]
fn a_drawn_failure_process_writes_out_as_a_file_that_replays_the_run() {
    let dir = std::env::temp_dir().join(format!("trainsim-drawn-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let drawn = dir.join("drawn.toml");
    let drawn_arg = drawn.to_str().unwrap();
    let file = "scenarios/spot_preemptions_replaced.toml";
    let first = trainsim(&[
        "run",
        file,
        "--format",
        "json",
        "--write-scenario",
        drawn_arg,
    ]);
    let written = std::fs::read_to_string(&drawn).unwrap();
    assert!(!written.contains("[failures]"), "{written}");
    assert!(written.contains("kind = \"stop\""), "{written}");
    let again = trainsim(&["run", drawn_arg, "--format", "json"]);
    let hash = |out: &Output| {
        let json: serde_json::Value = serde_json::from_str(text(&out.stdout).trim()).unwrap();
        json["trace_hash"].as_str().unwrap().to_owned()
    };
    assert_eq!(hash(&first), hash(&again));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_batch_of_seeds_ends_with_its_goodput() {
    let file = "scenarios/worker_crash_restart.toml";
    let out = trainsim(&["run", file, "--seeds", "0..3"]);
    let stdout = text(&out.stdout);
    let summary = stdout
        .split("goodput over 3 seeds of scenarios/worker_crash_restart.toml\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no summary in {stdout}"));
    assert!(summary.starts_with("  ETTR     mean "), "{summary}");
    let outcomes = summary.lines().nth(1).unwrap_or("");
    assert!(outcomes.starts_with("  outcome  "), "{summary}");
    let runs: usize = outcomes
        .split(", ")
        .map(|part| part.trim().trim_start_matches("outcome").trim())
        .map(|part| part.split(' ').next().unwrap().parse::<usize>().unwrap())
        .sum();
    assert_eq!(runs, 3, "{summary}");
}

#[test]
fn compare_sweeps_a_key_over_the_same_seeds() {
    let out = trainsim(&[
        "compare",
        "scenarios/worker_crash_restart.toml",
        "--set",
        "agent.max_restarts=0,3",
        "--seeds",
        "0..3",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("goodput over 3 seeds"), "{stdout}");
    assert!(stdout.contains("  agent.max_restarts=0  ETTR "), "{stdout}");
    assert!(
        stdout.contains("agent.max_restarts=3 vs agent.max_restarts=0: "),
        "{stdout}"
    );
    let json = trainsim(&[
        "compare",
        "scenarios/worker_crash_restart.toml",
        "--set",
        "agent.max_restarts=0,3",
        "--seeds",
        "0..3",
        "--format",
        "json",
    ]);
    let value: serde_json::Value = serde_json::from_str(text(&json.stdout).trim()).unwrap();
    assert_eq!(value["seeds"], 3);
    assert_eq!(value["variants"][1]["name"], "agent.max_restarts=3");
    assert_eq!(value["differences"][0]["base"], "agent.max_restarts=0");
    let bad = trainsim(&[
        "compare",
        "scenarios/worker_crash_restart.toml",
        "--set",
        "job.steps=0",
    ]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        text(&bad.stderr).contains("with job.steps=0"),
        "{}",
        text(&bad.stderr)
    );
}
