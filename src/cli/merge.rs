//! `trainsim merge PART...`: puts the part files of a sharded seed batch or comparison back
//! together and prints what one machine running every seed would have printed, byte for
//! byte; `--html` draws the comparison page. Parts that do not tile one run are errors
//! naming the file.
//!
//! Exit codes as the run that was sharded: for a batch 0 every run passed, 1 a run failed,
//! 3 a harness failure; for a comparison 0. Unreadable or mismatched parts are exit 2.

use super::check::SHARDS_MAX;
use super::part::{self, HarnessRow, Kind, Part, RunOf};
use super::run::Format;
use crate::report::compare::VariantRuns;
use crate::report::goodput_summary::GoodputTally;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The most parts one merge reads: one per shard.
pub const PARTS_MAX: usize = SHARDS_MAX;
/// The largest part file read, in bytes.
pub const PART_BYTES_MAX: u64 = 1 << 30;
/// The most rows (seeds × variants) all parts together may hold.
pub const ROWS_MAX: usize = 4_000_000;

/// Arguments of `trainsim merge`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Exit codes: as the sharded command (a batch: 0 passed, 1 a run failed, 3 harness failure; a comparison: 0); 2 for unreadable, mismatched, missing or duplicate parts.\n\nExamples:\n  trainsim compare a.toml b.toml --seeds 0..90 --shard 1/3 --out part-1.json   # and 2/3, 3/3\n  trainsim merge part-1.json part-2.json part-3.json --html compare.html\n  trainsim run scenarios/worker_crash_restart.toml --seeds 0..100 --shard 2/4 --out p2.json"
)]
pub struct MergeArgs {
    /// The part files (`--out` of `run --seeds … --shard k/n` or `compare … --shard k/n`),
    /// one per shard, in any order.
    #[arg(required = true, value_name = "PART")]
    pub parts: Vec<PathBuf>,
    /// `text` for people, `json` for one JSON object.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// Also write the comparison page (one self-contained HTML file) to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

/// The parts of one run put back together.
#[derive(Debug)]
pub struct Merged {
    pub of: RunOf,
    /// Each variant with every seed's row, in seed order.
    pub variants: Vec<VariantRuns>,
    pub harness_failures: Vec<HarnessRow>,
}

/// Runs the command; returns the exit code.
pub fn execute(args: MergeArgs) -> i32 {
    if let Some(path) = &args.html {
        if let Err(message) = part::check_writable("--html", path) {
            eprintln!("error: {message}");
            return 2;
        }
    }
    let merged = match merge_files(&args.parts) {
        Ok(merged) => merged,
        Err(message) => {
            eprintln!("error: {message}");
            return 2;
        }
    };
    if let Some(path) = &args.html {
        let page = crate::report::compare::page::page(&page_input(&merged.of, &merged.variants));
        if let Err(e) = super::write_atomically(path, page.as_bytes()) {
            eprintln!("error: cannot write {}: {e}", path.display());
            return 2;
        }
    }
    match merged.of.kind {
        Kind::Compare => {
            out!("{}", part::compare_summary(&merged.variants, args.format));
            0
        }
        Kind::Batch => {
            for failure in &merged.harness_failures {
                eprintln!("error: {}", failure.message);
            }
            let rows = &merged.variants[0].rows;
            let file = &merged.of.scenarios[0].file;
            let mut tally = GoodputTally::default();
            rows.iter().for_each(|row| tally.add(row));
            out!("{}", part::batch_summary(file, tally, args.format));
            if !merged.harness_failures.is_empty() {
                3
            } else if rows.iter().any(|r| !r.passed) {
                1
            } else {
                0
            }
        }
    }
}

/// What the compare page needs of a run.
pub fn page_input<'a>(
    of: &'a RunOf,
    variants: &'a [VariantRuns],
) -> crate::report::compare::page::PageInput<'a> {
    crate::report::compare::page::PageInput {
        command: &of.command,
        files: of.scenarios.iter().map(|s| s.file.as_str()).collect(),
        swept_key: of
            .set
            .as_deref()
            .and_then(|set| set.split_once('=').map(|(key, _)| key)),
        seeds: of.seed_range(),
        variants,
    }
}

/// Reads the parts and puts them together; `Err` names the file at fault.
pub fn merge_files(paths: &[PathBuf]) -> Result<Merged, String> {
    if paths.len() > PARTS_MAX {
        return Err(format!(
            "{} parts given; a merge reads at most {PARTS_MAX}",
            paths.len()
        ));
    }
    let mut parts: Vec<(String, Part)> = Vec::with_capacity(paths.len());
    let mut rows = 0usize;
    for path in paths {
        let file = path.display().to_string();
        let part = read_part(path)?;
        rows += part.variants.iter().map(|v| v.rows.len()).sum::<usize>();
        if rows > ROWS_MAX {
            return Err(format!(
                "{file}: the parts so far hold more than {ROWS_MAX} rows (seeds × variants)"
            ));
        }
        check_part(&file, &part)?;
        if let Some((first_file, first)) = parts.first() {
            same_run(&file, &part.of, first_file, &first.of)?;
        }
        parts.push((file, part));
    }
    let Some((_, first)) = parts.first() else {
        return Err("give the part files to merge".into());
    };
    let of = first.of.clone();
    every_shard_once(&of, &parts)?;
    let mut variants: Vec<VariantRuns> = of
        .variants
        .iter()
        .map(|name| VariantRuns {
            name: name.clone(),
            rows: Vec::new(),
        })
        .collect();
    let mut harness_failures = Vec::new();
    for (_, part) in parts {
        for (variant, rows) in variants.iter_mut().zip(part.variants) {
            variant.rows.extend(rows.rows);
        }
        harness_failures.extend(part.harness_failures);
    }
    for variant in &mut variants {
        variant.rows.sort_by_key(|r| r.seed);
    }
    harness_failures.sort_by_key(|h| h.seed);
    Ok(Merged {
        of,
        variants,
        harness_failures,
    })
}

