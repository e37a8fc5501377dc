//! `trainsim conform FILE... --python PATH`: runs each scenario on real torchrun (through
//! `conformance/driver.py`) and over seeds in the simulator, and compares their signatures.
//! Both sides run the file as this machine can (`conform::confirm::prepare`): a file it
//! cannot run is named fault by fault before Python starts, and the others still run.
//!
//! Exit codes: 0 every compared file agrees, 1 a disagreement, 2 bad input (an unreadable
//! scenario, a file the real machine cannot run, no torch at PATH, a failed driver).

use super::run::{parse_seed_range, SeedRange};
use crate::conform::compare::Distribution;
use crate::conform::confirm::{self, CannotRun};
use crate::conform::real::{self, TorchInfo};
use crate::conform::{self, FileReport};
use crate::scenario::{self, Scenario};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Arguments of `trainsim conform`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  conformance/setup    # prints the --python path\n  trainsim conform conformance/scenarios/*.toml --python ~/.cache/trainsim/torch/bin/python\n  trainsim conform conformance/scenarios/sigterm.toml --python PY --runs 5 --json conform.json\n  trainsim conform findings/repro/fuzz-rendezvous-seed2-case45.toml --python PY   # a fuzz repro"
)]
pub struct ConformArgs {
    /// Scenario files (TOML): the conformance suite's, or fuzz repros. A file asking for
    /// NCCL runs with gloo when the model's verdict is the same on both backends.
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
    /// Files this machine cannot run, each with every reason.
    refused: Vec<Refused>,
}

/// A file this machine cannot run.
#[derive(Debug, Serialize)]
struct Refused {
    file: String,
    reason: String,
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

/// One file of the invocation, as this machine runs it.
struct Planned {
    path: PathBuf,
    /// The file itself for a fix twin (the simulator alone runs it), else what runs here.
    scenario: Scenario,
    /// How the file run here differs from the one given (empty when it is the same).
    notes: Vec<String>,
    ran_with_gloo: bool,
    twin: bool,
}

fn execute_inner(args: &ConformArgs) -> Result<i32, String> {
    let mut scenarios: Vec<(PathBuf, Scenario)> = Vec::new();
    for path in &args.files {
        scenarios.push((
            path.clone(),
            scenario::load(path).map_err(|e| e.to_string())?,
        ));
    }
    // What runs here is decided before Python starts: a refused file never needs torch.
    let (planned, refused) = plan_files(args, scenarios)?;
    for (path, cannot) in &refused {
        print_refusal(path, cannot);
    }
    if planned.iter().all(|p| p.twin) && !refused.is_empty() {
        return Ok(2);
    }
    let torch = real::torch_info(&args.python).map_err(|e| e.to_string())?;
    let driver = real::driver_path(args.driver.as_deref()).map_err(|e| e.to_string())?;
    let logs = args.logs.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("trainsim-conform-{}", std::process::id()))
    });
    let mut run_files = BTreeMap::new();
    for p in planned.iter().filter(|p| !p.twin) {
        let file = run_file(p, &logs)?;
        real::check(&args.python, &driver, &file).map_err(|e| e.to_string())?;
        run_files.insert(p.path.clone(), file);
    }
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
    let (twins, compared): (Vec<&Planned>, Vec<&Planned>) = planned.iter().partition(|p| p.twin);
    for p in compared {
        let real = real_runs(args, &driver, (&p.path, &run_files[&p.path]), &logs)?;
        let sim = simulate(args, &p.scenario, &p.path)?;
        real_by_file.insert(p.path.clone(), real.clone());
        let mut report = conform::judge_file(&p.path.display().to_string(), real, sim);
        report.notes = p.notes.clone();
        print_report(&report, &torch, args, p.ran_with_gloo);
        reports.push(report);
    }
    for p in twins {
        let base = conform::unfixed_twin(&p.path).and_then(|b| real_by_file.get(&b));
        let sim = simulate(args, &p.scenario, &p.path)?;
        let report = conform::judge_twin(&p.path.display().to_string(), base, sim);
        print_report(&report, &torch, args, false);
        reports.push(report);
    }
    let code = finish(args, &torch, &reports, &refused)?;
    Ok(if refused.is_empty() { code } else { 2 })
}

