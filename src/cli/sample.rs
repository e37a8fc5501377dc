//! `trainsim sample`: prints the indices or batches each rank gets, e.g. "which samples did
//! rank 5 see in epoch 3?".

use std::io::Write;
use std::path::Path;

use serde_json::json;

use crate::sampler::{
    DistributedSampler, LoadBalancingBatchSampler, LoadBalancingSampler, SamplerFix,
};

#[path = "sample_summary.rs"]
mod summary;

/// Largest dataset this command samples: a shuffled epoch holds the whole permutation
/// (8 bytes per item, so 8 GB at this size).
pub const MAX_DATASET_LEN: u64 = 1_000_000_000;

/// Most indices printed in one call; beyond it, ask for a single `--rank`.
pub const MAX_PRINTED_INDICES: u64 = 100_000_000;

/// Most items with a complexity (sorting takes about 32 bytes per item).
pub const MAX_COMPLEXITY_ITEMS: u64 = 100_000_000;

/// Most ranks (each rank is one output line or JSON object).
pub const MAX_WORLD_SIZE: u64 = 1_000_000;

/// Which sampler to run, named in the JSON output as `--kind` spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum SamplerKind {
    /// torch's `DistributedSampler`.
    Distributed,
    /// Bagua's `LoadBalancingDistributedSampler` (batch sampler with `--batch-size`).
    #[value(name = "load_balancing", alias = "load-balancing")]
    LoadBalancing,
}

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// One line per rank.
    Text,
    /// One JSON document.
    Json,
}

/// Arguments of `trainsim sample`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  trainsim sample distributed --dataset-len 20 --world-size 4 --rank 1 --epoch 3\n  trainsim sample load_balancing --complexities 5,1,9,3,7,2,8 --world-size 2 --batch-size 2\n  trainsim sample distributed --dataset-len 10 --world-size 4 --batch-size 2 --summary"
)]
pub struct SampleArgs {
    /// Sampler to run.
    #[arg(value_enum)]
    pub kind: SamplerKind,
    /// Number of items in the dataset (distributed; optional with --complexities).
    #[arg(long)]
    pub dataset_len: Option<u64>,
    /// Complexity per item: a file (JSON array, or integers separated by commas or
    /// whitespace) or an inline comma-separated list. Required for load_balancing.
    #[arg(long, allow_hyphen_values = true)]
    pub complexities: Option<String>,
    /// Number of ranks (num_replicas).
    #[arg(long)]
    pub world_size: u64,
    /// Only this rank (default: every rank).
    #[arg(long)]
    pub rank: Option<u64>,
    /// Sampler seed (the generator uses seed + epoch).
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub seed: i64,
    /// Epoch, as passed to set_epoch.
    #[arg(long, default_value_t = 0)]
    pub epoch: u64,
    /// Shuffle (the default).
    #[arg(long, overrides_with = "no_shuffle")]
    pub shuffle: bool,
    /// Do not shuffle.
    #[arg(long, overrides_with = "shuffle")]
    pub no_shuffle: bool,
    /// Drop the tail instead of padding to an even split.
    #[arg(long)]
    pub drop_last: bool,
    /// Bagua's random_level in [0, 1] (load_balancing).
    #[arg(long, default_value_t = 0.0)]
    pub random_level: f64,
    /// Cut each rank's indices into batches of this size with Bagua's batch sampler
    /// (load_balancing).
    #[arg(long)]
    pub batch_size: Option<usize>,
    /// Batch sampler: cut every rank to the fewest batches instead of padding to the most.
    #[arg(long)]
    pub drop_last_batches: bool,
    /// Opt into a named fix (known: batch-sampler-negative-slice).
    #[arg(long = "fix")]
    pub fixes: Vec<String>,
    /// Instead of the indices, summarise the epoch: samples per rank, the samples padding
    /// repeats (and on which ranks), what drop_last would drop instead, and with
    /// --batch-size the batches per rank and the short last batch.
    #[arg(long)]
    pub summary: bool,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: OutputFormat,
}

/// What one rank gets: plain indices or batches.
#[derive(Debug, Clone, PartialEq, Eq)]
enum RankOutput {
    Indices(Vec<u64>),
    Batches(Vec<Vec<u64>>),
}

/// Runs the command; returns the exit code (2 for bad arguments).
pub fn execute(args: SampleArgs) -> i32 {
    if args.summary {
        return summary::execute(&args);
    }
    let outputs = match compute(&args) {
        Ok(outputs) => outputs,
        Err(message) => {
            eprintln!("trainsim sample: {message}");
            return 2;
        }
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let written = match args.format {
        OutputFormat::Text => write_text(&mut out, &outputs),
        OutputFormat::Json => write_json(&mut out, &args, &outputs),
    }
    .and_then(|()| out.flush());
    match written {
        Ok(()) => 0,
        // A closed pipe (`| head`) is the reader's choice, not a failure.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            eprintln!("trainsim sample: cannot write output: {e}");
            1
        }
    }
}

