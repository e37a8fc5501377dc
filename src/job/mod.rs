//! The simulated training job: synchronous data parallel on virtual GPUs. Each step every
//! local rank takes its next batch from its sampler, computes it on its GPU (cost from the
//! batch's complexity, the GPU profile and any `gpu_slow`), and the group all-reduces the
//! gradients (ring, α-β cost). Rank 0 of the group checkpoints every `checkpoint_every`
//! steps; a restarted group resumes from the last checkpoint.
//!
//! Epochs and resumption: the samplers are rebuilt for every group with its world size and
//! global ranks and `set_epoch(e)` is called at each epoch start, as training scripts do
//! (or never, or late: `job.set_epoch` reproduces those slips). A
//! checkpoint records the epoch and the next batch; a group of the same world size resumes
//! the epoch at that batch (a stateful data loader), a group of another world size starts
//! the checkpoint's epoch over, because `DistributedSampler` cannot re-deal a half-consumed
//! epoch over a different number of ranks (torch's elastic ImageNet example does the same).

pub mod bootstrap;
pub mod closed_form;
pub mod collective;
mod compute;
pub mod epoch_plan;
mod epochs;
pub mod eval;
mod gloo_mesh;
pub mod ledger;
pub mod reader_feed;
mod segment;

use crate::mutant::Mutants;
use crate::sim_time::{SimDuration, SimInstant};
use crate::trace::{EventKind, StepRun, TrainedOn};
use crate::world::collectives::{CollectiveError, RankBlock};
use crate::world::{time, Checkpoint, NodeEnv};
use compute::compute_time_of;
use epoch_plan::{EpochPlan, PlanKey};
use epochs::{dataset_key, finish_epoch, start_epoch};
use ledger::SampleLedger;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

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
    /// The rendezvous store incarnation the round belongs to.
    pub store_incarnation: u64,
    /// Where the workers' process group bootstraps.
    pub bootstrap: bootstrap::WorkerBootstrap,
    pub group_rank: u32,
    /// Node indices of the round, by group rank, as this node's view of it has them. The
    /// workers' process group is the world of `world_size` ranks, which a split view does
    /// not change.
    pub members: Vec<u32>,
    /// The global step the group resumes from (the last checkpoint).
    pub start_step: u64,
    /// The checkpoint the group resumes from (all zero when there is none).
    pub checkpoint: Checkpoint,
    /// The global rank of this node's local rank 0, and the group's world size in ranks.
    pub base_global_rank: u64,
    pub world_size: u64,
    pub local_world_size: u32,
}

impl GroupPlan {
    /// The group's identity across the run: one round of one rendezvous store incarnation.
    pub fn group_key(&self) -> u64 {
        // Two groups must never share a key: the round keeps to its 40 bits and the
        // incarnation to the 24 above them.
        assert!(
            self.round < 1 << 40 && self.store_incarnation < 1 << 24,
            "round {} of store incarnation {} does not fit a group key",
            self.round,
            self.store_incarnation
        );
        (self.store_incarnation << 40) | self.round
    }

    /// The ranks this node's workers hold in the group's world.
    pub fn ranks(&self) -> RankBlock {
        RankBlock {
            first: self.base_global_rank,
            count: u64::from(self.local_world_size),
            world_size: self.world_size,
        }
    }

    /// How many nodes the group's world spans: every node runs `local_world_size` ranks.
    pub fn nodes_in_world(&self) -> u64 {
        self.world_size
            .div_ceil(u64::from(self.local_world_size.max(1)))
    }

    /// What every step of the group relies on: members to reduce with, ranks on this node,
    /// a world of ranks, and a resume point inside the job's `steps`.
    fn assert_steppable(&self, steps: u64) {
        assert!(
            !self.members.is_empty() && self.local_world_size > 0 && self.world_size > 0,
            "group of round {} has {} members, {} local ranks, world size {}",
            self.round,
            self.members.len(),
            self.local_world_size,
            self.world_size
        );
        assert!(
            self.start_step <= steps,
            "group of round {} resumes from step {} past the job's {steps} steps",
            self.round,
            self.start_step
        );
    }
}

