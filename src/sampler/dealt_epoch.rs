//! One epoch dealt to a world of ranks and cut into batches as a `DataLoader` does, kept as
//! it was dealt (`rank_lists`: torch's padded order itself where it can be), with what is
//! derived from it kept beside it (`epoch_facts`); and a group's tally of which of its
//! batches were trained. The job's epoch plans and the checker's deals are both one of
//! these, dealt by the sampler for the key each names (`shared_deal`).
//!
//! Pure: no clock, no I/O. A dealt epoch is shared by every run of the process that deals
//! the same one (`crate::memo`), so what it derives (a batch's digest, an epoch's distinct
//! samples) is computed once for all of them.

use super::epoch_facts::{places, Digested, EpochFacts};
use super::rank_lists::{RankDeal, StridedOrder};
use super::shared_deal::KeptEpoch;
use super::RankLists;
use crate::trace::digest::samples_digests_x4;
use crate::trace::samples_digest;
use std::ops::Range;
use std::sync::Arc;

/// One epoch dealt to a world of ranks, each rank's samples side by side so a batch is a
/// slice (for torch's whole padded deal, laid out so only when a reader needs slices):
/// dealt once, read by every step of the epoch without copying.
#[derive(Debug)]
pub struct DealtEpoch {
    ids: RankDeal,
    /// Samples per rank (torch's `num_samples`), the batch size and batches per rank,
    /// beside the facts' own: every step reads them, and they are one load here.
    num_samples: u64,
    batch_size: u64,
    batches: u64,
    /// Its shape, and what the runs sharing this epoch computed from it; kept by the
    /// process after the ids are let go (`shared_deal`).
    facts: Arc<EpochFacts>,
}

impl DealtEpoch {
    /// `lists` cut into batches of `batch_size`, `num_samples` per rank.
    pub fn new(lists: RankLists, num_samples: u64, batch_size: u64) -> Self {
        Self::of_deal(RankDeal::Lists(lists), num_samples, batch_size)
    }

    /// `ids` cut into batches of `batch_size`, `num_samples` per rank.
    pub fn of_deal(ids: RankDeal, num_samples: u64, batch_size: u64) -> Self {
        let facts = Arc::new(EpochFacts::of(ids.rank_lens(), num_samples, batch_size));
        Self::with_facts(ids, num_samples, batch_size, facts)
    }

    /// `ids`, cut as [`DealtEpoch::of_deal`] cuts them, with the facts kept from an earlier
    /// deal of the same epoch.
    ///
    /// # Panics
    /// If the facts describe another shape: a deal is a pure function of its key, so the
    /// same key dealt again has the same shape.
    pub fn with_facts(
        ids: RankDeal,
        num_samples: u64,
        batch_size: u64,
        facts: Arc<EpochFacts>,
    ) -> Self {
        assert!(
            facts.describe(&ids.rank_lens(), num_samples, batch_size),
            "the kept facts of an epoch describe another shape than its deal"
        );
        DealtEpoch {
            ids,
            num_samples,
            batch_size,
            batches: facts.batches(),
            facts,
        }
    }

    /// Its shape and what was computed from it.
    pub fn facts(&self) -> &Arc<EpochFacts> {
        &self.facts
    }

    /// Batches per rank: the last one may be short, as a `DataLoader` keeps it.
    pub fn batches(&self) -> u64 {
        self.batches
    }

    /// Ranks in the world dealt to.
    pub fn world_size(&self) -> u64 {
        self.ids.world_size()
    }

    /// How many leading batches of the epoch are full (`batch_size` samples) for every rank.
    pub fn full_batches(&self) -> u64 {
        self.facts.full_batches()
    }

    /// Every rank's samples, laid out now if they were not.
    pub fn rank_lists(&self) -> &RankLists {
        self.ids.lists()
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
        let list = self.ids.lists().rank(rank);
        &list[places(list.len() as u64, self.num_samples, first, end)]
    }

    /// The places of a rank's list of torch's whole order (`order`) that its batch `batch`
    /// holds, as [`DealtEpoch::batch`] cuts them.
    fn rows(&self, order: &StridedOrder, batch: u64) -> Range<u64> {
        let first = batch.saturating_mul(self.batch_size);
        let end = first.saturating_add(self.batch_size);
        let places = places(order.per_rank(), self.num_samples, first, end);
        places.start as u64..places.end as u64
    }

    /// The digest of batch `batch` of ranks `first_rank..first_rank + ranks`, in rank order
    /// (what a node whose ranks those are trains on in that step).
    pub fn digest(&self, first_rank: u64, ranks: u32, batch: u64) -> u64 {
        self.facts
            .digest(first_rank, ranks, batch, |room_for_four| {
                self.compute_digest(first_rank, ranks, batch, room_for_four)
            })
    }

    /// Keeps in the facts the digest of every batch of every node of a world of nodes of
    /// `ranks` ranks (node k's from rank k × `ranks`), as a job of that layout asks for
    /// them step by step; see [`EpochFacts::keep_every_node_digest`].
    pub fn keep_every_node_digest(&self, ranks: u32) {
        self.facts
            .keep_every_node_digest(ranks, |first_rank, batch, four| {
                self.compute_digest(first_rank, ranks, batch, four)
            });
    }

