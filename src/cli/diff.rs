//! `trainsim diff A B`: what changed between two runs. Each side is a JSON report (a line
//! of `run --format json`) or a scenario file, run here with its seed (or `--seed`, and
//! `--seed-b` for the second); two simulated runs also show where their traces part.
//! Exit codes as diff(1): 0 the same, 1 they differ, 2 bad input, 3 a run failed to run.

use crate::report::diff::report_lines;
use crate::runner::{first_divergence, Run};
use crate::scenario;
use crate::trace::Trace;
use std::path::{Path, PathBuf};

/// `trainsim diff` arguments.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  trainsim diff a.json b.json\n  \
    trainsim diff scenarios/rank0_dies_stale_master.toml scenarios/rank0_dies_stale_master_fixed.toml\n  \
    trainsim diff scenarios/world_size_race.toml scenarios/world_size_race.toml --seed 1 --seed-b 2")]
pub struct DiffArgs {
    /// The first run: a JSON report file or a scenario file.
    pub a: PathBuf,
    /// The second run: a JSON report file or a scenario file.
    pub b: PathBuf,
    /// The seed of scenario runs (default: each file's own).
    #[arg(long)]
    pub seed: Option<u64>,
    /// The second scenario run's seed, when it differs from the first's.
    #[arg(long)]
    pub seed_b: Option<u64>,
}

/// The most bytes a JSON report file may hold.
const REPORT_BYTES_MAX: u64 = 64 << 20;

/// One side: its report as JSON, and its trace when it was simulated here.
struct Side {
    report: serde_json::Value,
    trace: Option<Trace>,
}

/// Runs the command; returns the exit code.
pub fn execute(args: DiffArgs) -> i32 {
    let seed_b = args.seed_b.or(args.seed);
    let sides = load(&args.a, args.seed).and_then(|a| Ok((a, load(&args.b, seed_b)?)));
    let (a, b) = match sides {
        Ok(sides) => sides,
        Err((code, message)) => {
            eprintln!("error: {message}");
            return code;
        }
    };
    outln!("A {}", label(&a.report));
    outln!("B {}", label(&b.report));
    let mut lines = report_lines(&a.report, &b.report);
    if let (Some(ta), Some(tb)) = (&a.trace, &b.trace) {
        if let Some(d) = first_divergence(ta, tb) {
            lines.push(format!(
                "first different event (#{}):\n  A {}\n  B {}",
                d.index, d.first, d.second
            ));
        }
    } else if a.report["trace_hash"] != b.report["trace_hash"] {
        // A report holds no events: the hash says whether the runs differ at all.
        lines.push(
            "the traces differ (another trace hash); diff the scenario files for the first \
             different event"
                .to_owned(),
        );
    }
    if lines.is_empty() {
        outln!("no differences in outcome, steps, goodput, rounds, agents, verdicts or events");
        return 0;
    }
    for line in lines {
        outln!("{line}");
    }
    1
}

/// The run's file, seed and trace hash.
fn label(report: &serde_json::Value) -> String {
    let text = |k: &str| report[k].as_str().unwrap_or("?").to_owned();
    format!(
        "{} --seed {} (trace {})",
        text("file"),
        report["seed"],
        text("trace_hash").get(..16).unwrap_or("?")
    )
}

/// Reads a JSON report, or runs a scenario file. `Err` holds the exit code and message.
fn load(path: &Path, seed: Option<u64>) -> Result<Side, (i32, String)> {
    let is_json = path.extension().is_some_and(|e| e == "json");
    if is_json {
        return read_report(path).map_err(|m| (2, format!("{}: {m}", path.display())));
    }
    let scenario = scenario::load(path).map_err(|e| (2, e.to_string()))?;
    let file = path.display().to_string();
    let run = Run::of(&scenario, &file);
    let run = match seed {
        Some(seed) => run.seed(seed),
        None => run,
    };
    let (report, trace) = run.traced().map_err(|e| (3, e.to_string()))?;
    let report = serde_json::to_value(&report).map_err(|e| (3, e.to_string()))?;
    Ok(Side {
        report,
        trace: Some(trace),
    })
}

/// The one report a file holds (`run --format json` of one run).
fn read_report(path: &Path) -> Result<Side, String> {
    let size = std::fs::metadata(path)
        .map_err(|e| format!("cannot read: {e}"))?
        .len();
    if size > REPORT_BYTES_MAX {
        return Err(format!("larger than {REPORT_BYTES_MAX} bytes"));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read: {e}"))?;
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let [line] = lines.as_slice() else {
        return Err(format!(
            "holds {} lines; diff takes one report (`trainsim run FILE --format json` of one seed)",
            lines.len()
        ));
    };
    let report: serde_json::Value =
        serde_json::from_str(line).map_err(|e| format!("not a JSON report: {e}"))?;
    if report.get("trace_hash").is_none() || report.get("agents").is_none() {
        return Err("not a trainsim run report (no trace_hash or agents)".into());
    }
    Ok(Side {
        report,
        trace: None,
    })
}
