//! What each rank trains on: the per-sample complexity of the dataset and each epoch's
//! per-rank batches, drawn by torch's `DistributedSampler` or Bagua's
//! `LoadBalancingDistributedSampler` and cut into batches as a `DataLoader` does
//! (`batch_size` per rank, the last batch of an epoch possibly short).
//!
//! Pure: no clock, no I/O. Complexities are a function of (dataset key, index), so nothing
//! dataset-sized is kept unless the load-balancing sampler needs the whole list.

use crate::sampler::dealt_epoch::DealtEpoch;
use crate::sampler::shared_deal::{is_dealt_or_dealing, shared_deal, shared_deal_then, DealKey};
use crate::sampler::{LoadBalancingSampler, RankLists, SamplerError};
use crate::scenario::limits::COMPLEXITY_MAX;
use crate::scenario::model::{Complexity, JobConfig, SamplerKind};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

/// The key the dataset's complexities are drawn under in the run with `run_seed`: the same
/// for every process of the run, and for a checker that deals an epoch again.
pub fn dataset_key(run_seed: u64) -> u64 {
    use rand::RngCore;
    crate::world::rng::stream(run_seed, "dataset/complexity").next_u64()
}

/// splitmix64: a fast, well-mixed hash of one word, so sample `i`'s complexity needs no
/// table and no sequential draw.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A uniform draw in (0, 1) from a hash.
fn unit_open(h: u64) -> f64 {
    ((h >> 11) as f64 + 0.5) / (1u64 << 53) as f64
}

/// The complexity of sample `index`, drawn from the scenario's distribution under `key`
/// (derived from the run seed).
pub fn complexity(key: u64, dist: &Complexity, index: u64) -> u64 {
    let h = mix(key ^ mix(index));
    match dist {
        Complexity::Constant { value } => *value,
        Complexity::Uniform { min, max } => min + h % (max - min + 1),
        Complexity::Lognormal { median, sigma } => {
            // Box-Muller from two independent hashes.
            let u1 = unit_open(h);
            let u2 = unit_open(mix(h ^ 0x5151_5151_5151_5151));
            let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
            let v = (median * (sigma * z).exp()).round();
            if v.is_finite() {
                (v.max(1.0) as u64).min(COMPLEXITY_MAX)
            } else {
                COMPLEXITY_MAX
            }
        }
        Complexity::List { values } => values[index as usize],
    }
}

/// The sum of the complexities of `indices`.
pub fn complexity_sum(key: u64, dist: &Complexity, indices: &[u64]) -> u64 {
    match dist {
        Complexity::Constant { value } => value * indices.len() as u64,
        _ => indices.iter().map(|&i| complexity(key, dist, i)).sum(),
    }
}

/// Every sample's complexity, as Bagua's `complexity_fn` sees the dataset.
pub fn complexities(key: u64, dist: &Complexity, len: u64) -> Vec<i64> {
    (0..len).map(|i| complexity(key, dist, i) as i64).collect()
}

/// One epoch's samples for every rank of a world, as the job reads them: a batch or a rank
/// past the epoch's is a bug of the job's and stops the run.
#[derive(Debug)]
pub struct EpochPlan {
    /// Each rank's samples of the epoch, in the order it takes them. A step reads its
    /// node's batch digest and its batches' lengths from what the epoch keeps, and the ids
    /// themselves only when its samples' complexities differ (then every rank's list is
    /// laid out, once per epoch, so a batch is a slice).
    dealt: Arc<DealtEpoch>,
}

impl EpochPlan {
    /// Batches per rank in the epoch: a `DataLoader` keeps the short last batch.
    pub fn batches(&self) -> u64 {
        self.dealt.batches()
    }

    /// How many leading batches of the epoch are full (`batch_size` samples) for every rank.
    pub fn full_batches(&self) -> u64 {
        self.dealt.full_batches()
    }

    /// The epoch as dealt, for the sample ledger's tally.
    pub fn dealt(&self) -> &Arc<DealtEpoch> {
        &self.dealt
    }

    /// The sample indices of `rank`'s batch `batch`.
    pub fn batch(&self, rank: u64, batch: u64) -> &[u64] {
        self.assert_inside(rank, batch);
        self.dealt.batch(rank, batch)
    }

