//! `trainsim compare`: which choice wins back goodput. Runs two or more scenario files, or
//! one file with a key swept over values (`--set job.checkpoint_every=25,50,100`), over the
//! same seeds, and prints each variant's ETTR and its difference from the first.

use super::check::{parse_shard, Shard};
use super::part::{self, Kind, Part, PartVariant, RunOf};
use super::run::{parse_seed_range, SeedRange};
use crate::report::compare::{self, VariantRuns};
use crate::report::goodput_summary::SeedRow;
use crate::runner::{Run, RunOptions};
use crate::scenario::{self, Scenario};
use crate::torch_plane::TorchPlane;
use std::path::{Path, PathBuf};

/// The most values one `--set` may sweep, and the most files one comparison runs.
const VALUES_MAX: usize = 64;

/// Arguments of `trainsim compare`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  trainsim compare scenarios/spot_preemptions_replaced.toml scenarios/spot_preemptions_replaced_fixed.toml --seeds 0..30\n  trainsim compare scenarios/spot_preemptions_replaced_fixed.toml --set job.checkpoint_every=100,300,900 --seeds 0..30 --html sweep.html\n  trainsim compare a.toml b.toml --seeds 0..90 --shard 2/3 --out part-2.json   # then: trainsim merge part-*.json"
)]
pub struct CompareArgs {
    /// Scenario files to compare (two or more), or one with `--set`.
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// Sweep one key of the one FILE over values: `KEY=V1,V2,...`, the key dotted as in
    /// the file (`job.checkpoint_every`, `failures.rate_per_node_day`, `agent.max_restarts`).
    #[arg(long, value_name = "KEY=V1,V2,...")]
    pub set: Option<String>,
    /// The seeds every variant runs: `A..B` runs A to B-1, `A..=B` includes B.
    #[arg(long, value_name = "A..B", value_parser = parse_seed_range, default_value = "0..20")]
    pub seeds: SeedRange,
    /// `text` for people, `json` for one JSON object.
    #[arg(long, value_enum, default_value = "text")]
    pub format: super::run::Format,
    /// Run only the k-th of n slices of the seeds (1-based; the seed at position i of the
    /// range goes to slice i mod n + 1) in every variant, and write them to `--out`;
    /// `trainsim merge` of the n parts prints the whole comparison.
    #[arg(long, value_name = "k/n", value_parser = parse_shard)]
    pub shard: Option<Shard>,
    /// Write the runs' part file (JSON) to FILE, for `trainsim merge`.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Write the comparison page to FILE: one self-contained HTML file with ETTR per
    /// variant (every seed, the mean and its 95 % interval), badput by cause, outcomes and
    /// the differences.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    #[command(flatten)]
    pub torch: super::torch::TorchArgs,
}

/// Runs the command; returns the exit code.
pub fn execute(args: CompareArgs) -> i32 {
    let (variants, planes, of) = match prepare(&args) {
        Ok(prepared) => prepared,
        Err(message) => {
            eprintln!("error: {message}");
            return 2;
        }
    };
    let seeds = part::owned_seeds(args.seeds, args.shard);
    let runs = variants.len() as u64 * seeds.len() as u64;
    let bar = super::progress_bar(runs, "{bar:30} {pos}/{len} runs {eta}");
    let mut results = Vec::new();
    for ((name, file, scenario), torch) in variants.iter().zip(planes) {
        let mut rows = Vec::with_capacity(seeds.len());
        let options = RunOptions {
            torch,
            ..RunOptions::default()
        };
        for &seed in &seeds {
            match Run::of(scenario, file)
                .seed(seed)
                .options(options.clone())
                .report()
            {
                Ok(report) => rows.push(SeedRow::of(&report)),
                Err(failure) => {
                    bar.finish_and_clear();
                    eprintln!("{failure}");
                    return 3;
                }
            }
            bar.inc(1);
        }
        results.push(VariantRuns {
            name: name.clone(),
            rows,
        });
    }
    bar.finish_and_clear();
    match write_outputs(&args, of, &results) {
        Ok(()) => 0,
        Err(code) => code,
    }
}