/// Where the group is in the data.
struct Position {
    step: u64,
    epoch: u64,
    batch: u64,
}

impl Position {
    /// Where a group starts: at its checkpoint's epoch, and at the checkpoint's batch only
    /// when the world size is the same (see the module's note on resumption).
    fn resumed(plan: &GroupPlan) -> Position {
        let ck = plan.checkpoint;
        let same_world = ck.world_size == plan.world_size;
        Position {
            step: plan.start_step,
            epoch: ck.epoch,
            batch: if same_world { ck.batch_in_epoch } else { 0 },
        }
    }

    /// Moves to where a run of `settled` steps ended, which may be in the epoch after the
    /// one it began in (the run opened it at the moment the last one's last step ended);
    /// returns that epoch's plan.
    fn end_run(&mut self, settled: u64, ended: segment::Ended, job_steps: u64) -> Arc<EpochPlan> {
        self.step += settled;
        self.epoch = ended.epoch;
        self.batch = ended.batch;
        self.assert_run_ended_in_bounds(settled, job_steps, ended.epoch_plan.batches());
        ended.epoch_plan
    }

    /// A run of `settled` steps that just ended here stopped at the job's end, the epoch's
    /// end or the next checkpoint, never past them.
    fn assert_run_ended_in_bounds(&self, settled: u64, job_steps: u64, epoch_batches: u64) {
        assert!(
            self.step <= job_steps && self.batch <= epoch_batches,
            "a run of {} steps ended at step {} of {}, batch {} of {}",
            settled,
            self.step,
            job_steps,
            self.batch,
            epoch_batches
        );
    }
}

/// The checkpoint a new worker group of this node resumes from, recorded with the steps it
/// loses against `highest_step` (the highest step this node's workers ever completed), which
/// it then keeps up to date: what every agent does as it starts its workers.
pub fn resume_from_checkpoint(env: &NodeEnv, highest_step: &AtomicU64) -> Checkpoint {
    let checkpoint = env.checkpoint();
    env.record(EventKind::ResumedFromCheckpoint {
        pid: env.pid,
        step: checkpoint.step,
        lost_steps: highest_step
            .load(Ordering::Relaxed)
            .saturating_sub(checkpoint.step),
    });
    highest_step.fetch_max(checkpoint.step, Ordering::Relaxed);
    checkpoint
}

/// The workers' state as an agent's monitor reads it (torch's `pcontext.wait(0)`): a crash
/// the world injected first, else what the workers report.
pub fn monitored(env: &NodeEnv, status: &Mutex<WorkerStatus>) -> WorkerStatus {
    if let Some((local_rank, exit_code)) = env.worker_crash() {
        return WorkerStatus::Failed {
            local_rank,
            exit_code,
            reason: "worker_crash".into(),
        };
    }
    status.lock().expect("status lock").clone()
}

/// Runs this node's workers until the job's last step, or until a worker fails.
/// `reached` keeps the highest step this node's workers ever completed, across groups, so
/// the agent can tell how many steps a restart lost. `mutants` are the run's planted bugs;
/// the job's and the reader's act here.
pub async fn train(
    env: NodeEnv,
    plan: GroupPlan,
    status: Arc<Mutex<WorkerStatus>>,
    reached: Arc<AtomicU64>,
    mutants: Arc<Mutants>,
) {
    // The worker process starts (Python, imports) before it reaches the process group.
    let job = &env.scenario().job;
    env.process_start(
        &format!("worker-start/{}", plan.group_key()),
        job.worker_start_time,
        job.worker_start_jitter,
    )
    .await;
    let result = match bootstrap::init_process_group(&env, &plan).await {
        // A store these workers host lives as long as they do.
        Ok(server) => {
            env.join_process_group(plan.group_key(), plan.ranks());
            if plan.start_step > 0 && !job.checkpoint_load_time.is_zero() {
                // A resumed group's workers load the checkpoint before their first step.
                time::sleep(job.checkpoint_load_time).await;
            }
            let result = train_steps(&env, &plan, &reached, &mutants).await;
            exit_process(&env, &result, job.worker_exit_time).await;
            drop(server);
            result
        }
        Err(failed) => {
            let failed = Err(failed);
            exit_process(&env, &failed, job.worker_exit_time).await;
            failed
        }
    };
    *status.lock().expect("status lock") = match result {
        Ok(()) => WorkerStatus::Succeeded,
        Err(failed) => failed,
    };
    env.monitor_wake().notify();
}