/// A file this machine cannot run, with why.
type RefusedFile = (PathBuf, CannotRun);

/// Each file as this machine runs it (`confirm::prepare`: refusals, the localhost variant,
/// the measured backend rule over `--seeds`), and the files it cannot run.
fn plan_files(
    args: &ConformArgs,
    scenarios: Vec<(PathBuf, Scenario)>,
) -> Result<(Vec<Planned>, Vec<RefusedFile>), String> {
    let seeds: Vec<u64> = (args.seeds.start..args.seeds.end_exclusive).collect();
    let mut planned = Vec::new();
    let mut refused = Vec::new();
    for (path, s) in scenarios {
        if conform::is_fix_twin(&s) {
            planned.push(Planned {
                path,
                scenario: s,
                notes: Vec::new(),
                ran_with_gloo: false,
                twin: true,
            });
            continue;
        }
        let file = path.display().to_string();
        match confirm::prepare(&s, &file, &seeds).map_err(|e| e.to_string())? {
            Ok(p) => planned.push(Planned {
                path,
                scenario: p.scenario,
                notes: p.notes,
                ran_with_gloo: p.ran_with_gloo,
                twin: false,
            }),
            Err(cannot) => refused.push((path, cannot)),
        }
    }
    Ok((planned, refused))
}

/// The file the driver runs: the given one when it runs here as it is, else the file run
/// here, written as `<logs>/<stem>/localhost.toml`.
fn run_file(p: &Planned, logs: &Path) -> Result<PathBuf, String> {
    if p.notes.is_empty() {
        return Ok(p.path.clone());
    }
    confirm::write_prepared(&p.scenario, &logs.join(stem_of(&p.path)))
}

fn stem_of(path: &Path) -> String {
    path.file_stem()
        .map_or("scenario".into(), |s| s.to_string_lossy().into_owned())
}

/// One line per thing this machine cannot run of `path`, each ending with its reason.
fn print_refusal(path: &Path, cannot: &CannotRun) {
    match cannot {
        CannotRun::Refused(refusals) => {
            for r in refusals {
                eprintln!("error: {}: cannot run on torch: {r}", path.display());
            }
        }
        CannotRun::Measured(reason) => {
            eprintln!("error: {}: cannot run on torch: {reason}", path.display())
        }
    }
}

/// The summary line, the JSON file, the exit code.
fn finish(
    args: &ConformArgs,
    torch: &TorchInfo,
    reports: &[FileReport],
    refused: &[RefusedFile],
) -> Result<i32, String> {
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
            refused: refused
                .iter()
                .map(|(path, cannot)| Refused {
                    file: path.display().to_string(),
                    reason: cannot.reason(),
                })
                .collect(),
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

/// `--runs` real runs of one file (`path`, run as `file`), each in `logs/<stem>/run-<k>`.
fn real_runs(
    args: &ConformArgs,
    driver: &Path,
    (path, file): (&Path, &Path),
    logs: &Path,
) -> Result<Distribution, String> {
    let stem = stem_of(path);
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
        signatures.push(
            real::run(&args.python, driver, file, &out)
                .map_err(|e| e.to_string())?
                .signature,
        );
    }
    Ok(Distribution::of(signatures))
}

fn simulate(args: &ConformArgs, s: &Scenario, path: &Path) -> Result<Distribution, String> {
    let seeds = args.seeds.start..args.seeds.end_exclusive;
    conform::sim_distribution(s, &path.display().to_string(), seeds).map_err(|e| e.to_string())
}

fn print_report(report: &FileReport, torch: &TorchInfo, args: &ConformArgs, gloo: bool) {
    let gloo = if gloo {
        format!("; {}", confirm::RAN_WITH_GLOO)
    } else {
        String::new()
    };
    outln!("{}: {}{gloo}", report.file, report.headline());
    let changes: Vec<&String> = report
        .notes
        .iter()
        .filter(|n| n.as_str() != confirm::RAN_WITH_GLOO)
        .collect();
    if !changes.is_empty() {
        let changes: Vec<&str> = changes.iter().map(|n| n.as_str()).collect();
        outln!("  run here with {}", changes.join("; "));
    }
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