    /// How many samples `rank`'s batch `batch` holds (from the epoch's shape: the ids are
    /// not read).
    pub fn batch_len(&self, rank: u64, batch: u64) -> u64 {
        self.assert_inside(rank, batch);
        self.dealt.facts().batch_len(rank, batch)
    }

    /// Each of `ranks` with the length of its batch `batch` (`EpochFacts::batch_lens`).
    pub fn batch_lens(
        &self,
        ranks: std::ops::Range<u64>,
        batch: u64,
    ) -> impl Iterator<Item = (u64, u64)> + '_ {
        if let Some(last) = ranks.end.checked_sub(1).filter(|&last| last >= ranks.start) {
            self.assert_inside(last, batch);
        }
        self.dealt.facts().batch_lens(ranks, batch)
    }

    /// The sum of the complexities of `rank`'s batch `batch` ([`complexity_sum`]): a
    /// constant complexity needs only the batch's length, so the ids are read only for
    /// complexities that differ from sample to sample.
    pub fn batch_complexity(&self, key: u64, dist: &Complexity, rank: u64, batch: u64) -> u64 {
        match dist {
            Complexity::Constant { value } => value * self.batch_len(rank, batch),
            _ => complexity_sum(key, dist, self.batch(rank, batch)),
        }
    }

    /// The digest of batch `batch` of ranks `first_rank..first_rank + ranks` (what a node
    /// whose ranks those are trains on in a step), computed once for every run sharing the
    /// plan.
    pub fn digest(&self, first_rank: u64, ranks: u32, batch: u64) -> u64 {
        self.assert_inside(first_rank + u64::from(ranks.max(1)) - 1, batch);
        self.dealt.digest(first_rank, ranks, batch)
    }

    fn assert_inside(&self, rank: u64, batch: u64) {
        assert!(
            batch < self.batches(),
            "batch {batch} of an epoch of {} batches",
            self.batches()
        );
        let world_size = self.dealt.world_size();
        assert!(rank < world_size, "rank {rank} of a world of {world_size}");
    }
}

/// What an epoch plan depends on besides the scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct PlanKey {
    /// The sampler's epoch (what `set_epoch` last set), not the data epoch being trained.
    pub epoch: u64,
    pub world_size: u64,
    pub off_by_one: bool,
}

/// Builds the plan of `key.epoch` for a world of `key.world_size` ranks, calling
/// `set_epoch(epoch)` on the sampler as training scripts do. A `DistributedSampler` plan is
/// the sampler's shared deal, so every run in the process that asks for the same one gets
/// the one already dealt. `complexities` is needed only by the load-balancing sampler.
pub fn epoch_plan(
    job: &JobConfig,
    key: PlanKey,
    complexities: impl FnOnce() -> Vec<i64>,
) -> Result<EpochPlan, SamplerError> {
    let s = &job.sampler;
    if s.kind == SamplerKind::Distributed {
        return Ok(EpochPlan {
            dealt: shared_deal(&deal_key(job, key))?,
        });
    }
    let mut sampler = LoadBalancingSampler::new(
        complexities(),
        key.world_size,
        0,
        s.shuffle,
        s.seed,
        s.drop_last,
        s.random_level,
    )?;
    sampler.set_epoch(key.epoch);
    let lists = RankLists::from_lists(&sampler.indices_all_ranks()?);
    let dealt = DealtEpoch::new(lists, sampler.len(), s.batch_size);
    Ok(EpochPlan {
        dealt: Arc::new(dealt),
    })
}

/// The deal a `DistributedSampler` plan of `plan` is (the sampler's shared one).
fn deal_key(job: &JobConfig, plan: PlanKey) -> DealKey {
    DealKey::of_job(job, plan.epoch, plan.world_size, u64::from(plan.off_by_one))
}

