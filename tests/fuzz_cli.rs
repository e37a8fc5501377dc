//! `trainsim fuzz` end to end: with each planted bug (mutant) switched on, the fuzzer finds
//! a failure from a fixed seed, writes the shrunk scenario, and `trainsim run FILE --seed N
//! --mutant M` replays the violation. Also: bad arguments exit 2, and the same seed writes
//! the same file.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn trainsim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_trainsim"))
        .args(args)
        .output()
        .expect("the trainsim binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A fresh scratch directory for one test, under the target directory (never the OS's
/// shared temp space, so parallel runs of different checkouts do not meet).
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("fuzz_cli-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// The value after `prefix` on the line that starts with it.
fn line_after<'a>(out: &'a str, prefix: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no line starting with {prefix:?} in:\n{out}"))
}

/// Fuzzes the rendezvous with `mutant`, then replays what was found; returns the written
/// file's text.
fn finds_and_replays(mutant: &str, cases: &str) -> String {
    finds_and_replays_on("rendezvous", mutant, cases)
}

/// Fuzzes `target` with `mutant`, then replays what was found; returns the file's text.
fn finds_and_replays_on(target: &str, mutant: &str, cases: &str) -> String {
    let dir = scratch(mutant);
    let dir_s = dir.to_str().expect("utf-8 path");
    let out = trainsim(&[
        "fuzz", "--target", target, "--cases", cases, "--seed", "1", "--mutant", mutant, "--out",
        dir_s,
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    assert!(
        stdout.contains("fuzz: ") && stdout.contains(" 1 failures, "),
        "{stdout}"
    );
    let file = line_after(&stdout, "wrote ");
    let repro = line_after(&stdout, "repro: ");
    let seed = repro
        .split_whitespace()
        .skip_while(|w| *w != "--seed")
        .nth(1)
        .expect("the repro line names a seed");
    assert!(repro.ends_with(&format!("--mutant {mutant}")), "{repro}");
    let contents = std::fs::read_to_string(file).expect("the finding was written");
    assert!(
        contents.contains(mutant),
        "the description names the mutant"
    );

    let replay = trainsim(&["run", file, "--seed", seed, "--mutant", mutant]);
    let report = text(&replay.stdout);
    let expected = line_after(&stdout, "found: ")
        .trim_end_matches(" violated")
        .split(", ")
        .map(str::to_owned)
        .collect::<Vec<_>>();
    for name in &expected {
        assert!(
            replay.status.code() == Some(1) || report.contains(&format!("VIOLATED  {name}")),
            "the replay with --mutant {mutant} does not violate {name}:\n{report}"
        );
    }
    contents
}

#[test]
fn finds_the_late_joiner_mutant() {
    finds_and_replays("late-joiner-joins-complete-round", "300");
}

#[test]
fn finds_the_rank_collision_mutant_and_the_same_seed_writes_the_same_file() {
    let first = finds_and_replays("rank-collision", "300");
    let second = finds_and_replays("rank-collision", "300");
    assert_eq!(first, second);
}

#[test]
fn finds_the_no_heartbeat_expiry_mutant() {
    finds_and_replays("no-heartbeat-expiry", "300");
}

#[test]
fn the_job_target_finds_the_sampler_off_by_one_mutant() {
    let contents = finds_and_replays_on("job", "sampler-off-by-one", "300");
    assert!(contents.contains("--target job"), "{contents}");
    assert!(contents.contains("sampler.coverage"), "{contents}");
}

#[test]
fn the_reader_target_finds_the_double_publish_mutant_within_5000_cases() {
    let contents = finds_and_replays_on("reader", "reader-double-publish", "5000");
    assert!(contents.contains("[reader]"), "{contents}");
    assert!(contents.contains("reader.exactly_once"), "{contents}");
}

#[test]
fn unknown_mutants_and_bad_arguments_exit_2() {
    let dir = scratch("bad-args");
    let dir = dir.to_str().expect("utf-8 path");
    let fuzz = trainsim(&[
        "fuzz",
        "--target",
        "rendezvous",
        "--cases",
        "5",
        "--mutant",
        "no-such-bug",
        "--out",
        dir,
    ]);
    assert_eq!(fuzz.status.code(), Some(2));
    assert!(text(&fuzz.stderr).contains("is not a mutant"));
    let target = trainsim(&["fuzz", "--target", "sampler", "--out", dir]);
    assert_eq!(target.status.code(), Some(2));
    let run = trainsim(&[
        "run",
        "scenarios/all_nodes_at_max.toml",
        "--mutant",
        "no-such-bug",
    ]);
    assert_eq!(run.status.code(), Some(2));
}
