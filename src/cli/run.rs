//! `trainsim run FILE...`: runs scenarios with their seeds and prints their reports.
//!
//! Exit codes follow the contract: 0 every run passed, 1 a run failed its invariants or
//! expectations, 2 a usage error or a scenario that cannot be read, 3 the harness failed.
//! The seed options and their parsing live here and are shared with `trainsim check`.

use super::check::{parse_shard, Shard};
use super::part::{self, HarnessRow, Kind, Part, PartVariant, RunOf};
use crate::report::explain;
use crate::report::goodput_summary::{GoodputTally, SeedRow};
use crate::report::Report;
use crate::runner::{HarnessFailure, Run, RunOptions, Told};
use crate::scenario::{self, Scenario};
use crate::torch_plane::TorchPlane;
use crate::trace::{perfetto, Story, Trace};
use indicatif::ProgressBar;
use std::path::{Path, PathBuf};

/// The most seeds one `--seeds` range may ask for.
pub const SEEDS_MAX: u64 = 1_000_000;

/// Arguments of `trainsim run`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  trainsim run scenarios/late_joiner_next_round.toml\n  trainsim run scenarios/*.toml --format json\n  trainsim run scenarios/store_host_dies.toml --seeds 0..20 --check-determinism\n  trainsim run scenarios/worker_crash_restart.toml --trace run.json\n  trainsim run scenarios/rank0_dies_stale_master.toml --html run.html"
)]
pub struct RunArgs {
    /// Scenario files (TOML), or directories whose `*.toml` files run in name order; without
    /// one, the scenarios in `scenarios/` are listed.
    #[arg(value_name = "FILE|DIR")]
    pub files: Vec<PathBuf>,
    #[command(flatten)]
    pub seeds: SeedArgs,
    /// `text` for people, `json` for one JSON object per run (one line each).
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// Run every seed twice and fail (exit 3) if the traces differ, showing the first
    /// differing event of each run.
    #[arg(long)]
    pub check_determinism: bool,
    /// Write the run as a Chrome/Perfetto trace (JSON) to FILE, to open in
    /// ui.perfetto.dev. Needs exactly one file and one seed.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Write a picture of the run to FILE: one self-contained HTML page with a timeline per
    /// node and the verdicts. Needs exactly one file and one seed.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Write the scenario this seed plays to FILE, as an ordinary scenario file: a
    /// `[failures]` process becomes the faults it drew, so the file replays the same run
    /// without it. Needs exactly one file and one seed.
    #[arg(long, value_name = "FILE")]
    pub write_scenario: Option<PathBuf>,
    /// Switch on a planted bug (repeatable), to replay what `trainsim fuzz --mutant M`
    /// found: late-joiner-joins-complete-round, rank-collision, no-heartbeat-expiry
    /// (rendezvous), sampler-off-by-one (job), reader-double-publish (reader).
    #[arg(long, value_name = "M")]
    pub mutant: Vec<String>,
    /// Simulate the agents' steady routine (monitor ticks, store polls, keep-alives)
    /// message by message even while nothing can change, instead of fast-forwarding it:
    /// slower, and the reference the fast-forward is tested against. Verdicts agree; trace
    /// hashes and exact moments differ.
    #[arg(long)]
    pub exact_control_plane: bool,
    #[command(flatten)]
    pub torch: super::torch::TorchArgs,
    /// Run a batch's seeds on N threads (default 1); the reports still print in seed
    /// order, after the last run.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub jobs: Option<u16>,
    /// Run only the k-th of n slices of `--seeds` (1-based; the seed at position i of the
    /// range goes to slice i mod n + 1) and write them to `--out`; `trainsim merge` of the
    /// n parts prints the goodput over every seed.
    #[arg(long, value_name = "k/n", value_parser = parse_shard, requires = "out")]
    pub shard: Option<Shard>,
    /// Write the batch's part file (JSON: each seed's goodput and outcome) to FILE, for
    /// `trainsim merge`. Needs exactly one file and `--seeds`.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// After each report, tell the run as a plain event log in time order: faults, rounds,
    /// agent restarts and exits with their reasons, worker failures, checkpoints, the job's
    /// end; then the rendezvous round by round: its participants, wait list and redundancy
    /// list, and the steps (torch's `_Action`s) that moved nodes between them (text format
    /// only; a long log is cut in the middle).
    #[arg(long, short = 'v')]
    pub explain: bool,
}

