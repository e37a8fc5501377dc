//! `trainsim fuzz`: a campaign over drawn scenarios (every case of `--cases`, over `--jobs`
//! threads), findings bucketed by signature and triaged against torch's known behaviours,
//! a minimal repro per signature, a coverage table and `--out/summary.json`; and
//! `trainsim fuzz merge DIR...`, which merges the summaries of case ranges.
//!
//! Exit codes: 0 no new signature, 1 a new signature was found, 2 bad arguments or
//! unreadable input, 3 output could not be written.

use super::fuzz_confirm::{self, ConfirmArgs, Confirmation};
use crate::fuzz::campaign::{self, Campaign, KnownMode};
use crate::fuzz::summary::{self, Summary};
use crate::fuzz::{self, mutants, parallel};
use indicatif::ProgressBar;
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// Arguments of `trainsim fuzz`.
#[derive(Debug, clap::Args)]
#[command(
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    after_help = "Mutants (planted bugs, --mutant):\n  late-joiner-joins-complete-round, rank-collision, no-heartbeat-expiry (rendezvous)\n  sampler-off-by-one (job)\n  reader-double-publish (reader)\n\nExamples:\n  trainsim fuzz --target rendezvous --cases 10000 --seed 1 --known skip --out findings/\n  trainsim fuzz --target rendezvous --cases 0..5000 --seed 1 --out ci-0 && trainsim fuzz --target rendezvous --cases 5000..10000 --seed 1 --out ci-1\n  trainsim fuzz merge ci-0 ci-1 --out merged\n  trainsim fuzz --target rendezvous --cases 2000 --seed 1 --corpus corpus/ --out findings/\n  trainsim fuzz --target rendezvous --cases 300 --seed 1 --mutant rank-collision --out /tmp/f\n  trainsim fuzz --target rendezvous --cases 300 --seed 1 --out findings/ --confirm 3 --python ~/.cache/trainsim/torch/bin/python"
)]
pub struct FuzzArgs {
    #[command(subcommand)]
    pub command: Option<FuzzCommand>,
    /// What to fuzz: the rendezvous (cluster shapes, node and network faults), the job
    /// (data, samplers, GPUs, job faults) or the reader (data faults).
    #[arg(long, value_enum, required = true)]
    pub target: Option<Target>,
    /// Cases to run: `N` (cases 0..N) or a range `A..B` / `A..=B` of case indices, so a
    /// campaign can be split over CI jobs and merged.
    #[arg(long, default_value = "100", value_parser = parse_cases, value_name = "N|A..B")]
    pub cases: Range<u64>,
    /// Seeds the campaign: case i draws from a generator seeded by (seed, i) alone.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Threads to run cases on (default: the available cores). Results do not depend on it.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub jobs: Option<u64>,
    /// Switch on a planted bug and count only what it breaks (see the list below).
    #[arg(long, value_name = "M")]
    pub mutant: Option<String>,
    /// Known torch behaviours: `report` lists them with their fix and issue; `skip` leaves
    /// them out of the summary.
    #[arg(long, value_enum, default_value = "report")]
    pub known: KnownArg,
    /// Keep cases that reach a coverage situation no earlier case reached in DIR, and draw
    /// one case in four by mutating them.
    #[arg(long, value_name = "DIR")]
    pub corpus: Option<PathBuf>,
    /// Write the violations into `expect.violations` (replay passes while the bug is
    /// there), for committing a documented bug under `scenarios/`.
    #[arg(long)]
    pub as_known_bug: bool,
    /// Directory for `summary.json` and the repro files (`repro/`).
    #[arg(long, value_name = "DIR", required = true)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub torch: super::torch::TorchArgs,
    /// After the campaign, run the representative repro of each of the first N new root
    /// causes on the real torch (as `trainsim conform` runs a file) and label each one.
    #[arg(long, value_name = "N", requires = "confirm_python", conflicts_with_all = ["mutant", "python"])]
    pub confirm: Option<u32>,
    /// The Python with torch that --confirm runs torchrun from (`conformance/setup` prints it).
    #[arg(long = "python", value_name = "PY", requires = "confirm")]
    pub confirm_python: Option<PathBuf>,
    /// Real runs per root cause --confirm runs.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub confirm_runs: u32,
}

/// `trainsim fuzz merge`.
#[derive(Debug, clap::Subcommand)]
pub enum FuzzCommand {
    /// Merge the summaries of a campaign's case ranges (each DIR holds a summary.json).
    Merge(MergeArgs),
    /// Compare two campaigns root cause by root cause: what appeared, disappeared or changed
    /// count from A to B (a stock torch against a patched one, the model against torch's
    /// code). Exit 0 when they agree, 1 when they differ.
    Diff(super::fuzz_diff::DiffArgs),
}

