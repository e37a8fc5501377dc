//! One epoch dealt to a world of ranks and cut into batches as a `DataLoader` does, with
//! what is derived from it kept beside it; and a group's tally of which of its batches
//! were trained. The job's epoch plans and the checker's deals are both one of these, dealt
//! by the sampler for the key each names (`shared_deal`).
//!
//! Pure: no clock, no I/O. A dealt epoch is shared by every run of the process that deals
//! the same one (`crate::memo`), so what it derives (a batch's digest, an epoch's distinct
//! samples) is computed once for all of them.

use super::RankLists;
use crate::trace::samples_digest;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Batch digests a dealt epoch keeps (about 50 bytes each): every node's every batch of a
/// fuzz case's epoch (8 nodes of 100 000 samples in batches of 32) fits, and the epochs a
/// process keeps add at most a few MiB.
const DIGESTS_KEPT_MAX: usize = 8_192;

/// One epoch dealt to a world of ranks, each rank's samples side by side so a batch is a
/// slice: dealt once, read by every step of the epoch without copying.
#[derive(Debug)]
pub struct DealtEpoch {
    lists: RankLists,
    /// Samples per rank (torch's `num_samples`).
    num_samples: u64,
    batch_size: u64,
    /// What the runs sharing this epoch computed from it.
    derived: Derived,
}

/// Pure functions of a dealt epoch, kept with it.
#[derive(Debug, Default)]
struct Derived {
    /// By (first rank, ranks, batch): the digest of those ranks' batch.
    digests: Mutex<BTreeMap<(u64, u32, u64), u64>>,
    /// By first batch: distinct ids in every rank's batches from it to the last.
    distinct_from: Mutex<BTreeMap<u64, u64>>,
}

impl DealtEpoch {
    /// `lists` cut into batches of `batch_size`, `num_samples` per rank.
    pub fn new(lists: RankLists, num_samples: u64, batch_size: u64) -> Self {
        DealtEpoch {
            lists,
            num_samples,
            batch_size,
            derived: Derived::default(),
        }
    }

    /// Batches per rank: the last one may be short, as a `DataLoader` keeps it.
    pub fn batches(&self) -> u64 {
        self.num_samples.div_ceil(self.batch_size.max(1))
    }

    /// Ranks in the world dealt to.
    pub fn world_size(&self) -> u64 {
        self.lists.world_size()
    }

    /// How many leading batches of the epoch are full (`batch_size` samples) for every rank.
    pub fn full_batches(&self) -> u64 {
        let shortest = self.lists.shortest() as u64;
        shortest.min(self.num_samples) / self.batch_size.max(1)
    }

    /// The ids of `rank`'s batch `batch`; none for a rank outside the world or a batch past
    /// the last.
    pub fn batch(&self, rank: u64, batch: u64) -> &[u64] {
        let first = batch.saturating_mul(self.batch_size);
        self.samples(rank, first, first.saturating_add(self.batch_size))
    }

    /// `rank`'s samples from place `first` to before `end`, both cut to the rank's
    /// `num_samples` and to its list (a mutant's shifted stride leaves the last ranks short).
    fn samples(&self, rank: u64, first: u64, end: u64) -> &[u64] {
        let list = self.lists.rank(rank);
        let end = (end.min(self.num_samples) as usize).min(list.len());
        &list[(first as usize).min(end)..end]
    }

    /// The digest of batch `batch` of ranks `first_rank..first_rank + ranks`, in rank order
    /// (what a node whose ranks those are trains on in that step).
    pub fn digest(&self, first_rank: u64, ranks: u32, batch: u64) -> u64 {
        let key = (first_rank, ranks, batch);
        kept(&self.derived.digests, key, DIGESTS_KEPT_MAX, || {
            samples_digest(
                (first_rank..first_rank + u64::from(ranks)).map(|r| self.batch(r, batch)),
            )
        })
    }

