//! `trainsim planes FILE... --torch PYTHON`: every file's seeds run by the Rust model and by
//! torch's own elastic code in the same simulated world, and where the two differ.
//!
//! Exit codes: 0 every compared file agrees on its coarse outcome, 1 one does not, 2 bad
//! input (an unreadable scenario, no torch at PYTHON). Files only the model can run (named
//! fixes) are listed as skipped, with the reason.

use super::run::{parse_seed_range, SeedRange};
use crate::conform::planes::{self, PlanesReport};
use crate::scenario;
use crate::torch_plane::{self, TorchInfo, TorchPlane};
use serde::Serialize;
use std::path::PathBuf;

/// Arguments of `trainsim planes`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  trainsim planes scenarios/*.toml --torch ~/.cache/trainsim/torch/bin/python --seeds 0..20\n  trainsim planes scenarios/late_joiner_next_round.toml --torch PY --torch-elastic-src ~/pytorch --json planes.json"
)]
pub struct PlanesArgs {
    /// Scenario files (TOML).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// The Python interpreter whose torch runs as the second control plane.
    #[arg(long, value_name = "PYTHON")]
    pub torch: PathBuf,
    /// A torch checkout whose `torch/distributed/elastic` Python is laid over the installed torch.
    #[arg(long, value_name = "DIR")]
    pub torch_elastic_src: Option<PathBuf>,
    /// Seeds, each run once by each plane: `A..B` runs A to B-1, `A..=B` includes B.
    #[arg(long, value_name = "A..B", value_parser = parse_seed_range, default_value = "0..20")]
    pub seeds: SeedRange,
    /// Write the results as JSON to this file.
    #[arg(long, value_name = "OUT")]
    pub json: Option<PathBuf>,
}

/// The JSON form.
#[derive(Debug, Serialize)]
struct Output<'a> {
    torch: &'a TorchInfo,
    seeds: String,
    compared: usize,
    coarse_agreed: usize,
    signature_agreed: usize,
    skipped: &'a [(String, String)],
    files: &'a [PlanesReport],
}

/// Runs the command; returns the exit code.
pub fn execute(args: PlanesArgs) -> i32 {
    match execute_inner(&args) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            2
        }
    }
}

fn execute_inner(args: &PlanesArgs) -> Result<i32, String> {
    let mut scenarios = Vec::new();
    for path in &args.files {
        scenarios.push((
            path.clone(),
            scenario::load(path).map_err(|e| e.to_string())?,
        ));
    }
    let plane = TorchPlane {
        python: args.torch.clone(),
        elastic_src: args.torch_elastic_src.clone(),
    };
    let torch = torch_plane::probe(&plane).map_err(|e| e.to_string())?;
    let seeds = args.seeds.start..args.seeds.end_exclusive;
    outln!(
        "planes: the model against torch {} ({}), seeds {}..{}",
        torch.torch_version,
        plane.python.display(),
        seeds.start,
        seeds.end
    );
    let mut reports = Vec::new();
    let mut skipped = Vec::new();
    for (path, s) in &scenarios {
        let file = path.display().to_string();
        if let Some(why) = planes::refusal(s) {
            outln!("{file}: skipped ({why})");
            skipped.push((file, why));
            continue;
        }
        let report =
            planes::compare_file(s, &file, seeds.clone(), &plane).map_err(|e| e.to_string())?;
        print_report(&report);
        reports.push(report);
    }
    finish(args, &torch, &reports, &skipped)
}

fn finish(
    args: &PlanesArgs,
    torch: &TorchInfo,
    reports: &[PlanesReport],
    skipped: &[(String, String)],
) -> Result<i32, String> {
    let coarse = reports
        .iter()
        .filter(|r| r.judged.levels.coarse == "agree")
        .count();
    let signature = reports.iter().filter(|r| signature_agrees(r)).count();
    outln!(
        "planes: {coarse} of {} files agree on the coarse outcome, {signature} on the full signature distribution; {} skipped",
        reports.len(),
        skipped.len()
    );
    if let Some(path) = &args.json {
        let output = Output {
            torch,
            seeds: format!("{}..{}", args.seeds.start, args.seeds.end_exclusive),
            compared: reports.len(),
            coarse_agreed: coarse,
            signature_agreed: signature,
            skipped,
            files: reports,
        };
        let text = serde_json::to_string_pretty(&output).map_err(|e| e.to_string())?;
        super::write_atomically(path, text.as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(if coarse == reports.len() { 0 } else { 1 })
}

/// The full signature distribution agrees: the mode rule, and a racy file's distribution test.
fn signature_agrees(report: &PlanesReport) -> bool {
    report.judged.headline() == "agree"
}

fn print_report(report: &PlanesReport) {
    let judged = &report.judged;
    let distribution = match judged.levels.distribution_p {
        Some(p) => format!("; racy, distribution test p = {p:.3}"),
        None => String::new(),
    };
    let headline = judged.headline();
    outln!("{}: {headline}", judged.file);
    outln!("  torch's own code, {} seeds:", judged.real.runs());
    for e in &judged.real.entries {
        outln!("    {:>3}x {}", e.count, e.signature.compact());
    }
    outln!("  model, {} seeds:", judged.sim.runs());
    for e in &judged.sim.entries {
        outln!("    {:>3}x {}", e.count, e.signature.compact());
    }
    outln!(
        "  coarse outcome: {}; most common signature: {}{distribution}",
        judged.levels.coarse,
        judged.verdict
    );
    for d in report.seeds_differing.iter().take(3) {
        outln!("  seed {}: model  {}", d.seed, d.model);
        outln!("  seed {}: torch  {}", d.seed, d.torch);
    }
}