/// Arguments of `trainsim fuzz merge`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  trainsim fuzz merge ci-0 ci-1 --out merged\n  trainsim fuzz merge shards/*"
)]
pub struct MergeArgs {
    /// Output directories of campaigns over case ranges of one campaign.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Write the merged summary.json here, with a copy of each signature's repro file
    /// (`repro/`), so the merged campaign no longer needs the part directories.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// What `trainsim fuzz` can target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Target {
    Rendezvous,
    Job,
    Reader,
}

/// `--known`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum KnownArg {
    Report,
    Skip,
}

impl Target {
    fn fuzz_target(self) -> fuzz::FuzzTarget {
        match self {
            Target::Rendezvous => fuzz::FuzzTarget::Rendezvous,
            Target::Job => fuzz::FuzzTarget::Job,
            Target::Reader => fuzz::FuzzTarget::Reader,
        }
    }
}

/// `N`, `A..B` or `A..=B`, non-empty.
pub fn parse_cases(text: &str) -> Result<Range<u64>, String> {
    let num = |s: &str| {
        s.trim()
            .parse::<u64>()
            .map_err(|_| format!("`{s}` is not a case count or index"))
    };
    let range = if let Some((a, b)) = text.split_once("..=") {
        num(a)?..num(b)?.checked_add(1).ok_or("range too large")?
    } else if let Some((a, b)) = text.split_once("..") {
        num(a)?..num(b)?
    } else {
        0..num(text)?
    };
    if range.is_empty() {
        return Err(format!(
            "`{text}` holds no case (expected N ≥ 1 or A..B with A < B)"
        ));
    }
    Ok(range)
}

/// Runs the command; returns the exit code.
pub fn execute(args: FuzzArgs) -> i32 {
    match args.command {
        Some(FuzzCommand::Merge(m)) => return merge(&m),
        Some(FuzzCommand::Diff(d)) => return super::fuzz_diff::execute(&d),
        None => {}
    }
    let mutant = match args.mutant.as_deref().map(mutants::parse).transpose() {
        Ok(mutant) => mutant,
        Err(message) => {
            eprintln!("error: {message}");
            return 2;
        }
    };
    let (Some(target), Some(out)) = (args.target, args.out.clone()) else {
        eprintln!("error: --target and --out are required");
        return 2;
    };
    // Every case runs on the campaign's torch: it must start before the first case does.
    let plane = args.torch.plane().and_then(|plane| {
        super::torch::probe_all(&plane)?;
        Ok(plane)
    });
    let torch = match plane {
        Ok(plane) => plane.as_ref().map(super::torch::section_of),
        Err(message) => {
            eprintln!("error: {message}");
            return 2;
        }
    };
    let target = target.fuzz_target();
    let flag = args
        .mutant
        .as_ref()
        .map(|m| format!(" --mutant {m}"))
        .unwrap_or_default();
    let campaign = Campaign {
        target,
        cases: args.cases.clone(),
        seed: args.seed,
        jobs: args
            .jobs
            .map_or_else(parallel::default_jobs, |j| j as usize),
        mutant,
        known: match args.known {
            KnownArg::Report => KnownMode::Report,
            KnownArg::Skip => KnownMode::Skip,
        },
        corpus: args.corpus.clone(),
        out: out.clone(),
        as_known_bug: args.as_known_bug,
        command: format!(
            "trainsim fuzz --target {} --cases {}..{} --seed {}{flag}{}",
            target.name(),
            args.cases.start,
            args.cases.end,
            args.seed,
            args.torch.flags()
        ),
        torch,
    };
    run_campaign(&campaign, &out, confirm_args(&args).as_ref())
}

/// `--confirm`'s arguments, when it was given (clap makes `--python` come with it).
fn confirm_args(args: &FuzzArgs) -> Option<ConfirmArgs> {
    let (causes, python) = (args.confirm?, args.confirm_python.clone()?);
    Some(ConfirmArgs {
        causes,
        python,
        runs: args.confirm_runs,
    })
}

/// The whole command line of a campaign with `--confirm`, for a failure's last line.
fn confirm_command(campaign: &Campaign, out: &Path, confirm: &ConfirmArgs) -> String {
    let word = |p: &Path| super::compare::shell_word(&p.to_string_lossy());
    format!(
        "{} --out {} --confirm {} --python {} --confirm-runs {}",
        campaign.command,
        word(out),
        confirm.causes,
        word(&confirm.python),
        confirm.runs
    )
}

