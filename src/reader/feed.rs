//! One node's reader pipeline in virtual time: the model's threads ([`Run`]) stepped in the
//! order their costs give, so reading overlaps the trainer's compute and the trainer only
//! waits when the pipeline falls behind.
//!
//! Time model (whole virtual microseconds, on the caller's clock), as HugeCTR's threads spend it
//! (tags v3.1 to v23.09):
//! - a worker's `read_a_batch` takes `parse_time` per record it parses (failed checksums
//!   included: the bytes are read either way); opens and claims take no time;
//! - a worker then copies its batch from host to device itself, to local GPU
//!   `w % gpus` (`records × record_size` at the h2d bandwidth, stretched by that GPU's
//!   slowdown), and publishes it when the copy is done; an end marker copies nothing;
//! - the collector's broadcast only copies device to device, to every local GPU at once:
//!   each GPU gets its dense slice, `batch_size / gpus_total` records at the d2d bandwidth,
//!   so the broadcast lasts one slice copy stretched by the slowest local GPU;
//! - the trainer copies a batch out of the broadcast buffer and frees it at once
//!   (`ready_to_collect`, before it trains), so the next broadcast may start from then;
//! - a step's effects count from its end: a thread that the step unblocks may move no
//!   earlier than that, and no step may act on a buffer before the step that last changed
//!   that buffer ended (a thread's own clock may be older: it was waiting).
//!
//! Background threads (workers, collector) always move in the order of the earliest time
//! they may move (ties: workers by index, then the collector), until the trainer has a
//! batch; they run ahead while the trainer computes, as far as the buffers let them. The
//! trainer moves only when the caller asks for a batch.

use crate::sim_time::{SimDuration, SimInstant};
use std::fmt;

use super::buffer::{ActorId, BufferEvent, BufferId};
use super::collector::CollectorAction;
use super::config::{ConfigError, ReaderConfig};
use super::files::RecordId;
use super::run::{Action, Outcome, Run};
use super::trainer::TrainerAction;
use super::worker::{WorkerAction, WorkerFailure};

/// What the pipeline's steps cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeedCosts {
    /// One worker thread parsing one record.
    pub parse_time: SimDuration,
    /// One record as copied to the GPUs.
    pub record_size_bytes: u64,
    /// Host-to-device bandwidth of one GPU.
    pub h2d_bits_per_sec: u64,
    /// Device-to-device bandwidth between two of the node's GPUs.
    pub d2d_bits_per_sec: u64,
    /// The node's GPUs: worker `w` copies to GPU `w % gpus`, and every batch is broadcast
    /// to all of them.
    pub gpus: u32,
    /// GPUs over all nodes: every batch is split evenly over them.
    pub gpus_total: u32,
}

impl FeedCosts {
    /// Time for one worker to parse `records` records.
    pub fn parse(&self, records: u32) -> SimDuration {
        // The pipeline's clock counts whole microseconds.
        let parse = self.parse_time.saturating_mul(u64::from(records));
        parse.floor_to(SimDuration::from_us(1))
    }

    /// Time for a worker to copy its batch of `records` from host to its GPU, stretched by
    /// that GPU's `slowdown` (1.0 when healthy).
    pub fn h2d(&self, records: u32, slowdown: f64) -> SimDuration {
        self.transfer(u64::from(records), self.h2d_bits_per_sec, slowdown)
    }

    /// Time for the collector to broadcast a batch: every local GPU receives its dense slice
    /// of a `batch_size` batch at once (HugeCTR copies the slice's full size whatever the
    /// batch holds), so it lasts one slice copy at the slowest GPU's `slowdown`.
    pub fn broadcast(&self, batch_size: u32, slowdown: f64) -> SimDuration {
        let slice = batch_size / self.gpus_total.max(1);
        self.transfer(u64::from(slice), self.d2d_bits_per_sec, slowdown)
    }

    fn transfer(&self, records: u64, bits_per_sec: u64, slowdown: f64) -> SimDuration {
        let bits = u128::from(records) * u128::from(self.record_size_bytes) * 8;
        SimDuration::transfer_whole_us(bits, bits_per_sec).stretched_whole_us(slowdown)
    }
}

