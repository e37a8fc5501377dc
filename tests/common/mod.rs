//! Helpers the integration tests share: the `trainsim` binary as the CLI tests call it,
//! custom agent programs over the real store for the world-level tests, and one scenario
//! file simulated and checked in process. Each test crate uses some of them.
#![allow(dead_code)]

use futures::FutureExt;
use std::future::Future;
use std::process::{Command, Output};
use std::sync::Arc;
use trainsim::world::{AgentExit, NodeEnv, Programs};

/// The `trainsim` binary, run from the package's root (where the scenario paths the tests
/// name resolve), ready for arguments.
pub fn trainsim_command() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_trainsim"));
    command.current_dir(env!("CARGO_MANIFEST_DIR"));
    command
}

/// Runs `trainsim` with `args` to its end: its exit status and output.
pub fn trainsim(args: &[&str]) -> Output {
    trainsim_command()
        .args(args)
        .output()
        .expect("the trainsim binary runs")
}

/// Output bytes as text (invalid UTF-8 shown as replacement characters).
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Programs whose agent is `agent` and whose store is the real c10d store server.
pub fn programs<F, Fut>(agent: F) -> Programs
where
    F: Fn(NodeEnv) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = AgentExit> + Send + 'static,
{
    Programs {
        step_by_step: false,
        exact_control_plane: false,
        resolve_role: trainsim::world::no_roles(),
        agent: Arc::new(move |env| agent(env).boxed()),
        store: trainsim::runner::RunOptions::default().programs().store,
    }
}

/// The exit of a test program that ran to its end.
pub fn done() -> AgentExit {
    AgentExit {
        state: trainsim::trace::AgentState::Succeeded,
        reason: "test program finished".into(),
    }
}

/// Every `.rs` file under `dir`, into `out`: the tests that read the crate's own sources.
pub fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Simulates the scenario `file` (its own seed) with `options` and checks the run: its
/// report, trace, and what it cost the simulator.
pub fn simulate_and_check(
    file: &str,
    options: trainsim::runner::RunOptions,
) -> (
    trainsim::report::Report,
    trainsim::trace::Trace,
    trainsim::world::RunStats,
) {
    let scenario = trainsim::scenario::load(std::path::Path::new(file))
        .unwrap_or_else(|e| panic!("{file}: {e}"));
    let one = trainsim::runner::Run::of(&scenario, file).options(options);
    let run = one.simulate().expect("the run finishes");
    let report = one.check(&run.trace, &run.end).expect("the checks run");
    (report, run.trace, run.stats)
}
