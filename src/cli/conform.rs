//! `trainsim conform FILE... --python PATH`: runs each scenario on real torchrun (through
//! `conformance/driver.py`) and over seeds in the simulator, and compares their signatures.
//!
//! Exit codes: 0 every compared file agrees, 1 a disagreement, 2 bad input (an unreadable
//! scenario, a file the real machine cannot run, no torch at PATH, a failed driver).

use super::run::{parse_seed_range, SeedRange};
use crate::conform::compare::Distribution;
use crate::conform::real::{self, TorchInfo};
use crate::conform::{self, FileReport};
use crate::scenario::{self, Scenario};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Arguments of `trainsim conform`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  conformance/setup    # prints the --python path\n  trainsim conform conformance/scenarios/*.toml --python ~/.cache/trainsim/torch/bin/python\n  trainsim conform conformance/scenarios/sigterm.toml --python PY --runs 5 --json conform.json"
)]
pub struct ConformArgs {
    /// Scenario files (TOML) with `[job] backend = "gloo"`.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// The Python interpreter with torch (`conformance/setup` prints it).
    #[arg(long, value_name = "PATH")]
    pub python: PathBuf,
    /// Real torch runs per file.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub runs: u32,
    /// Simulator seeds: `A..B` runs A to B-1, `A..=B` includes B.
    #[arg(long, value_name = "A..B", value_parser = parse_seed_range, default_value = "0..20")]
    pub seeds: SeedRange,
    /// Write the results as JSON to this file (for CI artefacts).
    #[arg(long, value_name = "OUT")]
    pub json: Option<PathBuf>,
    /// Keep the real runs' logs here (default: a fresh directory under the temp dir).
    #[arg(long, value_name = "DIR")]
    pub logs: Option<PathBuf>,
    /// Reuse real runs already in `--logs` (their `signature.json`) instead of running again.
    #[arg(long, requires = "logs")]
    pub reuse: bool,
    /// The driver script (default: `conformance/driver.py`).
    #[arg(long, value_name = "PATH")]
    pub driver: Option<PathBuf>,
}

/// The JSON form.
#[derive(Debug, Serialize)]
struct Output<'a> {
    torch: &'a TorchInfo,
    runs: u32,
    seeds: String,
    compared: usize,
    /// Files whose most common signature agrees (the mode rule).
    agreed: usize,
    /// Files that agree at every level: the mode, the coarse outcome and, when racy, the
    /// distribution test (the text's headline).
    agreed_every_level: usize,
    files: &'a [FileReport],
}

/// Runs the command; returns the exit code.
pub fn execute(args: ConformArgs) -> i32 {
    match execute_inner(&args) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            2
        }
    }
}

fn execute_inner(args: &ConformArgs) -> Result<i32, String> {
    let mut scenarios: Vec<(PathBuf, Scenario)> = Vec::new();
    for path in &args.files {
        scenarios.push((
            path.clone(),
            scenario::load(path).map_err(|e| e.to_string())?,
        ));
    }
    let torch = real::torch_info(&args.python).map_err(|e| e.to_string())?;
    let driver = real::driver_path(args.driver.as_deref()).map_err(|e| e.to_string())?;
    for (path, s) in &scenarios {
        if !conform::is_fix_twin(s) {
            real::check(&args.python, &driver, path).map_err(|e| e.to_string())?;
        }
    }
    let logs = args.logs.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("trainsim-conform-{}", std::process::id()))
    });
    outln!(
        "conform: torch {} ({}), {} real runs and seeds {}..{} per file; logs in {}",
        torch.version,
        torch.date,
        args.runs,
        args.seeds.start,
        args.seeds.end_exclusive,
        logs.display()
    );
    let mut real_by_file: BTreeMap<PathBuf, Distribution> = BTreeMap::new();
    let mut reports = Vec::new();
    // Compared files first, so every fix twin finds its unfixed twin's real runs.
    let (twins, compared): (Vec<_>, Vec<_>) =
        scenarios.iter().partition(|(_, s)| conform::is_fix_twin(s));
    for (path, s) in compared {
        let real = real_runs(args, &driver, path, &logs)?;
        let sim = simulate(args, s, path)?;
        real_by_file.insert(path.clone(), real.clone());
        let report = conform::judge_file(&path.display().to_string(), real, sim);
        print_report(&report, &torch, args);
        reports.push(report);
    }
    for (path, s) in twins {
        let base = conform::unfixed_twin(path).and_then(|b| real_by_file.get(&b));
        let report =
            conform::judge_twin(&path.display().to_string(), base, simulate(args, s, path)?);
        print_report(&report, &torch, args);
        reports.push(report);
    }
    finish(args, &torch, &reports)
}

