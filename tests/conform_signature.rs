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

/// Runs `code` (which may `import signature`) under python3 and returns its stdout.
fn python(code: &str) -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance");
    let output = Command::new("python3")
        .arg("-c")
        .arg(code)
        .current_dir(&dir)
        .output()
        .expect("python3 runs");
    assert!(
        output.status.success(),
        "python3 -c failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8")
}

/// Both sides collapse a restart loop the same way: `signature.py`'s `collapse_repeats`
/// gives, for the same rounds, exactly what the simulator side's does.
#[test]
fn the_real_side_collapses_repeated_rounds_as_the_simulator_side_does() {
    use trainsim::conform::signature::{collapse_repeats, RoundSig};
    let sequences: [&[u32]; 5] = [
        &[3, 2, 2, 2],
        &[3, 2, 2, 2, 2, 2, 2],
        &[2, 2, 3, 2, 2],
        &[3],
        &[],
    ];
    for sizes in sequences {
        let rounds: Vec<RoundSig> = sizes
            .iter()
            .map(|&w| RoundSig {
                world_size: w,
                members: (0..w).map(|i| format!("node-{i}")).collect(),
                repeated: false,
            })
            .collect();
        let input = serde_json::to_string(&rounds).expect("rounds serialize");
        let printed = python(&format!(
            "import json, signature\nprint(json.dumps(signature.collapse_repeats(json.loads('{input}'))))"
        ));
        let real: Vec<RoundSig> = serde_json::from_str(printed.trim()).expect("rounds");
        assert_eq!(real, collapse_repeats(rounds), "{sizes:?}");
    }
}

/// The join lines show a split round (two world sizes, a rank outside its world) and a world
/// below `min_nodes`; a clean round shows nothing.
#[test]
fn the_join_lines_show_agreement_and_bounds_violations() {
    let code = "import json, signature\n\
        plan = {'min_nodes': 2, 'max_nodes': 4}\n\
        def j(t, node, rnd, rank, size):\n\
        \x20   return {'t': t, 'node': node, 'round': rnd, 'rank': rank, 'world_size': size}\n\
        clean = [j(1, 'node-0', 0, 0, 2), j(1, 'node-1', 0, 1, 2)]\n\
        split = [j(1, 'node-0', 0, 0, 3), j(1, 'node-1', 0, 1, 3), j(1, 'node-2', 0, 2, 2)]\n\
        alone = [j(1, 'node-0', 0, 0, 1)]\n\
        for joins in (clean, split, alone):\n\
        \x20   print(json.dumps(signature.observed_violations(joins, [0], plan)))\n";
    let lines: Vec<String> = python(code).lines().map(str::to_owned).collect();
    assert_eq!(
        lines,
        vec![
            "[]",
            "[\"rendezvous.agreement\"]",
            "[\"rendezvous.bounds\"]"
        ]
    );
}