/// Writes the part (`--out`) and the page (`--html`), and prints the comparison, or for a
/// shard which part it wrote. `Err` is the exit code.
fn write_outputs(args: &CompareArgs, of: RunOf, results: &[VariantRuns]) -> Result<(), i32> {
    if let Some(path) = &args.html {
        let page = compare::page::page(&super::merge::page_input(&of, results));
        if let Err(e) = super::write_atomically(path, page.as_bytes()) {
            eprintln!("error: cannot write {}: {e}", path.display());
            return Err(2);
        }
    }
    if let Some(path) = &args.out {
        let shard = args.shard.map_or(1, |s| s.index);
        let part = Part {
            format: part::FORMAT.into(),
            version: part::VERSION,
            of,
            shard,
            variants: results
                .iter()
                .map(|v| PartVariant {
                    name: v.name.clone(),
                    rows: v.rows.clone(),
                })
                .collect(),
            harness_failures: Vec::new(),
        };
        if let Err(message) = part::write(path, &part) {
            eprintln!("error: {message}");
            return Err(2);
        }
        if let Some(shard) = args.shard {
            let seeds = results.first().map_or(0, |v| v.rows.len());
            outln!(
                "shard {}/{}: {seeds} of the {} seeds in each of {} variants, written to {}; \
                 `trainsim merge` every shard's part for the comparison",
                shard.index,
                shard.count,
                args.seeds.end_exclusive - args.seeds.start,
                results.len(),
                path.display()
            );
            return Ok(());
        }
    }
    out!("{}", part::compare_summary(results, args.format));
    Ok(())
}

/// The variants, each one's control plane (every torch probed), and the run's description
/// for a part; checks the output paths first, so a path that cannot be written fails before
/// any run.
fn prepare(args: &CompareArgs) -> Result<Prepared, String> {
    if args.shard.is_some() && args.out.is_none() {
        return Err("--shard runs a part of the seeds: give --out FILE for its part file".into());
    }
    if let (Some(_), Some(html)) = (args.shard, &args.html) {
        return Err(format!(
            "--html {} draws the whole comparison: give it to `trainsim merge` of the parts",
            html.display()
        ));
    }
    for (flag, path) in [("--out", &args.out), ("--html", &args.html)] {
        if let Some(path) = path {
            part::check_writable(flag, path)?;
        }
    }
    let variants = variants(args)?;
    let planes = variants
        .iter()
        .map(|(_, file, s)| (Path::new(file.as_str()), s));
    let planes = super::torch::planes_of(planes, &args.torch)?;
    let scenarios = match args.set {
        Some(_) => vec![part::scenario_ref(&args.files[0])?],
        None => args
            .files
            .iter()
            .map(|f| part::scenario_ref(f))
            .collect::<Result<_, _>>()?,
    };
    let mut command = String::from("trainsim compare");
    for file in &args.files {
        command.push(' ');
        command.push_str(&shell_word(&file.display().to_string()));
    }
    if let Some(set) = &args.set {
        command.push_str(&format!(" --set {}", shell_word(set)));
    }
    command.push_str(&format!(
        " --seeds {}..{}",
        args.seeds.start, args.seeds.end_exclusive
    ));
    command.push_str(&args.torch.flags());
    let of = RunOf {
        kind: Kind::Compare,
        command,
        scenarios,
        set: args.set.clone(),
        variants: variants.iter().map(|v| v.0.clone()).collect(),
        seeds_start: args.seeds.start,
        seeds_end_exclusive: args.seeds.end_exclusive,
        mutants: Vec::new(),
        shards: args.shard.map_or(1, |s| s.count),
    };
    Ok((variants, planes, of))
}

