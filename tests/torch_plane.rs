//! torch's own elastic code as the control plane, on scenarios whose outcome the model's
//! verdicts are known for: the real code must reproduce them, and replay bit for bit.
//!
//! Needs a Python with torch: `TRAINSIM_TORCH_PYTHON`, else `conformance/setup`'s venv
//! (`~/.cache/trainsim/torch/bin/python`). Without one the tests say so and pass, except in
//! CI (`CI=true`), whose `.ci/run` installs torch first and where a missing torch fails.

use std::path::{Path, PathBuf};
use trainsim::report::Report;
use trainsim::runner::{Run, RunOptions};
use trainsim::torch_plane::TorchPlane;

fn torch_python() -> Option<PathBuf> {
    let named = std::env::var_os("TRAINSIM_TORCH_PYTHON").map(PathBuf::from);
    let default = std::env::var_os("HOME")
        .map(|home| Path::new(&home).join(".cache/trainsim/torch/bin/python"));
    let found = named.or(default).filter(|p| p.exists());
    if found.is_none() {
        assert!(
            std::env::var("CI").is_err(),
            "CI runs the torch control plane: set TRAINSIM_TORCH_PYTHON (.ci/run installs torch)"
        );
        eprintln!("no Python with torch: skipping the torch control plane's tests");
    }
    found
}

/// Run options with `plane` as every node's control plane.
fn on(plane: TorchPlane) -> RunOptions {
    RunOptions {
        torch: Some(plane),
        ..RunOptions::default()
    }
}

/// The options of a run on torch's own code, as installed (no overlay).
fn on_torch(python: PathBuf) -> RunOptions {
    on(TorchPlane {
        python,
        elastic_src: None,
    })
}

fn run_on_torch(file: &str) -> Option<Report> {
    let options = on_torch(torch_python()?);
    let scenario = trainsim::scenario::load(Path::new(file)).expect("the scenario loads");
    let run = Run::of(&scenario, file).options(options);
    Some(run.report().unwrap_or_else(|e| panic!("{e}")))
}

/// A scenario's report on torch's own code; its expectations must hold there too.
fn expect_holds_on_torch(file: &str) {
    let Some(report) = run_on_torch(file) else {
        return;
    };
    assert!(
        report.expect.met,
        "{file} on torch's own code: {:?}\n{}",
        report.expect.failures, report.goodput.fate
    );
}

#[test]
fn a_late_joiner_meets_the_stale_master_address_on_torchs_own_code() {
    expect_holds_on_torch("scenarios/late_joiner_next_round.toml");
}

#[test]
fn a_killed_node_leaves_and_the_survivors_finish() {
    expect_holds_on_torch("scenarios/killed_after_round.toml");
}

#[test]
fn sigterm_after_the_workers_start_shuts_the_node_down() {
    expect_holds_on_torch("scenarios/graceful_stop.toml");
}

#[test]
fn a_worker_crash_spends_one_restart() {
    expect_holds_on_torch("scenarios/worker_crash_restart.toml");
}

#[test]
fn a_seed_replays_bit_for_bit() {
    let file = "scenarios/killed_after_round.toml";
    let Some(python) = torch_python() else { return };
    let scenario = trainsim::scenario::load(Path::new(file)).expect("the scenario loads");
    let run = Run::of(&scenario, file).options(on_torch(python)).seed(3);
    let (report, _) = run.deterministic().unwrap_or_else(|e| panic!("{e}"));
    let again = run.report().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.trace_hash, again.trace_hash);
}

#[test]
fn a_patched_checkout_laid_over_torch_removes_the_stale_address() {
    let Some(python) = torch_python() else { return };
    let overlay = Path::new(env!("CARGO_TARGET_TMPDIR")).join("refresh-master-addr-overlay");
    let made = std::process::Command::new(&python)
        .arg("docs/examples/patch_dynamic_rendezvous.py")
        .arg(&overlay)
        .output()
        .expect("the example runs");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let file = "scenarios/late_joiner_next_round.toml";
    let scenario = trainsim::scenario::load(Path::new(file)).expect("the scenario loads");
    let plane = TorchPlane {
        python,
        elastic_src: Some(overlay),
    };
    let info = trainsim::torch_plane::probe(&plane).expect("the overlay imports");
    assert!(info.overlay_hash.is_some());
    let report = Run::of(&scenario, file)
        .options(on(plane))
        .report()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.outcome, "succeeded", "{}", report.goodput.fate);
    assert!(
        report.repro.contains("--torch-elastic-src"),
        "{}",
        report.repro
    );
}

