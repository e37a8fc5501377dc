//! Epochs of torch's `DistributedSampler` dealt once per process: a deal is a pure function
//! of what [`DealKey`] holds, so every run, and the checks, that ask for the same one share
//! the one this module dealt.
//!
//! The job's epoch plans and the checker's deals both come from here, each asking with a
//! key of its own making: the job from its state (its world, the epoch its script set, a
//! planted bug's stride), the checker from the scenario and the trace. Neither can hand the
//! other a deal: the deal is this module's, computed from the key alone.
//!
//! The process keeps two things per epoch, each bounded: the deal (every rank's ids, the
//! heavy part) of the most recent few dozen, and the facts (`EpochFacts`: the shape, and
//! the digests and counts computed from the ids) of many more. A check of a long run finds
//! the facts of nearly every epoch its run dealt, and deals an epoch again only for what
//! no run computed.

use super::dealt_epoch::DealtEpoch;
use super::epoch_facts::EpochFacts;
use super::{DistributedSampler, SamplerError};
use crate::memo::Memo;
use crate::scenario::model::JobConfig;
use std::sync::{Arc, OnceLock};

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

/// Sample ids the process keeps in dealt epochs: a campaign's runs and their checks deal
/// each epoch of their dataset once. An id costs 8 bytes laid out in its rank's list, 4 in
/// a `u32` order, 12 in an order whose lists were laid out too: at most 96 MiB.
const DEAL_IDS_MAX: usize = 8 << 20;

/// Dealt epochs the process keeps, however small: a run needs the epoch it trains and the
/// few dealt ahead of it, and its checks judge from the epochs' facts. Every epoch kept
/// past that is memory the system must fault in once (a 64 × 8 run of 100 000 samples
/// otherwise fills all 96 MiB, about 80 epochs, and zeroing them was a sixth of the
/// dealing thread's time).
const DEALS_KEPT_MAX: usize = 16;

static DEALS: Memo<DealKey, DealtEpoch> = Memo::bounded(DEAL_IDS_MAX, DEALS_KEPT_MAX);

/// Slots ([`EpochFacts::weight`]) the process keeps in epochs' facts: about 50 bytes each
/// when filled, so at most about 150 MiB, and a few MiB in practice (the 534 epochs of a
/// 64 × 8 run of 100 000 samples weigh 2.2 million slots, of which digests fill a tenth).
const FACT_SLOTS_MAX: usize = 3 << 20;

static FACTS: Memo<DealKey, EpochFacts> = Memo::new(FACT_SLOTS_MAX);

/// The epoch `key` names, dealt to every rank: the kept one, the one another thread is
/// dealing (waited for), or dealt now.
pub fn shared_deal(key: &DealKey) -> Result<Arc<DealtEpoch>, SamplerError> {
    shared_deal_then(key, |_| {})
}

/// [`shared_deal`], with `prepare` run on a deal made now before any other thread gets it:
/// it fills the deal's facts ahead of need (digests, counts), so that a thread waiting for
/// the deal finds them too. What it fills is pure, so who filled it changes nothing.
pub fn shared_deal_then(
    key: &DealKey,
    prepare: impl FnOnce(&DealtEpoch),
) -> Result<Arc<DealtEpoch>, SamplerError> {
    DEALS.get_or_compute(key, deal_ids(key), || {
        let dealt = deal(key)?;
        prepare(&dealt);
        Ok(dealt)
    })
}

/// The epoch `key` names as the process keeps it: its facts, with its ids dealt only when
/// something not yet computed needs them.
pub fn kept_epoch(key: &DealKey) -> Result<KeptEpoch, SamplerError> {
    match FACTS.get(key) {
        Some(facts) => Ok(KeptEpoch::of_facts(facts, Some(*key), OnceLock::new())),
        None => Ok(KeptEpoch::of_dealt(shared_deal(key)?)),
    }
}

/// An epoch the sampler dealt: its facts, and its ids (dealt again from its key if the
/// process let them go, when a digest or count no run computed needs them).
#[derive(Debug)]
pub struct KeptEpoch {
    facts: Arc<EpochFacts>,
    /// The facts' world size and batches per rank, read on every step judged.
    world_size: u64,
    batches: u64,
    /// What deals it again; `None` when its deal is at hand.
    key: Option<DealKey>,
    dealt: OnceLock<Arc<DealtEpoch>>,
}

impl KeptEpoch {
    /// An epoch already dealt.
    pub fn of_dealt(dealt: Arc<DealtEpoch>) -> Self {
        Self::of_facts(Arc::clone(dealt.facts()), None, OnceLock::from(dealt))
    }

