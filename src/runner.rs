//! One run end to end: scenario in, report out. The world runs on its own thread; a panic
//! anywhere (simulation, checks, report) is caught and turned into a harness failure that
//! names the seed and the line that reproduces it.
//!
//! `--check-determinism` lives here too: it runs a seed twice and, when the traces differ,
//! says where they first diverge, because a bare "hashes differ" leaves the user to rerun
//! both and diff them by hand.

use crate::check;
use crate::report::{self, Report};
use crate::scenario::model::Scenario;
use crate::trace::Trace;
use crate::world::{self, Programs};
use futures::FutureExt;
use std::collections::BTreeSet;
use std::sync::Arc;

/// The harness itself failed on this run (exit code 3).
#[derive(Debug, Clone, thiserror::Error)]
#[error("harness failure on seed {seed}: {message}\n{repro}")]
pub struct HarnessFailure {
    pub seed: u64,
    pub message: String,
    pub repro: String,
}

/// How to run beyond what the scenario says: only the command line sets these.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunOptions {
    /// Planted rendezvous bugs to switch on (see `rendezvous::settings::KNOWN_MUTANTS`);
    /// empty runs torch's behaviour.
    pub mutants: BTreeSet<String>,
    /// A tighter bound than `world::SIM_EVENTS_MAX` on the simulator events the run may
    /// cost (`trainsim bench` stops its largest workloads with it).
    pub sim_events_max: Option<u64>,
    /// Time every training step one at a time (see `Programs::step_by_step`).
    pub step_by_step: bool,
}

/// The programs of a real run: torch's agent on every node and the c10d store.
pub fn programs() -> Programs {
    programs_with(&RunOptions::default())
}

/// Like [`programs`], with the options' mutants switched on in every agent.
pub fn programs_with(options: &RunOptions) -> Programs {
    let mutants = Arc::new(options.mutants.clone());
    Programs {
        mutants: Arc::clone(&mutants),
        step_by_step: options.step_by_step,
        agent: Arc::new(move |env| {
            crate::agent::run::agent_process_with(env, Arc::clone(&mutants)).boxed()
        }),
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
    run_traced(scenario, file, seed).map(|(report, _)| report)
}

/// Like [`run_one`], with options (mutants) the scenario file cannot set.
pub fn run_one_with(
    scenario: &Scenario,
    file: &str,
    seed: u64,
    options: &RunOptions,
) -> Result<Report, HarnessFailure> {
    run_traced_with(scenario, file, seed, options).map(|(report, _)| report)
}

/// Like [`run_one`], but also hands back the trace, for exports and determinism checks.
pub fn run_traced(
    scenario: &Scenario,
    file: &str,
    seed: u64,
) -> Result<(Report, Trace), HarnessFailure> {
    run_traced_with(scenario, file, seed, &RunOptions::default())
}

/// Like [`run_traced`], with options; a run with mutants names them in its repro line.
pub fn run_traced_with(
    scenario: &Scenario,
    file: &str,
    seed: u64,
    options: &RunOptions,
) -> Result<(Report, Trace), HarnessFailure> {
    let failure = |message: String| {
        let mut f = harness_failure(file, seed, message);
        f.repro.push_str(&mutant_flags(options));
        f
    };
    let with_reader_mutants = reader_mutants(scenario, options);
    let simulated = with_reader_mutants.as_ref().unwrap_or(scenario);
    let sim_events_max = options.sim_events_max.unwrap_or(world::SIM_EVENTS_MAX);
    let (trace, end) =
        world::simulate_bounded(simulated, seed, programs_with(options), sim_events_max)
            .map_err(|e| failure(e.to_string()))?;
    let report = checked_report(scenario, file, seed, &trace, &end, options)?;
    Ok((report, trace))
}

/// Checks a finished run and builds its report; a panic in either is a harness failure.
pub fn checked_report(
    scenario: &Scenario,
    file: &str,
    seed: u64,
    trace: &Trace,
    end: &crate::trace::RunEnd,
    options: &RunOptions,
) -> Result<Report, HarnessFailure> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let invariants = check::check_all(scenario, seed, trace, end);
        let mut report = report::build(scenario, file, seed, trace, end, invariants);
        report.repro.push_str(&mutant_flags(options));
        report
    }))
    .map_err(|payload| {
        let message = format!("the checks panicked: {}", world::panic_message(&payload));
        let mut f = harness_failure(file, seed, message);
        f.repro.push_str(&mutant_flags(options));
        f
    })
}

