//! `trainsim fuzz --confirm N --python PY [--confirm-runs n]`: after a campaign, the
//! representative repro of each of the first N new root causes (in the summary's order) runs
//! on the real torch through `trainsim conform`'s machinery (`conform::confirm`), and each
//! root cause gets a label: `confirmed on torch X.Y.Z (k of n runs)`, `not reproduced (n
//! runs)` or `cannot run on torch: <reason>`. Python starts only for a repro this machine
//! can run; a missing PY is refused before the campaign.

use crate::conform::confirm::{self, CannotRun, Finding, Label, RunResult, Target};
use crate::conform::real::{self, RealError, TorchInfo};
use crate::fuzz::root_causes::{self, RootCause};
use crate::fuzz::summary::Summary;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Simulator seeds of the backend rule, besides the repro's own.
pub const RULE_SEEDS: std::ops::Range<u64> = 0..20;

/// What `--confirm` asks for.
#[derive(Debug, Clone)]
pub struct ConfirmArgs {
    /// How many new root causes, the first in the summary's order.
    pub causes: u32,
    pub python: PathBuf,
    /// Real runs per root cause.
    pub runs: u32,
}

/// One root cause's confirmation, as `summary.json` keeps it (`root_causes[].confirm`).
#[derive(Debug, Clone, Serialize)]
pub struct Confirmation {
    pub label: String,
    /// The representative repro, relative to the summary's directory.
    pub repro: String,
    pub seed: u64,
    /// How the file run on both sides differs from the repro (gloo for NCCL, fewer workers,
    /// this machine's start times, a shorter limit).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub run_here_with: Vec<String>,
    /// What a real run had to show.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected: Option<Target>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<RunResult>,
    /// The real runs' logs, relative to the summary's directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logs: Option<String>,
}

/// A failure that ends the command: its message (naming the flag or file) and exit code.
pub type Failure = (String, i32);

/// Refuses a `--python` that does not exist, before any case runs (no Python starts).
pub fn check_python(args: &ConfirmArgs) -> Result<(), String> {
    if args.python.is_file() {
        Ok(())
    } else {
        Err(format!(
            "--python {}: no such file (conformance/setup prints the Python with torch)",
            args.python.display()
        ))
    }
}

/// Confirms the first `args.causes` new root causes of `summary` (written in `out`), in the
/// summary's order; returns each one's confirmation by cause.
pub fn confirm_root_causes(
    summary: &Summary,
    out: &Path,
    args: &ConfirmArgs,
) -> Result<BTreeMap<String, Confirmation>, Failure> {
    let mut torch: Option<(TorchInfo, PathBuf)> = None;
    let mut done = BTreeMap::new();
    let causes: Vec<RootCause> = root_causes::root_causes(summary)
        .into_iter()
        .filter(RootCause::is_new)
        .take(args.causes as usize)
        .collect();
    for cause in causes {
        let Some(entry) = root_causes::representative(summary, &cause.cause) else {
            continue;
        };
        let repro = entry.repro.clone().unwrap_or_default();
        let c = confirm_one(out, &repro, &entry.kinds, args, &mut torch)?;
        done.insert(cause.cause.clone(), c);
    }
    Ok(done)
}

/// Plans one repro and, when this machine can run it, runs it.
fn confirm_one(
    out: &Path,
    repro: &str,
    kinds: &[String],
    args: &ConfirmArgs,
    torch: &mut Option<(TorchInfo, PathBuf)>,
) -> Result<Confirmation, Failure> {
    let path = out.join(repro);
    let scenario = crate::scenario::load(&path).map_err(|e| (e.to_string(), 2))?;
    let finding = Finding {
        seed: scenario.seed,
        scenario,
        kinds: kinds.to_vec(),
    };
    let seeds: Vec<u64> = RULE_SEEDS.collect();
    let file = path.display().to_string();
    let mut c = Confirmation {
        label: String::new(),
        repro: repro.to_owned(),
        seed: finding.seed,
        run_here_with: Vec::new(),
        expected: None,
        runs: Vec::new(),
        logs: None,
    };
    let plan = match confirm::plan(&finding, &file, &seeds).map_err(|e| (e.to_string(), 3))? {
        Ok(plan) => plan,
        Err(cannot) => {
            c.label = cannot_run(&cannot).to_string();
            return Ok(c);
        }
    };
    if torch.is_none() {
        *torch = Some(start_torch(args)?);
    }
    let (info, driver) = torch.as_ref().expect("started above");
    let stem = Path::new(repro)
        .file_stem()
        .map_or("repro".into(), |s| s.to_string_lossy().into_owned());
    let logs = format!("confirm/{stem}");
    let dir = out.join(&logs);
    let written = confirm::write_prepared(&plan.prepared.scenario, &dir).map_err(|m| (m, 3))?;
    let ran = confirm::run_real(
        &plan,
        (&args.python, driver),
        &written,
        &dir,
        args.runs,
        |k| eprintln!("fuzz --confirm: {repro} real run {}/{}", k + 1, args.runs),
    );
    c.run_here_with = plan.prepared.notes.clone();
    c.expected = Some(plan.target.clone());
    c.logs = Some(logs);
    match ran {
        Ok(runs) => {
            let shown = runs.iter().filter(|r| r.shows).count() as u32;
            c.label = confirm::label_of(&info.version, shown, args.runs).to_string();
            c.runs = runs;
        }
        Err(RealError::Refused(reason)) => {
            c.label = Label::CannotRun { reason }.to_string();
        }
        Err(e) => return Err((e.to_string(), 2)),
    }
    Ok(c)
}

fn cannot_run(cannot: &CannotRun) -> Label {
    Label::CannotRun {
        reason: cannot.reason(),
    }
}

/// Asks `--python` for its torch, and finds the driver: the first time a repro needs them.
fn start_torch(args: &ConfirmArgs) -> Result<(TorchInfo, PathBuf), Failure> {
    let located = |e: RealError| (format!("--python {}: {e}", args.python.display()), 2);
    let info = real::torch_info(&args.python).map_err(located)?;
    let driver = real::driver_path(None).map_err(|e| (e.to_string(), 2))?;
    Ok((info, driver))
}

/// The campaign text's section: one label per confirmed root cause, with what ran.
pub fn render(
    confirmed: &BTreeMap<String, Confirmation>,
    order: &[RootCause],
    runs: u32,
    out_dir: &Path,
) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "confirm on the real torch ({runs} runs each; the first new root causes):"
    );
    for cause in order {
        let Some(c) = confirmed.get(&cause.cause) else {
            continue;
        };
        let _ = writeln!(out, "  {}: {}", cause.cause, c.label);
        let repro = out_dir.join(&c.repro);
        let _ = writeln!(out, "      repro: {} (seed {})", repro.display(), c.seed);
        for note in &c.run_here_with {
            let _ = writeln!(out, "      {note}");
        }
        if let Some(t) = &c.expected {
            let observed = if t.observable.is_empty() {
                String::new()
            } else {
                format!("; the join lines showing {}", t.observable.join(", "))
            };
            let _ = writeln!(
                out,
                "      expected: {}{observed}",
                confirm::describe_coarse(&t.coarse)
            );
        }
        for (k, r) in c.runs.iter().enumerate() {
            let shows = if r.shows { "shows it" } else { "does not" };
            let _ = writeln!(out, "      run {}: {shows}: {}", k + 1, r.signature);
        }
        if let Some(logs) = &c.logs {
            let _ = writeln!(out, "      logs: {}", out_dir.join(logs).display());
        }
    }
    out
}