/// Checks `--world-size` and `--rank` and parses the fixes.
fn check_world_and_fixes(args: &SampleArgs) -> Result<Vec<SamplerFix>, String> {
    if args.world_size == 0 || args.world_size > MAX_WORLD_SIZE {
        return Err(format!("--world-size must be in 1..={MAX_WORLD_SIZE}"));
    }
    if let Some(rank) = args.rank.filter(|&r| r >= args.world_size) {
        return Err(format!(
            "--rank {rank} must be below --world-size {}",
            args.world_size
        ));
    }
    args.fixes
        .iter()
        .map(|name| name.parse::<SamplerFix>().map_err(|e| e.to_string()))
        .collect()
}

/// Validates the arguments and runs the sampler: `(rank, output)` per requested rank.
fn compute(args: &SampleArgs) -> Result<Vec<(u64, RankOutput)>, String> {
    let fixes = check_world_and_fixes(args)?;
    let shuffle = !args.no_shuffle;
    let ranks: Vec<u64> = match args.rank {
        Some(rank) => vec![rank],
        None => (0..args.world_size).collect(),
    };
    match args.kind {
        SamplerKind::Distributed => {
            if args.batch_size.is_some() || !fixes.is_empty() {
                return Err("--batch-size and --fix apply to load_balancing only".into());
            }
            let dataset_len = distributed_len(args)?;
            check_printed(dataset_len, args)?;
            let sampler = DistributedSampler::new(
                dataset_len,
                args.world_size,
                0,
                shuffle,
                args.seed,
                args.drop_last,
            )
            .map_err(|e| e.to_string());
            let mut sampler = sampler?;
            sampler.set_epoch(args.epoch);
            let order = sampler.padded_order().map_err(|e| e.to_string())?;
            let stride = args.world_size as usize;
            Ok(ranks
                .into_iter()
                .map(|r| {
                    let mine = order.iter().skip(r as usize).step_by(stride).copied();
                    (r, RankOutput::Indices(mine.collect()))
                })
                .collect())
        }
        SamplerKind::LoadBalancing => load_balancing(args, shuffle, &fixes, ranks),
    }
}

/// The dataset length of a distributed run, from --dataset-len or the complexities' count.
fn distributed_len(args: &SampleArgs) -> Result<u64, String> {
    let dataset_len = match (args.dataset_len, &args.complexities) {
        (Some(len), _) => len,
        (None, Some(source)) => read_complexities(source)?.len() as u64,
        (None, None) => return Err("distributed needs --dataset-len N".into()),
    };
    if dataset_len > MAX_DATASET_LEN {
        return Err(format!(
            "--dataset-len {dataset_len} exceeds the limit of {MAX_DATASET_LEN} items \
             (a shuffled epoch holds the whole permutation in memory)"
        ));
    }
    Ok(dataset_len)
}

/// Refuses output larger than [`MAX_PRINTED_INDICES`].
fn check_printed(dataset_len: u64, args: &SampleArgs) -> Result<(), String> {
    let per_rank = crate::sampler::samples_per_rank(dataset_len, args.world_size, args.drop_last).0;
    let ranks_printed = if args.rank.is_some() {
        1
    } else {
        args.world_size
    };
    if per_rank.saturating_mul(ranks_printed) > MAX_PRINTED_INDICES {
        return Err(format!(
            "that would print {per_rank} indices for each of {ranks_printed} ranks, over the \
             limit of {MAX_PRINTED_INDICES}; pick one rank with --rank"
        ));
    }
    Ok(())
}

/// Bagua's sampler as the arguments describe it, at `--epoch`: its complexities read, their
/// count checked against `--dataset-len`, then `check(len)` (what the caller must refuse
/// before any work), then the batch-only flags checked.
fn load_balancing_sampler(
    args: &SampleArgs,
    shuffle: bool,
    fixes: &[SamplerFix],
    check: impl FnOnce(u64) -> Result<(), String>,
) -> Result<LoadBalancingSampler, String> {
    let source = args
        .complexities
        .as_deref()
        .ok_or("load_balancing needs --complexities FILE or --complexities 3,1,2")?;
    let complexities = read_complexities(source)?;
    let len = complexities.len() as u64;
    if args.dataset_len.is_some_and(|n| n != len) {
        return Err(format!(
            "--dataset-len disagrees with the {len} complexities given"
        ));
    }
    check(len)?;
    if args.batch_size.is_none() && (args.drop_last_batches || !fixes.is_empty()) {
        return Err("--drop-last-batches and --fix need --batch-size".into());
    }
    let mut sampler = LoadBalancingSampler::new(
        complexities,
        args.world_size,
        0,
        shuffle,
        args.seed,
        args.drop_last,
        args.random_level,
    )
    .map_err(|e| e.to_string())?;
    sampler.set_epoch(args.epoch);
    Ok(sampler)
}

