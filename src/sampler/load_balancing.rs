//! Bagua's `LoadBalancingDistributedSampler` and `LoadBalancingDistributedBatchSampler`,
//! bit for bit, plus an opt-in fix for the batch sampler's negative slice.

use std::str::FromStr;

use super::{check_rank, epoch_seed, samples_per_rank, SamplerError, TorchGenerator};
use crate::fixes::{Fix, FixInfo, ShownBy};

/// Name of the fix that makes the batch sampler truncate surplus batches with `drop_last`
/// instead of appending them again (see [`SamplerFix::BatchSamplerNegativeSlice`]).
pub const BATCH_SAMPLER_NEGATIVE_SLICE: &str = SamplerFix::BatchSamplerNegativeSlice.into_str();

/// A deliberate departure from the reference, named (in kebab-case) so runs say which ones
/// they used.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[strum(serialize_all = "kebab-case", const_into_str)]
pub enum SamplerFix {
    /// With `drop_last`, Bagua pads each rank's batch list with `batches[:total - len]`;
    /// when a rank has more batches than the least one, that slice is negative and *appends*
    /// almost all its batches again instead of dropping the surplus. The fix truncates.
    BatchSamplerNegativeSlice,
}

impl SamplerFix {
    /// The fix's stable name.
    pub fn name(self) -> &'static str {
        self.into_str()
    }
}

impl Fix for SamplerFix {
    const KEY: &'static str = "trainsim sample --fix";

    fn info(self) -> FixInfo {
        match self {
            SamplerFix::BatchSamplerNegativeSlice => FixInfo {
                upstream: "Bagua: the batch sampler's negative slice",
                summary: "with `drop_last`, every rank's batches are cut to the fewest any rank \
                    has; Bagua pads with `batches[:total - len]`, a negative slice that appends \
                    almost all of a longer rank's batches again (it acts only when ranks get \
                    different numbers of batches)",
                shown_by: ShownBy::Test("bagua_negative_slice"),
            },
        }
    }
}

impl FromStr for SamplerFix {
    type Err = SamplerError;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        <Self as strum::VariantArray>::VARIANTS
            .iter()
            .find(|fix| fix.name() == name)
            .copied()
            .ok_or_else(|| SamplerError::UnknownFix(name.to_string()))
    }
}

/// Bagua's `LoadBalancingDistributedSampler` over items with the given complexities.
///
/// Items are sorted by complexity (plus, when shuffling, a random jitter below
/// `random_number`), cut into chunks of `num_replicas` consecutive items (wrapping around to
/// fill `max(1, num_samples)` chunks), and each rank takes its position in every chunk, the
/// chunks visited in `randperm` order. Ranks thus get items of similar complexity per step.
#[derive(Debug, Clone)]
pub struct LoadBalancingSampler {
    complexities: Vec<i64>,
    num_replicas: u64,
    rank: u64,
    shuffle: bool,
    seed: i64,
    drop_last: bool,
    epoch: u64,
    /// Exclusive bound of the jitter draw: `int((max - min) * random_level + 1)`, always >= 1.
    random_number: u64,
}

impl LoadBalancingSampler {
    /// A sampler for `rank` of `num_replicas`, at epoch 0; errors where Bagua raises (bad
    /// rank, `random_level` outside `[0, 1]`, empty dataset).
    pub fn new(
        complexities: Vec<i64>,
        num_replicas: u64,
        rank: u64,
        shuffle: bool,
        seed: i64,
        drop_last: bool,
        random_level: f64,
    ) -> Result<Self, SamplerError> {
        check_rank(rank, num_replicas)?;
        let (Some(&min), Some(&max)) = (complexities.iter().min(), complexities.iter().max())
        else {
            return Err(SamplerError::EmptyDataset);
        };
        if !(0.0..=1.0).contains(&random_level) {
            return Err(SamplerError::InvalidRandomLevel(random_level));
        }
        let spread = max as i128 - min as i128;
        // Python computes this in floats and truncates; the same operations in f64 agree.
        let bound = spread as f64 * random_level + 1.0;
        if bound >= i64::MAX as f64 {
            return Err(SamplerError::ComplexitySpreadTooLarge { spread });
        }
        Ok(LoadBalancingSampler {
            complexities,
            num_replicas,
            rank,
            shuffle,
            seed,
            drop_last,
            epoch: 0,
            random_number: bound as u64,
        })
    }

