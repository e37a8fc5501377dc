//! The checker's own deal of an epoch: which sample ids each rank's batch holds, straight
//! from the parity-pinned samplers (`crate::sampler`) and cut into batches as a
//! `DataLoader` does, so `sampler.coverage` can judge recorded steps without trusting the
//! job's epoch plans or its sample ledger: the checker names the deal it needs from the
//! scenario and the trace, and the sampler deals it (or hands over the one it dealt for
//! the same key, to this check or to a run).

use crate::job::epoch_plan::{complexities, dataset_key};
use crate::sampler::dealt_epoch::DealtEpoch;
pub(super) use crate::sampler::shared_deal::KeptEpoch as Deal;
use crate::sampler::shared_deal::{kept_epoch, DealKey};
use crate::sampler::{LoadBalancingSampler, RankLists, SamplerError};
use crate::scenario::model::{JobConfig, SamplerKind};
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

/// Deals one [`Dealer`] keeps at once (each holds one permutation of the dataset).
pub(super) const DEALS_CACHED_MAX: usize = 4;

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
    /// A `DistributedSampler` deal is the sampler's, shared by every run and check in the
    /// process that asks for it (`sampler::shared_deal`): the key is the checker's own,
    /// made from the scenario and the trace. It comes as the process keeps it, its ids
    /// dealt again only if a digest or count that no run computed needs them.
    fn deal(&self, epoch: u64, world_size: u64) -> Result<Arc<Deal>, SamplerError> {
        let s = &self.job.sampler;
        let len = self.job.dataset.len;
        if s.batch_size == 0 {
            return Err(SamplerError::ZeroBatchSize);
        }
        match s.kind {
            SamplerKind::Distributed => {
                kept_epoch(&DealKey::of_job(self.job, epoch, world_size, 0)).map(Arc::new)
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
                let lists = RankLists::from_lists(&sampler.indices_all_ranks()?);
                let dealt = DealtEpoch::new(lists, sampler.len(), s.batch_size);
                Ok(Arc::new(Deal::of_dealt(Arc::new(dealt))))
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
    use crate::sampler::DistributedSampler;

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
                got.extend_from_slice(deal.dealt().batch(rank, batch));
            }
            let mut sampler = DistributedSampler::new(10, 4, rank, true, s.job.sampler.seed, false)
                .expect("a valid rank");
            sampler.set_epoch(3);
            assert_eq!(got, sampler.indices().unwrap(), "rank {rank}");
        }
        assert!(
            deal.dealt().batch(4, 0).is_empty(),
            "no rank 4 in a world of 4"
        );
        assert_eq!(deal.batch_len(4, 0), 0);
        assert!(
            deal.dealt().batch(0, 2).is_empty(),
            "no batch past the last"
        );
        assert_eq!(deal.batch_len(0, 2), 0);
    }

    /// torch's strided deal of a padded `order`, cut into batches of `batch_size`.
    fn strided(order: &[u64], world_size: u64, num_samples: u64, batch_size: u64) -> DealtEpoch {
        let lists = RankLists::strided(order, world_size, 0, num_samples);
        DealtEpoch::new(lists, num_samples, batch_size)
    }

    #[test]
    fn a_strided_deal_takes_every_world_size_th_place_from_the_rank() {
        for (world_size, num_samples) in [(1, 5), (4, 3), (5, 11), (512, 17), (3, 0)] {
            let order: Vec<u64> = (0..world_size * num_samples).map(|i| i * 7 + 1).collect();
            let deal = strided(&order, world_size, num_samples, 4);
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
        let deal = strided(&(0..10).collect::<Vec<u64>>(), 4, 3, 2);
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
                .flat_map(|b| deal.dealt().batch(rank, b).to_vec())
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
