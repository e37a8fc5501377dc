//! Confirming a model finding on the real torch: what this machine can run of it, with which
//! backend (decided by measuring the model, never assumed), what a real run must show to
//! count as the finding, and the label a root cause gets.
//!
//! A real run **shows** the finding when its coarse outcome (whether the job finished, and
//! how each node's last agent ended) is the one the model gives on the file run here at the
//! finding's own seed, and when every violated invariant of the finding that the agents' join
//! lines can show (`rendezvous.agreement`, `rendezvous.bounds`: [`OBSERVABLE`]) shows there
//! too. The others (`rendezvous.liveness`, `rendezvous.exclusive`, ...) need the simulator's
//! trace and are judged through the outcome alone.

use super::levels::coarse_signature;
use super::localhost::{self, Refusal};
use super::real::{self, RealError};
use super::signature::{self, Signature};
use crate::check::Status;
use crate::report::Report;
use crate::runner::{HarnessFailure, Run};
use crate::scenario::model::{Backend, Scenario};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The headline note of a file run with gloo where it asked for NCCL.
pub const RAN_WITH_GLOO: &str = "ran with gloo: the model's verdict is the same on both backends";

/// The invariants a real run's agent logs can show violated (`observed` in signature.py).
pub const OBSERVABLE: [&str; 2] = ["rendezvous.agreement", "rendezvous.bounds"];

/// A root cause's verdict on the real torch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Label {
    /// `shown` of `runs` real runs showed the finding.
    Confirmed {
        torch: String,
        shown: u32,
        runs: u32,
    },
    /// None of `runs` real runs showed it.
    NotReproduced { runs: u32 },
    /// This machine cannot run it, and why.
    CannotRun { reason: String },
}

impl std::fmt::Display for Label {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Label::Confirmed { torch, shown, runs } => write!(
                f,
                "confirmed on torch {} ({shown} of {runs} runs)",
                release(torch)
            ),
            Label::NotReproduced { runs } => write!(f, "not reproduced ({runs} runs)"),
            Label::CannotRun { reason } => write!(f, "cannot run on torch: {reason}"),
        }
    }
}

/// `2.15.0` of `2.15.0+cu132`: the release, without the build's local tag.
pub fn release(version: &str) -> &str {
    version.split('+').next().unwrap_or(version)
}

/// The label for `shown` of `runs` real runs showing the finding.
pub fn label_of(torch: &str, shown: u32, runs: u32) -> Label {
    if shown == 0 {
        Label::NotReproduced { runs }
    } else {
        Label::Confirmed {
            torch: torch.to_owned(),
            shown,
            runs,
        }
    }
}

/// The model's verdict on one run: the coarse outcome and the violated invariants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub coarse: Signature,
    /// Violated invariants, sorted.
    pub violated: Vec<String>,
    /// Violated kinds, as `invariant:kind`, sorted.
    pub kinds: Vec<String>,
}

impl Outcome {
    /// The verdict of a simulated run, from its report.
    pub fn of(report: &Report, steps: u64) -> Outcome {
        let violated: Vec<_> = report
            .invariants
            .iter()
            .filter(|i| i.status == Status::Violated)
            .collect();
        let kinds: BTreeSet<String> = violated
            .iter()
            .flat_map(|i| i.violations.iter().map(|v| v.kind.to_string()))
            .collect();
        Outcome {
            coarse: coarse_signature(&signature::from_report(report, steps)),
            violated: violated.iter().map(|i| i.name.clone()).collect(),
            kinds: kinds.into_iter().collect(),
        }
    }

    /// `node-0 FAILED, node-1 KILLED | not finished | violates rendezvous.liveness`.
    pub fn describe(&self) -> String {
        let violated = if self.violated.is_empty() {
            "violates nothing".to_owned()
        } else {
            format!("violates {}", self.violated.join(", "))
        };
        format!("{} | {violated}", describe_coarse(&self.coarse))
    }

    /// Whether the backend rule counts `other` as the same verdict: the same coarse outcome
    /// and the same violated invariants.
    fn same_verdict(&self, other: &Outcome) -> bool {
        (&self.coarse, &self.violated) == (&other.coarse, &other.violated)
    }
}

/// `node-0 FAILED, node-1 KILLED | not finished`.
pub fn describe_coarse(coarse: &Signature) -> String {
    let mut nodes: Vec<_> = coarse.nodes.iter().collect();
    nodes.sort_by_key(|(name, _)| signature::node_order(name));
    let nodes: Vec<String> = nodes
        .into_iter()
        .map(|(name, n)| format!("{name} {}", n.final_state))
        .collect();
    let finished = if coarse.finished {
        "finished"
    } else {
        "not finished"
    };
    format!("{} | {finished}", nodes.join(", "))
}