/// The scenario with the options' reader mutants switched on in its `[reader]`, when it has
/// one and any is named (the job's reader reads them from there); `None` leaves it as is.
fn reader_mutants(scenario: &Scenario, options: &RunOptions) -> Option<Scenario> {
    let names: Vec<String> = options
        .mutants
        .iter()
        .filter(|m| crate::reader::KNOWN_MUTANTS.contains(&m.as_str()))
        .cloned()
        .collect();
    if names.is_empty() || scenario.reader.is_none() {
        return None;
    }
    let mut with = scenario.clone();
    if let Some(reader) = with.reader.as_mut() {
        reader.mutants = names;
    }
    Some(with)
}

/// ` --mutant M` for each mutant, to append to a repro line.
pub fn mutant_flags(options: &RunOptions) -> String {
    options
        .mutants
        .iter()
        .map(|m| format!(" --mutant {m}"))
        .collect()
}

/// Runs `seed` twice and insists both runs are the same; returns the first run.
///
/// Differing traces (or, with equal traces, differing reports) are a harness failure whose
/// message shows the first diverging event of each run.
pub fn run_deterministic(
    scenario: &Scenario,
    file: &str,
    seed: u64,
) -> Result<(Report, Trace), HarnessFailure> {
    run_deterministic_with(scenario, file, seed, &RunOptions::default())
}

/// Like [`run_deterministic`], with options.
pub fn run_deterministic_with(
    scenario: &Scenario,
    file: &str,
    seed: u64,
    options: &RunOptions,
) -> Result<(Report, Trace), HarnessFailure> {
    let (first, first_trace) = run_traced_with(scenario, file, seed, options)?;
    let (second, second_trace) = run_traced_with(scenario, file, seed, options)?;
    if first.trace_hash != second.trace_hash {
        let message = match first_divergence(&first_trace, &second_trace) {
            Some(d) => format!(
                "the run is not deterministic: trace hashes {} and {} differ; the traces \
                 first diverge at event {}:\n  first run:  {}\n  second run: {}",
                first.trace_hash, second.trace_hash, d.index, d.first, d.second
            ),
            // Equal events but a different hash can only come from a changed hash function.
            None => format!(
                "the run is not deterministic: trace hashes {} and {} differ over equal events",
                first.trace_hash, second.trace_hash
            ),
        };
        return Err(harness_failure(file, seed, message));
    }
    if first != second {
        return Err(harness_failure(
            file,
            seed,
            format!(
                "the run is not deterministic: equal traces ({}) gave different reports:\n  \
                 first run:  {}\n  second run: {}",
                first.trace_hash,
                first.to_json_line(),
                second.to_json_line()
            ),
        ));
    }
    Ok((first, first_trace))
}

/// Where two traces of the same seed first differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Divergence {
    /// Index of the first differing event (0-based).
    pub index: usize,
    /// That event's canonical line in the first trace, or `<end of trace>`.
    pub first: String,
    /// That event's canonical line in the second trace, or `<end of trace>`.
    pub second: String,
}

/// The first event at which `a` and `b` differ, or `None` when they hold equal events.
pub fn first_divergence(a: &Trace, b: &Trace) -> Option<Divergence> {
    let (a, b) = (a.canonical_lines(), b.canonical_lines());
    let index = a
        .iter()
        .zip(&b)
        .position(|(x, y)| x != y)
        .or_else(|| (a.len() != b.len()).then(|| a.len().min(b.len())))?;
    let line = |lines: &[String]| {
        lines
            .get(index)
            .cloned()
            .unwrap_or_else(|| "<end of trace>".to_owned())
    };
    Some(Divergence {
        index,
        first: line(&a),
        second: line(&b),
    })
}

fn harness_failure(file: &str, seed: u64, message: String) -> HarnessFailure {
    HarnessFailure {
        seed,
        message,
        repro: report::repro_line(file, seed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Event, EventKind};

    fn trace(steps: &[u64]) -> Trace {
        Trace {
            events: steps
                .iter()
                .map(|&step| Event {
                    at_us: step * 10,
                    node: Some("node-0".to_owned()),
                    kind: EventKind::Step {
                        pid: 1,
                        round: 0,
                        step,
                        epoch: 0,
                        samples: 0,
                        trained: Default::default(),
                    },
                })
                .collect(),
            truncated: false,
            sim_events: 0,
            store: Default::default(),
        }
    }

    #[test]
    fn the_first_divergence_names_the_index_and_both_lines() {
        assert_eq!(first_divergence(&trace(&[1, 2]), &trace(&[1, 2])), None);
        let d = first_divergence(&trace(&[1, 2, 3]), &trace(&[1, 5, 3])).expect("differ");
        assert_eq!(d.index, 1);
        assert!(d.first.contains("\"step\":2") && d.second.contains("\"step\":5"));
        let d = first_divergence(&trace(&[1]), &trace(&[1, 2])).expect("differ");
        assert_eq!((d.index, d.first.as_str()), (1, "<end of trace>"));
    }
}