    /// How many distinct ids every rank's batches from `first_batch` on hold together.
    pub fn distinct_from(&self, first_batch: u64) -> u64 {
        // At most one entry per batch the epoch can start from.
        let kept_max = usize::try_from(self.batches()).unwrap_or(usize::MAX);
        kept(&self.derived.distinct_from, first_batch, kept_max, || {
            // A rank's batches from `first_batch` to the last are one slice of its list.
            let first = first_batch.saturating_mul(self.batch_size);
            distinct_ids(
                (0..self.world_size()).map(|rank| self.samples(rank, first, self.num_samples)),
            )
        })
    }
}

/// Which of a dealt epoch's batches a group's ranks trained on, and how many samples each
/// rank took: one bit per (rank, batch), so a step costs no copy of its samples, and the
/// distinct samples covered are counted from the epoch itself.
#[derive(Debug)]
pub struct PairTally {
    /// The batch the group started the epoch at (non-zero when resumed mid-epoch).
    pub first_batch: u64,
    dealt: Arc<DealtEpoch>,
    /// One bit per (rank, batch) trained, rank-major.
    trained: Vec<u64>,
    /// Samples taken, repeats counted.
    pub samples: u64,
    /// Samples per rank of the world, `None` until the rank trains.
    per_rank: Vec<Option<u64>>,
}

impl PairTally {
    /// Nothing trained yet of `dealt`, from `first_batch` on.
    pub fn new(dealt: &Arc<DealtEpoch>, first_batch: u64) -> Self {
        let world_size = dealt.world_size();
        let pairs = world_size.saturating_mul(dealt.batches());
        PairTally {
            first_batch,
            dealt: Arc::clone(dealt),
            trained: vec![0; pairs.div_ceil(64) as usize],
            samples: 0,
            per_rank: vec![None; world_size as usize],
        }
    }

    /// The epoch tallied.
    pub fn dealt(&self) -> &Arc<DealtEpoch> {
        &self.dealt
    }

    /// Where (word, bit) the pair (`rank`, `batch`) is kept.
    fn pair_bit(&self, rank: u64, batch: u64) -> (usize, u64) {
        let pair = rank * self.dealt.batches() + batch;
        ((pair / 64) as usize, 1u64 << (pair % 64))
    }

    /// `rank` trained on batch `batch`, of `len` samples. A rank outside the world counts
    /// its samples only.
    pub fn add(&mut self, rank: u64, batch: u64, len: u64) {
        if rank < self.dealt.world_size() && batch < self.dealt.batches() {
            let (word, bit) = self.pair_bit(rank, batch);
            self.trained[word] |= bit;
        }
        self.samples += len;
        if let Some(count) = self.per_rank.get_mut(rank as usize) {
            *count = Some(count.unwrap_or(0) + len);
        }
    }

    /// Samples of every rank of the world that trained, in rank order.
    pub fn rank_counts(&self) -> impl Iterator<Item = u64> + '_ {
        self.per_rank.iter().flatten().copied()
    }

    /// Distinct samples the ranks trained on. When they took every batch from the first
    /// on and nothing before it (a whole epoch, the usual case) that is the epoch's own
    /// count, computed once for every run sharing it; else counted id by id.
    pub fn distinct(&self) -> u64 {
        let (world_size, batches) = (self.dealt.world_size(), self.dealt.batches());
        let is_trained = |rank: u64, batch: u64| {
            let (word, bit) = self.pair_bit(rank, batch);
            self.trained[word] & bit != 0
        };
        let whole = (0..world_size)
            .all(|rank| (0..batches).all(|b| is_trained(rank, b) == (b >= self.first_batch)));
        if whole {
            return self.dealt.distinct_from(self.first_batch);
        }
        let pairs = (0..world_size).flat_map(|rank| (0..batches).map(move |b| (rank, b)));
        let taken = pairs.filter(|&(rank, batch)| is_trained(rank, batch));
        distinct_ids(taken.map(|(rank, batch)| self.dealt.batch(rank, batch)))
    }
}

