//! The checker's own deal of an epoch: which sample ids each rank's batch holds, straight
//! from the parity-pinned samplers (`crate::sampler`) and cut into batches as a
//! `DataLoader` does, so `sampler.coverage` can judge recorded steps without trusting the
//! job's epoch plans or its sample ledger.

use crate::job::epoch_plan::{complexities, dataset_key};
use crate::memo::Memo;
use crate::sampler::{DistributedSampler, LoadBalancingSampler, SamplerError};
use crate::scenario::model::{JobConfig, SamplerKind};
use crate::trace::samples_digest;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Step digests a deal keeps (about 50 bytes each): every node's every batch of a fuzz
/// case's epoch (8 nodes of 100 000 samples in batches of 32) fits, and the deals the
/// process keeps (`DISTRIBUTED_DEAL_IDS_MAX`) add at most a few MiB.
const DIGESTS_KEPT_MAX: usize = 8_192;

/// Deals one [`Dealer`] keeps at once (each holds one permutation of the dataset).
pub(super) const DEALS_CACHED_MAX: usize = 4;

/// One epoch dealt to a world of ranks, each rank's samples side by side so a batch is a
/// slice: dealt once, read by every step of the epoch without copying.
#[derive(Debug)]
pub(super) struct Deal {
    /// Every rank's samples, rank 0's first.
    ids: Vec<u64>,
    /// Where each rank's samples start in `ids`, and where the last one's end.
    starts: Vec<usize>,
    /// Samples per rank (torch's `num_samples`).
    num_samples: u64,
    batch_size: u64,
    /// What the checks of every run sharing this deal computed from it.
    derived: Derived,
}

/// Pure functions of a deal, kept with it: a campaign's runs share the deal, and each of
/// their checks asks for the same steps' digests and the same epochs' coverage.
#[derive(Debug, Default)]
struct Derived {
    /// By (first rank, ranks, batch): the digest of those ranks' batch.
    digests: Mutex<BTreeMap<(u64, u32, u64), u64>>,
    /// By first batch: distinct ids in every rank's batches from it to the last.
    distinct_from: Mutex<BTreeMap<u64, u64>>,
}

impl Deal {
    /// Lays out per-rank lists: rank `r`'s are `rank_ids(r)`, for `r` in `0..world_size`.
    fn of<I: IntoIterator<Item = u64>>(
        world_size: u64,
        num_samples: u64,
        batch_size: u64,
        total: usize,
        rank_ids: impl Fn(u64) -> I,
    ) -> Self {
        let mut ids = Vec::with_capacity(total);
        let mut starts = Vec::with_capacity(world_size as usize + 1);
        for rank in 0..world_size {
            starts.push(ids.len());
            ids.extend(rank_ids(rank));
        }
        starts.push(ids.len());
        Deal {
            ids,
            starts,
            num_samples,
            batch_size,
            derived: Derived::default(),
        }
    }

    /// torch's `order[rank : total_size : world_size]` for every rank.
    fn strided(order: &[u64], world_size: u64, num_samples: u64, batch_size: u64) -> Self {
        let (ws, ns) = (world_size as usize, num_samples as usize);
        if ws.checked_mul(ns) != Some(order.len()) {
            // Not a whole padded order: each rank takes the places its stride finds.
            let rank_ids = |rank| order.iter().copied().skip(rank as usize).step_by(ws);
            return Deal::of(world_size, num_samples, batch_size, order.len(), rank_ids);
        }
        // A few rows of the order at a time, so that each rank's next few samples are
        // written together and the rows read stay cached (a world of 512 ranks puts one
        // rank's samples 4 KiB apart, all in one cache set).
        const ROWS: usize = 8;
        let mut ids = vec![0; order.len()];
        for first_row in (0..ns).step_by(ROWS) {
            let rows = ROWS.min(ns - first_row);
            for (rank, out) in ids.chunks_exact_mut(ns).enumerate() {
                let out = &mut out[first_row..first_row + rows];
                for (row, id) in (first_row..).zip(out) {
                    *id = order[row * ws + rank];
                }
            }
        }
        Deal {
            ids,
            starts: (0..=ws).map(|rank| rank * ns).collect(),
            num_samples,
            batch_size,
            derived: Derived::default(),
        }
    }

    /// Batches per rank: the last one may be short, as a `DataLoader` keeps it.
    pub fn batches(&self) -> u64 {
        self.num_samples.div_ceil(self.batch_size)
    }

    /// Ranks in the world dealt to.
    pub fn world_size(&self) -> u64 {
        self.starts.len().saturating_sub(1) as u64
    }

