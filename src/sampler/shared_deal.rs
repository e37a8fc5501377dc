//! Epochs of torch's `DistributedSampler` dealt once per process: a deal is a pure function
//! of what [`DealKey`] holds, so every run, and the checks, that ask for the same one share
//! the one this module dealt.
//!
//! The job's epoch plans and the checker's deals both come from here, each asking with a
//! key of its own making: the job from its state (its world, the epoch its script set, a
//! planted bug's stride), the checker from the scenario and the trace. Neither can hand the
//! other a deal: the deal is this module's, computed from the key alone.

use super::dealt_epoch::DealtEpoch;
use super::{DistributedSampler, SamplerError};
use crate::memo::Memo;
use crate::scenario::model::JobConfig;
use std::sync::Arc;

/// Everything a `DistributedSampler` deal depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct DealKey {
    /// The dataset's length.
    pub len: u64,
    pub shuffle: bool,
    /// The sampler's `seed`, not the run's.
    pub seed: i64,
    pub drop_last: bool,
    /// Samples per batch, as a `DataLoader` cuts the epoch.
    pub batch_size: u64,
    /// What `set_epoch` set.
    pub epoch: u64,
    pub world_size: u64,
    /// Where each rank's stride starts past its rank: 0 but for a planted bug.
    pub offset: u64,
}

impl DealKey {
    /// The deal of epoch `epoch` to `world_size` ranks of `job`'s dataset and sampler
    /// settings, each rank's stride starting `offset` past its rank; never the run seed.
    pub fn of_job(job: &JobConfig, epoch: u64, world_size: u64, offset: u64) -> Self {
        let s = &job.sampler;
        DealKey {
            len: job.dataset.len,
            shuffle: s.shuffle,
            seed: s.seed,
            drop_last: s.drop_last,
            batch_size: s.batch_size,
            epoch,
            world_size,
            offset,
        }
    }
}

/// Sample ids the process keeps in dealt epochs (8 bytes each: 64 MiB): a campaign's runs
/// and their checks deal each epoch of their dataset once.
const DEAL_IDS_MAX: usize = 8 << 20;

static DEALS: Memo<DealKey, DealtEpoch> = Memo::new(DEAL_IDS_MAX);

/// The epoch `key` names, dealt to every rank: the kept one, the one another thread is
/// dealing (waited for), or dealt now.
pub fn shared_deal(key: &DealKey) -> Result<Arc<DealtEpoch>, SamplerError> {
    DEALS.get_or_compute(key, deal_ids(key), || deal(key))
}

/// Whether the epoch `key` names is kept or being dealt.
pub fn is_dealt_or_dealing(key: &DealKey) -> bool {
    DEALS.has(key)
}

fn deal(key: &DealKey) -> Result<DealtEpoch, SamplerError> {
    let mut sampler = DistributedSampler::new(
        key.len,
        key.world_size,
        0,
        key.shuffle,
        key.seed,
        key.drop_last,
    )?;
    sampler.set_epoch(key.epoch);
    let lists = sampler.deal_all_ranks(key.offset)?;
    Ok(DealtEpoch::new(lists, sampler.len(), key.batch_size))
}

/// The weight a deal is kept at: its sample ids.
fn deal_ids(key: &DealKey) -> usize {
    usize::try_from(key.len.saturating_add(key.world_size)).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(epoch: u64, offset: u64) -> DealKey {
        DealKey {
            len: 10,
            shuffle: true,
            seed: 3,
            drop_last: false,
            batch_size: 2,
            epoch,
            world_size: 4,
            offset,
        }
    }

    #[test]
    fn a_shared_deal_is_the_samplers_own_and_is_dealt_once() {
        let dealt = shared_deal(&key(5, 0)).unwrap();
        assert!(Arc::ptr_eq(&dealt, &shared_deal(&key(5, 0)).unwrap()));
        assert!(is_dealt_or_dealing(&key(5, 0)));
        for rank in 0..4 {
            let mut sampler = DistributedSampler::new(10, 4, rank, true, 3, false).unwrap();
            sampler.set_epoch(5);
            let got: Vec<u64> = (0..dealt.batches())
                .flat_map(|b| dealt.batch(rank, b).to_vec())
                .collect();
            assert_eq!(got, sampler.indices().unwrap(), "rank {rank}");
        }
        let shifted = shared_deal(&key(5, 1)).unwrap();
        assert_ne!(
            shifted.batch(0, 0),
            dealt.batch(0, 0),
            "another stride is another deal"
        );
    }
}