/// How many distinct ids `batches` hold together: each id's bit is set, then the bits are
/// counted once, so that no step waits on a running count.
pub fn distinct_ids<'a>(batches: impl Iterator<Item = &'a [u64]>) -> u64 {
    let mut seen: Vec<u64> = Vec::new();
    for batch in batches {
        let words_needed = batch.iter().max().map_or(0, |&max| (max / 64) as usize + 1);
        if words_needed > seen.len() {
            seen.resize(words_needed, 0);
        }
        for &id in batch {
            seen[(id / 64) as usize] |= 1u64 << (id % 64);
        }
    }
    seen.iter().map(|word| u64::from(word.count_ones())).sum()
}

/// The value of `key` in a memo of pure results: the kept one, or `compute`'s, kept while
/// the memo holds fewer than `kept_max`. A panic elsewhere cannot leave the memo
/// half-written, so a poisoned lock is taken as it is.
fn kept<K: Ord, V: Copy>(
    memo: &Mutex<BTreeMap<K, V>>,
    key: K,
    kept_max: usize,
    compute: impl FnOnce() -> V,
) -> V {
    let lock = || {
        memo.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    };
    if let Some(&value) = lock().get(&key) {
        return value;
    }
    let value = compute();
    let mut known = lock();
    if known.len() < kept_max {
        known.insert(key, value);
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strided(order: &[u64], world_size: u64, num_samples: u64, batch_size: u64) -> DealtEpoch {
        let lists = RankLists::strided(order, world_size, 0, num_samples);
        DealtEpoch::new(lists, num_samples, batch_size)
    }

    #[test]
    fn a_deal_keeps_what_it_derives_equal_to_computing_it() {
        // 10 samples padded to 12 over 4 ranks: ids 0 and 1 are dealt twice.
        let order: Vec<u64> = (0..10).chain(0..2).collect();
        let deal = strided(&order, 4, 3, 2);
        for _ in 0..2 {
            let direct = samples_digest([deal.batch(1, 1), deal.batch(2, 1)]);
            assert_eq!(deal.digest(1, 2, 1), direct, "computed, then kept");
            assert_eq!(
                deal.distinct_from(0),
                10,
                "every sample once, padding aside"
            );
            let from_1: Vec<&[u64]> = (0..4).map(|r| deal.batch(r, 1)).collect();
            assert_eq!(deal.distinct_from(1), distinct_ids(from_1.into_iter()));
        }
        assert_eq!(deal.world_size(), 4);
    }

    #[test]
    fn distinct_ids_count_each_id_once_across_batches() {
        let batches: [&[u64]; 4] = [&[0, 63, 64], &[64, 200, 0], &[], &[129]];
        assert_eq!(distinct_ids(batches.into_iter()), 5);
        assert_eq!(distinct_ids(std::iter::empty()), 0);
    }

    #[test]
    fn a_tally_of_a_whole_epoch_counts_as_its_ids_do() {
        // 10 samples padded to 12 over 4 ranks, batches of 2: ids 0 and 1 dealt twice.
        let order: Vec<u64> = (0..10).chain(0..2).collect();
        let dealt = Arc::new(strided(&order, 4, 3, 2));
        let mut whole = PairTally::new(&dealt, 0);
        let mut part = PairTally::new(&dealt, 1);
        for rank in 0..4 {
            for batch in 0..dealt.batches() {
                let len = dealt.batch(rank, batch).len() as u64;
                whole.add(rank, batch, len);
                if batch >= 1 && rank != 2 {
                    part.add(rank, batch, len);
                }
            }
        }
        assert_eq!((whole.distinct(), whole.samples), (10, 12));
        let taken = [0, 1, 3].map(|rank| dealt.batch(rank, 1));
        assert_eq!(part.distinct(), distinct_ids(taken.into_iter()));
        assert_eq!(part.rank_counts().collect::<Vec<_>>(), vec![1, 1, 1]);
        whole.add(9, 0, 5);
        assert_eq!(
            whole.samples, 17,
            "a rank outside the world counts its samples"
        );
    }
}