/// The workers' processes exit after `result`: an uncaught error or the script's end goes
/// through the interpreter's teardown first (`exit_time`), a signal ends them at once. Only
/// then do their connections close, and only then does their agent's `pcontext.wait` see
/// them gone (the status is set after this returns).
async fn exit_process(env: &NodeEnv, result: &Result<(), WorkerStatus>, exit_time: SimDuration) {
    let tears_down = match result {
        Ok(()) => true,
        Err(WorkerStatus::Failed { exit_code, .. }) => *exit_code > 0,
        Err(_) => false,
    };
    if tears_down && !exit_time.is_zero() {
        time::sleep(exit_time).await;
    }
    env.leave_collectives();
}

/// The step loop; an `Err` is the worker failure that ended it.
async fn train_steps(
    env: &NodeEnv,
    plan: &GroupPlan,
    reached: &AtomicU64,
    mutants: &Mutants,
) -> Result<(), WorkerStatus> {
    let job = env.scenario().job.clone();
    plan.assert_steppable(job.steps);
    let mut at = Position::resumed(plan);
    // The group's samplers are new (set to epoch 0); the script's `set_epoch` pattern says
    // which epoch's order each data epoch deals.
    let first_epoch = at.epoch;
    let key_of = |epoch| PlanKey {
        epoch: job.set_epoch.sampler_epoch(epoch, first_epoch),
        world_size: plan.world_size,
        off_by_one: mutants
            .job
            .contains(&crate::mutant::Mutant::SamplerOffByOne),
    };
    let mut epoch_plan = start_epoch(env, plan, &key_of, &mut at)?;
    let dataset_key = dataset_key(env);
    let ledger = env.shared::<Mutex<SampleLedger>>("job/ledger");
    let mut reader =
        reader_feed::ReaderFeed::start(env, plan.round, &mutants.reader).map_err(script_error)?;
    // Set when a closed-form run was cut in the middle of a step: when the next step began.
    let mut step_started = None;
    while at.step < job.steps {
        let steps = segment::Steps {
            env,
            plan,
            epoch_plan: &epoch_plan,
            key_of: &key_of,
            dataset_key,
            ledger: &ledger,
            reached,
        };
        let run = match step_started.take() {
            Some(started) => segment::Run::declined(started),
            None => segment::run(&steps, &at).await?,
        };
        if let Some(ended) = run.ended {
            epoch_plan = at.end_run(run.settled, ended, job.steps);
            step_started = run.next_step_started;
        } else {
            wait_for_reader(env, &mut reader).await?;
            let started = run.next_step_started.unwrap_or_else(time::now);
            one_step(&steps, &at, started).await?;
            at.step += 1;
            at.batch += 1;
        }
        if at.batch >= epoch_plan.batches() {
            finish_epoch(env, plan, &ledger, at.epoch, time::now_whole_us());
            at.epoch += 1;
            at.batch = 0;
            if at.step < job.steps {
                epoch_plan = start_epoch(env, plan, &key_of, &mut at)?;
            }
        }
        // A signal handler's request is the script's: it checkpoints after the step in
        // progress (the request waits for a group rank 0 to take it).
        if plan.group_rank == 0
            && (at.step.is_multiple_of(job.checkpoint_every) | env.take_checkpoint_request())
        {
            save_checkpoint(env, plan, job.checkpoint_save_time, &at).await;
        }
    }
    Ok(())
}

