//! The two control planes on the same files and seeds: the Rust model against torch's own
//! elastic code, both in the same simulated world (`trainsim planes`).
//!
//! Each seed of a file is run once by the model and once by torch's code; the two
//! distributions of run signatures are judged as a conformance check judges the real
//! torchrun's against the simulator's, torch's code standing where the real machine stands:
//! the mode rule, the coarse outcome (finished or not, each node's final state) and, for a
//! racy file, the distribution test. A seed gives both planes the same world (faults, store,
//! network, workers), not the same draws: the two Pythons and Rusts use their chance
//! differently, so it is the distributions that are compared, and the seeds whose two
//! signatures differ are listed for a person to replay.

use super::compare::Distribution;
use super::signature::{self, Signature};
use super::{judge_file, FileReport};
use crate::runner::{HarnessFailure, Run, RunOptions};
use crate::scenario::Scenario;
use crate::torch_plane::TorchPlane;
use serde::Serialize;

/// One seed whose two runs differ.
#[derive(Debug, Clone, Serialize)]
pub struct SeedDifference {
    pub seed: u64,
    pub model: String,
    pub torch: String,
}

/// What comparing the planes on one file found.
#[derive(Debug, Clone, Serialize)]
pub struct PlanesReport {
    /// The file's judgement, torch's code in the place of the real side (`real` holds its
    /// distribution, `sim` the model's).
    #[serde(flatten)]
    pub judged: FileReport,
    /// The seeds whose signatures differ between the planes.
    pub seeds_differing: Vec<SeedDifference>,
}

/// Why a file is not compared: named fixes exist only in the model, and torch reads its
/// rendezvous timeouts as whole seconds.
pub fn refusal(scenario: &Scenario) -> Option<String> {
    crate::torch_plane::argv::refusal(scenario)
}

/// One run's signature on one plane.
fn signature_of(
    scenario: &Scenario,
    file: &str,
    seed: u64,
    options: &RunOptions,
) -> Result<Signature, HarnessFailure> {
    let report = Run::of(scenario, file)
        .seed(seed)
        .options(options.clone())
        .report()?;
    Ok(signature::from_report(&report, scenario.job.steps))
}

/// Runs `seeds` of `file` on both planes and judges them.
pub fn compare_file(
    scenario: &Scenario,
    file: &str,
    seeds: std::ops::Range<u64>,
    plane: &TorchPlane,
) -> Result<PlanesReport, HarnessFailure> {
    let model_options = RunOptions::default();
    let torch_options = RunOptions {
        torch: Some(plane.clone()),
        ..RunOptions::default()
    };
    let mut model = Vec::new();
    let mut torch = Vec::new();
    let mut seeds_differing = Vec::new();
    for seed in seeds {
        let m = signature_of(scenario, file, seed, &model_options)?;
        let t = signature_of(scenario, file, seed, &torch_options)?;
        if m != t {
            seeds_differing.push(SeedDifference {
                seed,
                model: m.compact(),
                torch: t.compact(),
            });
        }
        model.push(m);
        torch.push(t);
    }
    let judged = judge_file(file, Distribution::of(torch), Distribution::of(model));
    Ok(PlanesReport {
        judged,
        seeds_differing,
    })
}