impl RunArgs {
    /// Whether the files' seeds make a batch: more than one run per file.
    fn several_seeds(&self) -> bool {
        self.seeds.several()
    }
}

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
}

/// `--seed` / `--seeds`, which `run` and `check` share.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct SeedArgs {
    /// Run with this seed instead of each file's `seed`.
    #[arg(long, conflicts_with = "seeds")]
    pub seed: Option<u64>,
    /// Run a range of seeds: `A..B` runs A to B-1, `A..=B` includes B.
    #[arg(long, value_name = "A..B", value_parser = parse_seed_range)]
    pub seeds: Option<SeedRange>,
}

impl SeedArgs {
    /// The seeds to run `scenario` with: `--seed`, else the `--seeds` range, else the
    /// file's own seed.
    pub fn for_scenario(&self, scenario: &Scenario) -> std::ops::RangeInclusive<u64> {
        match (self.seed, self.seeds) {
            (Some(seed), _) => seed..=seed,
            (None, Some(range)) => range.start..=range.end_exclusive - 1,
            (None, None) => scenario.seed..=scenario.seed,
        }
    }

    /// Whether a range asks for more than one seed per file.
    pub fn several(&self) -> bool {
        self.seed.is_none() && self.seeds.is_some_and(|r| r.end_exclusive - r.start > 1)
    }
}

/// A half-open range of seeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeedRange {
    pub start: u64,
    pub end_exclusive: u64,
}

/// Parses `A..B` or `A..=B`.
pub fn parse_seed_range(text: &str) -> Result<SeedRange, String> {
    let bad = || format!("'{text}' is not a seed range: write A..B (B excluded) or A..=B");
    let (start, end_exclusive) = if let Some((a, b)) = text.split_once("..=") {
        let b: u64 = b.trim().parse().map_err(|_| bad())?;
        (
            a.trim().parse::<u64>().map_err(|_| bad())?,
            b.checked_add(1).ok_or_else(bad)?,
        )
    } else if let Some((a, b)) = text.split_once("..") {
        (
            a.trim().parse::<u64>().map_err(|_| bad())?,
            b.trim().parse::<u64>().map_err(|_| bad())?,
        )
    } else {
        return Err(bad());
    };
    if end_exclusive <= start {
        return Err(format!("the seed range '{text}' is empty"));
    }
    if end_exclusive - start > SEEDS_MAX {
        return Err(format!(
            "the seed range '{text}' asks for more than {SEEDS_MAX} seeds"
        ));
    }
    Ok(SeedRange {
        start,
        end_exclusive,
    })
}

/// Runs the command; returns the exit code.
pub fn execute(args: RunArgs) -> i32 {
    if args.files.is_empty() {
        eprint!("{}", scenario_list(Path::new(SCENARIO_DIR)));
        return 2;
    }
    if args.explain && args.format == Format::Json {
        eprintln!("error: --explain tells the run in text: leave out --format json");
        return 2;
    }
    let (options, scenarios, planes) = match prepare(&args) {
        Ok(prepared) => prepared,
        Err(message) => {
            eprintln!("error: {message}");
            return 2;
        }
    };
    for ((file, scenario), plane) in scenarios.iter().zip(&planes) {
        if let Err(code) = draw_every_seed(file, scenario, plane.as_ref(), &args) {
            return code;
        }
    }
    let mut ended = Ended::default();
    for ((file, scenario), torch) in scenarios.iter().zip(planes) {
        let options = RunOptions {
            torch,
            ..options.clone()
        };
        if let Err(code) = run_scenario(file, scenario, &args, &options, &mut ended) {
            return code;
        }
    }
    if ended.harness_failure {
        3
    } else if ended.failed {
        1
    } else {
        0
    }
}

/// A run's plain options, every scenario and each one's control plane, or the message of a
/// usage error. Every file is read and every torch probed first, so a typo in the last file
/// or a missing Python fails before an hour of runs.
type Prepared = (RunOptions, Vec<(String, Scenario)>, Vec<Option<TorchPlane>>);

