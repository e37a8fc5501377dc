//! What a dealt epoch's shape and ids give without the ids themselves: each rank's share,
//! the batches, and the batch digests and distinct counts computed from the ids while they
//! were at hand. Small beside the ids (about 11 kB against 800 kB for 100 000 samples at
//! 512 ranks), so the process keeps the facts of many more epochs than it keeps deals
//! (`shared_deal`), and a check of a long run judges its steps from them without dealing
//! its epochs again.
//!
//! Pure: no clock, no I/O. Only values computed from the ids are kept, so a fact read back
//! is exactly what computing it again would give.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Mutex;

/// Batch digests one epoch's facts keep (about 50 bytes each): every node's every batch of
/// a fuzz case's epoch (8 nodes of 100 000 samples in batches of 32) fits.
pub const DIGESTS_KEPT_MAX: usize = 8_192;

/// One dealt epoch's shape, and what was computed from its ids.
#[derive(Debug)]
pub struct EpochFacts {
    /// Samples per rank (torch's `num_samples`).
    num_samples: u64,
    batch_size: u64,
    /// How many ids each rank's list holds (all `num_samples` but for a mutant's shifted
    /// stride, which leaves the last ranks short).
    rank_lens: Vec<u64>,
    /// Leading batches full for every rank, counted once: every step asks.
    full_batches: u64,
    /// By (first rank, ranks, batch): the digest of those ranks' batch.
    digests: Mutex<Digests>,
    /// By first batch: distinct ids in every rank's batches from it to the last.
    distinct_from: Mutex<BTreeMap<u64, u64>>,
}

impl EpochFacts {
    /// The shape of an epoch whose ranks' lists hold `rank_lens` ids, in rank order, cut
    /// into batches of `batch_size`, `num_samples` per rank; nothing computed yet.
    pub fn of(rank_lens: Vec<u64>, num_samples: u64, batch_size: u64) -> Self {
        let shortest = rank_lens.iter().copied().min().unwrap_or(0);
        EpochFacts {
            num_samples,
            batch_size,
            full_batches: shortest.min(num_samples) / batch_size.max(1),
            rank_lens,
            digests: Mutex::default(),
            distinct_from: Mutex::default(),
        }
    }

    /// How much the facts of an epoch of `world_size` ranks and `batches` batches weigh in
    /// a memo, at most: a slot per rank's share, per batch's distinct count and per digest
    /// they may keep.
    pub fn weight(world_size: u64, batches: u64) -> usize {
        let digests = world_size
            .saturating_mul(batches)
            .min(DIGESTS_KEPT_MAX as u64);
        let slots = world_size.saturating_add(batches).saturating_add(digests);
        usize::try_from(slots).unwrap_or(usize::MAX)
    }

    /// Whether an epoch whose ranks' lists hold `rank_lens` ids has the shape these facts
    /// describe.
    pub fn describe(&self, rank_lens: &[u64], num_samples: u64, batch_size: u64) -> bool {
        (self.num_samples, self.batch_size) == (num_samples, batch_size)
            && self.rank_lens == rank_lens
    }

    /// Batches per rank: the last one may be short, as a `DataLoader` keeps it.
    pub fn batches(&self) -> u64 {
        self.num_samples.div_ceil(self.batch_size.max(1))
    }

    /// Ranks in the world dealt to.
    pub fn world_size(&self) -> u64 {
        self.rank_lens.len() as u64
    }

    /// How many leading batches of the epoch are full (`batch_size` samples) for every rank.
    pub fn full_batches(&self) -> u64 {
        self.full_batches
    }

    /// How many ids `rank`'s batch `batch` holds; none for a rank outside the world.
    pub fn batch_len(&self, rank: u64, batch: u64) -> u64 {
        let list_len = self.rank_lens.get(rank as usize).copied().unwrap_or(0);
        let first = batch.saturating_mul(self.batch_size);
        let end = first.saturating_add(self.batch_size);
        places(list_len, self.num_samples, first, end).len() as u64
    }

