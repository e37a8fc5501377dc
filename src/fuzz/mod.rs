//! `trainsim fuzz`: a loop around the ordinary run path that draws scenarios instead of
//! reading them (proptest strategies in [`strategy`]), shrinks a failing one and writes it
//! as a scenario file with its repro line.
//!
//! What counts as a finding, kept deliberately simple:
//! - without a mutant, any violated invariant (or harness failure) is a finding;
//! - with a mutant, torch's own behaviour already violates some invariants in some fault
//!   plans (`rendezvous.liveness` after a kill, pytorch#111646; agreement or exclusive under
//!   heavy contention), so each case also runs without the mutant, and only invariants
//!   violated with the mutant but held or not applicable without it count. The canary is
//!   then what the fuzzer finds, not torch's known bugs.

pub mod job_case;
pub mod mutants;
pub mod reader_strategy;
pub mod strategy;

use crate::check::Status;
use crate::runner::{self, RunOptions};
use crate::scenario::{self, Scenario};
use proptest::strategy::{BoxedStrategy, Strategy};
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};
use std::cell::Cell;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use strategy::Case;

/// Most shrink steps per failure; each runs the simulator once or twice, and a fixed count
/// (not a wall-clock budget) keeps the result the same on every machine.
pub const SHRINK_ITERS_MAX: u32 = 1024;

/// Which part of the system the drawn scenarios exercise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FuzzTarget {
    /// Cluster shapes, rendezvous settings and fault plans ([`strategy`]).
    #[default]
    Rendezvous,
    /// The training job: data, samplers, GPUs and job faults ([`job_case`]).
    Job,
    /// Reader configurations with broken files and corrupt records ([`reader_strategy`]).
    Reader,
}

impl FuzzTarget {
    /// The target's name as `--target` spells it.
    pub fn name(self) -> &'static str {
        match self {
            FuzzTarget::Rendezvous => "rendezvous",
            FuzzTarget::Job => "job",
            FuzzTarget::Reader => "reader",
        }
    }

    fn strategy(self) -> BoxedStrategy<Case> {
        match self {
            FuzzTarget::Rendezvous => strategy::case().boxed(),
            FuzzTarget::Job => job_case::case().boxed(),
            FuzzTarget::Reader => reader_strategy::case().boxed(),
        }
    }
}

/// What to fuzz.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FuzzConfig {
    /// Which scenarios to draw.
    pub target: FuzzTarget,
    /// Cases to draw (shrink steps not counted).
    pub cases: u32,
    /// Seeds proptest's generator; the same seed draws the same cases.
    pub seed: u64,
    /// The mutant to switch on, if any.
    pub mutant: Option<String>,
}

/// A failing case and why it fails.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub case: Case,
    /// The invariants that count (see the module docs), by name.
    pub new_violations: Vec<String>,
    /// Every invariant the case violates (with the mutant, when one is on).
    pub all_violations: Vec<String>,
    /// The harness failed on the case (a panic): its message.
    pub harness_failure: Option<String>,
}

/// The result of a fuzz session.
#[derive(Debug, Clone, PartialEq)]
pub struct FuzzOutcome {
    /// Cases drawn before the first failure (all of them when none failed).
    pub cases_run: u64,
    /// The shrunk failing case, if any.
    pub finding: Option<Finding>,
}

/// The file name scenarios are reported under while fuzzing.
const CASE_FILE: &str = "fuzz-case.toml";

/// Evaluates one case; `Some` when it fails.
pub fn evaluate(case: &Case, mutant: Option<&str>) -> Option<Finding> {
    let options = RunOptions {
        mutants: mutant.into_iter().map(str::to_owned).collect(),
        ..RunOptions::default()
    };
    let violated = |options: &RunOptions| -> Result<Vec<String>, String> {
        let report = runner::run_one_with(&case.scenario, CASE_FILE, case.seed, options)
            .map_err(|e| e.message)?;
        Ok(report
            .invariants
            .iter()
            .filter(|i| i.status == Status::Violated)
            .map(|i| i.name.clone())
            .collect())
    };
    let finding = |new: Vec<String>, all: Vec<String>, harness: Option<String>| Finding {
        case: case.clone(),
        new_violations: new,
        all_violations: all,
        harness_failure: harness,
    };
    let with = match violated(&options) {
        Ok(names) => names,
        Err(message) => return Some(finding(Vec::new(), Vec::new(), Some(message))),
    };
    let baseline: BTreeSet<String> = if options.mutants.is_empty() || with.is_empty() {
        BTreeSet::new()
    } else {
        match violated(&RunOptions::default()) {
            Ok(names) => names.into_iter().collect(),
            Err(message) => return Some(finding(Vec::new(), with, Some(message))),
        }
    };
    let new: Vec<String> = with
        .iter()
        .filter(|n| !baseline.contains(*n))
        .cloned()
        .collect();
    (!new.is_empty()).then(|| finding(new, with, None))
}