    /// The digest of batch `batch` of ranks `first_rank..first_rank + ranks`, in rank order
    /// (what a node whose ranks those are trained on in that step, if the job is right).
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
            distinct_ids(
                (0..self.world_size())
                    .flat_map(|rank| (first_batch..self.batches()).map(move |b| (rank, b)))
                    .map(|(rank, batch)| self.batch(rank, batch)),
            )
        })
    }

    /// The ids of `rank`'s batch `batch`; none for a rank outside the world.
    pub fn batch(&self, rank: u64, batch: u64) -> &[u64] {
        let Some(list) = usize::try_from(rank)
            .ok()
            .and_then(|r| Some(&self.ids[*self.starts.get(r)?..*self.starts.get(r + 1)?]))
        else {
            return &[];
        };
        let first = batch.saturating_mul(self.batch_size).min(self.num_samples);
        let end = first.saturating_add(self.batch_size).min(self.num_samples);
        let end = (end as usize).min(list.len());
        &list[(first as usize).min(end)..end]
    }
}

/// How many distinct ids `batches` hold together.
pub(super) fn distinct_ids<'a>(batches: impl Iterator<Item = &'a [u64]>) -> u64 {
    let mut seen: Vec<u64> = Vec::new();
    let mut distinct = 0;
    for &id in batches.flatten() {
        let (word, bit) = ((id / 64) as usize, 1u64 << (id % 64));
        if word >= seen.len() {
            seen.resize(word + 1, 0);
        }
        distinct += u64::from(seen[word] & bit == 0);
        seen[word] |= bit;
    }
    distinct
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

/// What a deal of torch's `DistributedSampler` depends on: the dataset's length, the
/// sampler's settings, the epoch and the world, never the run seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct DistributedDealKey {
    len: u64,
    shuffle: bool,
    seed: i64,
    drop_last: bool,
    batch_size: u64,
    epoch: u64,
    world_size: u64,
}

/// Sample ids the process keeps in the checker's `DistributedSampler` deals (8 bytes each:
/// 32 MiB), so the checks of a campaign's runs deal each epoch of their dataset once. The
/// checker keeps its own, apart from the job's plans, so that it never trusts them.
const DISTRIBUTED_DEAL_IDS_MAX: usize = 4 << 20;

static DISTRIBUTED_DEALS: Memo<DistributedDealKey, Deal> = Memo::new(DISTRIBUTED_DEAL_IDS_MAX);

/// What every [`Dealer`] of one check deals from: the job's sampler settings and, for the
/// load-balancing sampler, the dataset's complexities, drawn once however many dealers
/// share them.
pub(super) struct DealSource<'a> {
    job: &'a JobConfig,
    run_seed: u64,
    complexities: OnceLock<Vec<i64>>,
}

impl<'a> DealSource<'a> {
    pub fn new(job: &'a JobConfig, run_seed: u64) -> Self {
        DealSource {
            job,
            run_seed,
            complexities: OnceLock::new(),
        }
    }

    /// `epoch` dealt to `world_size` ranks, as `set_epoch(epoch)` on every rank's sampler.
    /// A `DistributedSampler` deal is shared by every check in the process that asks for it.
    fn deal(&self, epoch: u64, world_size: u64) -> Result<Arc<Deal>, SamplerError> {
        let s = &self.job.sampler;
        let len = self.job.dataset.len;
        if s.batch_size == 0 {
            return Err(SamplerError::ZeroBatchSize);
        }
        match s.kind {
            SamplerKind::Distributed => {
                let key = DistributedDealKey {
                    len,
                    shuffle: s.shuffle,
                    seed: s.seed,
                    drop_last: s.drop_last,
                    batch_size: s.batch_size,
                    epoch,
                    world_size,
                };
                let ids = usize::try_from(len.saturating_add(world_size)).unwrap_or(usize::MAX);
                DISTRIBUTED_DEALS.get_or_compute(&key, ids, || {
                    let mut sampler = DistributedSampler::new(
                        len,
                        world_size,
                        0,
                        s.shuffle,
                        s.seed,
                        s.drop_last,
                    )?;
                    sampler.set_epoch(epoch);
                    let order = sampler.padded_order()?;
                    Ok(Deal::strided(
                        &order,
                        world_size,
                        sampler.len(),
                        s.batch_size,
                    ))
                })
            }
            SamplerKind::LoadBalancing => {
                let all = self.complexities.get_or_init(|| {
                    complexities(
                        dataset_key(self.run_seed),
                        &self.job.dataset.complexity,
                        len,
                    )
                });
                let mut sampler = LoadBalancingSampler::new(
                    all.clone(),
                    world_size,
                    0,
                    s.shuffle,
                    s.seed,
                    s.drop_last,
                    s.random_level,
                )?;
                sampler.set_epoch(epoch);
                let lists = sampler.indices_all_ranks()?;
                let total = lists.iter().map(Vec::len).sum();
                let rank_ids = |rank: u64| lists[rank as usize].iter().copied();
                let deal = Deal::of(world_size, sampler.len(), s.batch_size, total, rank_ids);
                Ok(Arc::new(deal))
            }
        }
    }
}

/// Deals epochs on demand from one [`DealSource`], keeping the few most recently asked for
/// (and what kept the sampler from dealing one, so a failing deal is tried once).
pub(super) struct Dealer<'s, 'a> {
    source: &'s DealSource<'a>,
    cached: BTreeMap<(u64, u64), Result<Arc<Deal>, SamplerError>>,
}

