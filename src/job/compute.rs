//! A node's compute time for a step: which of its GPUs are usable, and how long its slowest
//! local rank computes a batch (its samples' complexity, its GPU's speed and slowdown).

use super::epoch_plan::EpochPlan;
use super::{GroupPlan, WorkerStatus};
use crate::sim_time::SimDuration;
use crate::world::env::GpuNow;
use crate::world::gpu::{compute_time, gpu_of_local_rank};
use crate::world::NodeEnv;

/// The node's compute time for batch `batch`: its slowest GPU's.
pub(super) fn compute_time_of(
    env: &NodeEnv,
    plan: &GroupPlan,
    epoch_plan: &EpochPlan,
    batch: u64,
    dataset_key: u64,
) -> Result<SimDuration, WorkerStatus> {
    let gpus = usable_gpus(env, plan.local_world_size as usize)?;
    let on = ComputeOn {
        env,
        plan,
        epoch_plan,
        gpus: &gpus,
        dataset_key,
    };
    Ok(on.slowest(batch))
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
    pub fn slowest(&self, batch: u64) -> SimDuration {
        let scenario = self.env.scenario();
        let job = &scenario.job;
        let gpus_per_node = scenario.cluster.gpus_per_node;
        let mut slowest = SimDuration::ZERO;
        for local_rank in 0..self.plan.local_world_size {
            let rank = self.plan.base_global_rank + u64::from(local_rank);
            let complexity = self.epoch_plan.batch_complexity(
                self.dataset_key,
                &job.dataset.complexity,
                rank,
                batch,
            );
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
