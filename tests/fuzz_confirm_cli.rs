//! `trainsim fuzz --confirm N --python PY` without torch: a missing or torch-less PY is a
//! located error (exit 2, ending with the command that reproduces it); a new root cause whose
//! repro needs faults this machine cannot make is labelled `cannot run on torch: …` without
//! Python starting; without `--confirm` the summary is unchanged. Real-torch runs are not
//! in CI (it has no torch).

use std::path::{Path, PathBuf};
use std::process::Output;
mod common;
use common::{text, trainsim_command};

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("fuzz_confirm_cli-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// A stand-in for PY that leaves `marker` behind if anything starts it, and has no torch.
fn fake_python(dir: &Path, marker: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("python");
    let script = format!("#!/bin/sh\ntouch '{}'\nexit 1\n", marker.display());
    std::fs::write(&path, script).expect("write the stand-in");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

/// `trainsim fuzz --target rendezvous --seed S --cases C --out DIR` and `extra`, with
/// network namespaces turned off (`TRAINSIM_NETNS=off`), so a repro with a partition is
/// refused the same way on every machine.
fn campaign(dir: &Path, seed: &str, cases: &str, extra: &[&str]) -> Output {
    let out = dir.join("out");
    let mut args = vec![
        "fuzz",
        "--target",
        "rendezvous",
        "--seed",
        seed,
        "--cases",
        cases,
        "--out",
        out.to_str().expect("utf-8 path"),
    ];
    args.extend_from_slice(extra);
    trainsim_command()
        .args(&args)
        .env("TRAINSIM_NETNS", "off")
        .output()
        .expect("the trainsim binary runs")
}

fn summary(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("out/summary.json")).expect("summary.json");
    serde_json::from_str(&text).expect("summary.json is JSON")
}

#[test]
fn a_missing_python_is_refused_before_the_campaign_runs() {
    let dir = scratch("missing");
    let out = campaign(
        &dir,
        "1",
        "90..91",
        &["--confirm", "1", "--python", "/nonexistent/python"],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("error: --python /nonexistent/python: no such file"),
        "{stderr}"
    );
    let last = stderr.lines().last().unwrap_or("");
    assert!(
        last.starts_with("rerun: trainsim fuzz --target rendezvous --cases 90..91 --seed 1 --out ")
            && last.ends_with("--confirm 1 --python /nonexistent/python --confirm-runs 3"),
        "{stderr}"
    );
    assert!(!dir.join("out/summary.json").exists(), "no case ran");
}

/// Seed 1's case 90 is a new finding that needs a partition: its label says why it cannot
/// run, and PY never starts.
#[test]
fn a_repro_with_only_unrunnable_faults_is_labelled_without_starting_python() {
    let dir = scratch("unrunnable");
    let marker = dir.join("python-started");
    let python = fake_python(&dir, &marker);
    let py = python.to_str().expect("utf-8 path");
    let out = campaign(&dir, "1", "90..91", &["--confirm", "3", "--python", py]);
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a new finding: {stdout}{}",
        text(&out.stderr)
    );
    assert!(!marker.exists(), "Python started");
    let s = summary(&dir);
    let causes = s["root_causes"].as_array().expect("root causes");
    let new: Vec<&serde_json::Value> = causes.iter().filter(|c| c.get("issue").is_none()).collect();
    assert_eq!(new.len(), 1, "{causes:?}");
    let label = new[0]["confirm"]["label"].as_str().expect("a label");
    let partition = trainsim::conform::localhost::NETNS_OFF;
    assert!(
        label.starts_with("cannot run on torch: faults[")
            && label.contains("(partition at ")
            && label.contains("(heal at ")
            && label.ends_with(partition),
        "{label}"
    );
    assert!(
        stdout.contains(&format!("new: rendezvous.liveness: {label}")),
        "{stdout}"
    );
    // Known causes are not confirmed.
    for cause in causes.iter().filter(|c| c.get("issue").is_some()) {
        assert!(cause.get("confirm").is_none(), "{cause}");
    }
}

/// Seed 2's case 64 (a member killed and restarted; the job fails on a healthy cluster) can
/// run here, so PY must start: a PY without torch is a located error.
#[test]
fn a_python_without_torch_is_a_located_error_when_a_repro_needs_it() {
    let dir = scratch("no-torch");
    let marker = dir.join("python-started");
    let python = fake_python(&dir, &marker);
    let py = python.to_str().expect("utf-8 path");
    let out = campaign(&dir, "2", "64..65", &["--confirm", "1", "--python", py]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("error: --python {py}: no torch at {py}")),
        "{stderr}"
    );
    assert!(
        stderr
            .lines()
            .last()
            .unwrap_or("")
            .starts_with("rerun: trainsim fuzz "),
        "{stderr}"
    );
    assert!(
        marker.exists(),
        "the repro runs here, so Python was asked for torch"
    );
    // The campaign's own summary is kept, without labels.
    let s = summary(&dir);
    assert!(s["root_causes"]
        .as_array()
        .expect("causes")
        .iter()
        .all(|c| c.get("confirm").is_none()));
}

#[test]
fn without_confirm_the_summary_has_no_labels_and_confirm_needs_python() {
    let dir = scratch("plain");
    let out = campaign(&dir, "1", "90..91", &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let s = summary(&dir);
    let causes = s["root_causes"].as_array().expect("root causes");
    assert!(!causes.is_empty());
    assert!(
        causes.iter().all(|c| c.get("confirm").is_none()),
        "{causes:?}"
    );
    assert!(!text(&out.stdout).contains("confirm on the real torch"));
    let out = campaign(&dir, "1", "90..91", &["--confirm", "1"]);
    assert_eq!(out.status.code(), Some(2), "--confirm without --python");
    let out = campaign(
        &dir,
        "1",
        "90..91",
        &[
            "--confirm",
            "1",
            "--python",
            "/bin/sh",
            "--mutant",
            "rank-collision",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "--confirm with a mutant");
}
