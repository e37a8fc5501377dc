//! `trainsim check DIR|FILE...`: runs a scenario suite in parallel, the way CI does, and
//! prints one summary table, then each failure ending with its repro line.
//!
//! Every file is read and validated before any run starts. Runs go to a bounded pool of
//! threads (each run has its own simulator thread anyway); results are put back in suite
//! order, so the output never depends on which run finished first. The progress bar is
//! display only, drawn when stderr is a terminal, and never reaches stdout or a file.

use super::run::{run_seed, SeedArgs};
use crate::check::Status;
use crate::report::Report;
use crate::runner::{HarnessFailure, RunOptions};
use crate::scenario::{self, Scenario};
use crate::torch_plane::TorchPlane;
use indicatif::ProgressBar;
use quick_junit::{NonSuccessKind, TestCase, TestCaseStatus, TestSuite};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The most runs in flight at once, however many cores the machine has: each holds a
/// whole trace in memory.
pub const JOBS_MAX: usize = 16;
/// The largest `n` in `--shard k/n`.
pub const SHARDS_MAX: usize = 10_000;

/// Arguments of `trainsim check`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Exit codes: 0 every run passed, 1 a run failed, 2 usage error or unreadable scenario, 3 harness failure.\n\nExamples:\n  trainsim check scenarios/\n  trainsim check scenarios/ --junit report.xml --shard 1/4\n  trainsim check scenarios/ --seeds 0..10 --check-determinism\n  trainsim check scenarios/ --html pages/"
)]
pub struct CheckArgs {
    /// Scenario files, or directories whose `*.toml` files are the suite.
    #[arg(required = true, value_name = "DIR|FILE")]
    pub paths: Vec<PathBuf>,
    #[command(flatten)]
    pub seeds: SeedArgs,
    /// Run every seed twice and fail (exit 3) if the traces differ.
    #[arg(long)]
    pub check_determinism: bool,
    /// Also write a JUnit XML report to FILE (one testcase per scenario and seed).
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Run only the k-th of n slices of the sorted suite (1-based; file i goes to slice
    /// i mod n + 1), so n CI machines together run every file exactly once.
    #[arg(long, value_name = "k/n", value_parser = parse_shard)]
    pub shard: Option<Shard>,
    /// Runs in flight at once (default: the available cores, at most 16).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=JOBS_MAX as i64))]
    pub jobs: Option<u16>,
    /// Also write a picture of every run to DIR: one HTML page per scenario (and seed) and
    /// an index.html, for a CI artefact.
    #[arg(long, value_name = "DIR")]
    pub html: Option<PathBuf>,
    #[command(flatten)]
    pub torch: super::torch::TorchArgs,
}

/// `--shard k/n`: slice `index` (1-based) of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl Shard {
    /// Whether the file at `position` in the sorted suite (0-based) is in this slice.
    pub fn owns(&self, position: usize) -> bool {
        position % self.count == self.index - 1
    }
}

/// Parses `k/n` with `1 ≤ k ≤ n ≤ SHARDS_MAX`.
pub fn parse_shard(text: &str) -> Result<Shard, String> {
    let bad = || format!("'{text}' is not a shard: write k/n with 1 <= k <= n, like 2/4");
    let (k, n) = text.split_once('/').ok_or_else(bad)?;
    let index: usize = k.trim().parse().map_err(|_| bad())?;
    let count: usize = n.trim().parse().map_err(|_| bad())?;
    if index == 0 || count == 0 || index > count {
        return Err(bad());
    }
    if count > SHARDS_MAX {
        return Err(format!("'{text}' asks for more than {SHARDS_MAX} shards"));
    }
    Ok(Shard { index, count })
}

/// One run of the suite: which file and seed.
#[derive(Debug, Clone)]
struct Job {
    /// Index into the loaded scenarios.
    scenario: usize,
    seed: u64,
}

/// What one job produced.
#[derive(Debug)]
pub(super) enum JobResult {
    /// The report, and the run's HTML page when `--html` asked for pages.
    Ran(Box<Report>, Option<String>),
    Harness(HarnessFailure),
}

/// One row of the summary, and the JUnit testcase, for a job.
#[derive(Debug)]
struct Row {
    file: String,
    seed: u64,
    outcome: String,
    /// `pass`, `FAIL` or `ERROR` (harness failure).
    result: &'static str,
    /// What failed, for the table's last column.
    failed: Vec<String>,
    /// Failure text, ending with the repro line; empty when the run passed.
    details: String,
    /// The full text report, when there is one.
    text: String,
}