    /// Computes the digest of batch `batch` of ranks `first_rank..first_rank + ranks`, and
    /// with it the three next nodes' of as many ranks when `four` (they would be kept) and
    /// the world holds them: four chains of multiplies at once cost about what one does.
    pub fn compute_digest(&self, first_rank: u64, ranks: u32, batch: u64, four: bool) -> Digested {
        let span = u64::from(ranks);
        let last_end = first_rank.saturating_add(span.saturating_mul(4));
        let four = four && span > 0 && last_end <= self.world_size();
        if let RankDeal::Strided(order) = &self.ids {
            // Read from the order where it lies: its lists may never be laid out.
            let rows = self.rows(order, batch);
            return match four {
                true => Digested::Four(order.digests_x4(first_rank, span, rows)),
                false => Digested::One(order.digest(first_rank, span, rows)),
            };
        }
        if !four {
            let ranks = first_rank..first_rank.saturating_add(span);
            return Digested::One(samples_digest(ranks.map(|r| self.batch(r, batch))));
        }
        let first_of = |node: usize| first_rank + node as u64 * span;
        Digested::Four(samples_digests_x4(span, |node, rank| {
            self.batch(first_of(node) + rank, batch)
        }))
    }

    /// How many distinct ids every rank's batches from `first_batch` on hold together.
    pub fn distinct_from(&self, first_batch: u64) -> u64 {
        self.facts
            .distinct_from(first_batch, || self.count_distinct_from(first_batch))
    }

    /// Counts the distinct ids of every rank's batches from `first_batch` on.
    pub fn count_distinct_from(&self, first_batch: u64) -> u64 {
        // A rank's batches from `first_batch` to the last are one slice of its list, and
        // of torch's whole order the same places of every rank are one slice of rows.
        let first = first_batch.saturating_mul(self.batch_size);
        let num_samples = self.num_samples;
        if let RankDeal::Strided(order) = &self.ids {
            let places = places(order.per_rank(), num_samples, first, num_samples);
            return order.distinct_in_rows(places.start as u64..places.end as u64);
        }
        distinct_ids((0..self.world_size()).map(|rank| self.samples(rank, first, num_samples)))
    }
}

/// Which of a dealt epoch's batches a group's ranks trained on, and how many samples each
/// rank took: one bit per (rank, batch), so a step costs no copy of its samples, and the
/// distinct samples covered are counted from the epoch itself.
#[derive(Debug)]
pub struct PairTally {
    /// The batch the group started the epoch at (non-zero when resumed mid-epoch).
    pub first_batch: u64,
    epoch: Arc<KeptEpoch>,
    /// The epoch's world size and batches per rank, read on every step.
    world_size: u64,
    batches: u64,
    /// One bit per (rank, batch) trained, rank-major.
    trained: Vec<u64>,
    /// Samples taken, repeats counted.
    pub samples: u64,
    /// Samples per rank of the world, `None` until the rank trains.
    per_rank: Vec<Option<u64>>,
}

impl PairTally {
    /// Nothing trained yet of `epoch`, from `first_batch` on.
    pub fn new(epoch: &Arc<KeptEpoch>, first_batch: u64) -> Self {
        let world_size = epoch.world_size();
        let pairs = world_size.saturating_mul(epoch.batches());
        PairTally {
            first_batch,
            epoch: Arc::clone(epoch),
            world_size,
            batches: epoch.batches(),
            trained: vec![0; pairs.div_ceil(64) as usize],
            samples: 0,
            per_rank: vec![None; world_size as usize],
        }
    }

    /// The epoch tallied.
    pub fn epoch(&self) -> &Arc<KeptEpoch> {
        &self.epoch
    }

    /// Where (word, bit) the pair (`rank`, `batch`) is kept.
    fn pair_bit(&self, rank: u64, batch: u64) -> (usize, u64) {
        let pair = rank * self.batches + batch;
        ((pair / 64) as usize, 1u64 << (pair % 64))
    }