    /// Selects the epoch whose order the next call yields.
    pub fn set_epoch(&mut self, epoch: u64) {
        self.epoch = epoch;
    }

    /// The rank this sampler yields for.
    pub fn rank(&self) -> u64 {
        self.rank
    }

    /// Number of replicas.
    pub fn num_replicas(&self) -> u64 {
        self.num_replicas
    }

    /// Whether the tail is dropped rather than padded.
    pub fn drop_last(&self) -> bool {
        self.drop_last
    }

    /// Number of indices each rank gets per epoch (Bagua's `num_samples`).
    pub fn len(&self) -> u64 {
        let len = self.complexities.len() as u64;
        samples_per_rank(len, self.num_replicas, self.drop_last).0
    }

    /// True when each rank gets no index (only with `drop_last` and fewer items than ranks).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The indices this sampler's rank gets in the current epoch.
    pub fn indices(&self) -> Result<Vec<u64>, SamplerError> {
        Ok(self.epoch_chunks()?.rank_indices(self.rank))
    }

    /// The indices of every rank in the current epoch, computing the order once.
    pub fn indices_all_ranks(&self) -> Result<Vec<Vec<u64>>, SamplerError> {
        let chunks = self.epoch_chunks()?;
        Ok((0..self.num_replicas)
            .map(|rank| chunks.rank_indices(rank))
            .collect())
    }

    /// Bagua's `shuffle_chunks`: the complexity order and the order chunks are visited in.
    pub fn epoch_chunks(&self) -> Result<EpochChunks, SamplerError> {
        let num_samples = self.len();
        let num_chunks = num_samples.max(1);
        let (sorted_items, mut chunk_order) = if self.shuffle {
            let mut generator = TorchGenerator::new(epoch_seed(self.seed, self.epoch));
            // random_number >= 1, so Bagua always draws the jitter, even at random_level 0
            // where every draw is 0: the randperm below sees a generator advanced by n words.
            let jitter = generator.randint(self.random_number, self.complexities.len())?;
            let sorted_items = self.sorted_items(Some(&jitter));
            let chunk_order = generator.randperm(num_chunks)?;
            (sorted_items, chunk_order)
        } else {
            (self.sorted_items(None), (0..num_chunks).collect())
        };
        // There are max(1, num_samples) chunks, so the reference's padding never adds any;
        // only drop_last's truncation (to 0 chunks when items < ranks) can change the list.
        chunk_order.truncate(num_samples as usize);
        Ok(EpochChunks {
            sorted_items,
            chunk_order,
            num_replicas: self.num_replicas,
        })
    }

    /// Item indices stably sorted by complexity plus jitter (ties keep index order, as
    /// Python's `sorted` does).
    fn sorted_items(&self, jitter: Option<&[u64]>) -> Vec<u64> {
        let mut keyed: Vec<(i128, u64)> = self
            .complexities
            .iter()
            .enumerate()
            .map(|(item, &complexity)| {
                let extra = jitter.map_or(0, |j| j[item]);
                (complexity as i128 + extra as i128, item as u64)
            })
            .collect();
        // Sorting by (key, index) with an unstable sort gives the stable order, faster.
        keyed.sort_unstable();
        keyed.into_iter().map(|(_, item)| item).collect()
    }
}

/// One epoch's layout: items in complexity order, chunked by `num_replicas`, and the order
/// chunks are visited in. Chunk `c` holds `sorted_items[(c * p + r) % n]` at position `r`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpochChunks {
    /// Item indices in (jittered) complexity order.
    pub sorted_items: Vec<u64>,
    /// Chunk numbers in visiting order, `num_samples` of them.
    pub chunk_order: Vec<u64>,
    /// Chunk width.
    pub num_replicas: u64,
}

impl EpochChunks {
    /// `[index_chunks[c][rank] for c in chunk_order]`.
    pub fn rank_indices(&self, rank: u64) -> Vec<u64> {
        let n = self.sorted_items.len() as u64;
        self.chunk_order
            .iter()
            .map(|&chunk| self.sorted_items[((chunk * self.num_replicas + rank) % n) as usize])
            .collect()
    }
}

