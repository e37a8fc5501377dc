//! One run end to end: scenario in, report out. The world runs on its own thread; a panic
//! anywhere (simulation, checks, report) is caught and turned into a harness failure that
//! names the seed and the line that reproduces it.

use crate::check;
use crate::report::{self, Report};
use crate::scenario::model::Scenario;
use crate::world::{self, Programs};
use futures::FutureExt;
use std::sync::Arc;

/// The harness itself failed on this run (exit code 3).
#[derive(Debug, Clone, thiserror::Error)]
#[error("harness failure on seed {seed}: {message}\n{repro}")]
pub struct HarnessFailure {
    pub seed: u64,
    pub message: String,
    pub repro: String,
}

/// The programs of a real run: torch's agent on every node and the c10d store.
pub fn programs() -> Programs {
    Programs {
        agent: Arc::new(|env| crate::agent::run::agent_process(env).boxed()),
        store: Arc::new(|addr| {
            async move {
                // A bind failure means the port is taken: the store simply never comes up,
                // and clients see connection errors, as they would in torch.
                let _ = crate::store::service::serve(addr).await;
            }
            .boxed()
        }),
    }
}

/// Runs `scenario` (read from `file`) with `seed`, checks it and builds its report.
pub fn run_one(scenario: &Scenario, file: &str, seed: u64) -> Result<Report, HarnessFailure> {
    let failure = |message: String| HarnessFailure {
        seed,
        message,
        repro: report::repro_line(file, seed),
    };
    let (trace, end) =
        world::simulate(scenario, seed, programs()).map_err(|e| failure(e.to_string()))?;
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let invariants = check::check_all(scenario, &trace, &end);
        report::build(scenario, file, seed, &trace, &end, invariants)
    }))
    .map_err(|payload| {
        failure(format!(
            "the checks panicked: {}",
            world::panic_message(&payload)
        ))
    })
}