/// The backend rule over the same seeds on both backends: `None` when every seed gives the
/// same verdict with NCCL and with gloo, else the first seed that does not, with both.
pub fn backend_differs(
    nccl: &[(u64, Outcome)],
    gloo: &[(u64, Outcome)],
) -> Option<(u64, Outcome, Outcome)> {
    assert_eq!(nccl.len(), gloo.len(), "the same seeds on both backends");
    nccl.iter()
        .zip(gloo)
        .find(|((a, n), (b, g))| {
            assert_eq!(a, b, "seed by seed");
            !n.same_verdict(g)
        })
        .map(|((seed, n), (_, g))| (*seed, n.clone(), g.clone()))
}

/// The reason a file whose verdict depends on the backend is refused.
pub fn backend_refusal(seed: u64, nccl: &Outcome, gloo: &Outcome) -> String {
    format!(
        "the workers here run gloo, and the model's verdict differs between the backends \
         (seed {seed}: with nccl {}; with gloo {})",
        nccl.describe(),
        gloo.describe()
    )
}

/// What a real run must show: the model's coarse outcome at the finding's seed, and the
/// finding's invariants a real run can show.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Target {
    #[serde(serialize_with = "serialize_coarse")]
    pub coarse: Signature,
    pub observable: Vec<String>,
}

fn serialize_coarse<S: serde::Serializer>(s: &Signature, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&describe_coarse(s))
}

impl Target {
    /// The target of a finding that violates `invariants`, whose model run here ended `coarse`.
    pub fn new(coarse: Signature, invariants: &[String]) -> Target {
        let observable = invariants
            .iter()
            .filter(|i| OBSERVABLE.contains(&i.as_str()))
            .cloned()
            .collect();
        Target { coarse, observable }
    }

    /// Whether a real run with `real` as its signature, whose logs showed `observed`, shows
    /// the finding.
    pub fn shown_by(&self, real: &Signature, observed: &[String]) -> bool {
        coarse_signature(real) == self.coarse
            && self.observable.iter().all(|i| observed.contains(i))
    }
}

/// Why a file cannot run here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CannotRun {
    /// Faults or settings this machine cannot make, each with its sentence.
    Refused(Vec<Refusal>),
    /// A measured reason: the backend decides the verdict, or the file run here no longer
    /// shows the finding.
    Measured(String),
}

impl CannotRun {
    /// The label's reason: the measured reason, or every refusal, the faults and settings
    /// refused for the same reason named together before it (`faults[0] (partition at
    /// 23.162 s), faults[2] (heal at 68.174 s): a network partition is ...`).
    pub fn reason(&self) -> String {
        let refusals = match self {
            CannotRun::Refused(refusals) => refusals,
            CannotRun::Measured(reason) => return reason.clone(),
        };
        let mut by_reason: Vec<(&str, Vec<&str>)> = Vec::new();
        for r in refusals {
            match by_reason.iter_mut().find(|(why, _)| *why == r.why) {
                Some((_, what)) => what.push(&r.what),
                None => by_reason.push((&r.why, vec![&r.what])),
            }
        }
        let parts: Vec<String> = by_reason
            .into_iter()
            .map(|(why, what)| format!("{}: {why}", what.join(", ")))
            .collect();
        parts.join("; ")
    }
}

/// The file to run here, and a sentence for each way it differs from the one asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    pub scenario: Scenario,
    pub notes: Vec<String>,
    /// Whether the file asked for NCCL and runs with gloo.
    pub ran_with_gloo: bool,
}

/// What this machine runs of `s` (reported as `file`): its localhost variant, with gloo
/// workers when the model gives the same verdict with both backends over `seeds`.
pub fn prepare(
    s: &Scenario,
    file: &str,
    seeds: &[u64],
) -> Result<Result<Prepared, CannotRun>, HarnessFailure> {
    let refusals = localhost::refusals(s, localhost::Netns::here());
    if !refusals.is_empty() {
        return Ok(Err(CannotRun::Refused(refusals)));
    }
    let (variant, mut notes) = localhost::localhost_variant(s);
    if variant.job.backend == Backend::Gloo {
        return Ok(Ok(Prepared {
            scenario: variant,
            notes,
            ran_with_gloo: false,
        }));
    }
    let gloo = localhost::with_gloo(&variant);
    let outcomes = |scenario: &Scenario| -> Result<Vec<(u64, Outcome)>, HarnessFailure> {
        seeds
            .iter()
            .map(|&seed| {
                let report = Run::of(scenario, file).seed(seed).report()?;
                Ok((seed, Outcome::of(&report, scenario.job.steps)))
            })
            .collect()
    };
    if let Some((seed, n, g)) = backend_differs(&outcomes(&variant)?, &outcomes(&gloo)?) {
        return Ok(Err(CannotRun::Measured(backend_refusal(seed, &n, &g))));
    }
    notes.insert(0, RAN_WITH_GLOO.to_owned());
    Ok(Ok(Prepared {
        scenario: gloo,
        notes,
        ran_with_gloo: true,
    }))
}