/// Bagua's `LoadBalancingDistributedBatchSampler` with a `batch_fn` that cuts each rank's
/// indices into consecutive batches of `batch_size` (the last one possibly shorter).
#[derive(Debug, Clone)]
pub struct LoadBalancingBatchSampler {
    sampler: LoadBalancingSampler,
    batch_size: usize,
    drop_last: bool,
    fixes: Vec<SamplerFix>,
}

impl LoadBalancingBatchSampler {
    /// Wraps `sampler`; like Bagua, refuses one with `drop_last` set. `drop_last` here means
    /// "cut every rank to the fewest batches" instead of "pad to the most".
    pub fn new(
        sampler: LoadBalancingSampler,
        batch_size: usize,
        drop_last: bool,
    ) -> Result<Self, SamplerError> {
        if sampler.drop_last() {
            return Err(SamplerError::BatchSamplerNeedsNoDropLast);
        }
        if batch_size == 0 {
            return Err(SamplerError::ZeroBatchSize);
        }
        Ok(LoadBalancingBatchSampler {
            sampler,
            batch_size,
            drop_last,
            fixes: Vec::new(),
        })
    }

    /// Opts into departures from the reference (none by default).
    pub fn with_fixes(mut self, fixes: &[SamplerFix]) -> Self {
        self.fixes = fixes.to_vec();
        self
    }

    /// Selects the epoch of the wrapped sampler.
    pub fn set_epoch(&mut self, epoch: u64) {
        self.sampler.set_epoch(epoch);
    }

    /// The batches this sampler's rank gets in the current epoch.
    pub fn batches(&self) -> Result<Vec<Vec<u64>>, SamplerError> {
        let rank = self.sampler.rank() as usize;
        Ok(self.batches_all_ranks()?.swap_remove(rank))
    }

    /// The batches of every rank in the current epoch.
    pub fn batches_all_ranks(&self) -> Result<Vec<Vec<Vec<u64>>>, SamplerError> {
        let size = self.batch_size;
        self.batches_all_ranks_with(|indices| consecutive_batches(indices, size))
    }

    /// As [`Self::batches_all_ranks`] with any `batch_fn` (Bagua accepts any callable; with
    /// one that yields unequal batch counts the padding rules below start to matter).
    pub fn batches_all_ranks_with<F>(&self, batch_fn: F) -> Result<Vec<Vec<Vec<u64>>>, SamplerError>
    where
        F: Fn(&[u64]) -> Vec<Vec<u64>>,
    {
        let per_rank: Vec<Vec<Vec<u64>>> = self
            .sampler
            .indices_all_ranks()?
            .iter()
            .map(|indices| batch_fn(indices))
            .collect();
        let fixed = self.fixes.contains(&SamplerFix::BatchSamplerNegativeSlice);
        Ok(equalize_batch_counts(per_rank, self.drop_last, fixed))
    }
}

/// Cuts `indices` into consecutive batches of `batch_size` (Python's
/// `[idx[i:i + k] for i in range(0, len(idx), k)]`).
pub fn consecutive_batches(indices: &[u64], batch_size: usize) -> Vec<Vec<u64>> {
    indices
        .chunks(batch_size.max(1))
        .map(<[u64]>::to_vec)
        .collect()
}