#[test]
fn sigterm_restarts_the_exit_barriers_wait_on_torchs_own_code() {
    // The scenario's 30 s exit barrier timeout reaches torch's agent (torchrun itself has no
    // option for it), and node-0's barrier wait, interrupted at 55 s, waits its full 30 s
    // again: the SIGKILL at 80 s finds it still waiting, as on the real torch.
    let Some(report) = run_on_torch("conformance/scenarios/sigterm_in_exit_barrier.toml") else {
        return;
    };
    let states: Vec<(&str, &str)> = report
        .agents
        .iter()
        .map(|a| (a.node.as_str(), a.final_state.as_str()))
        .collect();
    assert_eq!(
        states,
        [
            ("node-0", "KILLED"),
            ("node-1", "SUCCEEDED"),
            ("node-2", "KILLED")
        ],
        "{}",
        report.goodput.fate
    );
}

#[test]
fn planes_finds_the_model_and_torchs_code_agreeing_on_a_kill() {
    let Some(python) = torch_python() else { return };
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_trainsim"))
        .args([
            "planes",
            "scenarios/killed_after_round.toml",
            "--seeds",
            "0..3",
            "--torch",
        ])
        .arg(&python)
        .output()
        .expect("trainsim runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("scenarios/killed_after_round.toml: agree"),
        "{text}"
    );
    assert!(
        text.contains("1 of 1 files agree on the coarse outcome"),
        "{text}"
    );
}

#[test]
fn python_that_never_yields_is_stopped_and_named() {
    let Some(python) = torch_python() else { return };
    let overlay = Path::new(env!("CARGO_TARGET_TMPDIR")).join("spinning-overlay");
    // next_rendezvous spins before it does anything: the watchdog must end the run.
    let make = r#"
import os, sys
import torch.distributed.elastic.rendezvous.dynamic_rendezvous as m
src = open(m.__file__).read()
head = '    def next_rendezvous(self) -> RendezvousInfo:\n'
assert head in src
src = src.replace(head, head + '        while True:\n            pass\n', 1)
out = os.path.join(sys.argv[1], 'torch', 'distributed', 'elastic', 'rendezvous')
os.makedirs(out, exist_ok=True)
open(os.path.join(out, 'dynamic_rendezvous.py'), 'w').write(src)
"#;
    let made = std::process::Command::new(&python)
        .args(["-c", make])
        .arg(&overlay)
        .output()
        .expect("python runs");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_trainsim"))
        .env("TRAINSIM_TORCH_WALL_MAX_S", "3")
        .args(["run", "scenarios/killed_after_round.toml", "--torch"])
        .arg(&python)
        .arg("--torch-elastic-src")
        .arg(&overlay)
        .output()
        .expect("trainsim runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(text.contains("without yielding to the simulator"), "{text}");
    assert!(text.contains("on node-"), "{text}");
    assert!(
        text.contains("next_rendezvous"),
        "the stack names where it spun: {text}"
    );
    assert!(
        text.contains("trainsim run scenarios/killed_after_round.toml"),
        "{text}"
    );
}

#[test]
fn torchs_own_executor_tells_the_story_of_a_parked_node() {
    let Some(python) = torch_python() else { return };
    let file = "scenarios/spare_beyond_max_nodes.toml";
    let scenario = trainsim::scenario::load(Path::new(file)).expect("the scenario loads");
    let run = Run::of(&scenario, file)
        .options(on_torch(python))
        .told()
        .unwrap_or_else(|e| panic!("{e}"));
    use trainsim::trace::story::RendezvousAction as A;
    let steps = &run.story.rendezvous;
    let parked: Vec<_> = steps
        .iter()
        .filter(|s| s.action == A::AddToRedundancyList)
        .collect();
    assert_eq!(parked.len(), 1, "{steps:#?}");
    let lists = parked[0].lists.as_ref().expect("its lists");
    assert_eq!(lists.participants.len(), 3);
    assert_eq!(lists.redundancy_list.len(), 1);
    assert_eq!(lists.redundancy_list[0].node, parked[0].node);
    assert_eq!(lists.redundancy_list[0].pid, parked[0].pid);
    assert!(parked[0].store_incarnation >= 1);
    // Each participant's join ends with FINISH; the redundant node's join with no step
    // (torch raises its graceful exit from inside the op).
    let finished = steps
        .iter()
        .filter(|s| s.action == A::Finish && s.op.name() == "join")
        .count();
    assert_eq!(finished, 3, "{steps:#?}");
    assert!(steps.windows(2).all(|w| w[0].at <= w[1].at));
}