/// What the trainer got when it asked for a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// A batch, ready at `ready_at` (never before the time asked).
    Batch {
        /// When the trainer has it.
        ready_at: SimInstant,
        /// The epoch it belongs to.
        epoch: u32,
        /// Its records, in batch order (its size is their count).
        records: Vec<RecordId>,
        /// False when `Model::train` dropped it as incomplete: the trainer asks again at once.
        trained: bool,
    },
    /// The end-of-data marker: the epoch is over; call [`NodeFeed::set_source`] to go on.
    EndOfData {
        /// When the trainer has it.
        ready_at: SimInstant,
        /// The epoch that ended.
        epoch: u32,
    },
    /// No batch will ever come: every thread is blocked.
    Hang {
        /// The epoch the trainer is in.
        epoch: u32,
        /// Why, in one sentence.
        reason: String,
    },
}

/// Why [`NodeFeed::set_source`] did not start the next epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetSourceError {
    /// HugeCTR's worker `set_source` threw `IllegalCall`: this worker was not at end of
    /// data. Nothing in `Model::fit` catches it, so the training process exits with 1.
    Refused {
        /// The worker that threw.
        worker: u32,
    },
    /// The trainer is not at an end-of-data marker: a caller's mistake.
    NotAtEndOfData,
}

impl fmt::Display for SetSourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetSourceError::Refused { worker } => write!(
                f,
                "HugeCTR IllegalCall: set_source on data reader worker {worker}, which is not at \
                 end of data; Model::fit does not catch it"
            ),
            SetSourceError::NotAtEndOfData => {
                f.write_str("set_source is only called after the end-of-data marker")
            }
        }
    }
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
    ready_at: Vec<SimInstant>,
    /// Per buffer (workers' by index, then the broadcast buffer): when the step that last
    /// changed its state ended.
    changed_at: Vec<SimInstant>,
    /// Buffer state changes not yet taken by the caller.
    events: Vec<BufferEvent>,
    epoch: u32,
    notes: Vec<WorkerNote>,
}

impl NodeFeed {
    /// The pipeline of `cfg` at the start of epoch 0, every thread starting at `start`
    /// (when the trainer's process builds its `DataReader`).
    pub fn new(
        cfg: &ReaderConfig,
        costs: FeedCosts,
        start: SimInstant,
    ) -> Result<NodeFeed, ConfigError> {
        let run = Run::new(cfg)?;
        let threads = cfg.workers as usize + 1;
        Ok(NodeFeed {
            run,
            costs,
            ready_at: vec![start; threads],
            changed_at: vec![start; threads],
            events: Vec::new(),
            epoch: 0,
            notes: Vec::new(),
        })
    }