/// Runs the session: `cases` draws from a generator seeded by `seed` only (no OS entropy,
/// no persistence file), stopping at the first failure and shrinking it.
pub fn fuzz(config: &FuzzConfig) -> FuzzOutcome {
    let proptest_config = Config {
        cases: config.cases,
        failure_persistence: None,
        max_shrink_iters: SHRINK_ITERS_MAX,
        max_shrink_time: 0,
        max_local_rejects: 0,
        max_global_rejects: 0,
        verbose: 0,
        // Set explicitly so no PROPTEST_* variable in the environment changes a session.
        fork: false,
        timeout: 0,
        ..Config::default()
    };
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&config.seed.to_le_bytes());
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes);
    let mut runner = TestRunner::new_with_rng(proptest_config, rng);
    // Calls before the first failure are drawn cases; after it, shrink steps.
    let calls = Cell::new(0u64);
    let first_failure_at = Cell::new(None::<u64>);
    let mutant = config.mutant.as_deref();
    let result = runner.run(&config.target.strategy(), |case| {
        calls.set(calls.get() + 1);
        match evaluate(&case, mutant) {
            None => Ok(()),
            Some(f) => {
                if first_failure_at.get().is_none() {
                    first_failure_at.set(Some(calls.get()));
                }
                Err(TestCaseError::fail(failure_reason(&f)))
            }
        }
    });
    let cases_run = first_failure_at.get().unwrap_or(calls.get());
    let finding = match result {
        Err(TestError::Fail(_, case)) => evaluate(&case, mutant),
        _ => None,
    };
    FuzzOutcome { cases_run, finding }
}

fn failure_reason(f: &Finding) -> String {
    match &f.harness_failure {
        Some(message) => format!("harness failure: {message}"),
        None => format!("violated: {}", f.new_violations.join(", ")),
    }
}

/// The finding as a scenario file's contents: the shrunk scenario with its seed, the
/// violated invariants as `expect.violations`, and a description of where it came from.
pub fn repro_scenario(finding: &Finding, mutant: Option<&str>) -> Scenario {
    repro_scenario_for(FuzzTarget::Rendezvous, finding, mutant)
}

/// Like [`repro_scenario`], naming the target that found it.
pub fn repro_scenario_for(target: FuzzTarget, finding: &Finding, mutant: Option<&str>) -> Scenario {
    let mut s = finding.case.scenario.clone();
    s.seed = finding.case.seed;
    s.name = "found by trainsim fuzz".to_owned();
    let with = match mutant {
        Some(m) => format!("with the mutant `{m}` switched on (replay with --mutant {m})"),
        None => "with no mutant".to_owned(),
    };
    let what = match &finding.harness_failure {
        Some(message) => format!("The harness failed: {message}"),
        None if mutant.is_some() => format!(
            "It violates {} (the same case without the mutant does not).",
            finding.new_violations.join(", ")
        ),
        None => format!("It violates {}.", finding.new_violations.join(", ")),
    };
    s.description = format!(
        "Found and shrunk by the fuzzer (`trainsim fuzz --target {}`) {with}. {what}",
        target.name()
    );
    s.expect = scenario::model::Expect {
        violations: finding.all_violations.clone(),
        ..Default::default()
    };
    s
}

/// Writes `scenario` atomically as `DIR/NAME` and returns the path.
pub fn write_repro(dir: &Path, name: &str, scenario: &Scenario) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(name);
    crate::cli::write_atomically(&path, scenario::to_toml(scenario).as_bytes())?;
    Ok(path)
}
