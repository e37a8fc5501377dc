//! One node's reader pipeline in virtual time: the model's threads ([`Run`]) stepped in the
//! order their costs give, so reading overlaps the trainer's compute and the trainer only
//! waits when the pipeline falls behind.
//!
//! Time model (virtual microseconds, on the caller's clock):
//! - a worker's `read_a_batch` takes `parse_time_us` per record it parses (failed checksums
//!   included: the bytes are read either way); opens, claims and publishes take no time;
//! - the collector's broadcast of a batch takes the host-to-device copy of the batch
//!   (`records × record_size` at the GPU profile's h2d bandwidth) plus a device-to-device
//!   copy to each of the node's other GPUs in turn (d2d bandwidth), both multiplied by the
//!   caller's `copy_slowdown`; its other iterations take no time;
//! - a step's effects count from its end: a thread that the step unblocks may move no
//!   earlier than that, and the trainer gets a broadcast batch once its copy is done.
//!
//! Background threads (workers, collector) always move in the order of the earliest time
//! they may move (ties: workers by index, then the collector), until the trainer has a
//! batch; they run ahead while the trainer computes, as far as the buffers let them. The
//! trainer moves only when the caller asks for a batch.

use super::buffer::{ActorId, BufferEvent, BufferId};
use super::collector::CollectorAction;
use super::config::{ConfigError, ReaderConfig, FIX_TRAIN_KEEPS_INCOMPLETE_BATCHES};
use super::files::RecordId;
use super::run::{Action, Outcome, Run};
use super::trainer::TrainerAction;
use super::worker::{WorkerAction, WorkerFailure};
use super::Consumer;

/// Microseconds in a second, for bandwidth arithmetic.
const US_PER_SEC: u128 = 1_000_000;

/// What the pipeline's steps cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeedCosts {
    /// One worker thread parsing one record.
    pub parse_time_us: u64,
    /// One record as copied to the GPUs.
    pub record_size_bytes: u64,
    /// Host-to-device bandwidth of one GPU.
    pub h2d_bits_per_sec: u64,
    /// Device-to-device bandwidth between two of the node's GPUs.
    pub d2d_bits_per_sec: u64,
    /// GPUs on the node that every batch is broadcast to.
    pub gpus: u32,
}

impl FeedCosts {
    /// Time for one worker to parse `records` records.
    pub fn parse_us(&self, records: u32) -> u64 {
        self.parse_time_us.saturating_mul(u64::from(records))
    }

    /// Time for the collector to copy a batch of `records` to the first GPU and on to the
    /// others, stretched by `slowdown` (1.0 for healthy GPUs).
    pub fn copy_us(&self, records: usize, slowdown: f64) -> u64 {
        let bits = (records as u128) * u128::from(self.record_size_bytes) * 8;
        let transfer = |bps: u64| (bits * US_PER_SEC).div_ceil(u128::from(bps.max(1)));
        let others = u128::from(self.gpus.saturating_sub(1));
        let base = transfer(self.h2d_bits_per_sec) + others * transfer(self.d2d_bits_per_sec);
        let scaled = (base as f64 * slowdown.max(1.0)).ceil();
        if scaled >= u64::MAX as f64 {
            u64::MAX
        } else {
            scaled as u64
        }
    }
}

/// What the trainer got when it asked for a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// A batch, ready at `ready_at_us` (never before the time asked).
    Batch {
        /// When the trainer has it.
        ready_at_us: u64,
        /// The epoch it belongs to.
        epoch: u32,
        /// Its records, in batch order (its size is their count).
        records: Vec<RecordId>,
        /// False when `Model::train` dropped it as incomplete: the trainer freed it at once
        /// without a step and asks again.
        trained: bool,
    },
    /// The end-of-data marker: the epoch is over; call [`NodeFeed::set_source`] to go on.
    EndOfData {
        /// When the trainer has it.
        ready_at_us: u64,
        /// The epoch that ended.
        epoch: u32,
    },
    /// No batch will ever come: every thread is blocked (or `set_source` was refused).
    Hang {
        /// The epoch the trainer is in.
        epoch: u32,
        /// Why, in one sentence.
        reason: String,
    },
}

/// Something a worker did that the trace keeps: a record skipped, a thread dying.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkerNote {
    /// Records whose checksum failed, skipped by `worker` in `epoch`.
    Skipped {
        /// The worker.
        worker: u32,
        /// The epoch.
        epoch: u32,
        /// The records.
        records: Vec<RecordId>,
    },
    /// `worker`'s retries ran out in `epoch`; with HugeCTR's behaviour the thread ended and
    /// `lost` records it had read were thrown away.
    Failed {
        /// The worker.
        worker: u32,
        /// The epoch.
        epoch: u32,
        /// Why.
        failure: WorkerFailure,
        /// Records of the batch in hand that were thrown away.
        lost: u32,
    },
}