    /// Each of `ranks` with the length of its batch `batch`, as [`Self::batch_len`] gives
    /// it: before the epoch's short last batches every rank of the world holds a full batch,
    /// so one length serves them all (a step's ranks are read on every step).
    pub fn batch_lens(
        &self,
        ranks: Range<u64>,
        batch: u64,
    ) -> impl Iterator<Item = (u64, u64)> + Clone + '_ {
        let all_full = batch < self.full_batches && ranks.end <= self.world_size();
        let full_len = all_full.then_some(self.batch_size);
        ranks.map(move |rank| {
            (
                rank,
                full_len.unwrap_or_else(|| self.batch_len(rank, batch)),
            )
        })
    }

    /// The digest of batch `batch` of ranks `first_rank..first_rank + ranks`, if kept.
    #[cfg(test)]
    pub fn kept_digest(&self, first_rank: u64, ranks: u32, batch: u64) -> Option<u64> {
        lock(&self.digests).get((first_rank, ranks, batch), self.batches())
    }

    /// The distinct ids of every rank's batches from `first_batch` on, if kept.
    #[cfg(test)]
    pub fn kept_distinct_from(&self, first_batch: u64) -> Option<u64> {
        lock(&self.distinct_from).get(&first_batch).copied()
    }

    /// The digest of batch `batch` of ranks `first_rank..first_rank + ranks`: kept, or
    /// `compute`'s, kept while there is room. `compute` is told whether the digests of the
    /// three nodes after this one (alike, on the same batch) would be kept too, and may
    /// hand them over with its own. One look-up, and one more lock only to keep what was
    /// computed: runs on two threads share an epoch's facts, and a lock taken by both
    /// bounces between their cores.
    pub fn digest(
        &self,
        first_rank: u64,
        ranks: u32,
        batch: u64,
        compute: impl FnOnce(bool) -> Digested,
    ) -> u64 {
        let key = (first_rank, ranks, batch);
        let batches = self.batches();
        let (room_for_one, room_for_four) = {
            let digests = lock(&self.digests);
            if let Some(digest) = digests.get(key, batches) {
                return digest;
            }
            (
                digests.has_room(key, 1, batches),
                digests.has_room(key, 4, batches),
            )
        };
        let digested = compute(room_for_four);
        let mine = digested.first();
        if room_for_one {
            let shape = (batches, self.world_size());
            let mut digests = lock(&self.digests);
            for (node, digest) in digested.each() {
                let first_rank = first_rank + node * u64::from(ranks);
                digests.keep((first_rank, ranks, batch), shape, digest);
            }
        }
        mine
    }

    /// Keeps the digest of every batch of every node of a world of nodes of `ranks` ranks
    /// (node k's from rank k × `ranks`), computed by `compute` as [`EpochFacts::digest`]
    /// has it computed (first rank, batch, whether the next three nodes' are wanted too);
    /// nothing when the flat table of the facts does not hold that layout (it is laid out
    /// for another, or would pass [`DIGESTS_KEPT_MAX`]) or holds them all already.
    pub fn keep_every_node_digest(
        &self,
        ranks: u32,
        mut compute: impl FnMut(u64, u64, bool) -> Digested,
    ) {
        let (batches, world_size) = (self.batches(), self.world_size());
        let nodes = world_size.checked_div(u64::from(ranks)).unwrap_or(0);
        let slots = nodes.saturating_mul(batches);
        {
            let digests = lock(&self.digests);
            let laid_out_for = |r| digests.ranks == r && digests.table.len() as u64 == slots;
            let full = laid_out_for(ranks) && digests.table.iter().all(Option::is_some);
            let other_layout = digests.ranks != 0 && !laid_out_for(ranks);
            if nodes == 0 || slots > DIGESTS_KEPT_MAX as u64 || full || other_layout {
                return;
            }
        }
        let span = u64::from(ranks);
        let mut computed = Vec::with_capacity(slots as usize);
        for batch in 0..batches {
            let mut node = 0;
            while node < nodes {
                let digested = compute(node * span, batch, node + 4 <= nodes);
                for (after, digest) in digested.each() {
                    computed.push(((node + after) * span, batch, digest));
                }
                node += digested.each().count() as u64;
            }
        }
        let mut digests = lock(&self.digests);
        for (first_rank, batch, digest) in computed {
            digests.keep((first_rank, ranks, batch), (batches, world_size), digest);
        }
    }

    /// The distinct ids of every rank's batches from `first_batch` on: kept, or `compute`'s.
    pub fn distinct_from(&self, first_batch: u64, compute: impl FnOnce() -> u64) -> u64 {
        // At most one entry per batch the epoch can start from.
        let kept_max = usize::try_from(self.batches()).unwrap_or(usize::MAX);
        kept(&self.distinct_from, first_batch, kept_max, compute)
    }
}