/// Bagua's `generate_batches` padding: every rank's list becomes
/// `batches + batches[:total - len(batches)]`, `total` being the most batches of any rank (or
/// the fewest with `drop_last`). Python slicing caps a positive slice at the list length (so
/// padding may fall short) and reads a negative one from the end, which with `drop_last`
/// appends batches instead of dropping them; `fix_negative_slice` truncates instead.
pub fn equalize_batch_counts(
    per_rank: Vec<Vec<Vec<u64>>>,
    drop_last: bool,
    fix_negative_slice: bool,
) -> Vec<Vec<Vec<u64>>> {
    let counts = per_rank.iter().map(Vec::len);
    let total = if drop_last {
        counts.min()
    } else {
        counts.max()
    }
    .unwrap_or(0);
    per_rank
        .into_iter()
        .map(|mut batches| {
            let len = batches.len();
            if total >= len {
                let extra = (total - len).min(len);
                batches.extend_from_within(..extra);
            } else if fix_negative_slice {
                batches.truncate(total);
            } else {
                // batches[:total - len] with a negative bound keeps the first `total` ones.
                batches.extend_from_within(..total);
            }
            batches
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sampler(complexities: Vec<i64>, replicas: u64) -> LoadBalancingSampler {
        LoadBalancingSampler::new(complexities, replicas, 0, true, 0, false, 0.5).unwrap()
    }

    #[test]
    fn rejects_what_bagua_rejects() {
        assert!(LoadBalancingSampler::new(vec![], 2, 0, true, 0, false, 0.0).is_err());
        assert!(LoadBalancingSampler::new(vec![1], 2, 2, true, 0, false, 0.0).is_err());
        assert!(LoadBalancingSampler::new(vec![1], 2, 0, true, 0, false, 1.5).is_err());
        let dropping = LoadBalancingSampler::new(vec![1, 2], 2, 0, true, 0, true, 0.0).unwrap();
        assert!(LoadBalancingBatchSampler::new(dropping, 2, false).is_err());
    }

    #[test]
    fn unshuffled_ranks_take_positions_in_sorted_chunks() {
        let s = LoadBalancingSampler::new(vec![5, 1, 4, 2, 3], 2, 0, false, 0, false, 0.0);
        // Sorted: items 1,3,4,2,0; chunks [1,3] [4,2] [0,1(wrapped)].
        let all = s.unwrap().indices_all_ranks().unwrap();
        assert_eq!(all, vec![vec![1, 4, 0], vec![3, 2, 1]]);
    }

    #[test]
    fn batch_counts_pad_from_the_front() {
        let per_rank = vec![vec![vec![1], vec![2], vec![3]], vec![vec![4]]];
        let padded = equalize_batch_counts(per_rank, false, false);
        // total 3: rank 1 can only repeat its single batch once (Python's capped slice).
        assert_eq!(padded[1], vec![vec![4], vec![4]]);
        assert_eq!(padded[0].len(), 3);
    }

    #[test]
    fn negative_slice_appends_unless_fixed() {
        // A batch_fn that gives rank 0 three batches and rank 1 one.
        let per_rank = || vec![vec![vec![1], vec![2], vec![3]], vec![vec![4, 5]]];
        let as_bagua = equalize_batch_counts(per_rank(), true, false);
        // batches[:1 - 3] == batches[:-2] == the first batch, appended: 4 batches, not 1.
        assert_eq!(as_bagua[0], vec![vec![1], vec![2], vec![3], vec![1]]);
        let fixed = equalize_batch_counts(per_rank(), true, true);
        assert_eq!(fixed[0], vec![vec![1]]);
        assert_eq!(fixed[1], vec![vec![4, 5]]);
    }

    #[test]
    fn fix_names_round_trip() {
        let fix: SamplerFix = BATCH_SAMPLER_NEGATIVE_SLICE.parse().unwrap();
        assert_eq!(fix.name(), BATCH_SAMPLER_NEGATIVE_SLICE);
        assert!("no-such-fix".parse::<SamplerFix>().is_err());
    }

    #[test]
    fn batch_sampler_with_uneven_batch_fn_shows_the_bug() {
        let s = sampler((0..12).collect(), 2);
        let b = LoadBalancingBatchSampler::new(s, 2, true).unwrap();
        // Rank 0 gets one batch per index, rank 1 a single batch: uneven counts.
        let uneven = |idx: &[u64]| {
            if idx.contains(&0) {
                idx.iter().map(|&i| vec![i]).collect()
            } else {
                vec![idx.to_vec()]
            }
        };
        let buggy = b.batches_all_ranks_with(uneven).unwrap();
        let fixed = b
            .clone()
            .with_fixes(&[SamplerFix::BatchSamplerNegativeSlice])
            .batches_all_ranks_with(uneven)
            .unwrap();
        assert!(buggy.iter().map(Vec::len).max() > Some(1));
        assert!(fixed.iter().all(|batches| batches.len() == 1));
    }
}
