//! `trainsim run FILE...`: runs scenarios with their seeds and prints their reports.
//!
//! Exit codes follow the contract: 0 every run passed, 1 a run failed its invariants or
//! expectations, 2 a usage error or a scenario that cannot be read, 3 the harness failed.

use crate::runner::{self, HarnessFailure};
use crate::scenario::{self, Scenario};
use std::path::PathBuf;

/// The most seeds one `--seeds` range may ask for.
pub const SEEDS_MAX: u64 = 1_000_000;

/// Arguments of `trainsim run`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  trainsim run scenarios/late_joiner_next_round.toml\n  trainsim run scenarios/*.toml --format json\n  trainsim run scenarios/store_host_dies.toml --seeds 0..20"
)]
pub struct RunArgs {
    /// Scenario files (TOML) to run.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Run with this seed instead of the file's `seed`.
    #[arg(long, conflicts_with = "seeds")]
    pub seed: Option<u64>,
    /// Run a range of seeds: `A..B` runs A to B-1, `A..=B` includes B.
    #[arg(long, value_name = "A..B", value_parser = parse_seed_range)]
    pub seeds: Option<SeedRange>,
    /// `text` for people, `json` for one JSON object per run (one line each).
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
}

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
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
    // Read every file first, so a typo in the last one fails before an hour of runs.
    let mut scenarios: Vec<(String, Scenario)> = Vec::new();
    for path in &args.files {
        match scenario::load(path) {
            Ok(s) => scenarios.push((path.display().to_string(), s)),
            Err(e) => {
                eprintln!("error: {e}");
                return 2;
            }
        }
    }
    let mut any_failed = false;
    let mut any_harness_failure = false;
    for (file, scenario) in &scenarios {
        for seed in seeds_for(&args, scenario) {
            match runner::run_one(scenario, file, seed) {
                Ok(report) => {
                    any_failed |= !report.passed();
                    match args.format {
                        Format::Json => println!("{}", report.to_json_line()),
                        Format::Text => println!("{}", report.to_text()),
                    }
                }
                Err(failure) => {
                    any_harness_failure = true;
                    print_harness_failure(&failure);
                }
            }
        }
    }
    if any_harness_failure {
        3
    } else if any_failed {
        1
    } else {
        0
    }
}

fn seeds_for(args: &RunArgs, scenario: &Scenario) -> std::ops::RangeInclusive<u64> {
    match (args.seed, args.seeds) {
        (Some(seed), _) => seed..=seed,
        (None, Some(range)) => range.start..=range.end_exclusive - 1,
        (None, None) => scenario.seed..=scenario.seed,
    }
}

fn print_harness_failure(failure: &HarnessFailure) {
    eprintln!("error: {failure}");
}