/// `word` as one shell word: as it is when it holds only safe characters, else quoted.
pub(super) fn shell_word(word: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "_./=,:+-@%".contains(c);
    if !word.is_empty() && word.chars().all(safe) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// A variant to run: its name, its file and its scenario.
type Variant = (String, String, Scenario);

/// The variants, the control plane of each, and what the runs are, for a part file.
type Prepared = (Vec<Variant>, Vec<Option<TorchPlane>>, RunOf);

/// The variants to run.
fn variants(args: &CompareArgs) -> Result<Vec<Variant>, String> {
    let Some(set) = &args.set else {
        if args.files.len() < 2 || args.files.len() > VALUES_MAX {
            return Err(format!(
                "compare needs 2 to {VALUES_MAX} FILEs, or one FILE and --set"
            ));
        }
        return args
            .files
            .iter()
            .map(|path| {
                let file = path.display().to_string();
                let s = scenario::load(path).map_err(|e| e.to_string())?;
                Ok((file.clone(), file, s))
            })
            .collect();
    };
    let [path] = args.files.as_slice() else {
        return Err("--set sweeps one FILE: give exactly one".into());
    };
    let (key, values) = set
        .split_once('=')
        .ok_or_else(|| format!("--set {set}: write KEY=V1,V2,..."))?;
    let values: Vec<&str> = values.split(',').map(str::trim).collect();
    if values.iter().any(|v| v.is_empty()) || values.len() > VALUES_MAX {
        return Err(format!(
            "--set {set}: give 1 to {VALUES_MAX} values, none empty"
        ));
    }
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{file}: {e}"))?;
    values
        .iter()
        .map(|value| {
            let name = format!("{key}={value}");
            let edited = with_value(&text, key, value).map_err(|e| format!("{file}: {e}"))?;
            let label = format!("{file} with {name}");
            let s = scenario::parse(&edited, &label).map_err(|e| e.to_string())?;
            Ok((name, file.clone(), s))
        })
        .collect()
}

/// The scenario text with the dotted `key` set to `value`: a TOML value when it reads as
/// one (`25`, `0.5`, `true`, `"30m"`), else a string (`30m`).
fn with_value(text: &str, key: &str, value: &str) -> Result<String, String> {
    let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e| format!("{e}"))?;
    let parts: Vec<&str> = key.split('.').collect();
    let Some((last, tables)) = parts.split_last() else {
        return Err(format!("--set: `{key}` is no key"));
    };
    let mut table = doc.as_table_mut();
    for part in tables {
        let entry = table
            .entry(part)
            .or_insert_with(|| toml_edit::Item::Table(toml_edit::Table::new()));
        table = entry
            .as_table_mut()
            .ok_or_else(|| format!("--set: `{part}` in `{key}` is not a table"))?;
    }
    let value = value
        .parse::<toml_edit::Value>()
        .unwrap_or_else(|_| toml_edit::Value::from(value));
    table.insert(last, toml_edit::Item::Value(value));
    Ok(doc.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words_quote_what_the_shell_would_split() {
        assert_eq!(
            shell_word("job.checkpoint_every=25,50"),
            "job.checkpoint_every=25,50"
        );
        assert_eq!(
            shell_word("rendezvous.fixes=[],[\"x\"]"),
            "'rendezvous.fixes=[],[\"x\"]'"
        );
        assert_eq!(shell_word("it's"), "'it'\\''s'");
    }

    #[test]
    fn a_set_edits_one_key_and_keeps_the_rest() {
        let text = "name = \"x\"\n[job]\nsteps = 10\n";
        let edited = with_value(text, "job.checkpoint_every", "25").unwrap();
        assert!(edited.contains("checkpoint_every = 25") && edited.contains("steps = 10"));
        let edited = with_value(text, "failures.repair_time", "30m").unwrap();
        assert!(
            edited.contains("[failures]\nrepair_time = \"30m\""),
            "{edited}"
        );
        assert!(with_value(text, "name.x", "1").is_err());
    }
}