/// A finding of the model: the repro's scenario, its seed and the kinds of violation it
/// counted (`invariant:kind`).
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub scenario: Scenario,
    pub seed: u64,
    pub kinds: Vec<String>,
}

/// Everything a finding's confirmation runs: the file, and what its real runs must show.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub prepared: Prepared,
    pub target: Target,
}

/// Plans a finding's confirmation: the file run here (over `seeds` and the finding's own
/// seed for the backend rule), which must still show the finding's kinds of violation in
/// the model at the finding's seed; the target is the model's outcome there.
pub fn plan(
    f: &Finding,
    file: &str,
    seeds: &[u64],
) -> Result<Result<Plan, CannotRun>, HarnessFailure> {
    let mut all: Vec<u64> = seeds.to_vec();
    if !all.contains(&f.seed) {
        all.push(f.seed);
    }
    let prepared = match prepare(&f.scenario, file, &all)? {
        Ok(p) => p,
        Err(cannot) => return Ok(Err(cannot)),
    };
    let report = Run::of(&prepared.scenario, file).seed(f.seed).report()?;
    let here = Outcome::of(&report, prepared.scenario.job.steps);
    let missing: Vec<&String> = f.kinds.iter().filter(|k| !here.kinds.contains(k)).collect();
    if !missing.is_empty() {
        let changed = if prepared.notes.is_empty() {
            String::new()
        } else {
            format!(" ({})", prepared.notes.join("; "))
        };
        let reason = format!(
            "the file run here{changed} no longer shows the finding in the model at seed {}: {}",
            f.seed,
            here.describe()
        );
        return Ok(Err(CannotRun::Measured(reason)));
    }
    let invariants: BTreeSet<String> = f
        .kinds
        .iter()
        .map(|k| k.split_once(':').map_or(k.as_str(), |(i, _)| i).to_owned())
        .collect();
    let invariants: Vec<String> = invariants.into_iter().collect();
    Ok(Ok(Plan {
        target: Target::new(here.coarse, &invariants),
        prepared,
    }))
}

/// One real run of a confirmation, as `summary.json` keeps it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RunResult {
    /// The run's signature, compact.
    pub signature: String,
    /// The invariants its join lines showed violated.
    pub observed: Vec<String>,
    /// Whether it showed the finding.
    pub shows: bool,
}

/// Writes the file run here (`scenario`, a [`Prepared`]'s) as `dir/localhost.toml`, the file
/// the driver runs, after checking that it reads back as exactly the scenario the model ran.
pub fn write_prepared(scenario: &Scenario, dir: &Path) -> Result<PathBuf, String> {
    let text = crate::scenario::to_toml(scenario);
    let path = dir.join("localhost.toml");
    match crate::scenario::parse(&text, &path.display().to_string()) {
        Ok(back) if back == *scenario => {}
        Ok(_) => {
            return Err(format!(
                "{}: does not read back as the model's file",
                path.display()
            ))
        }
        Err(e) => return Err(e.to_string()),
    }
    std::fs::create_dir_all(dir)
        .and_then(|()| crate::files::write_atomically(&path, text.as_bytes()))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}

/// Runs `file` (the plan's, as [`write_prepared`] wrote it) `runs` times on real torch, each
/// run's logs in `dir/run-<k>`, and judges each against the plan's target; `progress` sees
/// each run start.
pub fn run_real(
    plan: &Plan,
    real: (&Path, &Path),
    file: &Path,
    dir: &Path,
    runs: u32,
    mut progress: impl FnMut(u32),
) -> Result<Vec<RunResult>, RealError> {
    let (python, driver) = real;
    real::check(python, driver, file)?;
    let mut results = Vec::new();
    for k in 0..runs {
        let out = dir.join(format!("run-{k}"));
        let fresh = match out.exists() {
            true => std::fs::remove_dir_all(&out),
            false => Ok(()),
        };
        fresh
            .and_then(|()| std::fs::create_dir_all(&out))
            .map_err(|e| RealError::Driver(format!("cannot prepare {}: {e}", out.display())))?;
        progress(k);
        let run = real::run(python, driver, file, &out)?;
        results.push(RunResult {
            signature: run.signature.compact(),
            shows: plan.target.shown_by(&run.signature, &run.observed),
            observed: run.observed,
        });
    }
    Ok(results)
}

#[cfg(test)]
#[path = "confirm_tests.rs"]
mod tests;
