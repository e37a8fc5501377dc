//! The step loop's data epochs: the plan of each (shared by every process of a run), and
//! what happens at an epoch's start and end: the ledger's tally opens and closes, the plans
//! ahead are dealt ahead, and the trace records `EpochStarted` and `EpochCovered`. A run of
//! steps settled in closed form crosses an epoch's end through the same functions, at the
//! moment the epoch's last step ended.

use super::epoch_plan::{self, EpochPlan, PlanKey};
use super::ledger::SampleLedger;
use super::{script_error, GroupPlan, Position, WorkerStatus};
use crate::sim_time::SimInstant;
use crate::trace::EventKind;
use crate::world::NodeEnv;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Epoch plans kept at once (a plan holds one permutation of the dataset).
const PLANS_CACHED_MAX: usize = 4;

/// Caches shared by every process of a run: epoch plans and the dataset's complexities.
#[derive(Default)]
struct DataCache {
    plans: Mutex<BTreeMap<PlanKey, Arc<EpochPlan>>>,
    complexities: Mutex<Option<Arc<Vec<i64>>>>,
}

/// The key complexities are drawn under: the same for every process of a run.
pub(super) fn dataset_key(env: &NodeEnv) -> u64 {
    epoch_plan::dataset_key(env.run_seed())
}

/// The plan of one epoch for this group, computed once per run and shared.
fn plan_for(env: &NodeEnv, key: PlanKey) -> Result<Arc<EpochPlan>, String> {
    let cache = env.shared::<DataCache>("job/data");
    if let Some(plan) = cache.plans.lock().expect("plans").get(&key) {
        return Ok(Arc::clone(plan));
    }
    let job = &env.scenario().job;
    let complexities = || {
        let mut slot = cache.complexities.lock().expect("complexities");
        let all = slot.get_or_insert_with(|| {
            Arc::new(epoch_plan::complexities(
                dataset_key(env),
                &job.dataset.complexity,
                job.dataset.len,
            ))
        });
        all.as_ref().clone()
    };
    let plan = Arc::new(epoch_plan::epoch_plan(job, key, complexities).map_err(|e| e.to_string())?);
    let mut plans = cache.plans.lock().expect("plans");
    while plans.len() >= PLANS_CACHED_MAX {
        let oldest = *plans.keys().next().expect("non-empty");
        plans.remove(&oldest);
    }
    plans.insert(key, Arc::clone(&plan));
    Ok(plan)
}

/// The plan of the order the samplers deal under `key`, when it gives every rank a batch
/// to step; else the script's error.
pub(super) fn steppable_plan(
    env: &NodeEnv,
    plan: &GroupPlan,
    key: PlanKey,
) -> Result<Arc<EpochPlan>, WorkerStatus> {
    let epoch_plan = plan_for(env, key).map_err(|e| script_error(format!("sampler: {e}")))?;
    if epoch_plan.batches() == 0 {
        return Err(script_error(format!(
            "the sampler gives each of {} ranks no sample: the training loop cannot step",
            plan.world_size
        )));
    }
    Ok(epoch_plan)
}

/// Data epoch `at.epoch` begins now: builds (or shares) the plan of the order the samplers
/// deal (its key names the epoch `set_epoch` last set) and opens the epoch (see
/// [`open_epoch`]).
pub(super) fn start_epoch(
    env: &NodeEnv,
    plan: &GroupPlan,
    key_of: &KeyOf<'_>,
    at: &mut Position,
) -> Result<Arc<EpochPlan>, WorkerStatus> {
    let epoch_plan = steppable_plan(env, plan, key_of(at.epoch))?;
    if at.batch >= epoch_plan.batches() {
        at.batch = 0;
    }
    let now = crate::world::time::now_whole_us();
    open_epoch(env, plan, &epoch_plan, key_of, at, now);
    Ok(epoch_plan)
}

/// The sampler's key of each data epoch (the epoch `set_epoch` last set for it).
pub(super) type KeyOf<'k> = dyn Fn(u64) -> PlanKey + Sync + 'k;