fn load_balancing(
    args: &SampleArgs,
    shuffle: bool,
    fixes: &[SamplerFix],
    ranks: Vec<u64>,
) -> Result<Vec<(u64, RankOutput)>, String> {
    let sampler = load_balancing_sampler(args, shuffle, fixes, |len| check_printed(len, args))?;
    let Some(batch_size) = args.batch_size else {
        let mut all = sampler.indices_all_ranks().map_err(|e| e.to_string())?;
        let pick = |r: u64| (r, RankOutput::Indices(std::mem::take(&mut all[r as usize])));
        return Ok(ranks.into_iter().map(pick).collect());
    };
    let batcher = LoadBalancingBatchSampler::new(sampler, batch_size, args.drop_last_batches)
        .map_err(|e| format!("{e} (drop --drop-last when batching)"))?
        .with_fixes(fixes);
    let mut all = batcher.batches_all_ranks().map_err(|e| e.to_string())?;
    let pick = |r: u64| (r, RankOutput::Batches(std::mem::take(&mut all[r as usize])));
    Ok(ranks.into_iter().map(pick).collect())
}

/// Reads complexities from a file if `source` names one, else parses it as a list.
fn read_complexities(source: &str) -> Result<Vec<i64>, String> {
    let path = Path::new(source);
    let (text, origin) = if path.is_file() {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read complexities file {source}: {e}"))?;
        (text, format!("complexities file {source}"))
    } else {
        (source.to_string(), "--complexities".to_string())
    };
    let trimmed = text.trim();
    let values: Vec<i64> = if trimmed.starts_with('[') {
        serde_json::from_str(trimmed)
            .map_err(|e| format!("{origin}: not a JSON array of integers: {e}"))?
    } else {
        trimmed
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|t| !t.is_empty())
            .map(|t| {
                t.parse::<i64>()
                    .map_err(|_| format!("{origin}: {t:?} is not an integer (nor a file)"))
            })
            .collect::<Result<_, _>>()?
    };
    if values.is_empty() {
        return Err(format!("{origin}: no complexities"));
    }
    if values.len() as u64 > MAX_COMPLEXITY_ITEMS {
        return Err(format!(
            "{origin}: {} items exceed the limit of {MAX_COMPLEXITY_ITEMS}",
            values.len()
        ));
    }
    Ok(values)
}

fn write_text(out: &mut impl Write, outputs: &[(u64, RankOutput)]) -> std::io::Result<()> {
    for (rank, output) in outputs {
        write!(out, "rank {rank}:")?;
        match output {
            RankOutput::Indices(indices) => {
                for index in indices {
                    write!(out, " {index}")?;
                }
            }
            RankOutput::Batches(batches) => {
                for batch in batches {
                    let items: Vec<String> = batch.iter().map(u64::to_string).collect();
                    write!(out, " [{}]", items.join(" "))?;
                }
            }
        }
        writeln!(out)?;
    }
    Ok(())
}

fn write_json(
    out: &mut impl Write,
    args: &SampleArgs,
    outputs: &[(u64, RankOutput)],
) -> std::io::Result<()> {
    let ranks: Vec<serde_json::Value> = outputs
        .iter()
        .map(|(rank, output)| match output {
            RankOutput::Indices(indices) => json!({"rank": rank, "indices": indices}),
            RankOutput::Batches(batches) => json!({"rank": rank, "batches": batches}),
        })
        .collect();
    let kind: &str = args.kind.into();
    let document = json!({
        "sampler": kind,
        "world_size": args.world_size,
        "seed": args.seed,
        "epoch": args.epoch,
        "shuffle": !args.no_shuffle,
        "drop_last": args.drop_last,
        "ranks": ranks,
    });
    serde_json::to_writer(&mut *out, &document)?;
    writeln!(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complexities_parse_from_lists_and_json() {
        assert_eq!(read_complexities("3,1, 2").unwrap(), vec![3, 1, 2]);
        assert_eq!(read_complexities("[-1, 4]").unwrap(), vec![-1, 4]);
        assert!(read_complexities("3,x").is_err());
        assert!(read_complexities(" ").is_err());
    }
}