    /// The epoch the trainer is in.
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// The next batch for a trainer asking at `now`; `slowdowns[g]` stretches copies to
    /// local GPU `g` (missing entries are healthy GPUs).
    pub fn next_batch(&mut self, now: SimInstant, slowdowns: &[f64]) -> Delivery {
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
                .min_by_key(|a| (self.ready_at[self.slot(**a)], self.slot(**a)))
            else {
                // No thread can move: the run's outcome is a hang, never "still running".
                let outcome = self
                    .run
                    .outcome()
                    .expect("a reader with no enabled thread has an outcome");
                return self.stuck(outcome);
            };
            self.step_background(actor, slowdowns);
        }
        let ready_at = now.max(self.changed_at[self.buffer_slot(BufferId::Broadcast)]);
        match self.step_trainer(ready_at) {
            Action::Trainer(TrainerAction::EndOfData) => Delivery::EndOfData {
                ready_at,
                epoch: self.epoch,
            },
            Action::Trainer(TrainerAction::Acquired { .. }) => {
                let records = self.run.buffers().get(BufferId::Broadcast).records.clone();
                // `ready_to_collect`: the trainer frees the broadcast buffer as soon as it has
                // the batch, before it trains on it (or drops it).
                let trained = match self.step_trainer(ready_at) {
                    Action::Trainer(TrainerAction::Trained { .. }) => true,
                    Action::Trainer(TrainerAction::Dropped { .. }) => false,
                    other => unreachable!("the trainer releases what it took, not {other:?}"),
                };
                Delivery::Batch {
                    ready_at,
                    epoch: self.epoch,
                    records,
                    trained,
                }
            }
            other => unreachable!("the trainer acquires when enabled, not {other:?}"),
        }
    }

    /// HugeCTR's training loop at end of data: `set_source` on every worker, so the next
    /// epoch reads the files again from the start.
    pub fn set_source(&mut self, now: SimInstant) -> Result<u32, SetSourceError> {
        if !self.run.enabled().contains(&ActorId::Trainer) {
            return Err(SetSourceError::NotAtEndOfData);
        }
        match self.step_trainer(now) {
            Action::Trainer(TrainerAction::SetSource { epoch }) => {
                self.epoch = epoch;
                Ok(epoch)
            }
            Action::Trainer(TrainerAction::SetSourceRefused { worker }) => {
                Err(SetSourceError::Refused { worker })
            }
            _ => Err(SetSourceError::NotAtEndOfData),
        }
    }

    /// Moves out the buffer state changes logged since the last call, in order.
    pub fn take_buffer_events(&mut self) -> Vec<BufferEvent> {
        std::mem::take(&mut self.events)
    }

    /// Moves out the worker notes gathered since the last call, in order.
    pub fn take_worker_notes(&mut self) -> Vec<WorkerNote> {
        std::mem::take(&mut self.notes)
    }

    fn slot(&self, actor: ActorId) -> usize {
        match actor {
            ActorId::Worker(w) => w as usize,
            ActorId::Collector | ActorId::Trainer => self.ready_at.len() - 1,
        }
    }

    fn buffer_slot(&self, buffer: BufferId) -> usize {
        match buffer {
            BufferId::Worker(w) => w as usize,
            BufferId::Broadcast => self.changed_at.len() - 1,
        }
    }

    fn stuck(&self, outcome: Outcome) -> Delivery {
        let reason = match outcome {
            Outcome::Hang { blocked, .. } => {
                format!("every reader thread is blocked: {}", blocked.join("; "))
            }
            Outcome::SetSourceRefused { worker, .. } => {
                SetSourceError::Refused { worker }.to_string()
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
    fn step_background(&mut self, actor: ActorId, slowdowns: &[f64]) {
        let before = self.run.enabled();
        let action = self.run.step(actor);
        let events = self.run.take_events();
        // The thread acts on the buffers it changed: not before their last change ended.
        let start = events
            .iter()
            .map(|e| self.changed_at[self.buffer_slot(e.buffer)])
            .fold(self.ready_at[self.slot(actor)], SimInstant::max);
        let done = start.after(self.cost(&action, slowdowns));
        let slot = self.slot(actor);
        self.ready_at[slot] = done;
        self.log(events, done);
        self.wake(&before, actor, done);
    }

    /// What a background step costs: parsing, a worker's host-to-device copy, a broadcast.
    fn cost(&mut self, action: &Action, slowdowns: &[f64]) -> SimDuration {
        let gpus = self.costs.gpus.max(1) as usize;
        let slowdown_of = |gpu: usize| slowdowns.get(gpu).copied().unwrap_or(1.0);
        match action {
            Action::Worker(w, WorkerAction::ReadBatch(report)) => {
                self.note_read(*w, report);
                self.costs.parse(report.records_parsed)
            }
            Action::Worker(w, WorkerAction::Published { size }) => {
                self.costs.h2d(*size, slowdown_of(*w as usize % gpus))
            }
            Action::Collector(CollectorAction::Broadcast { .. }) => {
                let slowest = (0..gpus).map(slowdown_of).fold(1.0, f64::max);
                self.costs.broadcast(self.run.config().batch_size, slowest)
            }
            _ => SimDuration::ZERO,
        }
    }

    /// Steps the trainer at `at`; threads it unblocks may move from then on.
    fn step_trainer(&mut self, at: SimInstant) -> Action {
        let before = self.run.enabled();
        let action = self.run.step(ActorId::Trainer);
        let events = self.run.take_events();
        self.log(events, at);
        self.wake(&before, ActorId::Trainer, at);
        action
    }

    /// Keeps a step's buffer changes for the caller and stamps their buffers with `done`.
    fn log(&mut self, events: Vec<BufferEvent>, done: SimInstant) {
        for event in &events {
            let slot = self.buffer_slot(event.buffer);
            self.changed_at[slot] = self.changed_at[slot].max(done);
        }
        self.events.extend(events);
    }

    /// A step by `mover` ending at `done` may have unblocked other background threads:
    /// none of them may move before it. Threads that were enabled all along keep their
    /// clocks (they were free to move earlier).
    fn wake(&mut self, before: &[ActorId], mover: ActorId, done: SimInstant) {
        for actor in self.run.enabled() {
            if actor == ActorId::Trainer || actor == mover || before.contains(&actor) {
                continue;
            }
            let slot = self.slot(actor);
            self.ready_at[slot] = self.ready_at[slot].max(done);
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

#[cfg(test)]
#[path = "feed_tests.rs"]
mod tests;