/// Rank 0's checkpoint of the step just completed at `at`.
async fn save_checkpoint(env: &NodeEnv, plan: &GroupPlan, save_time: SimDuration, at: &Position) {
    // Every pass of the step loop completes a step: a checkpoint never repeats the one the
    // group resumed from.
    assert!(
        at.step > plan.start_step,
        "round {} checkpoints step {} without a step past its start {}",
        plan.round,
        at.step,
        plan.start_step
    );
    // A blocking save: rank 0 writes while its peers wait in the next all-reduce
    // (their wait counts toward the collective's timeout, as in torch); a failure
    // during the write leaves the previous checkpoint.
    if !save_time.is_zero() {
        time::sleep(save_time).await;
    }
    env.write_checkpoint(Checkpoint {
        step: at.step,
        epoch: at.epoch,
        batch_in_epoch: at.batch,
        world_size: plan.world_size,
    });
    env.record(EventKind::Checkpoint {
        pid: env.pid,
        step: at.step,
    });
}

/// One step, its compute begun at `started` (now, unless a cut run left it in progress):
/// compute, the all-reduce (its barrier, then the ring's cost), then the step is recorded.
async fn one_step(
    s: &segment::Steps<'_>,
    at: &Position,
    started: SimInstant,
) -> Result<(), WorkerStatus> {
    let (env, plan) = (s.env, s.plan);
    let compute = compute_time_of(env, plan, s.epoch_plan, at.batch, s.dataset_key)?;
    let arrival = started.after(closed_form::slept(compute));
    if arrival > time::now() {
        time::sleep_until(arrival).await;
    }
    // Waiting since the arrival: a cut run's step may have arrived before now. The
    // timeout left counts whole microseconds.
    let whole_us = SimDuration::from_us(1);
    let waited = time::now().since(arrival).floor_to(whole_us);
    let timeout = env.scenario().job.collective_timeout.floor_to(whole_us);
    let reduced = env
        .all_reduce(
            plan.group_key(),
            at.step + 1,
            plan.ranks(),
            ring_cost(env, plan),
            timeout.saturating_sub(waited),
        )
        .await;
    if let Err(e) = reduced {
        return Err(collective_failure(env, e, at.step + 1, arrival).await);
    }
    let step = at.step + 1;
    s.reached.fetch_max(step, Ordering::Relaxed);
    let samples = consume(s.ledger, plan, at.epoch, s.epoch_plan, at.batch);
    env.record(EventKind::Step {
        pid: env.pid,
        round: plan.round,
        step,
        epoch: at.epoch,
        samples,
        trained: trained_on(plan, at.batch, s.epoch_plan),
        run: StepRun::default(),
    });
    Ok(())
}

/// With a `[reader]`, the trainer first takes its step's batch from the node's reader,
/// stalling while the pipeline is behind; a hung reader blocks the trainer forever, as in
/// HugeCTR, and an exception from it fails the worker.
async fn wait_for_reader(
    env: &NodeEnv,
    reader: &mut Option<reader_feed::ReaderFeed>,
) -> Result<(), WorkerStatus> {
    let Some(feed) = reader.as_mut() else {
        return Ok(());
    };
    match feed.take_batch(env, time::now_whole_us()) {
        reader_feed::Taken::Batch { stall, .. } => time::sleep(stall).await,
        reader_feed::Taken::Hang => std::future::pending::<()>().await,
        reader_feed::Taken::Failed { reason } => return Err(script_error(reason)),
    }
    Ok(())
}

/// A worker failure of local rank 0 with exit code 1 (a Python exception).
fn script_error(reason: String) -> WorkerStatus {
    WorkerStatus::Failed {
        local_rank: 0,
        exit_code: 1,
        reason,
    }
}

