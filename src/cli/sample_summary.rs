//! `trainsim sample --summary`: how an epoch evens out over the ranks instead of its indices:
//! samples per rank, the samples padding repeats and the ranks they land on, what
//! `drop_last` would cut instead, and with `--batch-size` the batches per rank, the short last
//! batch and what a `DataLoader`'s own `drop_last` would leave out.

use std::io::Write;

use serde_json::json;

use super::{check_world_and_fixes, distributed_len, OutputFormat, SampleArgs, SamplerKind};
use crate::sampler::summary::{Batching, EpochEvening};
use crate::sampler::{DistributedSampler, LoadBalancingBatchSampler};

/// Most indices a text line lists before saying how many more there are (JSON lists all:
/// padding and the dropped tail are each shorter than the world).
const LISTED_MAX: usize = 20;

/// One epoch's summary.
struct Summary {
    evening: EpochEvening,
    batching: Option<Batching>,
}

/// Runs `--summary`; returns the exit code (2 for bad arguments).
pub(super) fn execute(args: &SampleArgs) -> i32 {
    let summary = match summarize(args) {
        Ok(summary) => summary,
        Err(message) => {
            eprintln!("trainsim sample: {message}");
            return 2;
        }
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let written = match args.format {
        OutputFormat::Text => write_text(&mut out, args, &summary),
        OutputFormat::Json => write_json(&mut out, args, &summary),
    }
    .and_then(|()| out.flush());
    match written {
        Ok(()) => 0,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            eprintln!("trainsim sample: cannot write output: {e}");
            1
        }
    }
}

/// The epoch's list before evening out, and its batching, from the sampler asked for.
fn summarize(args: &SampleArgs) -> Result<Summary, String> {
    let fixes = check_world_and_fixes(args)?;
    let shuffle = !args.no_shuffle;
    match args.kind {
        SamplerKind::Distributed => {
            if args.drop_last_batches || !fixes.is_empty() {
                return Err("--drop-last-batches and --fix apply to load_balancing only".into());
            }
            let len = distributed_len(args)?;
            // Padding and truncation both start from the same (shuffled) list of `len`.
            let mut sampler =
                DistributedSampler::new(len, args.world_size, 0, shuffle, args.seed, false)
                    .map_err(|e| e.to_string())?;
            sampler.set_epoch(args.epoch);
            let mut order = sampler.padded_order().map_err(|e| e.to_string())?;
            order.truncate(len as usize);
            let evening = EpochEvening::of(&order, args.world_size);
            let num_samples = in_effect(&evening, args.drop_last);
            let batching = match args.batch_size {
                Some(0) => return Err("--batch-size must be at least 1".into()),
                Some(size) => Some(Batching::of(num_samples, size as u64)),
                None => None,
            };
            Ok(Summary { evening, batching })
        }
        SamplerKind::LoadBalancing => load_balancing(args, shuffle, &fixes),
    }
}

fn load_balancing(
    args: &SampleArgs,
    shuffle: bool,
    fixes: &[crate::sampler::SamplerFix],
) -> Result<Summary, String> {
    let sampler = super::load_balancing_sampler(args, shuffle, fixes, |_| Ok(()))?;
    // Bagua pads and truncates the items in (jittered) complexity order.
    let order = sampler
        .epoch_chunks()
        .map_err(|e| e.to_string())?
        .sorted_items;
    let evening = EpochEvening::of(&order, args.world_size);
    let Some(batch_size) = args.batch_size else {
        return Ok(Summary {
            evening,
            batching: None,
        });
    };
    let batcher = LoadBalancingBatchSampler::new(sampler, batch_size, args.drop_last_batches)
        .map_err(|e| format!("{e} (drop --drop-last when batching)"))?
        .with_fixes(fixes);
    let all = batcher.batches_all_ranks().map_err(|e| e.to_string())?;
    // The batch sampler's own batches: every rank gets as many (see docs/fidelity.md).
    let first = all.first().map(Vec::as_slice).unwrap_or_default();
    let batching = Batching {
        batch_size: batch_size as u64,
        batches: first.len() as u64,
        last_batch: first.last().map_or(0, |b| b.len() as u64),
    };
    Ok(Summary {
        evening,
        batching: Some(batching),
    })
}

/// Samples per rank with the `drop_last` asked for.
fn in_effect(e: &EpochEvening, drop_last: bool) -> u64 {
    if drop_last {
        e.dropped_num_samples
    } else {
        e.padded_num_samples
    }
}

/// The ranks to print a line for.
fn ranks(args: &SampleArgs) -> std::ops::Range<u64> {
    match args.rank {
        Some(rank) => rank..rank + 1,
        None => 0..args.world_size,
    }
}

/// `1 sample`, `2 samples`.
fn samples(n: u64) -> String {
    match n {
        1 => "1 sample".to_owned(),
        n => format!("{n} samples"),
    }
}

/// `a b c … (N more)`.
fn listed(items: impl ExactSizeIterator<Item = String>) -> String {
    let total = items.len();
    let mut text: Vec<String> = items.take(LISTED_MAX).collect();
    if total > LISTED_MAX {
        text.push(format!("… ({} more)", total - LISTED_MAX));
    }
    text.join(" ")
}

