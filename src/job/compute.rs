//! A node's compute time for a step: which of its GPUs are usable, and how long its slowest
//! local rank computes a batch (its samples' complexity, its GPU's speed and slowdown).

use super::epoch_plan::{self, EpochPlan};
use super::{GroupPlan, WorkerStatus};
use crate::scenario::model::Complexity;
use crate::sim_time::SimDuration;
use crate::world::env::GpuNow;
use crate::world::gpu::{compute_time, gpu_of_local_rank};
use crate::world::NodeEnv;

/// Fills each local rank's batch and returns the node's compute time: its slowest GPU's.
pub(super) fn compute_batches(
    env: &NodeEnv,
    plan: &GroupPlan,
    epoch_plan: &EpochPlan,
    batch: u64,
    dataset_key: u64,
    batches: &mut [Vec<u64>],
) -> Result<SimDuration, WorkerStatus> {
    let gpus = usable_gpus(env, batches.len())?;
    let on = ComputeOn {
        env,
        plan,
        epoch_plan,
        gpus: &gpus,
        dataset_key,
    };
    Ok(on.slowest(batch, batches, Fill::Always))
}

/// The node's GPUs now, or the failure of the first of `ranks` local ranks whose GPU is lost.
pub(super) fn usable_gpus(env: &NodeEnv, ranks: usize) -> Result<Vec<GpuNow>, WorkerStatus> {
    let gpus_per_node = env.scenario().cluster.gpus_per_node;
    let gpus = env.gpus_now(gpus_per_node.max(1));
    for local_rank in (0u32..).take(ranks) {
        let gpu = gpu_of_local_rank(local_rank, gpus_per_node);
        if gpus[gpu as usize].failed {
            return Err(WorkerStatus::Failed {
                local_rank,
                exit_code: crate::world::gpu::GPU_LOST_EXIT_CODE,
                reason: format!("CUDA error on gpu {gpu}: the GPU has fallen off the bus"),
            });
        }
    }
    Ok(gpus)
}

/// Whether a step's compute time needs its batches' sample ids.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Fill {
    /// Fill every batch: the step trains on it next.
    Always,
    /// Only where the time depends on which samples (a dataset of varying complexity).
    WhenTimed,
}

/// What a node's compute time depends on besides the batch: its GPUs and its data.
pub(super) struct ComputeOn<'a> {
    pub env: &'a NodeEnv,
    pub plan: &'a GroupPlan,
    pub epoch_plan: &'a EpochPlan,
    pub gpus: &'a [GpuNow],
    pub dataset_key: u64,
}

impl ComputeOn<'_> {
    /// The slowest local rank's compute time for batch `batch`.
    pub fn slowest(&self, batch: u64, batches: &mut [Vec<u64>], fill: Fill) -> SimDuration {
        let scenario = self.env.scenario();
        let job = &scenario.job;
        let gpus_per_node = scenario.cluster.gpus_per_node;
        let mut slowest = SimDuration::ZERO;
        for (local_rank, out) in (0u32..).zip(batches.iter_mut()) {
            let rank = self.plan.base_global_rank + u64::from(local_rank);
            let complexity = match (fill, &job.dataset.complexity) {
                (Fill::WhenTimed, Complexity::Constant { value }) => {
                    value * self.epoch_plan.batch_len(rank, batch)
                }
                (_, complexity) => {
                    self.epoch_plan.batch_into(rank, batch, out);
                    epoch_plan::complexity_sum(self.dataset_key, complexity, out)
                }
            };
            let gpu = self.gpus[gpu_of_local_rank(local_rank, gpus_per_node) as usize];
            let time = compute_time(
                job.step_time,
                complexity,
                job.sampler.batch_size,
                gpu.slowdown,
                scenario.cluster.gpu.compute_speed,
            );
            slowest = slowest.max(time);
        }
        slowest
    }
}