/// Runs the command; returns the exit code.
pub fn execute(args: CheckArgs) -> i32 {
    let files = match suite_files(&args.paths) {
        Ok(files) => files,
        Err(message) => {
            eprintln!("error: {message}");
            return 2;
        }
    };
    let Some(scenarios) = load_all(&files) else {
        return 2;
    };
    // An output that cannot be written, or a torch that cannot run, fails now, before any
    // run.
    let planes = match check_before_runs(&args, &files, &scenarios) {
        Ok(planes) => planes,
        Err(message) => {
            eprintln!("error: {message}");
            return 2;
        }
    };
    let shard = args.shard.unwrap_or(Shard { index: 1, count: 1 });
    let jobs: Vec<Job> = (0..scenarios.len())
        .filter(|&i| shard.owns(i))
        .flat_map(|i| {
            args.seeds
                .for_scenario(&scenarios[i].1)
                .map(move |seed| Job { scenario: i, seed })
        })
        .collect();
    let mut results = run_jobs(&scenarios, &planes, &jobs, &args);
    // Name testcases by seed too only when a range asks for several seeds per file.
    let several_seeds = args.seeds.several();
    if let Some(dir) = &args.html {
        let labels: Vec<(String, u64)> = jobs
            .iter()
            .map(|job| (scenarios[job.scenario].0.clone(), job.seed))
            .collect();
        if let Err(message) =
            super::check_html::write_pages(dir, &labels, &mut results, several_seeds)
        {
            eprintln!("error: {message}");
            return 2;
        }
    }
    let rows: Vec<Row> = jobs
        .iter()
        .zip(results)
        .map(|(job, result)| row(&scenarios[job.scenario], job.seed, result))
        .collect();
    out!("{}", summary(&rows, shard));
    if let Some(path) = &args.junit {
        let xml = junit(&rows, shard, several_seeds);
        if let Err(e) = super::write_atomically(path, xml.as_bytes()) {
            eprintln!(
                "error: cannot write the JUnit report to {}: {e}",
                path.display()
            );
            return if rows.iter().any(|r| r.result == "ERROR") {
                3
            } else {
                2
            };
        }
    }
    exit_code(&rows)
}

/// `--junit` must be a file that can be written, `--html` a directory that can hold pages,
/// and every torch a scenario runs on must start; gives each scenario's control plane.
fn check_before_runs(
    args: &CheckArgs,
    files: &[PathBuf],
    scenarios: &[(String, Scenario)],
) -> Result<Vec<Option<TorchPlane>>, String> {
    if let Some(path) = &args.junit {
        super::output_paths::check_file("--junit", path)?;
    }
    if let Some(dir) = &args.html {
        super::output_paths::check_dir("--html", dir)?;
    }
    let paths = files.iter().map(PathBuf::as_path);
    super::torch::planes_of(paths.zip(scenarios.iter().map(|s| &s.1)), &args.torch)
}

fn exit_code(rows: &[Row]) -> i32 {
    if rows.iter().any(|r| r.result == "ERROR") {
        3
    } else if rows.iter().any(|r| r.result == "FAIL") {
        1
    } else {
        0
    }
}

/// The suite's files: each directory's `*.toml`, plus the files named, sorted and
/// without duplicates so shards agree on positions whatever order the shell gave.
fn suite_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut files = expand_dirs(paths)?;
    files.sort();
    files.dedup();
    Ok(files)
}

/// The paths with each directory replaced by its `*.toml` files in name order; a directory
/// without one is an error. `trainsim run` keeps the order given; `check` sorts.
pub(super) fn expand_dirs(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for path in paths {
        if !path.is_dir() {
            files.push(path.clone());
            continue;
        }
        let entries = std::fs::read_dir(path)
            .map_err(|e| format!("cannot read the directory {}: {e}", path.display()))?;
        let mut found = Vec::new();
        for entry in entries {
            let entry =
                entry.map_err(|e| format!("cannot read the directory {}: {e}", path.display()))?;
            let file = path.join(entry.file_name());
            if file.extension().is_some_and(|x| x == "toml") && !file.is_dir() {
                found.push(file);
            }
        }
        if found.is_empty() {
            return Err(format!("{} holds no *.toml scenario files", path.display()));
        }
        found.sort();
        files.extend(found);
    }
    Ok(files)
}