/// One node's reader pipeline with its clock.
#[derive(Debug, Clone)]
pub struct NodeFeed {
    run: Run,
    costs: FeedCosts,
    /// Per background thread (workers by index, then the collector): the earliest time it
    /// may move next.
    ready_at_us: Vec<u64>,
    /// When the batch in the broadcast buffer is fully copied.
    broadcast_ready_at_us: u64,
    /// The trainer holds a trained batch it frees when it asks for the next one.
    holding: bool,
    epoch: u32,
    notes: Vec<WorkerNote>,
}

impl NodeFeed {
    /// The pipeline of `cfg` at the start of epoch 0, every thread starting at `start_us`
    /// (when the trainer's process builds its `DataReader`).
    pub fn new(
        cfg: &ReaderConfig,
        costs: FeedCosts,
        start_us: u64,
    ) -> Result<NodeFeed, ConfigError> {
        let run = Run::new(cfg)?;
        Ok(NodeFeed {
            run,
            costs,
            ready_at_us: vec![start_us; cfg.workers as usize + 1],
            broadcast_ready_at_us: 0,
            holding: false,
            epoch: 0,
            notes: Vec::new(),
        })
    }

    /// The epoch the trainer is in.
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// The next batch for a trainer asking at `now_us`, with copies stretched by
    /// `copy_slowdown`. First frees the batch the trainer held (its step is done).
    pub fn next_batch(&mut self, now_us: u64, copy_slowdown: f64) -> Delivery {
        if self.holding {
            self.holding = false;
            self.step_trainer(now_us);
        }
        if let Some(outcome) = self.run.outcome() {
            return self.stuck(outcome);
        }
        loop {
            let enabled = self.run.enabled();
            if enabled.contains(&ActorId::Trainer) {
                break;
            }
            let Some(&actor) = enabled
                .iter()
                .min_by_key(|a| (self.ready_at_us[self.slot(**a)], self.slot(**a)))
            else {
                let outcome = self
                    .run
                    .outcome()
                    .unwrap_or(Outcome::StepLimit { steps: 0 });
                return self.stuck(outcome);
            };
            self.step_background(actor, copy_slowdown);
        }
        let ready_at_us = now_us.max(self.broadcast_ready_at_us);
        match self.step_trainer(ready_at_us) {
            Action::Trainer(TrainerAction::EndOfData) => Delivery::EndOfData {
                ready_at_us,
                epoch: self.epoch,
            },
            Action::Trainer(TrainerAction::Acquired { .. }) => {
                let records = self.run.buffers().get(BufferId::Broadcast).records.clone();
                let trained = !self.drops(records.len());
                if trained {
                    self.holding = true;
                } else {
                    // `Model::train` skips the batch and frees it at once.
                    self.step_trainer(ready_at_us);
                }
                Delivery::Batch {
                    ready_at_us,
                    epoch: self.epoch,
                    records,
                    trained,
                }
            }
            other => unreachable!("the trainer acquires when enabled, not {other:?}"),
        }
    }

    /// HugeCTR's training loop at end of data: `set_source` on every worker, so the next
    /// epoch reads the files again from the start. An error says why it was refused.
    pub fn set_source(&mut self, now_us: u64) -> Result<u32, String> {
        if !self.run.enabled().contains(&ActorId::Trainer) {
            return Err("set_source is only called after the end-of-data marker".into());
        }
        match self.step_trainer(now_us) {
            Action::Trainer(TrainerAction::SetSource { epoch }) => {
                self.epoch = epoch;
                Ok(epoch)
            }
            Action::Trainer(TrainerAction::SetSourceRefused { worker }) => Err(format!(
                "set_source throws because worker {worker} is not at end-of-data"
            )),
            other => Err(format!("the trainer did {other:?} instead of set_source")),
        }
    }

    /// Moves out the buffer state changes logged since the last call, in order.
    pub fn take_buffer_events(&mut self) -> Vec<BufferEvent> {
        self.run.take_events()
    }

    /// Moves out the worker notes gathered since the last call, in order.
    pub fn take_worker_notes(&mut self) -> Vec<WorkerNote> {
        std::mem::take(&mut self.notes)
    }

    fn slot(&self, actor: ActorId) -> usize {
        match actor {
            ActorId::Worker(w) => w as usize,
            ActorId::Collector | ActorId::Trainer => self.ready_at_us.len() - 1,
        }
    }