/// Where a rank's samples from place `first` to before `end` lie in its list of `list_len`:
/// both cut to the rank's `num_samples` and to its list (a mutant's shifted stride leaves
/// the last ranks short).
pub(super) fn places(
    list_len: u64,
    num_samples: u64,
    first: u64,
    end: u64,
) -> std::ops::Range<usize> {
    let end = end.min(num_samples).min(list_len) as usize;
    (first as usize).min(end)..end
}

/// A panic elsewhere cannot leave a map of facts half-written, so a poisoned lock is taken
/// as it is.
fn lock<T>(memo: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    memo.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The value of `key`: the kept one, or `compute`'s, kept while the map holds fewer than
/// `kept_max`.
fn kept<K: Ord, V: Copy>(
    memo: &Mutex<BTreeMap<K, V>>,
    key: K,
    kept_max: usize,
    compute: impl FnOnce() -> V,
) -> V {
    if let Some(&value) = lock(memo).get(&key) {
        return value;
    }
    let value = compute();
    let mut known = lock(memo);
    if known.len() < kept_max {
        known.insert(key, value);
    }
    value
}

/// What a digest's computation gives: the digest asked for, or it and the next three
/// nodes' of the same batch, in node order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Digested {
    One(u64),
    Four([u64; 4]),
}

impl Digested {
    fn first(self) -> u64 {
        match self {
            Digested::One(digest) | Digested::Four([digest, ..]) => digest,
        }
    }

    /// Each digest with its node's place after the first.
    fn each(self) -> impl Iterator<Item = (u64, u64)> {
        let (digests, count) = match self {
            Digested::One(digest) => ([digest, 0, 0, 0], 1),
            Digested::Four(four) => (four, 4),
        };
        (0..).zip(digests.into_iter().take(count))
    }
}

/// Kept batch digests, by (first rank, ranks, batch). A world of nodes alike lays them out
/// alike (node k's ranks start at k × ranks), so their digests go in a flat table by
/// (node, batch), laid out by the first digest kept; any other goes in a map. A step reads
/// its digest, and the next nodes' are kept with it, without a map's search or allocation.
#[derive(Debug, Default)]
struct Digests {
    /// Ranks per node of the table's layout; 0 until a digest is kept.
    ranks: u32,
    /// Node-major, a slot per batch.
    table: Vec<Option<u64>>,
    /// Digests of ranks the table's layout does not hold.
    other: BTreeMap<(u64, u32, u64), u64>,
}

impl Digests {
    /// Where the table keeps `(first_rank, ranks, batch)`, if it does.
    fn slot(&self, (first_rank, ranks, batch): (u64, u32, u64), batches: u64) -> Option<usize> {
        let span = u64::from(ranks);
        if ranks == 0 || ranks != self.ranks || first_rank % span != 0 || batch >= batches {
            return None;
        }
        let slot = (first_rank / span)
            .checked_mul(batches)?
            .checked_add(batch)?;
        usize::try_from(slot)
            .ok()
            .filter(|&slot| slot < self.table.len())
    }

    /// Whether the digests of `nodes` nodes alike, the first one's key `key`, would all be
    /// kept now: their slots are on the table (the last one's is, then), or the digests
    /// kept leave room for them. Before the first digest the table is not laid out, and
    /// there is room.
    fn has_room(
        &self,
        (first_rank, ranks, batch): (u64, u32, u64),
        nodes: u64,
        batches: u64,
    ) -> bool {
        let last_first_rank = nodes
            .saturating_sub(1)
            .saturating_mul(u64::from(ranks))
            .saturating_add(first_rank);
        let kept = (self.table.len() + self.other.len()) as u64;
        self.slot((last_first_rank, ranks, batch), batches)
            .is_some()
            || kept.saturating_add(nodes) <= DIGESTS_KEPT_MAX as u64
    }

    fn get(&self, key: (u64, u32, u64), batches: u64) -> Option<u64> {
        match self.slot(key, batches) {
            Some(slot) => self.table[slot],
            None => self.other.get(&key).copied(),
        }
    }