fn write_text(out: &mut impl Write, args: &SampleArgs, s: &Summary) -> std::io::Result<()> {
    let e = &s.evening;
    let (n, p) = (e.dataset_len, e.num_replicas);
    let kind: &str = args.kind.into();
    let shuffle = if args.no_shuffle { "off" } else { "on" };
    let list = match (args.kind, args.no_shuffle) {
        (SamplerKind::Distributed, false) => "the shuffled index list",
        (SamplerKind::Distributed, true) => "the index list",
        (SamplerKind::LoadBalancing, _) => "the items in complexity order",
    };
    writeln!(
        out,
        "{kind}: {n} samples over {p} ranks (shuffle {shuffle}, seed {}, epoch {})",
        args.seed, args.epoch
    )?;
    write_drop_last(out, args, e, list)?;
    let num_samples = in_effect(e, args.drop_last);
    for rank in ranks(args) {
        write!(out, "rank {rank}: {}", samples(num_samples))?;
        // Padding fills fewer places than there are ranks, past the dataset's end: a rank
        // gets at most one copy, as its last sample.
        if let (false, [copy]) = (args.drop_last, e.padding_of(rank).as_slice()) {
            write!(out, ", the last a padding copy of index {copy}")?;
        }
        writeln!(out)?;
    }
    if let Some(b) = &s.batching {
        write_batching(out, args, b, p)?;
    }
    Ok(())
}

/// What each `drop_last` setting does to the epoch: the padding one adds, the tail the
/// other drops, each line marking the setting in effect. `list` names what is padded from.
fn write_drop_last(
    out: &mut impl Write,
    args: &SampleArgs,
    e: &EpochEvening,
    list: &str,
) -> std::io::Result<()> {
    let (n, p) = (e.dataset_len, e.num_replicas);
    let mark = |on: bool| {
        if on == args.drop_last {
            " (in effect)"
        } else {
            ""
        }
    };
    write!(
        out,
        "drop_last=false{}: {} per rank, ceil({n} / {p}); ",
        mark(false),
        samples(e.padded_num_samples)
    )?;
    if e.padding.is_empty() {
        writeln!(out, "no padding")?;
    } else {
        let repeats = e.repeats();
        let times = repeats.iter().map(|(i, t)| format!("{i} ×{t}"));
        writeln!(
            out,
            "padding repeats {} from the start of {list} (index ×times dealt): {}",
            samples(e.padding.len() as u64),
            listed(times)
        )?;
    }
    write!(
        out,
        "drop_last=true{}: {} per rank, floor({n} / {p}); ",
        mark(true),
        samples(e.dropped_num_samples)
    )?;
    if e.dropped.is_empty() {
        writeln!(out, "drops nothing")?;
    } else {
        let indices = e.dropped.iter().map(|d| d.index.to_string());
        writeln!(
            out,
            "drops the last {} of {list}, unseen this epoch: {}",
            samples(e.dropped.len() as u64),
            listed(indices)
        )?;
    }
    Ok(())
}

fn write_batching(
    out: &mut impl Write,
    args: &SampleArgs,
    b: &Batching,
    world_size: u64,
) -> std::io::Result<()> {
    write!(
        out,
        "batches of {}: {} per rank, the last holding {}",
        b.batch_size, b.batches, b.last_batch
    )?;
    match args.kind {
        SamplerKind::Distributed => match b.loader_drops() {
            0 => writeln!(out, "; DataLoader(drop_last=True) would drop nothing"),
            drops => writeln!(
                out,
                "; DataLoader(drop_last=True) would drop that batch: {} per rank, {} in all",
                samples(drops),
                drops * world_size
            ),
        },
        // Bagua's batch sampler goes to the DataLoader as `batch_sampler`, which refuses a
        // `drop_last` of its own; the sampler's drop_last cuts ranks to the fewest batches.
        SamplerKind::LoadBalancing => writeln!(
            out,
            " (Bagua's batch sampler; its drop_last cuts every rank to the fewest batches any rank has, so a short last batch stays)"
        ),
    }
}

fn write_json(out: &mut impl Write, args: &SampleArgs, s: &Summary) -> std::io::Result<()> {
    let e = &s.evening;
    let num_samples = in_effect(e, args.drop_last);
    let ranks: Vec<serde_json::Value> = ranks(args)
        .map(|rank| {
            let padding = if args.drop_last {
                Vec::new()
            } else {
                e.padding_of(rank)
            };
            json!({"rank": rank, "samples": num_samples, "padding": padding})
        })
        .collect();
    let repeats: Vec<serde_json::Value> = e
        .repeats()
        .into_iter()
        .map(|(index, times)| json!({"index": index, "times": times}))
        .collect();
    let place = |p: &crate::sampler::summary::Place| json!({"rank": p.rank, "index": p.index});
    let batches = s.batching.map(|b| {
        let loader = (args.kind == SamplerKind::Distributed).then(|| b.loader_drops());
        json!({
            "batch_size": b.batch_size,
            "per_rank": b.batches,
            "last_batch": b.last_batch,
            "dataloader_drop_last_drops_per_rank": loader,
        })
    });
    let kind: &str = args.kind.into();
    let document = json!({
        "sampler": kind,
        "dataset_len": e.dataset_len,
        "world_size": e.num_replicas,
        "seed": args.seed,
        "epoch": args.epoch,
        "shuffle": !args.no_shuffle,
        "drop_last": args.drop_last,
        "num_samples": num_samples,
        "padding": {
            "num_samples": e.padded_num_samples,
            "places": e.padding.iter().map(place).collect::<Vec<_>>(),
            "repeats": repeats,
        },
        "drop_last_drops": {
            "num_samples": e.dropped_num_samples,
            "places": e.dropped.iter().map(place).collect::<Vec<_>>(),
        },
        "ranks": ranks,
        "batches": batches,
    });
    serde_json::to_writer(&mut *out, &document)?;
    writeln!(out)
}
