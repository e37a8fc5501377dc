//! A shard's part file: what one `--shard k/n` of a seed batch (`run --seeds`) or of a
//! comparison (`compare`) ran, and what it is a shard of, so `trainsim merge` can put the
//! parts back together and print what one machine would have printed.
//!
//! Shard k of n runs the seeds whose position in the range (seed − start) mod n is k − 1,
//! as `check --shard` deals files: the shards' sizes differ by at most one seed, and every
//! shard gets early and late seeds alike.

use super::check::Shard;
use super::run::{Format, SeedRange};
use crate::report::compare::{self, VariantRuns};
use crate::report::goodput_summary::{GoodputTally, SeedRow};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::Path;

/// What every part file says it is.
pub const FORMAT: &str = "trainsim-goodput-part";
/// The part format's version; a merge refuses parts of another.
pub const VERSION: u32 = 1;

/// A seed batch or a comparison, as one shard ran it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Part {
    pub format: String,
    pub version: u32,
    /// What this part is a shard of: the same in every part of one run.
    pub of: RunOf,
    /// Which shard this is, 1-based.
    pub shard: usize,
    /// One entry per variant (one for a batch), with this shard's rows in seed order.
    pub variants: Vec<PartVariant>,
    /// Seeds whose run failed in the harness (a batch only; a comparison stops at one).
    pub harness_failures: Vec<HarnessRow>,
}

/// The run that the parts are shards of.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunOf {
    pub kind: Kind,
    /// The command that runs the whole thing on one machine; `--shard k/n --out FILE`
    /// added to it runs shard k.
    pub command: String,
    /// The scenario files, with a digest of each file's text, so parts of a file edited
    /// between shards do not merge.
    pub scenarios: Vec<ScenarioRef>,
    /// The swept key and values (`KEY=V1,V2,...`) of a sweep.
    pub set: Option<String>,
    /// The variants' names, in the order their results print.
    pub variants: Vec<String>,
    pub seeds_start: u64,
    pub seeds_end_exclusive: u64,
    /// Planted bugs switched on (`run --mutant`).
    pub mutants: Vec<String>,
    /// How many shards the seeds were dealt to.
    pub shards: usize,
}

/// A batch of seeds of one file (`run --seeds`) or a comparison of variants (`compare`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Batch,
    Compare,
}

/// A scenario file as the run read it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioRef {
    pub file: String,
    /// SHA-256 of the file's bytes, hex.
    pub sha256: String,
}

/// One variant's rows in a part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartVariant {
    pub name: String,
    pub rows: Vec<SeedRow>,
}

/// A seed whose run failed in the harness, with the failure's text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HarnessRow {
    pub seed: u64,
    pub message: String,
}

impl RunOf {
    /// The seeds of the whole run.
    pub fn seed_range(&self) -> std::ops::Range<u64> {
        self.seeds_start..self.seeds_end_exclusive
    }

    /// The seeds shard `index` of this run owns, in order.
    pub fn seeds_of(&self, index: usize) -> impl Iterator<Item = u64> {
        let shard = Shard {
            index,
            count: self.shards,
        };
        let start = self.seeds_start;
        self.seed_range()
            .filter(move |seed| shard.owns((seed - start) as usize))
    }

    /// The command that runs shard `index`, writing `out`.
    pub fn shard_command(&self, index: usize, out: &str) -> String {
        format!(
            "{} --shard {index}/{} --out {out}",
            self.command, self.shards
        )
    }
}

/// The seeds `shard` owns of `range` (every seed without a shard).
pub fn owned_seeds(range: SeedRange, shard: Option<Shard>) -> Vec<u64> {
    let shard = shard.unwrap_or(Shard { index: 1, count: 1 });
    (range.start..range.end_exclusive)
        .filter(|seed| shard.owns((seed - range.start) as usize))
        .collect()
}

/// The file at `path` as a part names it; `Err` is a message naming the file.
pub fn scenario_ref(path: &Path) -> Result<ScenarioRef, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let digest = Sha256::digest(&bytes);
    Ok(ScenarioRef {
        file: path.display().to_string(),
        sha256: digest.iter().map(|b| format!("{b:02x}")).collect(),
    })
}

/// Fails at once when `path` cannot be written, before any run starts: a directory, a
/// missing or read-only directory. The probe file is removed again.
pub fn check_writable(flag: &str, path: &Path) -> Result<(), String> {
    let bad = |why: String| format!("{flag} {}: cannot write there: {why}", path.display());
    if path.is_dir() {
        return Err(bad("it is a directory".into()));
    }
    let name = path
        .file_name()
        .ok_or_else(|| bad("not a file name".into()))?;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let probe = dir.join(format!(
        ".{}.{}.probe",
        name.to_string_lossy(),
        std::process::id()
    ));
    std::fs::File::create(&probe).map_err(|e| bad(e.to_string()))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// Writes `part` to `path` (atomically); `Err` is the message.
pub fn write(path: &Path, part: &Part) -> Result<(), String> {
    let json = serde_json::to_string(part).expect("a part serializes");
    super::write_atomically(path, json.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// What a batch prints after its runs, and what a merge of its parts prints: the goodput
/// over the seeds counted. Empty when no run was counted.
pub fn batch_summary(file: &str, tally: GoodputTally, format: Format) -> String {
    match (tally.summary(), format) {
        (None, _) => String::new(),
        (Some(s), Format::Text) => format!("{}\n", s.to_text(file)),
        (Some(s), Format::Json) => format!("{}\n", s.to_json(file)),
    }
}

/// What a comparison prints, and what a merge of its parts prints.
pub fn compare_summary(variants: &[VariantRuns], format: Format) -> String {
    match format {
        Format::Text => format!("{}\n", compare::to_text(variants)),
        Format::Json => format!("{}\n", compare::to_json(variants)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shards_deal_every_seed_once() {
        let range = SeedRange {
            start: 10,
            end_exclusive: 17,
        };
        let mut all: Vec<u64> = (1..=3)
            .flat_map(|index| owned_seeds(range, Some(Shard { index, count: 3 })))
            .collect();
        assert_eq!(
            owned_seeds(range, Some(Shard { index: 2, count: 3 })),
            [11, 14]
        );
        all.sort_unstable();
        assert_eq!(all, (10..17).collect::<Vec<_>>());
        assert_eq!(owned_seeds(range, None), (10..17).collect::<Vec<_>>());
    }
}