    /// Keeps a digest while the table and the map hold fewer than [`DIGESTS_KEPT_MAX`]
    /// between them; the first one kept lays the table out for nodes of its ranks.
    fn keep(&mut self, key: (u64, u32, u64), (batches, world_size): (u64, u64), digest: u64) {
        let ranks = key.1;
        if self.ranks == 0 && ranks > 0 {
            let nodes = world_size / u64::from(ranks);
            let slots = nodes.saturating_mul(batches);
            if let Ok(slots) = usize::try_from(slots) {
                if slots <= DIGESTS_KEPT_MAX {
                    self.ranks = ranks;
                    self.table = vec![None; slots];
                }
            }
        }
        match self.slot(key, batches) {
            Some(slot) => self.table[slot] = Some(digest),
            None if self.table.len() + self.other.len() < DIGESTS_KEPT_MAX => {
                self.other.insert(key, digest);
            }
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampler::RankLists;

    #[test]
    fn facts_give_each_batchs_place_and_keep_what_was_computed() {
        // A shifted stride: 10 ids over 4 ranks of 3, starting one place late.
        let order: Vec<u64> = (0..10).collect();
        let lists = RankLists::strided(&order, 4, 1, 3);
        let lens: Vec<u64> = (0..4).map(|rank| lists.rank(rank).len() as u64).collect();
        assert_eq!(lens, [3, 2, 2, 2]);
        let facts = EpochFacts::of(lens.clone(), 3, 2);
        assert!(facts.describe(&lens, 3, 2));
        assert!(!facts.describe(&lens, 3, 1));
        assert!(!facts.describe(&[3, 3, 2, 2], 3, 2));
        assert_eq!((facts.batches(), facts.world_size()), (2, 4));
        for rank in 0..4 {
            for batch in 0..3 {
                let first = (batch * 2) as usize;
                let list = lists.rank(rank);
                let want = list.len().min(3).min(first + 2).saturating_sub(first);
                assert_eq!(facts.batch_len(rank, batch), want as u64, "{rank} {batch}");
            }
        }
        assert_eq!(facts.batch_len(9, 0), 0, "no rank 9");
        assert_eq!(facts.full_batches(), 1, "the last ranks hold two ids");
        assert_eq!(facts.kept_digest(0, 2, 1), None);
        assert_eq!(facts.digest(0, 2, 1, |_| Digested::One(42)), 42);
        assert_eq!(facts.digest(0, 2, 1, |_| panic!("computed twice")), 42);
        assert_eq!(facts.kept_digest(0, 2, 1), Some(42));
        assert_eq!(facts.distinct_from(1, || 5), 5);
        assert_eq!(facts.kept_distinct_from(1), Some(5));
    }

    #[test]
    fn the_weight_counts_every_slot_the_facts_may_fill() {
        assert_eq!(EpochFacts::weight(512, 7), 512 + 7 + 512 * 7);
        assert_eq!(EpochFacts::weight(8, 3_125), 8 + 3_125 + DIGESTS_KEPT_MAX);
        assert_eq!(EpochFacts::weight(u64::MAX, 2), usize::MAX);
    }

    #[test]
    fn digests_of_nodes_alike_and_of_others_are_kept_apart_and_bounded() {
        let mut kept = Digests::default();
        // A world of 8 ranks, 4 nodes of 2, 3 batches: the first digest lays the table out.
        let shape = (3, 8);
        kept.keep((2, 2, 1), shape, 11);
        assert_eq!((kept.ranks, kept.table.len()), (2, 12));
        kept.keep((6, 2, 2), shape, 12);
        kept.keep((1, 2, 0), shape, 13); // not on the layout: first rank 1
        kept.keep((0, 4, 0), shape, 14); // another shape of node
        kept.keep((0, 2, 3), shape, 15); // past the last batch
        assert_eq!(kept.other.len(), 3);
        for (key, digest) in [
            ((2, 2, 1), 11),
            ((6, 2, 2), 12),
            ((1, 2, 0), 13),
            ((0, 4, 0), 14),
        ] {
            assert_eq!(kept.get(key, 3), Some(digest), "{key:?}");
        }
        assert_eq!(kept.get((0, 2, 0), 3), None);
        assert_eq!(kept.get((0, 2, 3), 3), Some(15));
        // Past the bound nothing more is kept off the table; the table's slots still are.
        for first in 0..DIGESTS_KEPT_MAX as u64 {
            kept.keep((first * 2 + 1, 2, 0), shape, first);
        }
        assert_eq!(kept.table.len() + kept.other.len(), DIGESTS_KEPT_MAX);
        kept.keep((4, 2, 0), shape, 16);
        assert_eq!(kept.get((4, 2, 0), 3), Some(16));
    }

    #[test]
    fn digests_are_kept_only_while_there_is_room() {
        // 4 ranks of 1 node each and DIGESTS_KEPT_MAX + 4 batches: too many for a table.
        let facts = EpochFacts::of(vec![16; 4], DIGESTS_KEPT_MAX as u64 + 4, 1);
        let four = |_| Digested::Four([1, 2, 3, 4]);
        assert_eq!(facts.digest(0, 1, 0, four), 1);
        assert_eq!(
            facts.kept_digest(3, 1, 0),
            Some(4),
            "the next nodes' are kept along"
        );
        for batch in 1..(DIGESTS_KEPT_MAX as u64 - 5) {
            facts.digest(0, 1, batch, |_| Digested::One(batch));
        }
        assert!(
            lock(&facts.digests).table.is_empty(),
            "no table for so many"
        );
        // Room for two more: the next nodes' would not all be kept, so they are not asked.
        let mut told = None;
        facts.digest(1, 1, 1, |four| {
            told = Some(four);
            Digested::One(7)
        });
        assert_eq!(told, Some(false));
        assert_eq!(facts.kept_digest(1, 1, 1), Some(7));
        facts.digest(2, 1, 1, |_| Digested::One(8));
        facts.digest(3, 1, 1, |_| Digested::One(9));
        assert_eq!(facts.kept_digest(3, 1, 1), None, "past the bound");
        assert_eq!(
            facts.digest(3, 1, 1, |_| Digested::One(9)),
            9,
            "computed, not kept"
        );
        // On a table, a node's slot is always there.
        let facts = EpochFacts::of(vec![2; 8], 2, 1);
        facts.digest(0, 2, 0, |_| Digested::One(1));
        assert!(lock(&facts.digests).has_room((0, 2, 1), 4, 2));
        assert_eq!(
            facts.digest(0, 2, 1, |four| Digested::Four([five(four), 6, 7, 8])),
            5
        );
        assert_eq!(facts.kept_digest(6, 2, 1), Some(8));
    }

    #[test]
    fn every_node_digest_is_kept_on_the_table_of_its_layout_only() {
        // 10 ranks in nodes of 2 (5 nodes: four at once, then one), 3 batches.
        let facts = EpochFacts::of(vec![6; 10], 6, 2);
        let digest_of = |first_rank: u64, batch: u64| first_rank * 10 + batch;
        let mut asked = Vec::new();
        facts.keep_every_node_digest(2, |first_rank, batch, four| {
            asked.push((first_rank, batch, four));
            match four {
                true => Digested::Four([0, 2, 4, 6].map(|r| digest_of(first_rank + r, batch))),
                false => Digested::One(digest_of(first_rank, batch)),
            }
        });
        assert_eq!(asked.len(), 6, "two computations a batch: {asked:?}");
        for first_rank in (0..10).step_by(2) {
            for batch in 0..3 {
                let kept = facts.kept_digest(first_rank, 2, batch);
                assert_eq!(kept, Some(digest_of(first_rank, batch)));
            }
        }
        // Kept already, or laid out for nodes of another size: nothing is computed.
        facts.keep_every_node_digest(2, |_, _, _| panic!("computed again"));
        facts.keep_every_node_digest(5, |_, _, _| panic!("another layout"));
        assert_eq!(facts.kept_digest(0, 5, 0), None);
        // A world too large for the table keeps nothing.
        let wide = EpochFacts::of(vec![2; DIGESTS_KEPT_MAX + 1], 2, 2);
        wide.keep_every_node_digest(1, |_, _, _| panic!("past the bound"));
        // A table laid out by a digest kept earlier, and not full, is filled whole.
        let facts = EpochFacts::of(vec![2; 4], 2, 1);
        facts.digest(2, 1, 1, |_| Digested::One(7));
        facts.keep_every_node_digest(1, |first_rank, batch, _| {
            Digested::One(digest_of(first_rank, batch))
        });
        assert_eq!(facts.kept_digest(2, 1, 1), Some(21));
        assert_eq!(facts.kept_digest(3, 1, 1), Some(31));
    }

    /// 5 when told there is room for four digests.
    fn five(four: bool) -> u64 {
        assert!(four);
        5
    }
}