fn prepare(args: &RunArgs) -> Result<Prepared, String> {
    let files = super::check::expand_dirs(&args.files)?;
    let options = RunOptions {
        exact_control_plane: args.exact_control_plane,
        ..crate::fuzz::mutants::options_of(&args.mutant)?
    };
    let mut scenarios: Vec<(String, Scenario)> = Vec::new();
    for path in &files {
        let s = scenario::load(path).map_err(|e| e.to_string())?;
        scenarios.push((path.display().to_string(), s));
    }
    check_one_run_outputs(args, &scenarios)?;
    check_batch_flags(args)?;
    let paths = files.iter().map(PathBuf::as_path);
    let planes = super::torch::planes_of(paths.zip(scenarios.iter().map(|s| &s.1)), &args.torch)?;
    Ok((options, scenarios, planes))
}

/// The outputs that write one run (`--trace`, `--html`, `--write-scenario`): each needs
/// exactly one file and one seed, and a path that can be written, checked before any run.
fn check_one_run_outputs(args: &RunArgs, scenarios: &[(String, Scenario)]) -> Result<(), String> {
    let one_run_flags = [
        ("--trace", &args.trace),
        ("--html", &args.html),
        ("--write-scenario", &args.write_scenario),
    ];
    for (flag, path) in one_run_flags {
        let Some(path) = path else { continue };
        let seeds = args.seeds.for_scenario(&scenarios[0].1);
        if scenarios.len() != 1 || seeds.start() != seeds.end() {
            return Err(format!(
                "{flag} {} writes one run: give exactly one FILE and one seed",
                path.display()
            ));
        }
        super::output_paths::check_file(flag, path)?;
    }
    Ok(())
}

/// What the runs so far came to.
#[derive(Debug, Default)]
struct Ended {
    failed: bool,
    harness_failure: bool,
}

/// Runs one scenario's seeds and prints their reports; several seeds in text end with the
/// goodput over them. `Err` is the exit code of an output that could not be written.
fn run_scenario(
    file: &str,
    scenario: &Scenario,
    args: &RunArgs,
    options: &RunOptions,
    ended: &mut Ended,
) -> Result<(), i32> {
    let seeds: Vec<u64> = match (args.seeds.seeds, args.seeds.seed) {
        (Some(range), None) => part::owned_seeds(range, args.shard),
        _ => args.seeds.for_scenario(scenario).collect(),
    };
    let bar = progress_bar(seeds.len() as u64, args.several_seeds());
    let mut batch = Batch::default();
    let jobs = args.jobs.map_or(1, usize::from);
    if jobs <= 1 {
        for seed in seeds {
            let result = run_seed(scenario, file, seed, args.check_determinism, options);
            batch.emit(
                seed,
                result.map(|told| (told.report, Some((told.trace, told.story)))),
                scenario,
                args,
                ended,
                &bar,
            )?;
            bar.inc(1);
        }
    } else {
        // Runs on `jobs` threads, each in its own runtime; reports print in seed order once
        // all are done. A trace is kept only where something prints or writes it.
        let keep_trace = args.explain || args.trace.is_some() || args.html.is_some();
        let results = crate::fuzz::parallel::map(
            &seeds,
            jobs,
            |&seed| {
                run_seed(scenario, file, seed, args.check_determinism, options).map(|told| {
                    let kept = keep_trace.then_some((told.trace, told.story));
                    (told.report, kept)
                })
            },
            |_| bar.inc(1),
        );
        for (&seed, result) in seeds.iter().zip(results) {
            batch.emit(seed, result, scenario, args, ended, &bar)?;
        }
    }
    let Batch {
        tally,
        rows,
        harness_failures,
    } = batch;
    bar.finish_and_clear();
    if args.several_seeds() && args.format == Format::Text {
        let label = match args.shard {
            Some(s) => format!("{file} (shard {}/{})", s.index, s.count),
            None => file.to_owned(),
        };
        out!("{}", part::batch_summary(&label, tally, Format::Text));
    }
    if let Some(path) = &args.out {
        write_part(path, file, args, rows, harness_failures)?;
    }
    Ok(())
}

