//! The real side's log parsing, on runs of real torch recorded under `tests/data/conform/`:
//! `conformance/driver.py parse` must give back the signature the driver printed, and that
//! signature must read as the simulator side's `Signature` type. Needs only `python3` (the
//! parser is standard-library Python), never torch.

use std::path::{Path, PathBuf};
use std::process::Command;
use trainsim::conform::real::parse_signature;
use trainsim::conform::signature::Signature;

fn cases() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/conform");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("tests/data/conform exists")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.join("expected.json").is_file())
        .collect();
    dirs.sort();
    assert!(
        dirs.len() >= 5,
        "recorded runs are missing under {}",
        root.display()
    );
    dirs
}

fn parse(dir: &Path) -> String {
    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance/driver.py");
    let output = Command::new("python3")
        .arg(&driver)
        .arg("parse")
        .arg(dir)
        .env("TZ", "Pacific/Auckland") // the parser must not depend on this machine's zone
        .output()
        .expect("python3 runs (the log parser is standard-library Python)");
    assert!(
        output.status.success(),
        "driver.py parse {} failed: {}",
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8")
}

fn expected(dir: &Path) -> Signature {
    let text = std::fs::read_to_string(dir.join("expected.json")).expect("expected.json");
    parse_signature(&text).expect("expected.json is a signature")
}

#[test]
fn recorded_runs_parse_to_their_signatures() {
    for dir in cases() {
        let got = parse_signature(&parse(&dir)).expect("the parser prints a signature");
        assert_eq!(got, expected(&dir), "{}", dir.display());
    }
}

fn case(name: &str) -> Signature {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/conform")
        .join(name);
    parse_signature(&parse(&dir)).expect("a signature")
}

#[test]
fn a_killed_node_and_two_rounds() {
    let s = case("kill_non_rank0");
    assert_eq!(s.rounds.len(), 2);
    assert_eq!(s.rounds[0].world_size, 3);
    assert_eq!(s.rounds[1].members, vec!["node-0", "node-1"]);
    let killed = &s.nodes["node-2"];
    assert_eq!(
        (killed.final_state.as_str(), killed.exit_code),
        ("KILLED", Some(-9))
    );
    assert_eq!(s.nodes["node-0"].restarts, 1);
}

#[test]
fn sigterm_is_stopped_with_exit_code_one() {
    let s = case("sigterm");
    let stopped = &s.nodes["node-2"];
    assert_eq!(
        (stopped.final_state.as_str(), stopped.exit_code),
        ("STOPPED", Some(1))
    );
}

#[test]
fn a_restarted_store_host_starts_a_new_rendezvous() {
    // The new incarnation's round 0 is its own round, after the first one.
    let s = case("store_host_restarts");
    let sizes: Vec<u32> = s.rounds.iter().map(|r| r.world_size).collect();
    assert_eq!(sizes, vec![2, 1]);
    assert_eq!(s.rounds[1].members, vec!["node-0"]);
    assert!(s.finished);
}

#[test]
fn all_start_succeeds_in_one_round() {
    let s = case("all_start");
    assert_eq!(s.rounds.len(), 1);
    assert!(s
        .nodes
        .values()
        .all(|n| n.final_state == "SUCCEEDED" && n.exit_code == Some(0)));
    assert!(s.finished);
}