    fn of_facts(
        facts: Arc<EpochFacts>,
        key: Option<DealKey>,
        dealt: OnceLock<Arc<DealtEpoch>>,
    ) -> Self {
        KeptEpoch {
            world_size: facts.world_size(),
            batches: facts.batches(),
            facts,
            key,
            dealt,
        }
    }

    /// The epoch's ids, dealt again if they are not at hand.
    ///
    /// # Panics
    /// If dealing its key fails: its facts were kept from a deal of that very key, and a
    /// deal is a pure function of its key.
    pub fn dealt(&self) -> &Arc<DealtEpoch> {
        self.dealt.get_or_init(|| {
            let key = self.key.expect("an epoch without its deal has its key");
            shared_deal(&key).unwrap_or_else(|e| {
                panic!("the epoch {key:?} was dealt before and now fails to deal: {e}")
            })
        })
    }

    /// Batches per rank.
    pub fn batches(&self) -> u64 {
        self.batches
    }

    /// Ranks in the world dealt to.
    pub fn world_size(&self) -> u64 {
        self.world_size
    }

    /// How many ids `rank`'s batch `batch` holds.
    pub fn batch_len(&self, rank: u64, batch: u64) -> u64 {
        self.facts.batch_len(rank, batch)
    }

    /// Each of `ranks` with the length of its batch `batch` (`EpochFacts::batch_lens`).
    pub fn batch_lens(
        &self,
        ranks: std::ops::Range<u64>,
        batch: u64,
    ) -> impl Iterator<Item = (u64, u64)> + Clone + '_ {
        self.facts.batch_lens(ranks, batch)
    }

    /// The digest of batch `batch` of ranks `first_rank..first_rank + ranks`: kept, or
    /// computed from the ids.
    pub fn digest(&self, first_rank: u64, ranks: u32, batch: u64) -> u64 {
        self.facts
            .digest(first_rank, ranks, batch, |room_for_four| {
                self.dealt()
                    .compute_digest(first_rank, ranks, batch, room_for_four)
            })
    }

    /// Distinct ids of every rank's batches from `first_batch` on: kept, or counted.
    pub fn distinct_from(&self, first_batch: u64) -> u64 {
        self.facts.distinct_from(first_batch, || {
            self.dealt().count_distinct_from(first_batch)
        })
    }
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
    let ids = sampler.deal(key.offset)?;
    let (num_samples, batch_size) = (sampler.len(), key.batch_size);
    // Dealt again after its ids were let go, an epoch keeps what was computed from them.
    let batches = num_samples.div_ceil(batch_size.max(1));
    let weight = EpochFacts::weight(key.world_size, batches);
    let facts = FACTS.get_or_compute(key, weight, || {
        Ok::<_, SamplerError>(EpochFacts::of(ids.rank_lens(), num_samples, batch_size))
    })?;
    Ok(DealtEpoch::with_facts(ids, num_samples, batch_size, facts))
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

    #[test]
    fn a_kept_epoch_answers_from_its_facts_and_deals_only_for_what_they_lack() {
        // Seed 4 and epoch 9: a key no other test of the process deals.
        let key = DealKey {
            seed: 4,
            ..key(9, 0)
        };
        let dealt = deal(&key).unwrap();
        let facts = Arc::clone(dealt.facts());
        // A digest the facts hold is read back as kept, ids or not.
        facts.digest(0, 2, 0, |_| crate::sampler::epoch_facts::Digested::One(77));
        let husk = KeptEpoch::of_facts(facts, Some(key), OnceLock::new());
        assert_eq!(husk.digest(0, 2, 0), 77, "read from the facts");
        assert!(husk.dealt.get().is_none(), "nothing dealt for it");
        assert_eq!((husk.batches(), husk.world_size()), (2, 4));
        assert_eq!(husk.batch_len(3, 1), dealt.batch(3, 1).len() as u64);
        // One they lack is computed from the epoch dealt again.
        assert_eq!(husk.digest(1, 1, 1), dealt.digest(1, 1, 1));
        assert!(husk.dealt.get().is_some(), "dealt again for it");
        assert_eq!(husk.distinct_from(0), dealt.distinct_from(0));
        assert_eq!(husk.dealt().batch(2, 0), dealt.batch(2, 0));
    }

    #[test]
    fn an_epoch_dealt_again_keeps_the_facts_of_its_first_deal() {
        let key = DealKey {
            seed: 5,
            ..key(9, 0)
        };
        let first = shared_deal(&key).unwrap();
        first.digest(0, 1, 0);
        let again = deal(&key).unwrap();
        assert!(Arc::ptr_eq(first.facts(), again.facts()));
        let kept = kept_epoch(&key).unwrap();
        assert_eq!(kept.facts.kept_digest(0, 1, 0), Some(first.digest(0, 1, 0)));
    }
}