/// What a batch of seeds gathered so far: the goodput tally, and the rows `--out` writes.
#[derive(Default)]
struct Batch {
    tally: GoodputTally,
    rows: Vec<SeedRow>,
    harness_failures: Vec<HarnessRow>,
}

impl Batch {
    /// Prints one seed's report (or harness failure), writes its outputs and counts it.
    fn emit(
        &mut self,
        seed: u64,
        result: Result<(Report, Option<(Trace, Story)>), HarnessFailure>,
        scenario: &Scenario,
        args: &RunArgs,
        ended: &mut Ended,
        bar: &indicatif::ProgressBar,
    ) -> Result<(), i32> {
        let (report, kept) = match result {
            Ok(done) => done,
            Err(failure) => {
                ended.harness_failure = true;
                bar.suspend(|| print_harness_failure(&failure));
                self.harness_failures.push(HarnessRow {
                    seed,
                    message: failure.to_string(),
                });
                return Ok(());
            }
        };
        ended.failed |= !report.passed();
        bar.suspend(|| match (args.format, &kept) {
            (Format::Json, _) => outln!("{}", report.to_json_line()),
            (Format::Text, Some((trace, story))) if args.explain => {
                let log = explain::lines(trace, scenario.job.steps);
                outln!(
                    "{}\n{}",
                    report.to_text(),
                    explain::render(&log, &report.repro)
                );
                let rounds = explain::rendezvous_lines(story);
                if !rounds.is_empty() {
                    let title = explain::RENDEZVOUS_TITLE;
                    outln!("{}", explain::render_section(title, &rounds, &report.repro));
                }
            }
            // A batch shows a passing seed in one line and a failing one whole.
            (Format::Text, _) if args.several_seeds() && report.passed() => {
                outln!("{}", report.to_batch_line())
            }
            (Format::Text, _) => outln!("{}", report.to_text()),
        });
        if let Some((trace, story)) = &kept {
            write_outputs(scenario, &report, (trace, story), args)?;
        }
        let row = SeedRow::of(&report);
        self.tally.add(&row);
        if args.out.is_some() {
            self.rows.push(row);
        }
        Ok(())
    }
}

/// `--shard` and `--out` make a part of one file's batch of seeds; the part's path is
/// checked before any run.
fn check_batch_flags(args: &RunArgs) -> Result<(), String> {
    let Some(out) = &args.out else {
        return Ok(());
    };
    if args.files.len() != 1 || args.seeds.seeds.is_none() {
        return Err(format!(
            "--out {} writes one batch: give exactly one FILE and --seeds A..B",
            out.display()
        ));
    }
    part::check_writable("--out", out)
}

/// Writes the batch's part file; `Err` is the exit code.
fn write_part(
    path: &Path,
    file: &str,
    args: &RunArgs,
    rows: Vec<SeedRow>,
    harness_failures: Vec<HarnessRow>,
) -> Result<(), i32> {
    let range = args
        .seeds
        .seeds
        .expect("--out is checked to come with --seeds");
    let mut command = format!(
        "trainsim run {} --seeds {}..{}",
        super::compare::shell_word(file),
        range.start,
        range.end_exclusive
    );
    for mutant in &args.mutant {
        command.push_str(&format!(" --mutant {}", super::compare::shell_word(mutant)));
    }
    command.push_str(&args.torch.flags());
    let fail = |message: String| {
        eprintln!("error: {message}");
        2
    };
    let of = RunOf {
        kind: Kind::Batch,
        command,
        scenarios: vec![part::scenario_ref(Path::new(file)).map_err(fail)?],
        set: None,
        variants: vec![file.to_owned()],
        seeds_start: range.start,
        seeds_end_exclusive: range.end_exclusive,
        mutants: args.mutant.clone(),
        shards: args.shard.map_or(1, |s| s.count),
    };
    let part = Part {
        format: part::FORMAT.into(),
        version: part::VERSION,
        of,
        shard: args.shard.map_or(1, |s| s.index),
        variants: vec![PartVariant {
            name: file.to_owned(),
            rows,
        }],
        harness_failures,
    };
    part::write(path, &part).map_err(fail)
}

