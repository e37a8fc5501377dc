//! `trainsim conform`'s refusals, and the driver's, which need no torch: no torch at
//! `--python`, an unreadable scenario, a fault the real machine cannot apply.

use std::path::Path;
use std::process::Command;
mod common;
use common::{text, trainsim_command};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `trainsim` with `args`: its exit code and its stderr.
fn trainsim(args: &[&str]) -> (i32, String) {
    let out = common::trainsim(args);
    (out.status.code().unwrap_or(-1), text(&out.stderr))
}

#[test]
fn no_torch_at_python_is_exit_2() {
    let (code, stderr) = trainsim(&[
        "conform",
        "conformance/scenarios/all_start.toml",
        "--python",
        "/nonexistent/python",
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("no torch at /nonexistent/python"),
        "{stderr}"
    );
}

#[test]
fn an_unreadable_scenario_is_exit_2_before_torch_is_asked() {
    let (code, stderr) = trainsim(&[
        "conform",
        "conformance/scenarios/no_such_file.toml",
        "--python",
        "/nonexistent/python",
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("no_such_file.toml"), "{stderr}");
}

/// `driver.py check` on `toml`, with network namespaces turned off (`TRAINSIM_NETNS=off`)
/// so the refusals are the same on every machine.
fn driver_check(toml: &str) -> (i32, String) {
    driver_check_netns(toml, "off")
}

fn driver_check_netns(toml: &str, netns: &str) -> (i32, String) {
    let dir = std::env::temp_dir().join(format!("trainsim-conform-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join(format!("case-{}.toml", toml.len()));
    std::fs::write(&file, toml).expect("write the scenario");
    let out = Command::new("python3")
        .arg(root().join("conformance/driver.py"))
        .arg("check")
        .arg(&file)
        .env("TRAINSIM_NETNS", netns)
        .output()
        .expect("python3 runs");
    let _ = std::fs::remove_file(&file);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const BASE: &str = "name = \"x\"\n[cluster]\nnodes = 2\n[rendezvous]\nmin_nodes = 2\nmax_nodes = 2\njoin_timeout = \"20s\"\n[job]\nbackend = \"gloo\"\n";

#[test]
fn the_driver_accepts_the_suite() {
    let suite = root().join("conformance/scenarios");
    let mut checked = 0;
    for entry in std::fs::read_dir(suite).expect("the suite") {
        let path = entry.expect("an entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if !name.ends_with(".toml") || name.ends_with("_fixed.toml") {
            continue;
        }
        let out = Command::new("python3")
            .arg(root().join("conformance/driver.py"))
            .arg("check")
            .arg(&path)
            .output()
            .expect("python3 runs");
        assert!(
            out.status.success(),
            "{}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        checked += 1;
    }
    assert!(checked >= 12, "only {checked} suite files");
}

#[test]
fn the_driver_refuses_what_the_machine_cannot_do() {
    let cases = [
        ("[[faults]]\nat = \"5s\"\nkind = \"partition\"\ngroups = [[\"node-0\"], [\"node-1\"]]\n", "partition"),
        ("[[faults]]\nat = \"5s\"\nkind = \"power_off\"\nnode = \"node-1\"\n", "power_off"),
        ("[[faults]]\nat = \"5s\"\nkind = \"gpu_fail\"\nnode = \"node-1\"\ngpu = 0\n", "gpu_fail"),
    ];
    for (fault, word) in cases {
        let (code, stderr) = driver_check(&format!("{BASE}{fault}"));
        assert_eq!(code, 2, "{word}: {stderr}");
        assert!(stderr.contains(word), "{word}: {stderr}");
    }
    let (code, stderr) = driver_check(&BASE.replace("\"20s\"", "\"1500ms\""));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("whole seconds"), "{stderr}");
    let (code, stderr) = driver_check(&BASE.replace("gloo", "nccl"));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("backend"), "{stderr}");
}

/// The namespace commands the driver builds (`conformance/test_netns.py`: pure functions,
/// no root needed).
#[test]
fn the_drivers_namespace_commands_pass_their_tests() {
    let out = Command::new("python3")
        .args(["-m", "unittest", "conformance/test_netns.py"])
        .current_dir(root())
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every fault localhost cannot make, one per line, as trainsim and the driver both word it.
const UNRUNNABLE: &str =
    "[[faults]]\nat = \"5s\"\nkind = \"partition\"\ngroups = [[\"node-0\"], [\"node-1\"]]\n\
    [[faults]]\nat = \"6s\"\nkind = \"kill\"\nnode = \"node-1\"\n\
    [[faults]]\nat = \"7s\"\nkind = \"heal\"\n\
    [[faults]]\nat = \"8s\"\nkind = \"clog_link\"\nfrom = \"node-0\"\nto = \"node-1\"\n\
    [[faults]]\nat = \"9s\"\nkind = \"unclog_link\"\nfrom = \"node-0\"\nto = \"node-1\"\n\
    [[faults]]\nat = \"10s\"\nkind = \"power_off\"\nnode = \"node-0\"\n\
    [[faults]]\nat = \"11s\"\nkind = \"latency\"\nlatency = [\"1ms\", \"2ms\"]\n\
    [[faults]]\nat = \"12s\"\nkind = \"loss\"\nprobability = 0.1\n\
    [[faults]]\nat = \"13500ms\"\nkind = \"clock_skew\"\nnode = \"node-1\"\noffset = \"3s\"\n\
    [[faults]]\nat = \"14s\"\nkind = \"gpu_fail\"\nnode = \"node-1\"\ngpu = 0\n";

/// trainsim (which refuses without starting Python) and the driver refuse the same faults
/// with the same sentences, in the same order.
#[test]
fn trainsim_and_the_driver_refuse_the_same_faults_with_the_same_words() {
    let toml =
        format!("{BASE}checkpoint_on_signal = \"SIGUSR1\"\n[network]\nloss = 0.01\n{UNRUNNABLE}");
    let scenario = trainsim::scenario::parse(&toml, "x.toml").expect("a valid scenario");
    let off = trainsim::conform::localhost::Netns::Refused(trainsim::conform::localhost::NETNS_OFF);
    let ours: Vec<String> = trainsim::conform::localhost::refusals(&scenario, off)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(ours.len(), 11, "{ours:#?}");
    assert!(
        ours[0].starts_with("network.loss: network latency and loss"),
        "{ours:#?}"
    );
    assert!(
        ours[1].starts_with("job.checkpoint_on_signal: the driver's training script"),
        "{ours:#?}"
    );
    assert!(
        ours[2].starts_with("faults[0] (partition at 5 s): a partition, a clogged link"),
        "{ours:#?}"
    );
    assert!(ours.iter().all(|r| !r.contains("(kill at")), "{ours:#?}");
    let (code, stderr) = driver_check(&toml);
    assert_eq!(code, 2, "{stderr}");
    let theirs: Vec<String> = stderr
        .lines()
        .map(|l| l.split_once(".toml: ").map_or(l, |(_, why)| why).to_owned())
        .collect();
    assert_eq!(theirs, ours);
}

/// Where namespaces can be made (root, `ip netns`), neither side refuses a partition, a
/// clogged link or a power-off; elsewhere both give the same reason.
#[test]
fn network_faults_are_refused_only_where_namespaces_cannot_be_made() {
    let toml = format!("{BASE}{UNRUNNABLE}");
    let scenario = trainsim::scenario::parse(&toml, "x.toml").expect("a valid scenario");
    let here = trainsim::conform::localhost::Netns::here();
    let ours: Vec<String> = trainsim::conform::localhost::refusals(&scenario, here)
        .iter()
        .map(ToString::to_string)
        .collect();
    let (code, stderr) = driver_check_netns(&toml, "");
    assert_eq!(code, 2, "{stderr}");
    let theirs: Vec<String> = stderr
        .lines()
        .map(|l| l.split_once(".toml: ").map_or(l, |(_, why)| why).to_owned())
        .collect();
    assert_eq!(theirs, ours);
    let network = ["partition", "heal", "clog_link", "unclog_link", "power_off"];
    let refused_network = ours
        .iter()
        .filter(|r| network.iter().any(|k| r.contains(&format!("({k} at "))))
        .count();
    let expected = if here == trainsim::conform::localhost::Netns::Available {
        0
    } else {
        5
    };
    assert_eq!(refused_network, expected, "{ours:#?}");
}

/// A fuzz repro (NCCL, a partition) is refused fault by fault before torch is asked for.
#[test]
fn conform_names_each_fault_it_cannot_make_without_asking_for_torch() {
    let dir = std::env::temp_dir().join(format!("trainsim-conform-refuse-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("repro.toml");
    let toml = "name = \"r\"\n[cluster]\nnodes = 3\n[[faults]]\nat = \"23162ms\"\nkind = \"partition\"\n\
        groups = [[\"node-0\", \"node-1\"], [\"node-2\"]]\n[[faults]]\nat = \"30s\"\nkind = \"kill\"\n\
        node = \"node-1\"\n[[faults]]\nat = \"68174ms\"\nkind = \"heal\"\n";
    std::fs::write(&file, toml).expect("write");
    let path = file.to_str().expect("utf-8");
    let out = trainsim_command()
        .args(["conform", path, "--python", "/nonexistent/python"])
        .env("TRAINSIM_NETNS", "off")
        .output()
        .expect("trainsim runs");
    let (code, stderr) = (out.status.code().unwrap_or(-1), text(&out.stderr));
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(code, 2, "{stderr}");
    let partition = trainsim::conform::localhost::NETNS_OFF;
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines,
        vec![
            format!("error: {path}: cannot run on torch: faults[0] (partition at 23.162 s): {partition}"),
            format!("error: {path}: cannot run on torch: faults[2] (heal at 68.174 s): {partition}"),
        ],
        "{stderr}"
    );
}

/// The conformance suite's files are valid scenarios whose expectations the simulator
/// meets (the expectations state what the real torchrun did).
#[test]
fn the_conformance_suite_passes_in_the_simulator() {
    let out = trainsim_command()
        .args(["check", "conformance/scenarios/"])
        .output()
        .expect("trainsim runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("42 passed, 0 failed"), "{stdout}");
}