/// One part file, bounded in size, in this format and version.
fn read_part(path: &Path) -> Result<Part, String> {
    let file = path.display();
    let handle = std::fs::File::open(path).map_err(|e| format!("cannot read {file}: {e}"))?;
    let mut text = String::new();
    handle
        .take(PART_BYTES_MAX + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read {file}: {e}"))?;
    if text.len() as u64 > PART_BYTES_MAX {
        return Err(format!("{file}: larger than {PART_BYTES_MAX} bytes"));
    }
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{file}: not a part file (JSON): {e}"))?;
    if value["format"] != part::FORMAT {
        return Err(format!(
            "{file}: not a part file: `format` is not \"{}\" (write one with --shard k/n --out FILE)",
            part::FORMAT
        ));
    }
    if value["version"] != part::VERSION {
        return Err(format!(
            "{file}: a part of format version {}; this trainsim merges version {}",
            value["version"],
            part::VERSION
        ));
    }
    serde_json::from_value(value).map_err(|e| format!("{file}: a malformed part file: {e}"))
}

/// A part agrees with itself: its shard is one of its run's, its variants are its run's,
/// and each holds exactly the seeds its shard owns.
fn check_part(file: &str, part: &Part) -> Result<(), String> {
    let of = &part.of;
    if of.shards == 0 || of.shards > SHARDS_MAX || part.shard == 0 || part.shard > of.shards {
        return Err(format!(
            "{file}: shard {}/{} is not a shard (1 <= k <= n <= {SHARDS_MAX})",
            part.shard, of.shards
        ));
    }
    let seeds = of.seeds_end_exclusive.saturating_sub(of.seeds_start);
    if seeds == 0 || seeds > super::run::SEEDS_MAX {
        return Err(format!("{file}: its seed range holds {seeds} seeds"));
    }
    let names: Vec<&str> = part.variants.iter().map(|v| v.name.as_str()).collect();
    if names != of.variants.iter().map(String::as_str).collect::<Vec<_>>()
        || names.is_empty()
        || (of.kind == Kind::Batch && names.len() != 1)
    {
        return Err(format!(
            "{file}: its variants {names:?} are not the run's {:?}",
            of.variants
        ));
    }
    let expected: Vec<u64> = of.seeds_of(part.shard).collect();
    for variant in &part.variants {
        let mut held: Vec<u64> = variant.rows.iter().map(|r| r.seed).collect();
        held.extend(part.harness_failures.iter().map(|h| h.seed));
        held.sort_unstable();
        if held != expected {
            let first_wrong = held
                .iter()
                .zip(&expected)
                .position(|(h, e)| h != e)
                .unwrap_or(held.len().min(expected.len()));
            return Err(format!(
                "{file}: {} holds {} seeds where shard {}/{} owns {} (first difference at position {first_wrong})",
                variant.name,
                held.len(),
                part.shard,
                of.shards,
                expected.len()
            ));
        }
    }
    Ok(())
}

/// Both parts are shards of one run, else which way they differ.
fn same_run(file: &str, of: &RunOf, first_file: &str, first: &RunOf) -> Result<(), String> {
    let files = |o: &RunOf| {
        o.scenarios
            .iter()
            .map(|s| s.file.clone())
            .collect::<Vec<_>>()
    };
    let differs = if of.kind != first.kind {
        format!("it is a {:?} part, the other a {:?}", of.kind, first.kind).to_lowercase()
    } else if files(of) != files(first) {
        format!("its scenarios are {:?}, not {:?}", files(of), files(first))
    } else if of.scenarios != first.scenarios {
        "a scenario file differs between them (edited between the shards?)".into()
    } else if of.set != first.set || of.variants != first.variants {
        format!(
            "its variants are {:?}, not {:?}",
            of.variants, first.variants
        )
    } else if of.seed_range() != first.seed_range() {
        format!(
            "its seeds are {:?}, not {:?}",
            of.seed_range(),
            first.seed_range()
        )
    } else if of.mutants != first.mutants {
        format!("its mutants are {:?}, not {:?}", of.mutants, first.mutants)
    } else if of.shards != first.shards {
        format!(
            "it is one of {} shards, the other one of {}",
            of.shards, first.shards
        )
    } else if of != first {
        format!("its command `{}` differs", of.command)
    } else {
        return Ok(());
    };
    Err(format!(
        "{file} is not a part of the same run as {first_file}: {differs}"
    ))
}

/// Every shard of the run is there, each once.
fn every_shard_once(of: &RunOf, parts: &[(String, Part)]) -> Result<(), String> {
    let mut seen: BTreeMap<usize, &str> = BTreeMap::new();
    for (file, part) in parts {
        if let Some(other) = seen.insert(part.shard, file) {
            return Err(format!(
                "{file} and {other} are both shard {}/{}: give each shard once",
                part.shard, of.shards
            ));
        }
    }
    if let Some(missing) = (1..=of.shards).find(|k| !seen.contains_key(k)) {
        let given: Vec<&str> = seen.values().copied().collect();
        return Err(format!(
            "shard {missing}/{} is missing (given: {}); it is written by\n{}",
            of.shards,
            given.join(", "),
            of.shard_command(missing, &format!("part-{missing}.json"))
        ));
    }
    Ok(())
}