/// Has the process's prefetch thread deal the `DistributedSampler` plan of `key` ahead of
/// need, with what the run will read of it: the whole epoch's distinct samples, every batch
/// digest of a world of nodes of `ranks_per_node` ranks (the group's layout), and every
/// rank's list when the job reads its samples' ids (their complexities differ). All of it
/// is pure, so the run computes exactly what it would without this, only sooner. Nothing
/// is asked when the plan is kept, being dealt or asked for already. A load-balancing plan
/// is not shared, so not prefetched.
pub fn prefetch(job: &JobConfig, key: PlanKey, ranks_per_node: u32) {
    if job.sampler.kind != SamplerKind::Distributed {
        return;
    }
    let deal = deal_key(job, key);
    let queued = || QUEUED_PLANS.lock().unwrap_or_else(PoisonError::into_inner);
    // Every node of a group asks at its epoch's start: the first one's request is the one.
    if is_dealt_or_dealing(&deal) || !queued().insert(deal) {
        return;
    }
    let reads_ids = !matches!(job.dataset.complexity, Complexity::Constant { .. });
    let sent = crate::memo::prefetch::submit(move || {
        // Begun: from here the memo knows the deal is under way (a panic in it ends that).
        queued().remove(&deal);
        let _ = shared_deal_then(&deal, |dealt| {
            dealt.distinct_from(0);
            dealt.keep_every_node_digest(ranks_per_node);
            if reads_ids {
                dealt.rank_lists();
            }
        });
    });
    if !sent {
        queued().remove(&deal);
    }
}

/// [`prefetch`] of the plans of the data epochs after this one (`ahead`, in order, each
/// `epoch_batches` steps long as the group's world stays), the first beginning at step
/// `next_epoch_step`, as far as the job's steps reach them (a plan never reached would keep
/// a core busy for nothing).
pub fn prefetch_ahead(
    job: &JobConfig,
    ahead: &[PlanKey],
    next_epoch_step: u64,
    epoch_batches: u64,
    ranks_per_node: u32,
) {
    let mut first_step = next_epoch_step;
    for &key in ahead {
        if first_step >= job.steps {
            return;
        }
        prefetch(job, key, ranks_per_node);
        first_step = first_step.saturating_add(epoch_batches);
    }
}