    fn drops(&self, size: usize) -> bool {
        let cfg = self.run.config();
        cfg.consumer == Consumer::ModelTrain
            && size < cfg.batch_size as usize
            && !cfg.has_fix(FIX_TRAIN_KEEPS_INCOMPLETE_BATCHES)
    }

    fn stuck(&self, outcome: Outcome) -> Delivery {
        let reason = match outcome {
            Outcome::Hang { blocked, .. } => {
                format!("every reader thread is blocked: {}", blocked.join("; "))
            }
            Outcome::SetSourceRefused { worker, .. } => {
                format!("set_source was refused by worker {worker}")
            }
            Outcome::Finished => "the reader has no epoch left".into(),
            Outcome::StepLimit { steps } => format!("the reader stopped after {steps} steps"),
        };
        Delivery::Hang {
            epoch: self.epoch,
            reason,
        }
    }

    /// Steps a worker or the collector at the earliest time it may move and charges its cost.
    fn step_background(&mut self, actor: ActorId, copy_slowdown: f64) {
        let at_us = self.ready_at_us[self.slot(actor)];
        let before = self.run.enabled();
        let action = self.run.step(actor);
        let cost_us = match &action {
            Action::Worker(w, WorkerAction::ReadBatch(report)) => {
                self.note_read(*w, report);
                self.costs.parse_us(report.records_parsed)
            }
            Action::Collector(CollectorAction::Broadcast { records, .. }) => {
                self.costs.copy_us(records.len(), copy_slowdown)
            }
            _ => 0,
        };
        let done_us = at_us.saturating_add(cost_us);
        let slot = self.slot(actor);
        self.ready_at_us[slot] = done_us;
        if matches!(action, Action::Collector(CollectorAction::Broadcast { .. }))
            || matches!(
                action,
                Action::Collector(CollectorAction::EndOfEpoch { .. })
            )
        {
            self.broadcast_ready_at_us = done_us;
        }
        self.wake(&before, actor, done_us);
    }

    /// Steps the trainer at `at_us`; threads it unblocks may move from then on.
    fn step_trainer(&mut self, at_us: u64) -> Action {
        let before = self.run.enabled();
        let action = self.run.step(ActorId::Trainer);
        self.wake(&before, ActorId::Trainer, at_us);
        action
    }

    /// A step by `mover` ending at `done_us` may have unblocked other background threads:
    /// none of them may move before it. Threads that were enabled all along keep their
    /// clocks (they were free to move earlier).
    fn wake(&mut self, before: &[ActorId], mover: ActorId, done_us: u64) {
        for actor in self.run.enabled() {
            if actor == ActorId::Trainer || actor == mover || before.contains(&actor) {
                continue;
            }
            let slot = self.slot(actor);
            self.ready_at_us[slot] = self.ready_at_us[slot].max(done_us);
        }
    }

    fn note_read(&mut self, worker: u32, report: &super::worker::ReadReport) {
        if !report.skipped.is_empty() {
            self.notes.push(WorkerNote::Skipped {
                worker,
                epoch: self.epoch,
                records: report.skipped.clone(),
            });
        }
        if let Some(failure) = report.failed {
            self.notes.push(WorkerNote::Failed {
                worker,
                epoch: self.epoch,
                failure,
                lost: report.lost.len() as u32,
            });
        }
    }
}

/// Records as `[file, first record, count]` runs of consecutive records, in order: how the
/// trace keeps a batch compact.
pub fn record_runs(records: &[RecordId]) -> Vec<[u32; 3]> {
    let mut runs: Vec<[u32; 3]> = Vec::new();
    for r in records {
        match runs.last_mut() {
            Some([file, first, count]) if *file == r.file && *first + *count == r.record => {
                *count += 1
            }
            _ => runs.push([r.file, r.record, 1]),
        }
    }
    runs
}

/// The records of `[file, first record, count]` runs, in order.
pub fn expand_runs(runs: &[[u32; 3]]) -> impl Iterator<Item = RecordId> + '_ {
    runs.iter().flat_map(|&[file, first, count]| {
        (first..first + count).map(move |r| RecordId::new(file, r))
    })
}