/// How many epochs past the current one have their plans dealt ahead: four when the
/// dataset is small enough for runs to span epochs (such a run needs the next plan as it
/// begins, so the prefetch thread must be further ahead; six deals of at most 1 Mi ids fit
/// the process's deal memo), else two, so that a late prefetch leaves the next one still
/// ahead.
fn plans_ahead(env: &NodeEnv) -> u64 {
    if env.scenario().job.dataset.len <= super::segment::SPANNING_DATASET_LEN_MAX {
        4
    } else {
        2
    }
}

/// Has group rank 0 ask the prefetch thread for the plans of the [`plans_ahead`] epochs
/// after `last_epoch`, which is `epoch_batches` long and ends at step `next_epoch_step`.
pub(super) fn prefetch_after(
    env: &NodeEnv,
    plan: &GroupPlan,
    key_of: &KeyOf<'_>,
    last_epoch: u64,
    next_epoch_step: u64,
    epoch_batches: u64,
) {
    // The group's members open each epoch together; one asks for the plans ahead.
    if plan.group_rank != 0 {
        return;
    }
    let ahead: Vec<PlanKey> = (1..=plans_ahead(env))
        .map(|k| key_of(last_epoch + k))
        .collect();
    let (job, ranks_per_node) = (&env.scenario().job, plan.local_world_size);
    epoch_plan::prefetch_ahead(job, &ahead, next_epoch_step, epoch_batches, ranks_per_node);
}

/// Opens data epoch `at.epoch` at batch `at.batch` of `epoch_plan`, at `moment`: its tally
/// in the ledger, and group rank 0's `EpochStarted`. Group rank 0 has the plans of the
/// next epochs ([`plans_ahead`]) dealt ahead on the prefetch thread while this one trains,
/// with the batch digests of nodes of this group's ranks per node, when the job's steps
/// reach them (a plan never reached would keep a core busy for nothing).
pub(super) fn open_epoch(
    env: &NodeEnv,
    plan: &GroupPlan,
    epoch_plan: &EpochPlan,
    key_of: &KeyOf<'_>,
    at: &Position,
    moment: SimInstant,
) {
    assert!(
        at.batch < epoch_plan.batches(),
        "epoch {} starts at batch {} of {}",
        at.epoch,
        at.batch,
        epoch_plan.batches()
    );
    env.shared::<Mutex<SampleLedger>>("job/ledger")
        .lock()
        .expect("ledger")
        .begin(plan.group_key(), at.epoch, epoch_plan.dealt(), at.batch);
    let batches = epoch_plan.batches();
    let next_epoch_step = at.step + (batches - at.batch);
    prefetch_after(env, plan, key_of, at.epoch, next_epoch_step, batches);
    if plan.group_rank == 0 {
        env.record_at(
            moment,
            EventKind::EpochStarted {
                pid: env.pid,
                round: plan.round,
                store_incarnation: plan.store_incarnation,
                epoch: at.epoch,
                world_size: plan.world_size,
                first_batch: at.batch,
                batches,
            },
        );
    }
}

/// This node finished `epoch` at `moment`; the last node of the group records what the
/// group covered.
pub(super) fn finish_epoch(
    env: &NodeEnv,
    plan: &GroupPlan,
    ledger: &Mutex<SampleLedger>,
    epoch: u64,
    moment: SimInstant,
) {
    let done = ledger.lock().expect("ledger").node_done(
        plan.group_key(),
        epoch,
        env.index,
        plan.nodes_in_world() as usize,
    );
    if let Some(c) = done {
        env.record_at(
            moment,
            EventKind::EpochCovered {
                round: plan.round,
                store_incarnation: plan.store_incarnation,
                epoch: c.epoch,
                world_size: c.world_size,
                first_batch: c.first_batch,
                samples: c.samples,
                distinct: c.distinct,
                ranks: c.ranks,
                rank_samples_min: c.rank_samples_min,
                rank_samples_max: c.rank_samples_max,
            },
        );
    }
}