/// Reads and validates every file; prints every error (not just the first) and gives
/// `None` when there was one.
fn load_all(files: &[PathBuf]) -> Option<Vec<(String, Scenario)>> {
    let mut scenarios = Vec::new();
    let mut ok = true;
    for path in files {
        match scenario::load(path) {
            Ok(s) => scenarios.push((path.display().to_string(), s)),
            Err(e) => {
                eprintln!("error: {e}");
                ok = false;
            }
        }
    }
    ok.then_some(scenarios)
}

/// How many runs go at once: `--jobs`, else the available cores, never more than jobs.
fn workers(requested: Option<u16>, jobs: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let wanted = requested.map_or(cores.min(JOBS_MAX), usize::from);
    wanted.min(jobs).max(1)
}

fn progress_bar(len: usize) -> ProgressBar {
    super::progress_bar(len as u64, "{bar:30} {pos}/{len} runs {wide_msg}")
}

/// Runs every job on a bounded pool, each scenario's on its control plane (`planes`, by
/// scenario); results come back in job order.
fn run_jobs(
    scenarios: &[(String, Scenario)],
    planes: &[Option<TorchPlane>],
    jobs: &[Job],
    args: &CheckArgs,
) -> Vec<JobResult> {
    let options: Vec<RunOptions> = planes
        .iter()
        .map(|torch| RunOptions {
            torch: torch.clone(),
            ..RunOptions::default()
        })
        .collect();
    let bar = progress_bar(jobs.len());
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<JobResult>>> = jobs.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..workers(args.jobs, jobs.len()) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(job) = jobs.get(i) else { break };
                let (file, scenario) = &scenarios[job.scenario];
                let html = args.html.is_some();
                let twice = args.check_determinism;
                let options = &options[job.scenario];
                let result = run_job(scenario, file, job.seed, twice, html, options);
                *slots[i].lock().expect("a result slot is never poisoned") = Some(result);
                bar.set_message(format!("{file} seed {}", job.seed));
                bar.inc(1);
            });
        }
    });
    bar.finish_and_clear();
    slots
        .into_iter()
        .map(|slot| {
            slot.into_inner()
                .expect("a result slot is never poisoned")
                .expect("every job ran")
        })
        .collect()
}

/// One job; a panic outside the runner's own guard is still a harness failure, not a crash
/// of the whole suite.
fn run_job(
    scenario: &Scenario,
    file: &str,
    seed: u64,
    twice: bool,
    html: bool,
    options: &RunOptions,
) -> JobResult {
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_seed(scenario, file, seed, twice, options)
    }));
    match ran {
        Ok(Ok(told)) => {
            let page = html.then(|| {
                crate::report::html::page(scenario, &told.report, &told.trace, &told.story)
            });
            JobResult::Ran(Box::new(told.report), page)
        }
        Ok(Err(failure)) => JobResult::Harness(failure),
        Err(payload) => JobResult::Harness(HarnessFailure {
            seed,
            message: format!(
                "the run panicked: {}",
                crate::world::panic_message(&payload)
            ),
            repro: crate::report::repro_line(file, seed),
        }),
    }
}

/// Builds a job's row: what failed, and the failure text ending with the repro line.
fn row((file, scenario): &(String, Scenario), seed: u64, result: JobResult) -> Row {
    match result {
        JobResult::Ran(report, _) => {
            let passed = report.passed();
            let mut details = String::new();
            if !passed {
                details.push_str(&crate::report::verdict_block(&report));
                details.push_str(&report.repro);
            }
            Row {
                file: file.clone(),
                seed,
                outcome: report.outcome.clone(),
                result: if passed { "pass" } else { "FAIL" },
                failed: failed_items(scenario, &report),
                details,
                text: report.to_text(),
            }
        }
        JobResult::Harness(failure) => Row {
            file: file.clone(),
            seed,
            outcome: "-".to_owned(),
            result: "ERROR",
            failed: vec!["harness failure".to_owned()],
            details: failure.to_string(),
            text: String::new(),
        },
    }
}