fn run_campaign(campaign: &Campaign, out: &Path, confirm: Option<&ConfirmArgs>) -> i32 {
    if let Some(confirm) = confirm {
        if let Err(message) = fuzz_confirm::check_python(confirm) {
            eprintln!("error: {message}");
            eprintln!("rerun: {}", confirm_command(campaign, out, confirm));
            return 2;
        }
    }
    let bar = progress_bar(campaign.cases.end - campaign.cases.start);
    // Wall time feeds only the progress bar and the cases/s figure printed at the end; it
    // never reaches summary.json, a repro file or a run.
    #[allow(clippy::disallowed_methods)]
    let started = std::time::Instant::now();
    let quiet = quiet_world_panics();
    let result = campaign::run(campaign, |p| {
        bar.set_position(p.done);
        let phase = if p.triaged > 0 {
            format!(", triaged {}/{}", p.triaged, p.signatures)
        } else {
            String::new()
        };
        bar.set_message(format!(
            "{} failing, {} signatures{phase}",
            p.failing, p.signatures
        ));
    });
    drop(quiet);
    bar.finish_and_clear();
    let elapsed_s = started.elapsed().as_secs_f64().max(1e-9);
    let summary = match result {
        Ok(s) => s,
        Err(message) => {
            eprintln!("error: {message}");
            return 3;
        }
    };
    if let Err(code) = write_summary(out, &summary, &BTreeMap::new()) {
        return code;
    }
    out!("{}", summary::render(&summary, &out.to_string_lossy()));
    if let Some(confirm) = confirm {
        if let Err(code) = confirm_and_rewrite(campaign, &summary, out, confirm) {
            return code;
        }
    }
    outln!("wrote {}", out.join("summary.json").display());
    outln!(
        "fuzz: {} cases, {} failing, {} signatures ({} new), {:.1} cases/s",
        summary.cases(),
        summary.failing_cases,
        summary.signatures.len(),
        summary.new_signatures(),
        summary.cases() as f64 / elapsed_s
    );
    i32::from(summary.new_signatures() > 0)
}

/// While alive, panics on simulation threads print nothing: the runner catches them and
/// the campaign counts them as `harness` findings, and each finding's cases re-run many
/// times while it is reduced, triaged and shrunk. Other panics print as usual.
struct QuietWorldPanics;

fn quiet_world_panics() -> QuietWorldPanics {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let simulated = std::thread::current()
            .name()
            .is_some_and(|n| n == crate::world::run_thread::RUN_THREAD_NAME);
        if !simulated {
            default(info);
        }
    }));
    QuietWorldPanics
}

impl Drop for QuietWorldPanics {
    fn drop(&mut self) {
        let _ = std::panic::take_hook();
    }
}

fn progress_bar(len: u64) -> ProgressBar {
    super::progress_bar(len, "{bar:30} {pos}/{len} cases {per_sec} {wide_msg}")
}

/// Runs `--confirm` after the campaign, prints its section and writes the summary again
/// with each confirmed root cause's label. A failure names the flag or file, ends with the
/// command that reproduces it, and leaves the summary as the campaign wrote it.
fn confirm_and_rewrite(
    campaign: &Campaign,
    summary: &Summary,
    out: &Path,
    confirm: &ConfirmArgs,
) -> Result<(), i32> {
    let confirmed = match fuzz_confirm::confirm_root_causes(summary, out, confirm) {
        Ok(confirmed) => confirmed,
        Err((message, code)) => {
            eprintln!("error: {message}");
            eprintln!("rerun: {}", confirm_command(campaign, out, confirm));
            return Err(code);
        }
    };
    let order = fuzz::root_causes::root_causes(summary);
    out!(
        "{}",
        fuzz_confirm::render(&confirmed, &order, confirm.runs, out)
    );
    write_summary(out, summary, &confirmed)
}

fn write_summary(
    dir: &Path,
    summary: &Summary,
    confirmed: &BTreeMap<String, Confirmation>,
) -> Result<(), i32> {
    /// The summary with its root causes, which readers recompute and so never read back.
    #[derive(serde::Serialize)]
    struct Written<'a> {
        #[serde(flatten)]
        summary: &'a Summary,
        root_causes: Vec<Cause<'a>>,
    }
    /// A root cause with its label on the real torch, when `--confirm` ran it.
    #[derive(serde::Serialize)]
    struct Cause<'a> {
        #[serde(flatten)]
        cause: fuzz::root_causes::RootCause,
        #[serde(skip_serializing_if = "Option::is_none")]
        confirm: Option<&'a Confirmation>,
    }
    let root_causes = fuzz::root_causes::root_causes(summary)
        .into_iter()
        .map(|cause| Cause {
            confirm: confirmed.get(&cause.cause),
            cause,
        })
        .collect();
    let written = Written {
        summary,
        root_causes,
    };
    let json = serde_json::to_string_pretty(&written).expect("a summary serializes");
    std::fs::create_dir_all(dir)
        .and_then(|()| super::write_atomically(&dir.join("summary.json"), json.as_bytes()))
        .map_err(|e| {
            eprintln!("error: cannot write to {}: {e}", dir.display());
            3
        })
}