/// A bar on a terminal's stderr for a batch of seeds; none for a single run.
fn progress_bar(runs: u64, several: bool) -> ProgressBar {
    match several {
        true => super::progress_bar(runs, "{bar:30} {pos}/{len} seeds {eta}"),
        false => ProgressBar::hidden(),
    }
}

/// Writes the run's `--trace` and `--html` files when asked.
fn write_outputs(
    scenario: &Scenario,
    report: &Report,
    (trace, story): (&Trace, &Story),
    args: &RunArgs,
) -> Result<(), i32> {
    if let Some(path) = &args.trace {
        write_trace(path, report, trace, story)?;
    }
    if let Some(path) = &args.html {
        let page = crate::report::html::page(scenario, report, trace, story);
        if let Err(e) = super::write_atomically(path, page.as_bytes()) {
            eprintln!("error: cannot write {}: {e}", path.display());
            return Err(2);
        }
    }
    Ok(())
}

/// Draws each seed's failure process before any run, so a draw past a bound is a usage
/// error (exit 2) at once; writes the drawn scenario when `--write-scenario` asks, with
/// the run's torch as its `[torch]` table in absolute paths, so it replays from anywhere.
fn draw_every_seed(
    file: &str,
    scenario: &Scenario,
    plane: Option<&TorchPlane>,
    args: &RunArgs,
) -> Result<(), i32> {
    for seed in args.seeds.for_scenario(scenario) {
        let mut drawn = match scenario::failure_draw::expand(scenario, seed) {
            Ok(drawn) => drawn,
            Err(e) => {
                eprintln!("error: {file}: failures.rate_per_node_day: with seed {seed}, {e}");
                return Err(2);
            }
        };
        if let Some(path) = &args.write_scenario {
            drawn.to_mut().torch = plane.map(super::torch::section_of);
            let text = format!(
                "# {file} as seed {seed} plays it: `trainsim run` of this file replays the run
{}",
                scenario::emit::to_toml(&drawn)
            );
            if let Err(e) = super::write_atomically(path, text.as_bytes()) {
                eprintln!("error: cannot write {}: {e}", path.display());
                return Err(2);
            }
        }
    }
    Ok(())
}

/// One seed, once or (with `--check-determinism`) twice.
pub(crate) fn run_seed(
    scenario: &Scenario,
    file: &str,
    seed: u64,
    check_determinism: bool,
    options: &RunOptions,
) -> Result<Told, HarnessFailure> {
    let run = Run::of(scenario, file).seed(seed).options(options.clone());
    if check_determinism {
        run.deterministic_told()
    } else {
        run.told()
    }
}

/// Writes the Perfetto export; an unwritable path is a usage error (exit 2).
fn write_trace(path: &Path, report: &Report, trace: &Trace, story: &Story) -> Result<(), i32> {
    let title = format!("{} (seed {})", report.scenario, report.seed);
    let json = perfetto::chrome_trace_json(trace, story, &title);
    super::write_atomically(path, json.as_bytes()).map_err(|e| {
        eprintln!("error: cannot write the trace to {}: {e}", path.display());
        2
    })
}

fn print_harness_failure(failure: &HarnessFailure) {
    eprintln!("error: {failure}");
}

/// Where `trainsim run` without a file looks for scenarios to suggest.
const SCENARIO_DIR: &str = "scenarios";

/// The usage message of `trainsim run` without a file: every scenario in `dir` with its name.
fn scenario_list(dir: &Path) -> String {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "toml"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    if files.is_empty() {
        return format!(
            "error: give a scenario file: trainsim run FILE (no scenarios in {}/)\n",
            dir.display()
        );
    }
    let mut text = format!(
        "error: give a scenario file: trainsim run FILE. The scenarios in {}/:\n",
        dir.display()
    );
    let width = files.iter().map(|f| f.display().to_string().len()).max();
    for file in &files {
        let name = scenario::load(file)
            .map(|s| s.name)
            .unwrap_or_else(|e| format!("(cannot be read: {e})"));
        let file = file.display().to_string();
        text.push_str(&format!("  {file:<w$}  {name}\n", w = width.unwrap_or(0)));
    }
    text
}