impl<'s, 'a> Dealer<'s, 'a> {
    pub fn new(source: &'s DealSource<'a>) -> Self {
        Dealer {
            source,
            cached: BTreeMap::new(),
        }
    }

    /// `epoch` dealt to `world_size` ranks, as `set_epoch(epoch)` on every rank's sampler.
    pub fn deal(&mut self, epoch: u64, world_size: u64) -> Result<&Arc<Deal>, &SamplerError> {
        let key = (epoch, world_size);
        if !self.cached.contains_key(&key) {
            let deal = self.source.deal(epoch, world_size);
            // The smallest key goes first: a deal asked for again is dealt again, only
            // slower (the check asks for one epoch's world sizes, usually one).
            while self.cached.len() >= DEALS_CACHED_MAX {
                self.cached.pop_first();
            }
            self.cached.insert(key, deal);
        }
        self.cached[&key].as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::testkit::scenario;

    #[test]
    fn a_deal_gives_each_rank_its_sampler_indices_in_batches() {
        let mut s = scenario();
        s.job.dataset.len = 10;
        s.job.sampler.batch_size = 2;
        s.job.sampler.drop_last = false;
        let source = DealSource::new(&s.job, 1);
        let mut dealer = Dealer::new(&source);
        let deal = dealer.deal(3, 4).unwrap();
        assert_eq!(deal.batches(), 2, "3 samples per rank in batches of 2");
        for rank in 0..4 {
            let mut got = Vec::new();
            for batch in 0..deal.batches() {
                got.extend_from_slice(deal.batch(rank, batch));
            }
            let mut sampler = DistributedSampler::new(10, 4, rank, true, s.job.sampler.seed, false)
                .expect("a valid rank");
            sampler.set_epoch(3);
            assert_eq!(got, sampler.indices().unwrap(), "rank {rank}");
        }
        assert!(deal.batch(4, 0).is_empty(), "no rank 4 in a world of 4");
        assert!(deal.batch(0, 2).is_empty(), "no batch past the last");
    }

    #[test]
    fn a_deal_keeps_what_it_derives_equal_to_computing_it() {
        // 10 samples padded to 12 over 4 ranks: ids 0 and 1 are dealt twice.
        let order: Vec<u64> = (0..10).chain(0..2).collect();
        let deal = Deal::strided(&order, 4, 3, 2);
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
    fn a_strided_deal_takes_every_world_size_th_place_from_the_rank() {
        for (world_size, num_samples) in [(1, 5), (4, 3), (5, 11), (512, 17), (3, 0)] {
            let order: Vec<u64> = (0..world_size * num_samples).map(|i| i * 7 + 1).collect();
            let deal = Deal::strided(&order, world_size, num_samples, 4);
            for rank in 0..world_size {
                let got: Vec<u64> = (0..deal.batches())
                    .flat_map(|b| deal.batch(rank, b).to_vec())
                    .collect();
                let want: Vec<u64> = order
                    .iter()
                    .copied()
                    .skip(rank as usize)
                    .step_by(world_size as usize)
                    .collect();
                assert_eq!(got, want, "rank {rank} of {world_size}");
            }
        }
        // An order short of `num_samples × world_size`: the last ranks get fewer.
        let deal = Deal::strided(&(0..10).collect::<Vec<u64>>(), 4, 3, 2);
        assert_eq!(deal.batch(1, 1), &[9]);
        assert!(deal.batch(2, 1).is_empty());
        assert_eq!(deal.batch(3, 0), &[3, 7]);
    }

    #[test]
    fn a_load_balancing_deal_gives_each_rank_its_sampler_indices() {
        let mut s = scenario();
        s.job.dataset.len = 23;
        s.job.sampler.kind = SamplerKind::LoadBalancing;
        s.job.sampler.batch_size = 2;
        let source = DealSource::new(&s.job, 7);
        let mut dealer = Dealer::new(&source);
        let deal = dealer.deal(2, 3).unwrap();
        let all = complexities(dataset_key(7), &s.job.dataset.complexity, 23);
        let j = &s.job.sampler;
        let mut sampler =
            LoadBalancingSampler::new(all, 3, 0, j.shuffle, j.seed, j.drop_last, j.random_level)
                .unwrap();
        sampler.set_epoch(2);
        for (rank, want) in (0..).zip(sampler.indices_all_ranks().unwrap()) {
            let got: Vec<u64> = (0..deal.batches())
                .flat_map(|b| deal.batch(rank, b).to_vec())
                .collect();
            assert_eq!(got, want, "rank {rank}");
        }
    }

    #[test]
    fn a_failing_deal_says_why_every_time_it_is_asked_for() {
        let mut s = scenario();
        s.job.sampler.batch_size = 0;
        let source = DealSource::new(&s.job, 1);
        let mut dealer = Dealer::new(&source);
        for _ in 0..2 {
            assert_eq!(dealer.deal(0, 4).unwrap_err(), &SamplerError::ZeroBatchSize);
        }
    }
}
