//! `trainsim compare`: which choice wins back goodput. Runs two or more scenario files, or
//! one file with a key swept over values (`--set job.checkpoint_every=25,50,100`), over the
//! same seeds, and prints each variant's ETTR and its difference from the first.

use super::run::{parse_seed_range, SeedRange};
use crate::report::compare::{self, VariantRuns};
use crate::runner::Run;
use crate::scenario::{self, Scenario};
use std::path::PathBuf;

/// The most values one `--set` may sweep.
const VALUES_MAX: usize = 64;

/// Arguments of `trainsim compare`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  trainsim compare scenarios/spot_preemptions_replaced.toml scenarios/spot_preemptions_replaced_fixed.toml --seeds 0..30\n  trainsim compare scenarios/spot_preemptions_replaced_fixed.toml --set job.checkpoint_every=100,300,900 --seeds 0..30"
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
}

/// Runs the command; returns the exit code.
pub fn execute(args: CompareArgs) -> i32 {
    let variants = match variants(&args) {
        Ok(variants) => variants,
        Err(message) => {
            eprintln!("error: {message}");
            return 2;
        }
    };
    let seeds = args.seeds.start..args.seeds.end_exclusive;
    let runs = variants.len() as u64 * (seeds.end - seeds.start);
    let bar = super::progress_bar(runs, "{bar:30} {pos}/{len} runs {eta}");
    let mut results = Vec::new();
    for (name, file, scenario) in &variants {
        let mut runs = VariantRuns {
            name: name.clone(),
            ettrs: Vec::new(),
            outcomes: Vec::new(),
        };
        for seed in seeds.clone() {
            match Run::of(scenario, file).seed(seed).report() {
                Ok(report) => {
                    runs.ettrs.push(report.goodput.ettr);
                    runs.outcomes.push(report.outcome);
                }
                Err(failure) => {
                    bar.finish_and_clear();
                    eprintln!("{failure}");
                    return 3;
                }
            }
            bar.inc(1);
        }
        results.push(runs);
    }
    bar.finish_and_clear();
    match args.format {
        super::run::Format::Text => outln!("{}", compare::to_text(&results)),
        super::run::Format::Json => outln!("{}", compare::to_json(&results)),
    }
    0
}

/// The variants to run: (name, file, scenario).
fn variants(args: &CompareArgs) -> Result<Vec<(String, String, Scenario)>, String> {
    let Some(set) = &args.set else {
        if args.files.len() < 2 {
            return Err("compare needs two or more FILEs, or one FILE and --set".into());
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
