//! The checker's own deal of an epoch: which sample ids each rank's batch holds, straight
//! from the parity-pinned samplers (`crate::sampler`) and cut into batches as a
//! `DataLoader` does, so `sampler.coverage` can judge recorded steps without trusting the
//! job's epoch plans or its sample ledger.

use crate::job::epoch_plan::{complexities, dataset_key};
use crate::sampler::{DistributedSampler, LoadBalancingSampler, SamplerError};
use crate::scenario::model::{JobConfig, SamplerKind};
use std::collections::BTreeMap;

/// Deals kept at once (each holds one permutation of the dataset).
const DEALS_CACHED_MAX: usize = 4;

/// How one epoch's samples lie over the ranks.
#[derive(Debug)]
enum Layout {
    /// torch's `order[rank : total_size : world_size]` over the padded order.
    Strided(Vec<u64>),
    /// One list per rank (Bagua's load-balancing sampler).
    PerRank(Vec<Vec<u64>>),
}

/// One epoch dealt to a world of ranks.
#[derive(Debug)]
pub(super) struct Deal {
    layout: Layout,
    world_size: u64,
    /// Samples per rank (torch's `num_samples`).
    num_samples: u64,
    batch_size: u64,
}

impl Deal {
    /// Batches per rank: the last one may be short, as a `DataLoader` keeps it.
    pub fn batches(&self) -> u64 {
        self.num_samples.div_ceil(self.batch_size)
    }

    /// The ids of `rank`'s batch `batch`, into `out` (cleared first); none for a rank
    /// outside the world.
    pub fn batch_into(&self, rank: u64, batch: u64, out: &mut Vec<u64>) {
        out.clear();
        if rank >= self.world_size {
            return;
        }
        let first = batch.saturating_mul(self.batch_size).min(self.num_samples);
        let end = first.saturating_add(self.batch_size).min(self.num_samples);
        match &self.layout {
            Layout::Strided(order) => out.extend(
                (first..end).filter_map(|k| order.get((rank + k * self.world_size) as usize)),
            ),
            Layout::PerRank(lists) => {
                let list = &lists[rank as usize];
                let end = (end as usize).min(list.len());
                out.extend_from_slice(&list[(first as usize).min(end)..end]);
            }
        }
    }
}

/// Deals epochs on demand, keeping the few most recently asked for.
pub(super) struct Dealer<'a> {
    job: &'a JobConfig,
    run_seed: u64,
    complexities: Option<Vec<i64>>,
    cached: BTreeMap<(u64, u64), Deal>,
}

impl<'a> Dealer<'a> {
    pub fn new(job: &'a JobConfig, run_seed: u64) -> Self {
        Dealer {
            job,
            run_seed,
            complexities: None,
            cached: BTreeMap::new(),
        }
    }

    /// `epoch` dealt to `world_size` ranks, as `set_epoch(epoch)` on every rank's sampler.
    pub fn deal(&mut self, epoch: u64, world_size: u64) -> Result<&Deal, SamplerError> {
        let key = (epoch, world_size);
        if !self.cached.contains_key(&key) {
            let deal = self.deal_afresh(epoch, world_size)?;
            while self.cached.len() >= DEALS_CACHED_MAX {
                let oldest = *self.cached.keys().next().expect("non-empty");
                self.cached.remove(&oldest);
            }
            self.cached.insert(key, deal);
        }
        Ok(&self.cached[&key])
    }

    fn deal_afresh(&mut self, epoch: u64, world_size: u64) -> Result<Deal, SamplerError> {
        let s = &self.job.sampler;
        let len = self.job.dataset.len;
        if s.batch_size == 0 {
            return Err(SamplerError::ZeroBatchSize);
        }
        let (layout, num_samples) = match s.kind {
            SamplerKind::Distributed => {
                let mut sampler =
                    DistributedSampler::new(len, world_size, 0, s.shuffle, s.seed, s.drop_last)?;
                sampler.set_epoch(epoch);
                (Layout::Strided(sampler.padded_order()?), sampler.len())
            }
            SamplerKind::LoadBalancing => {
                let (job, run_seed) = (self.job, self.run_seed);
                let all = self.complexities.get_or_insert_with(|| {
                    complexities(dataset_key(run_seed), &job.dataset.complexity, len)
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
                (Layout::PerRank(sampler.indices_all_ranks()?), sampler.len())
            }
        };
        Ok(Deal {
            layout,
            world_size,
            num_samples,
            batch_size: s.batch_size,
        })
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
        let mut dealer = Dealer::new(&s.job, 1);
        let deal = dealer.deal(3, 4).unwrap();
        assert_eq!(deal.batches(), 2, "3 samples per rank in batches of 2");
        let mut out = Vec::new();
        for rank in 0..4 {
            let mut got = Vec::new();
            for batch in 0..deal.batches() {
                deal.batch_into(rank, batch, &mut out);
                got.extend_from_slice(&out);
            }
            let mut sampler = DistributedSampler::new(10, 4, rank, true, s.job.sampler.seed, false)
                .expect("a valid rank");
            sampler.set_epoch(3);
            assert_eq!(got, sampler.indices().unwrap(), "rank {rank}");
        }
        deal.batch_into(4, 0, &mut out);
        assert!(out.is_empty(), "no rank 4 in a world of 4");
    }
}