/// The plans asked of the prefetch thread and not yet begun (at most its queue's length).
static QUEUED_PLANS: Mutex<BTreeSet<DealKey>> = Mutex::new(BTreeSet::new());

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampler::DistributedSampler;
    use crate::scenario::model::{Dataset, SamplerConfig};
    use crate::sim_time::SimDuration;

    #[test]
    #[should_panic(expected = "batch 6 of an epoch of 6 batches")]
    fn a_batch_past_the_epoch_stops_the_run() {
        let j = job(SamplerKind::Distributed, 103, 4, false);
        let key = PlanKey {
            epoch: 0,
            world_size: 5,
            off_by_one: false,
        };
        epoch_plan(&j, key, Vec::new).unwrap().batch(0, 6);
    }

    /// Plans are dealt ahead only as far as the job's steps reach (`job` has 10 steps), and
    /// a plan dealt ahead is the one the run then gets.
    #[test]
    fn plans_are_dealt_ahead_only_as_far_as_the_steps_reach() {
        crate::memo::prefetch::start_thread();
        // A dataset length no other test uses, so its deals are this test's own.
        let j = job(SamplerKind::Distributed, 1_009, 4, false);
        let key = |epoch| PlanKey {
            epoch,
            world_size: 5,
            off_by_one: false,
        };
        // Epochs of 51 batches from step 8 of 10: the next is reached, the one after not;
        // from step 10 none is.
        prefetch_ahead(&j, &[key(1), key(2)], 8, 51, 1);
        prefetch_ahead(&j, &[key(3)], 10, 51, 1);
        // The prefetch thread works in order: once a later request is done, so is every one
        // before it (a dropped request fails here rather than being waited for).
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let marker = move || done_tx.send(()).unwrap();
        assert!(crate::memo::prefetch::submit(marker));
        done_rx.recv().unwrap();
        assert!(is_dealt_or_dealing(&deal_key(&j, key(1))), "dealt ahead");
        assert!(!is_dealt_or_dealing(&deal_key(&j, key(2))), "never reached");
        assert!(
            !is_dealt_or_dealing(&deal_key(&j, key(3))),
            "from past the last step"
        );
        let ahead = epoch_plan(&j, key(1), Vec::new).unwrap();
        let fresh = epoch_plan(&j, key(1), Vec::new).unwrap();
        assert_eq!(all_batches(&ahead, 5), all_batches(&fresh, 5));
        // Dealt with every digest of nodes of one rank, as the slices give them.
        for (rank, batch) in [(0, 0), (4, 3), (2, 50)] {
            let kept = ahead.dealt().facts().kept_digest(rank, 1, batch);
            let want = crate::trace::samples_digest([fresh.batch(rank, batch)]);
            assert_eq!(kept, Some(want), "rank {rank}, batch {batch}");
        }
    }

    fn job(kind: SamplerKind, len: u64, batch_size: u64, drop_last: bool) -> JobConfig {
        JobConfig {
            steps: 10,
            step_time: SimDuration::from_ms(1),
            model_size_bytes: 1,
            checkpoint_every: 1,
            collective_timeout: SimDuration::from_us(1),
            worker_start_time: SimDuration::ZERO,
            worker_start_jitter: SimDuration::ZERO,
            worker_exit_time: SimDuration::ZERO,
            checkpoint_save_time: SimDuration::ZERO,
            checkpoint_load_time: SimDuration::ZERO,
            backend: Default::default(),
            nccl_peer_exit_detection: None,
            dataset: Dataset {
                len,
                complexity: Complexity::Uniform { min: 1, max: 100 },
            },
            sampler: SamplerConfig {
                kind,
                shuffle: true,
                seed: 3,
                drop_last,
                random_level: 0.0,
                batch_size,
            },
            set_epoch: Default::default(),
            checkpoint_on_signal: None,
            init_method: Default::default(),
            script_master_port: None,
            eval: None,
        }
    }

    fn all_batches(plan: &EpochPlan, world: u64) -> Vec<Vec<u64>> {
        let mut out = Vec::new();
        for rank in 0..world {
            let mut rank_all = Vec::new();
            for b in 0..plan.batches() {
                rank_all.extend_from_slice(plan.batch(rank, b));
            }
            out.push(rank_all);
        }
        out
    }

    #[test]
    fn distributed_plan_matches_the_sampler_of_each_rank() {
        let j = job(SamplerKind::Distributed, 103, 4, false);
        let key = PlanKey {
            epoch: 2,
            world_size: 5,
            off_by_one: false,
        };
        let plan = epoch_plan(&j, key, Vec::new).unwrap();
        assert_eq!((0..6).map(|b| plan.batch_len(0, b)).sum::<u64>(), 21);
        assert_eq!(plan.batches(), 6);
        for (rank, got) in all_batches(&plan, 5).into_iter().enumerate() {
            let mut s = DistributedSampler::new(103, 5, rank as u64, true, 3, false).unwrap();
            s.set_epoch(2);
            assert_eq!(got, s.indices().unwrap());
        }
    }

    #[test]
    fn off_by_one_mutant_shifts_the_stride() {
        let j = job(SamplerKind::Distributed, 100, 10, false);
        let key = PlanKey {
            epoch: 0,
            world_size: 4,
            off_by_one: true,
        };
        let plan = epoch_plan(&j, key, Vec::new).unwrap();
        let ranks = all_batches(&plan, 4);
        assert_eq!(ranks[0].len(), 25);
        assert_eq!(ranks[3].len(), 24, "the last rank runs off the end");
    }

    #[test]
    fn load_balancing_plan_covers_each_rank_list() {
        let j = job(SamplerKind::LoadBalancing, 50, 3, false);
        let key = PlanKey {
            epoch: 1,
            world_size: 4,
            off_by_one: false,
        };
        let cx = complexities(9, &j.dataset.complexity, 50);
        let plan = epoch_plan(&j, key, || cx.clone()).unwrap();
        let ranks = all_batches(&plan, 4);
        for (rank, got) in ranks.iter().enumerate() {
            let mut s =
                LoadBalancingSampler::new(cx.clone(), 4, rank as u64, true, 3, false, 0.0).unwrap();
            s.set_epoch(1);
            assert_eq!(*got, s.indices().unwrap());
        }
    }

    #[test]
    fn complexities_follow_their_distribution() {
        let u = Complexity::Uniform { min: 5, max: 7 };
        assert!((0..1000).all(|i| (5..=7).contains(&complexity(1, &u, i))));
        let ln = Complexity::Lognormal {
            median: 20.0,
            sigma: 1.0,
        };
        let mut v: Vec<u64> = (0..4001).map(|i| complexity(1, &ln, i)).collect();
        v.sort_unstable();
        assert!((15..=25).contains(&v[2000]), "median {}", v[2000]);
        assert!(v.iter().all(|&x| x >= 1));
        let c = Complexity::Constant { value: 3 };
        assert_eq!(complexity_sum(0, &c, &[1, 2, 3]), 9);
    }
}
