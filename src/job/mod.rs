//! The simulated training job, as issue #2 models it: a worker group advances the global step
//! every `job.step_time`, each step ending in an all-reduce across the group; rank 0 writes a
//! checkpoint every `checkpoint_every` steps. (Issue #4 replaces the timer with GPUs and
//! samplers.)

pub mod reader_feed;

use crate::trace::EventKind;
use crate::world::{time, NodeEnv};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// torch's default process-group timeout: a collective whose peer is gone fails after it.
pub const COLLECTIVE_TIMEOUT_US: u64 = 600_000_000;

/// What the workers of one node are doing, as the agent's monitor sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkerStatus {
    Healthy,
    Succeeded,
    Failed {
        local_rank: u32,
        exit_code: i32,
        reason: String,
    },
}

/// The group a node's workers train in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupPlan {
    pub round: u64,
    pub group_rank: u32,
    /// Node indices of the group, by group rank.
    pub members: Vec<u32>,
    /// The global step the group resumes from (the last checkpoint).
    pub start_step: u64,
}

/// Runs this node's workers until the job's last step, or until a collective fails.
/// `reached` keeps the highest step this node's workers ever completed, across groups, so
/// the agent can tell how many steps a restart lost.
pub async fn train(
    env: NodeEnv,
    plan: GroupPlan,
    status: Arc<Mutex<WorkerStatus>>,
    reached: Arc<AtomicU64>,
) {
    let job = env.scenario().job.clone();
    let mut step = plan.start_step;
    let mut reader = reader_feed::ReaderFeed::start(&env, plan.round);
    while step < job.steps {
        if let Some(feed) = reader.as_mut() {
            match feed.take_batch(&env, time::elapsed_us(), 1.0) {
                reader_feed::Taken::Batch { stall_us, .. } => time::sleep_us(stall_us).await,
                reader_feed::Taken::Hang => std::future::pending::<()>().await,
            }
        }
        time::sleep_us(job.step_time_us).await;
        if env
            .all_reduce(plan.round, step + 1, &plan.members, COLLECTIVE_TIMEOUT_US)
            .await
            .is_err()
        {
            *status.lock().expect("status lock") = WorkerStatus::Failed {
                local_rank: 0,
                exit_code: 1,
                reason: "an all-reduce timed out: a peer never joined it".into(),
            };
            return;
        }
        step += 1;
        reached.fetch_max(step, Ordering::Relaxed);
        env.record(EventKind::Step {
            pid: env.pid,
            round: plan.round,
            step,
        });
        if plan.group_rank == 0
            && job.checkpoint_every > 0
            && step.is_multiple_of(job.checkpoint_every)
        {
            env.write_checkpoint(step);
            env.record(EventKind::Checkpoint { pid: env.pid, step });
        }
    }
    *status.lock().expect("status lock") = WorkerStatus::Succeeded;
}