/// The summary line, the JSON file, the exit code.
fn finish(args: &ConformArgs, torch: &TorchInfo, reports: &[FileReport]) -> Result<i32, String> {
    let compared = reports
        .iter()
        .filter(|r| r.verdict == "agree" || r.verdict == "disagree")
        .count();
    let agreed = reports.iter().filter(|r| r.verdict == "agree").count();
    let agreed_every_level = reports.iter().filter(|r| r.headline() == "agree").count();
    outln!(
        "conform: {agreed_every_level} of {compared} files agree with torch {} at every level",
        torch.version
    );
    let judged: Vec<&FileReport> = reports
        .iter()
        .filter(|r| r.verdict == "agree" || r.verdict == "disagree")
        .collect();
    let coarse = judged.iter().filter(|r| r.levels.coarse == "agree").count();
    let racy: Vec<bool> = judged
        .iter()
        .filter_map(|r| r.levels.distribution_agrees())
        .collect();
    let racy_agreed = racy.iter().filter(|a| **a).count();
    outln!(
        "conform: {coarse} of {compared} agree on the coarse outcome; {racy_agreed} of {} racy files pass the distribution test (p >= {})",
        racy.len(),
        conform::levels::P_VALUE_MIN
    );
    if let Some(path) = &args.json {
        let output = Output {
            torch,
            runs: args.runs,
            seeds: format!("{}..{}", args.seeds.start, args.seeds.end_exclusive),
            compared,
            agreed,
            agreed_every_level,
            files: reports,
        };
        let text = serde_json::to_string_pretty(&output).map_err(|e| e.to_string())?;
        super::write_atomically(path, text.as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(if reports.iter().any(FileReport::disagrees) {
        1
    } else {
        0
    })
}

/// `--runs` real runs of one file, each in `logs/<stem>/run-<k>`.
fn real_runs(
    args: &ConformArgs,
    driver: &Path,
    path: &Path,
    logs: &Path,
) -> Result<Distribution, String> {
    let stem = path
        .file_stem()
        .map_or("scenario".into(), |s| s.to_string_lossy().into_owned());
    let mut signatures = Vec::new();
    for k in 0..args.runs {
        let out = logs.join(&stem).join(format!("run-{k}"));
        if args.reuse {
            if let Some(saved) = real::saved_signature(&out) {
                signatures.push(saved);
                continue;
            }
        }
        if out.exists() {
            std::fs::remove_dir_all(&out)
                .map_err(|e| format!("cannot clear {}: {e}", out.display()))?;
        }
        std::fs::create_dir_all(&out)
            .map_err(|e| format!("cannot create {}: {e}", out.display()))?;
        eprintln!(
            "conform: {} real run {}/{}",
            path.display(),
            k + 1,
            args.runs
        );
        signatures.push(real::run(&args.python, driver, path, &out).map_err(|e| e.to_string())?);
    }
    Ok(Distribution::of(signatures))
}

fn simulate(args: &ConformArgs, s: &Scenario, path: &Path) -> Result<Distribution, String> {
    let seeds = args.seeds.start..args.seeds.end_exclusive;
    conform::sim_distribution(s, &path.display().to_string(), seeds).map_err(|e| e.to_string())
}

fn print_report(report: &FileReport, torch: &TorchInfo, args: &ConformArgs) {
    outln!("{}: {}", report.file, report.headline());
    let real_label = if report.verdict.starts_with("fix") {
        "real torch (its unfixed twin)"
    } else {
        "real torch"
    };
    if report.verdict != "sim-only" {
        outln!(
            "  {real_label} {}, {} runs:",
            torch.version,
            report.real.runs()
        );
        print_distribution(&report.real);
    }
    outln!(
        "  simulator, seeds {}..{}:",
        args.seeds.start,
        args.seeds.end_exclusive
    );
    print_distribution(&report.sim);
    for d in &report.differences {
        outln!("  differs: {d}");
    }
    if report.verdict != "sim-only" {
        let distribution = match report.levels.distribution_p {
            Some(p) => format!("; racy, distribution test p = {p:.3}"),
            None => String::new(),
        };
        outln!("  coarse outcome: {}{distribution}", report.levels.coarse);
    }
}

fn print_distribution(d: &Distribution) {
    for e in &d.entries {
        outln!("    {:>3}x {}", e.count, e.signature.compact());
    }
}
