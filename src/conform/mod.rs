//! Conformance against the real torch: the same scenario run by torchrun on this machine
//! (`conformance/driver.py`) and by the simulator, compared by run signature.
//!
//! - [`signature`]: the coarse run signature and how the simulator's report maps to it.
//! - [`compare`]: signature distributions and the agreement rule.
//! - [`levels`]: agreement on the coarse outcome, and the distribution test of racy files.
//! - [`real`]: running the Python driver and reading its signature back.
//! - [`planes`]: the model against torch's own code, both in the simulated world.
//! - [`localhost`]: what this machine can run of a file, and the file it runs.
//! - [`confirm`]: a model finding run on the real torch, and its label.
//!
//! A scenario with `rendezvous.fixes` or `agent.fixes` cannot run on real torch, which has
//! no fixes. Such a file is a fix twin: only the simulator runs it, and when its unfixed twin
//! (the same name without `_fixed`) is checked in the same invocation, the twin's
//! distribution is shown against that twin's real runs, to show what the fix changes.

pub mod compare;
pub mod confirm;
pub mod levels;
pub mod localhost;
pub mod planes;
pub mod real;
pub mod signature;

use crate::runner::{HarnessFailure, Run};
use crate::scenario::Scenario;
use compare::{Distribution, Verdict};
use levels::{judge_levels, Levels};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// What the check on one file found.
#[derive(Debug, Clone, Serialize)]
pub struct FileReport {
    pub file: String,
    /// `agree`, `disagree`, `fix-differs` (a fix twin whose simulated runs differ from its
    /// unfixed twin's real runs, as a fix should), `fix-same` or `sim-only` (a fix twin
    /// without its unfixed twin in the invocation).
    pub verdict: String,
    /// For a fix twin, the real runs of its unfixed twin.
    pub real: Distribution,
    pub sim: Distribution,
    /// Each differing field between the most common real and simulated signatures.
    pub differences: Vec<String>,
    /// The coarse outcome's verdict and, for a racy file, the distribution test's p-value.
    #[serde(flatten)]
    pub levels: Levels,
    /// How the file both sides ran differs from the one given (`confirm::prepare`): gloo
    /// for NCCL, fewer workers, this machine's start times, a shorter limit.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl FileReport {
    /// The file's verdict at every level together: `agree` only when the most common
    /// signature, the coarse outcome and (for a racy file) the distribution test all agree;
    /// `agree on the coarse outcome only`; `disagree`. A fix twin or a simulator-only file
    /// keeps its own verdict.
    pub fn headline(&self) -> &str {
        if self.verdict != "agree" && self.verdict != "disagree" {
            return &self.verdict;
        }
        let coarse = self.levels.coarse == "agree";
        let full = self.verdict == "agree" && self.levels.distribution_agrees().unwrap_or(true);
        match (coarse, full) {
            (true, true) => "agree",
            (true, false) => "agree on the coarse outcome only",
            (false, _) => "disagree",
        }
    }

    /// Whether this file counts as a disagreement for the exit code (fix twins never do).
    pub fn disagrees(&self) -> bool {
        self.verdict == "disagree"
    }
}

/// Whether `scenario` turns on a fix, which real torch cannot run.
pub fn is_fix_twin(scenario: &Scenario) -> bool {
    !scenario.rendezvous.fixes.is_empty() || !scenario.agent.fixes.is_empty()
}

/// The unfixed twin of `path`: `x_fixed.toml` is the twin of `x.toml`.
pub fn unfixed_twin(path: &Path) -> Option<PathBuf> {
    let stem = path.file_stem()?.to_str()?;
    let base = stem.strip_suffix("_fixed")?;
    Some(path.with_file_name(format!("{base}.toml")))
}

/// The simulator's signature distribution over `seeds`.
pub fn sim_distribution(
    scenario: &Scenario,
    file: &str,
    seeds: std::ops::Range<u64>,
) -> Result<Distribution, HarnessFailure> {
    let mut signatures = Vec::new();
    for seed in seeds {
        let report = Run::of(scenario, file).seed(seed).report()?;
        signatures.push(signature::from_report(&report, scenario.job.steps));
    }
    Ok(Distribution::of(signatures))
}

/// Judges a file checked against real torch.
pub fn judge_file(file: &str, real: Distribution, sim: Distribution) -> FileReport {
    let Verdict { agree, differences } = compare::judge(&real, &sim);
    FileReport {
        file: file.to_owned(),
        verdict: if agree { "agree" } else { "disagree" }.to_owned(),
        levels: judge_levels(&real, &sim),
        real,
        sim,
        differences,
        notes: Vec::new(),
    }
}

/// Judges a fix twin against its unfixed twin's real runs, when they were made.
pub fn judge_twin(file: &str, base_real: Option<&Distribution>, sim: Distribution) -> FileReport {
    let Some(real) = base_real else {
        return FileReport {
            file: file.to_owned(),
            verdict: "sim-only".to_owned(),
            real: Distribution::default(),
            sim,
            differences: Vec::new(),
            levels: Levels {
                coarse: "n/a".to_owned(),
                distribution_p: None,
            },
            notes: Vec::new(),
        };
    };
    let Verdict { agree, differences } = compare::judge(real, &sim);
    FileReport {
        file: file.to_owned(),
        verdict: if agree { "fix-same" } else { "fix-differs" }.to_owned(),
        levels: judge_levels(real, &sim),
        real: real.clone(),
        sim,
        differences,
        notes: Vec::new(),
    }
}

#[cfg(test)]
mod tests;