/// The worker failure the all-reduce of `step`, entered at `arrival`, ends in, at the
/// moment the backend raises it (see [`collective::failure`]).
async fn collective_failure(
    env: &NodeEnv,
    error: CollectiveError,
    step: u64,
    arrival: SimInstant,
) -> WorkerStatus {
    let job = &env.scenario().job;
    let backend = collective::Backend {
        kind: job.backend,
        timeout: job.collective_timeout,
        peer_exit_detection: job.nccl_peer_exit_detection,
    };
    let now = time::now();
    let failure = collective::failure(&backend, error, step, arrival, now, |node| {
        crate::scenario::model::node_name(node)
    });
    if failure.at > now {
        time::sleep_until(failure.at).await;
    }
    WorkerStatus::Failed {
        local_rank: 0,
        exit_code: failure.exit_code,
        reason: failure.reason,
    }
}

/// What one step's gradient all-reduce costs once every rank has arrived: a ring over every
/// node of the group's world.
fn ring_cost(env: &NodeEnv, plan: &GroupPlan) -> SimDuration {
    let scenario = env.scenario();
    collective::ring_all_reduce(
        scenario.job.model_size_bytes,
        plan.nodes_in_world(),
        u64::from(plan.local_world_size),
        env.latency_mean(),
        scenario.network.bandwidth_bits_per_sec,
        scenario.cluster.gpu.d2d_bits_per_sec,
    )
}

/// What the step's record says this node's ranks trained on: where in the epoch, which
/// ranks, and a digest of the batches they were given.
fn trained_on(plan: &GroupPlan, batch: u64, epoch_plan: &EpochPlan) -> TrainedOn {
    let ranks = plan.local_world_size;
    TrainedOn {
        batch,
        world_size: plan.world_size,
        first_rank: plan.base_global_rank,
        ranks,
        samples_digest: epoch_plan.digest(plan.base_global_rank, ranks, batch),
    }
}

/// Adds the node's batch `batch` to the ledger; returns how many samples its ranks took.
fn consume(
    ledger: &Mutex<SampleLedger>,
    plan: &GroupPlan,
    epoch: u64,
    epoch_plan: &EpochPlan,
    batch: u64,
) -> u64 {
    let ranks = plan.base_global_rank..plan.base_global_rank + u64::from(plan.local_world_size);
    let lens = epoch_plan.batch_lens(ranks, batch);
    ledger
        .lock()
        .expect("ledger")
        .consume_step(plan.group_key(), epoch, lens, batch)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(round: u64, store_incarnation: u64) -> GroupPlan {
        GroupPlan {
            round,
            store_incarnation,
            bootstrap: bootstrap::WorkerBootstrap {
                master: "node-0:29500".into(),
                master_addr: None,
                hosts_store: false,
            },
            group_rank: 0,
            members: vec![0, 1],
            start_step: 0,
            checkpoint: Checkpoint::default(),
            base_global_rank: 0,
            world_size: 2,
            local_world_size: 1,
        }
    }

    #[test]
    fn group_keys_tell_rounds_and_incarnations_apart() {
        assert_ne!(plan(1, 0).group_key(), plan(0, 1).group_key());
        assert_eq!(plan(3, 2).group_key(), (2 << 40) | 3);
        plan(3, 2).assert_steppable(10);
    }

    #[test]
    #[should_panic(
        expected = "round 1099511627776 of store incarnation 0 does not fit a group key"
    )]
    fn a_round_past_its_bits_stops_the_run() {
        plan(1 << 40, 0).group_key();
    }

    #[test]
    #[should_panic(expected = "resumes from step 11 past the job's 10 steps")]
    fn a_group_resuming_past_the_end_stops_the_run() {
        let mut p = plan(1, 0);
        p.start_step = 11;
        p.assert_steppable(10);
    }
}