/// The reader model's configuration for a scenario's `[reader]` as the job runs it: every
/// node reads all files (one node's view), `Model::train` consumes, epochs go on until the
/// model's bound, and the run's own budgets never stop it early.
pub fn config_of(r: &crate::scenario::model::ReaderConfig) -> ReaderConfig {
    let mut cfg = ReaderConfig::new(
        r.workers,
        r.files,
        u32::try_from(r.records_per_file).unwrap_or(u32::MAX),
        u32::try_from(r.batch_size).unwrap_or(u32::MAX),
    );
    cfg.repeat = r.repeat;
    cfg.check = match r.check {
        crate::scenario::model::ReaderCheck::Sum => super::CheckKind::Sum,
        crate::scenario::model::ReaderCheck::None => super::CheckKind::None,
    };
    cfg.broken_files = r.broken_files.iter().copied().collect();
    cfg.corrupt_records = r
        .corrupt_records
        .iter()
        .map(|&(f, rec)| RecordId::new(f, u32::try_from(rec).unwrap_or(u32::MAX)))
        .collect();
    cfg.truncated_files = r
        .truncated_files
        .iter()
        .map(|&(f, kept)| (f, u32::try_from(kept).unwrap_or(u32::MAX)))
        .collect();
    cfg.consumer = Consumer::ModelTrain;
    cfg.epochs = super::config::EPOCHS_MAX;
    cfg.repeat_batches = u32::MAX;
    cfg.steps_max = u64::MAX;
    cfg.fixes = r.fixes.iter().cloned().collect();
    cfg.mutants = r.mutants.iter().cloned().collect();
    cfg
}

/// The pipeline's costs for a scenario: its reader settings and the node's GPUs.
pub fn costs_of(s: &crate::scenario::model::Scenario) -> Option<FeedCosts> {
    let r = s.reader.as_ref()?;
    Some(FeedCosts {
        parse_time_us: r.parse_time_us,
        record_size_bytes: r.record_size_bytes,
        h2d_bits_per_sec: s.cluster.gpu.h2d_bits_per_sec,
        d2d_bits_per_sec: s.cluster.gpu.d2d_bits_per_sec,
        gpus: s.cluster.gpus_per_node,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn costs() -> FeedCosts {
        FeedCosts {
            parse_time_us: 1,
            record_size_bytes: 1000,
            h2d_bits_per_sec: 8_000_000_000,
            d2d_bits_per_sec: 80_000_000_000,
            gpus: 3,
        }
    }

    /// Takes batches every `step_us` of compute until the first end marker.
    fn epoch_sizes(cfg: &ReaderConfig, step_us: u64) -> (Vec<usize>, u64) {
        let mut feed = NodeFeed::new(cfg, costs(), 0).unwrap();
        let (mut now, mut sizes, mut stalled) = (0, Vec::new(), 0);
        loop {
            match feed.next_batch(now, 1.0) {
                Delivery::Batch {
                    ready_at_us,
                    records,
                    ..
                } => {
                    stalled += ready_at_us - now;
                    sizes.push(records.len());
                    now = ready_at_us + step_us;
                }
                Delivery::EndOfData { .. } => return (sizes, stalled),
                Delivery::Hang { reason, .. } => panic!("hang: {reason}"),
            }
        }
    }

    #[test]
    fn hugectrs_unit_test_case_through_the_feed() {
        let mut cfg = ReaderConfig::new(1, 10, 74, 32);
        cfg.consumer = Consumer::ReadBatch;
        let (sizes, _) = epoch_sizes(&cfg, 100);
        assert_eq!(sizes.len(), 24);
        assert!(sizes[..23].iter().all(|&s| s == 32));
        assert_eq!(sizes[23], 4);
    }

    #[test]
    fn costs_follow_bandwidth_and_reading_overlaps_compute() {
        // 10 records of 1000 B: 10 µs at 8 Gbps h2d, then 1 µs to each of two more GPUs.
        assert_eq!(costs().copy_us(10, 1.0), 12);
        assert_eq!(costs().copy_us(10, 2.0), 24);
        let cfg = ReaderConfig::new(2, 4, 64, 16);
        // Parsing a batch takes 16 µs and copying it 20 µs: a slow trainer waits only for
        // the first batch, a fast one waits on the copies of every batch.
        let (_, slow_trainer_stall) = epoch_sizes(&cfg, 10_000);
        let (_, fast_trainer_stall) = epoch_sizes(&cfg, 1);
        assert_eq!(slow_trainer_stall, 16 + costs().copy_us(16, 1.0));
        assert!(fast_trainer_stall > 10 * costs().copy_us(16, 1.0));
    }

    #[test]
    fn a_dead_worker_hangs_the_feed_and_runs_round_trip() {
        let mut cfg = ReaderConfig::new(1, 12, 4, 4);
        cfg.broken_files = (0..10).collect();
        let mut feed = NodeFeed::new(&cfg, costs(), 0).unwrap();
        assert!(matches!(feed.next_batch(0, 1.0), Delivery::Hang { .. }));
        let records = [(0, 1), (0, 2), (0, 4), (1, 5)].map(|(f, r)| RecordId::new(f, r));
        let runs = record_runs(&records);
        assert_eq!(runs, vec![[0, 1, 2], [0, 4, 1], [1, 5, 1]]);
        assert!(expand_runs(&runs).eq(records));
    }
}