    /// `rank` trained on batch `batch`, of `len` samples. A rank outside the world counts
    /// its samples only.
    pub fn add(&mut self, rank: u64, batch: u64, len: u64) {
        if rank < self.world_size && batch < self.batches {
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
    /// count, computed once for every run sharing it; else counted id by id (from the
    /// epoch dealt again if the process let its ids go).
    pub fn distinct(&self) -> u64 {
        let (world_size, batches) = (self.world_size, self.batches);
        let is_trained = |rank: u64, batch: u64| {
            let (word, bit) = self.pair_bit(rank, batch);
            self.trained[word] & bit != 0
        };
        let whole = (0..world_size)
            .all(|rank| (0..batches).all(|b| is_trained(rank, b) == (b >= self.first_batch)));
        if whole {
            return self.epoch.distinct_from(self.first_batch);
        }
        let dealt = self.epoch.dealt();
        let pairs = (0..world_size).flat_map(|rank| (0..batches).map(move |b| (rank, b)));
        let taken = pairs.filter(|&(rank, batch)| is_trained(rank, batch));
        distinct_ids(taken.map(|(rank, batch)| dealt.batch(rank, batch)))
    }
}

/// How many distinct ids `batches` hold together: each id's bit is set, then the bits are
/// counted once, so that no step waits on a running count. Ids are `u64` in laid-out
/// lists and `u32` in a narrow padded order (`rank_lists`).
pub fn distinct_ids<'a, T: Copy + Into<u64> + 'a>(batches: impl Iterator<Item = &'a [T]>) -> u64 {
    let mut seen: Vec<u64> = Vec::new();
    for batch in batches {
        let max = batch.iter().map(|&id| id.into()).max();
        let words_needed = max.map_or(0, |max| (max / 64) as usize + 1);
        if words_needed > seen.len() {
            seen.resize(words_needed, 0);
        }
        for &id in batch {
            let id: u64 = id.into();
            seen[(id / 64) as usize] |= 1u64 << (id % 64);
        }
    }
    seen.iter().map(|word| u64::from(word.count_ones())).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampler::DistributedSampler;

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

    /// Everything read from an epoch kept as torch's padded order, in place, against the
    /// same epoch laid out as lists.
    fn check_order_against_lists(sampler: &DistributedSampler, batch_size: u64) {
        let num_samples = sampler.len();
        let in_place = DealtEpoch::of_deal(sampler.deal(0).unwrap(), num_samples, batch_size);
        assert!(matches!(in_place.ids, RankDeal::Strided(_)));
        let lists = sampler.deal_all_ranks(0).unwrap();
        let laid_out = DealtEpoch::new(lists, num_samples, batch_size);
        let world = laid_out.world_size();
        assert_eq!(in_place.world_size(), world);
        assert_eq!(in_place.batches(), laid_out.batches());
        assert_eq!(in_place.full_batches(), laid_out.full_batches());
        for batch in 0..=laid_out.batches() {
            for ranks in 0..=world as u32 + 1 {
                for first in 0..=world {
                    for four in [false, true] {
                        let got = in_place.compute_digest(first, ranks, batch, four);
                        let want = laid_out.compute_digest(first, ranks, batch, four);
                        assert_eq!(got, want, "ranks {first}+{ranks}, batch {batch}, {four}");
                    }
                }
            }
            assert_eq!(
                in_place.count_distinct_from(batch),
                laid_out.count_distinct_from(batch),
                "from batch {batch}"
            );
            for rank in 0..=world {
                let len = laid_out.batch(rank, batch).len() as u64;
                assert_eq!(in_place.facts().batch_len(rank, batch), len);
            }
        }
        for ranks in 1..=world as u32 {
            let alike = DealtEpoch::of_deal(sampler.deal(0).unwrap(), num_samples, batch_size);
            alike.keep_every_node_digest(ranks);
            for first in (0..world).step_by(ranks as usize) {
                for batch in 0..laid_out.batches() {
                    let kept = alike.facts().kept_digest(first, ranks, batch);
                    let want = laid_out.digest(first, ranks, batch);
                    let whole_node = first + u64::from(ranks) <= world;
                    assert_eq!(kept, whole_node.then_some(want), "{first}+{ranks}, {batch}");
                }
            }
        }
        for rank in 0..=world {
            assert_eq!(
                in_place.rank_lists().rank(rank),
                laid_out.rank_lists().rank(rank)
            );
        }
    }

    proptest::proptest! {
        /// torch's deal kept as its padded order gives every digest, length and distinct
        /// count the lists laid out give: datasets that the world does not divide (padding,
        /// or `drop_last`), short last batches, nodes that reach past the world.
        #[test]
        fn a_deal_read_in_place_gives_what_its_lists_give(
            len in 0u64..300,
            world in 1u64..13,
            batch_size in 1u64..12,
            shuffle: bool,
            drop_last: bool,
            seed: i64,
            epoch in 0u64..1_000,
        ) {
            let mut sampler = DistributedSampler::new(len, world, 0, shuffle, seed, drop_last)
                .unwrap();
            sampler.set_epoch(epoch);
            check_order_against_lists(&sampler, batch_size);
        }
    }

    #[test]
    fn distinct_ids_count_each_id_once_across_batches() {
        let batches: [&[u64]; 4] = [&[0, 63, 64], &[64, 200, 0], &[], &[129]];
        assert_eq!(distinct_ids(batches.into_iter()), 5);
        assert_eq!(distinct_ids(std::iter::empty::<&[u64]>()), 0);
    }

    #[test]
    fn a_tally_of_a_whole_epoch_counts_as_its_ids_do() {
        // 10 samples padded to 12 over 4 ranks, batches of 2: ids 0 and 1 dealt twice.
        let order: Vec<u64> = (0..10).chain(0..2).collect();
        let dealt = Arc::new(strided(&order, 4, 3, 2));
        let epoch = Arc::new(KeptEpoch::of_dealt(Arc::clone(&dealt)));
        let mut whole = PairTally::new(&epoch, 0);
        let mut part = PairTally::new(&epoch, 1);
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