/// The invariants whose verdict was not the expected one, by name, then the other unmet
/// expectations as their sentences.
fn failed_items(scenario: &Scenario, report: &Report) -> Vec<String> {
    let expected = &scenario.expect.violations;
    let invariants: Vec<String> = report
        .invariants
        .iter()
        .filter(|r| (r.status == Status::Violated) != expected.contains(&r.name))
        .map(|r| r.name.clone())
        .collect();
    let others = report
        .expect
        .failures
        .iter()
        .filter(|f| !invariants.iter().any(|name| f.contains(name.as_str())))
        .filter(|f| !expected.iter().any(|name| f.contains(name.as_str())))
        .cloned();
    invariants.iter().cloned().chain(others).collect()
}

/// The summary table, a count line, then each failure's text ending with its repro line.
fn summary(rows: &[Row], shard: Shard) -> String {
    let file_w = rows.iter().map(|r| r.file.len()).max().unwrap_or(0).max(4);
    let outcome_w = rows
        .iter()
        .map(|r| r.outcome.len())
        .max()
        .unwrap_or(0)
        .max(7);
    let mut out = format!(
        "{:<file_w$}  {:>6}  {:<outcome_w$}  {:<6}  failed\n",
        "file", "seed", "outcome", "result"
    );
    for r in rows {
        let line = format!(
            "{:<file_w$}  {:>6}  {:<outcome_w$}  {:<6}  {}",
            r.file,
            r.seed,
            r.outcome,
            r.result,
            r.failed.join("; ")
        );
        out.push_str(line.trim_end());
        out.push('\n');
    }
    let passed = rows.iter().filter(|r| r.result == "pass").count();
    let errors = rows.iter().filter(|r| r.result == "ERROR").count();
    if shard.count > 1 {
        out.push_str(&format!("shard {}/{}\n", shard.index, shard.count));
    }
    if errors > 0 {
        out.push_str(&format!("{errors} runs hit a harness failure\n"));
    }
    out.push_str(&format!(
        "check: {passed} passed, {} failed\n",
        rows.len() - passed
    ));
    for r in rows.iter().filter(|r| r.result != "pass") {
        out.push_str(&format!(
            "\n{} {} seed {}:\n{}\n",
            r.result, r.file, r.seed, r.details
        ));
    }
    out
}

/// The JUnit XML: one testsuite, one testcase per file (per file and seed when several
/// seeds run), named by file so CI tools can track each scenario across builds.
fn junit(rows: &[Row], shard: Shard, several_seeds: bool) -> String {
    let suite_name = if shard.count > 1 {
        format!("trainsim check (shard {}/{})", shard.index, shard.count)
    } else {
        "trainsim check".to_owned()
    };
    let mut suite = TestSuite::new(suite_name.as_str());
    for r in rows {
        let status = match r.result {
            "pass" => TestCaseStatus::success(),
            result => {
                let kind = if result == "ERROR" {
                    NonSuccessKind::Error
                } else {
                    NonSuccessKind::Failure
                };
                let mut status = TestCaseStatus::non_success(kind);
                status.set_message(r.details.as_str());
                status.set_type(if result == "ERROR" {
                    "harness failure"
                } else {
                    "scenario failed"
                });
                if !r.text.is_empty() {
                    status.set_description(r.text.as_str());
                }
                status
            }
        };
        let name = if several_seeds {
            format!("{} --seed {}", r.file, r.seed)
        } else {
            r.file.clone()
        };
        let mut case = TestCase::new(name, status);
        case.set_classname(class_name(&r.file));
        case.add_property(("seed", r.seed.to_string().as_str()));
        case.add_property(("outcome", r.outcome.as_str()));
        suite.add_test_case(case);
    }
    let mut report = quick_junit::Report::new("trainsim");
    report.add_test_suite(suite);
    report
        .to_string()
        .expect("a JUnit report always serializes")
}

/// `scenarios/late_joiner.toml` → `scenarios.late_joiner`, the dotted form JUnit viewers group by.
fn class_name(file: &str) -> String {
    let stem = Path::new(file).with_extension("");
    stem.to_string_lossy()
        .trim_start_matches("./")
        .trim_start_matches('/')
        .replace(['/', '\\'], ".")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_parse_and_partition() {
        assert_eq!(parse_shard("2/3"), Ok(Shard { index: 2, count: 3 }));
        for bad in ["0/2", "3/2", "1/0", "x/2", "1", "1/2/3", ""] {
            assert!(parse_shard(bad).is_err(), "{bad}");
        }
        let shards: Vec<Shard> = (1..=3).map(|k| Shard { index: k, count: 3 }).collect();
        for position in 0..10 {
            assert_eq!(shards.iter().filter(|s| s.owns(position)).count(), 1);
        }
    }
}