/// Reads `DIR/summary.json`.
pub fn read_summary(dir: &Path) -> Result<Summary, String> {
    let path = dir.join("summary.json");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: not a fuzz summary: {e}", path.display()))
}

fn merge(args: &MergeArgs) -> i32 {
    let parts: Result<Vec<(String, Summary)>, String> = args
        .dirs
        .iter()
        .map(|d| read_summary(d).map(|s| (d.to_string_lossy().into_owned(), s)))
        .collect();
    let mut merged = match parts.and_then(|p| summary::merge(&p)) {
        Ok(m) => m,
        Err(message) => {
            eprintln!("error: {message}");
            return 2;
        }
    };
    if let Some(out) = &args.out {
        if let Err((code, message)) = adopt_repros(&mut merged, out) {
            eprintln!("error: {message}");
            return code;
        }
        if let Err(code) = write_summary(out, &merged, &BTreeMap::new()) {
            return code;
        }
    }
    let repro_dir = args
        .out
        .as_deref()
        .map_or(String::new(), |d| d.display().to_string());
    out!("{}", summary::render(&merged, &repro_dir));
    if let Some(out) = &args.out {
        outln!("wrote {}", out.join("summary.json").display());
    }
    outln!(
        "fuzz merge: {} cases, {} failing, {} signatures ({} new)",
        merged.cases(),
        merged.failing_cases,
        merged.signatures.len(),
        merged.new_signatures()
    );
    i32::from(merged.new_signatures() > 0)
}

/// Copies each merged signature's repro from its part directory into `out/repro/`, so a
/// merged campaign stands on its own once the part directories (CI artefacts) are gone:
/// its summary then names `repro/FILE` as one campaign over the whole range would. The
/// copy's replay line names the copy. Errors carry the exit code: 2 for a part's repro that
/// cannot be read, 3 for output that cannot be written.
fn adopt_repros(merged: &mut Summary, out: &Path) -> Result<(), (i32, String)> {
    let mut names = std::collections::BTreeSet::new();
    for entry in &mut merged.signatures {
        let Some(part_path) = entry.repro.clone() else {
            continue;
        };
        let name = Path::new(&part_path)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| (2, format!("{part_path}: not a repro file")))?;
        if !names.insert(name.clone()) {
            return Err((2, format!("two signatures have the repro file {name}")));
        }
        let text = std::fs::read_to_string(&part_path)
            .map_err(|e| (2, format!("cannot read {part_path}: {e}")))?;
        let rel = format!("repro/{name}");
        let target = out.join(&rel);
        let text = with_replay_path(&text, &target.to_string_lossy());
        std::fs::create_dir_all(out.join("repro"))
            .and_then(|()| super::write_atomically(&target, text.as_bytes()))
            .map_err(|e| (3, format!("cannot write to {}: {e}", target.display())))?;
        entry.repro = Some(rel);
    }
    Ok(())
}

/// A repro's text with its `# Replay: trainsim run FILE[ --mutant M]` line naming `path`.
fn with_replay_path(text: &str, path: &str) -> String {
    const REPLAY: &str = "# Replay: trainsim run ";
    let lines = text.split_inclusive('\n').map(|line| {
        match (line.strip_prefix(REPLAY), line.rfind(".toml")) {
            (Some(_), Some(end)) => format!("{REPLAY}{path}{}", &line[end + ".toml".len()..]),
            _ => line.to_owned(),
        }
    });
    lines.collect()
}

#[cfg(test)]
mod tests {
    use super::parse_cases;

    #[test]
    fn a_copied_repro_replays_from_its_new_place() {
        let text = "# Found by: x\n# Replay: trainsim run ci-0/repro/f.toml --mutant m\n#   fails.\nname = \"f.toml\"\n";
        assert_eq!(
            super::with_replay_path(text, "merged/repro/f.toml"),
            "# Found by: x\n# Replay: trainsim run merged/repro/f.toml --mutant m\n#   fails.\nname = \"f.toml\"\n"
        );
    }

    #[test]
    fn case_ranges_parse_and_empty_ones_are_refused() {
        assert_eq!(parse_cases("300"), Ok(0..300));
        assert_eq!(parse_cases("100..200"), Ok(100..200));
        assert_eq!(parse_cases("100..=199"), Ok(100..200));
        assert!(parse_cases("0").is_err());
        assert!(parse_cases("5..5").is_err());
        assert!(parse_cases("x..3").is_err());
    }
}
