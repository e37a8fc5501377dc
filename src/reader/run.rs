//! One run of the reader model: the threads, an explicit scheduler that picks which enabled
//! thread moves next, hang and budget detection, and the per-epoch output.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::buffer::{ActorId, BufferEvent, BufferId, Buffers};
use super::collector::{Collector, CollectorAction};
use super::config::{ConfigError, ReaderConfig};
use super::files::{Dataset, RecordId};
use super::trainer::{Trainer, TrainerAction, TrainerPc};
use super::worker::{Worker, WorkerAction, WorkerFailure, WorkerPc};
use crate::mutant::Mutant;

/// What the node's reader did in one epoch.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct EpochOutput {
    /// Sizes of the batches the collector handed out, in order (end marker not counted).
    pub batch_sizes: Vec<u32>,
    /// Records of those batches, in order.
    pub delivered: Vec<RecordId>,
    /// The records whose dense part this node kept (its slice of every batch).
    pub dense_kept: Vec<RecordId>,
    /// Sizes of the batches the consumer trained on.
    pub trained_batch_sizes: Vec<u32>,
    /// Records of those batches, in order.
    pub trained: Vec<RecordId>,
    /// Sizes of the incomplete batches `Model::train` dropped.
    pub dropped_batch_sizes: Vec<u32>,
    /// Records of the dropped batches.
    pub dropped: Vec<RecordId>,
    /// Records workers skipped because their checksum failed.
    pub skipped: Vec<RecordId>,
    /// Records read into a batch that a dying worker threw away.
    pub lost: Vec<RecordId>,
    /// Workers that published a size-0 batch that was not their end marker.
    pub empty_batches: Vec<u32>,
    /// Workers whose retries ran out, and why.
    pub worker_failures: Vec<(u32, WorkerFailure)>,
    /// Whether the end-of-data marker reached the trainer.
    pub ended: bool,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum Outcome {
    /// Every epoch ended (epoch mode) or the batch budget was reached (repeat mode).
    Finished,
    /// Every live thread was blocked before the run was done.
    Hang {
        /// Step at which it was detected.
        step: u64,
        /// Epoch the trainer was in.
        epoch: u32,
        /// What each thread was waiting on, one sentence each.
        blocked: Vec<String>,
    },
    /// `set_source` threw because a worker was not at end-of-data.
    SetSourceRefused {
        /// The epoch that could not start.
        epoch: u32,
        /// The worker that refused.
        worker: u32,
    },
    /// The step budget ran out first.
    StepLimit {
        /// Steps taken.
        steps: u64,
    },
}

/// Everything a run produced.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RunOutput {
    /// Per epoch, in order.
    pub epochs: Vec<EpochOutput>,
    /// Every buffer state change, in order.
    pub events: Vec<BufferEvent>,
    /// How the run ended.
    pub outcome: Outcome,
    /// Steps taken.
    pub steps: u64,
}

/// One step: which thread moved and what it did (a later step attaches costs to these).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// A worker step.
    Worker(u32, WorkerAction),
    /// A collector iteration.
    Collector(CollectorAction),
    /// A trainer step.
    Trainer(TrainerAction),
}

/// Picks which enabled thread moves next; the only source of interleaving.
pub trait Scheduler {
    /// An index into `enabled` (never empty, sorted: workers, collector, trainer).
    fn pick(&mut self, enabled: &[ActorId]) -> usize;
}

/// Rotates through the enabled threads.
#[derive(Debug, Clone, Default)]
pub struct RoundRobin {
    turn: usize,
}

impl Scheduler for RoundRobin {
    fn pick(&mut self, enabled: &[ActorId]) -> usize {
        self.turn = self.turn.wrapping_add(1);
        self.turn % enabled.len()
    }
}

/// Uniform choices from a ChaCha8 stream seeded by the caller.
#[derive(Debug, Clone)]
pub struct SeededScheduler {
    rng: ChaCha8Rng,
}

impl SeededScheduler {
    /// A scheduler whose choices follow `seed`.
    pub fn new(seed: u64) -> Self {
        SeededScheduler {
            rng: ChaCha8Rng::seed_from_u64(seed),
        }
    }
}

impl Scheduler for SeededScheduler {
    fn pick(&mut self, enabled: &[ActorId]) -> usize {
        self.rng.gen_range(0..enabled.len())
    }
}

/// Follows a caller's list of choices (each taken modulo the enabled count), then picks the
/// first enabled thread.
#[derive(Debug, Clone, Default)]
pub struct Scripted {
    choices: Vec<usize>,
    at: usize,
}

impl Scripted {
    /// A scheduler that makes these choices in order.
    pub fn new(choices: Vec<usize>) -> Self {
        Scripted { choices, at: 0 }
    }
}

impl Scheduler for Scripted {
    fn pick(&mut self, enabled: &[ActorId]) -> usize {
        let choice = self.choices.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        choice % enabled.len()
    }
}

/// Always moves the first enabled thread in a fixed preference order (for example workers
/// first, to fill every buffer before the collector runs).
#[derive(Debug, Clone)]
pub struct Prefer {
    order: Vec<ActorId>,
}

impl Prefer {
    /// Prefers threads in this order; threads not listed come last.
    pub fn new(order: Vec<ActorId>) -> Self {
        Prefer { order }
    }
}

impl Scheduler for Prefer {
    fn pick(&mut self, enabled: &[ActorId]) -> usize {
        let rank = |a: &ActorId| self.order.iter().position(|o| o == a).unwrap_or(usize::MAX);
        (0..enabled.len())
            .min_by_key(|&i| rank(&enabled[i]))
            .expect("enabled is never empty")
    }
}

/// A run in progress: the node's threads and buffers, stepped one thread at a time.
#[derive(Debug, Clone)]
pub struct Run {
    cfg: ReaderConfig,
    ds: Dataset,
    bufs: Buffers,
    workers: Vec<Worker>,
    worker_epoch: Vec<u32>,
    collector: Collector,
    collector_epoch: u32,
    trainer: Trainer,
    epochs: Vec<EpochOutput>,
    steps: u64,
}

impl Run {
    /// A run of `cfg` at the start of epoch 0, every thread about to start.
    pub fn new(cfg: &ReaderConfig) -> Result<Run, ConfigError> {
        cfg.validate()?;
        Ok(Run {
            ds: Dataset::new(cfg),
            bufs: Buffers::new(cfg.workers),
            workers: (0..cfg.workers).map(|w| Worker::new(w, cfg)).collect(),
            worker_epoch: vec![0; cfg.workers as usize],
            collector: {
                let c = Collector::new(cfg.workers);
                if cfg.mutants.contains(&Mutant::ReaderDoublePublish) {
                    c.with_double_publish()
                } else {
                    c
                }
            },
            collector_epoch: 0,
            trainer: Trainer::new(),
            epochs: vec![EpochOutput::default()],
            steps: 0,
            cfg: cfg.clone(),
        })
    }

    /// The threads whose next step makes progress, sorted.
    pub fn enabled(&self) -> Vec<ActorId> {
        let workers = self
            .workers
            .iter()
            .enumerate()
            .filter(|(_, w)| w.enabled(&self.bufs))
            .map(|(i, _)| ActorId::Worker(i as u32));
        let collector = self
            .collector
            .enabled(&self.bufs)
            .then_some(ActorId::Collector);
        let trainer = self.trainer.enabled(&self.bufs).then_some(ActorId::Trainer);
        workers.chain(collector).chain(trainer).collect()
    }

    /// The buffers, for inspection between steps.
    pub fn buffers(&self) -> &Buffers {
        &self.bufs
    }

    /// Moves out the buffer state changes logged since the last call.
    pub fn take_events(&mut self) -> Vec<BufferEvent> {
        self.bufs.take_events()
    }

    /// The configuration the run was built from.
    pub fn config(&self) -> &ReaderConfig {
        &self.cfg
    }

    /// How the run ended, once it has: the trainer is done, every thread is blocked, or the
    /// step budget is spent.
    pub fn outcome(&self) -> Option<Outcome> {
        match *self.trainer.pc() {
            TrainerPc::Finished => return Some(Outcome::Finished),
            TrainerPc::Refused { worker } => {
                return Some(Outcome::SetSourceRefused {
                    epoch: self.trainer.epoch() + 1,
                    worker,
                })
            }
            _ => {}
        }
        if self.enabled().is_empty() {
            return Some(Outcome::Hang {
                step: self.steps,
                epoch: self.trainer.epoch(),
                blocked: self.blocked(),
            });
        }
        (self.steps >= self.cfg.steps_max).then_some(Outcome::StepLimit { steps: self.steps })
    }

    /// Moves `actor` one step; it must be enabled and the run not over.
    pub fn step(&mut self, actor: ActorId) -> Action {
        assert!(!self.trainer.is_done(), "the run is over");
        self.steps += 1;
        self.bufs.set_step(self.steps);
        match actor {
            ActorId::Worker(w) => {
                let action = self.workers[w as usize].step(&self.ds, &self.cfg, &mut self.bufs);
                self.note_worker(w, &action);
                Action::Worker(w, action)
            }
            ActorId::Collector => {
                let action = self.collector.step(&mut self.bufs);
                self.note_collector(&action);
                Action::Collector(action)
            }
            ActorId::Trainer => {
                let action = self
                    .trainer
                    .step(&self.cfg, &mut self.bufs, &mut self.workers);
                self.note_trainer(&action);
                Action::Trainer(action)
            }
        }
    }

    /// Runs to the end under `sched` and returns the output.
    pub fn run_with(mut self, sched: &mut dyn Scheduler) -> RunOutput {
        loop {
            if let Some(outcome) = self.outcome() {
                return self.finish(outcome);
            }
            let enabled = self.enabled();
            let pick = sched.pick(&enabled);
            assert!(
                pick < enabled.len(),
                "the scheduler picked outside the enabled set"
            );
            self.step(enabled[pick]);
        }
    }

    fn finish(mut self, outcome: Outcome) -> RunOutput {
        RunOutput {
            events: self.bufs.take_events(),
            epochs: self.epochs,
            outcome,
            steps: self.steps,
        }
    }

    fn epoch_mut(&mut self, epoch: u32) -> &mut EpochOutput {
        let i = epoch as usize;
        if self.epochs.len() <= i {
            self.epochs.resize(i + 1, EpochOutput::default());
        }
        &mut self.epochs[i]
    }

    fn note_worker(&mut self, w: u32, action: &WorkerAction) {
        let WorkerAction::ReadBatch(report) = action else {
            return;
        };
        let epoch = self.epoch_mut(self.worker_epoch[w as usize]);
        epoch.skipped.extend_from_slice(&report.skipped);
        epoch.lost.extend_from_slice(&report.lost);
        if report.empty_batch_published {
            epoch.empty_batches.push(w);
        }
        if let Some(failure) = report.failed {
            epoch.worker_failures.push((w, failure));
        }
    }

    fn note_collector(&mut self, action: &CollectorAction) {
        let slice = self.cfg.dense_slice();
        let epoch = self.collector_epoch;
        match action {
            CollectorAction::Broadcast { records, .. } => {
                let out = self.epoch_mut(epoch);
                out.batch_sizes.push(records.len() as u32);
                out.delivered.extend_from_slice(records);
                let kept = records
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| slice.contains(&(*i as u32)))
                    .map(|(_, r)| *r);
                out.dense_kept.extend(kept);
            }
            CollectorAction::EndOfEpoch { .. } => self.collector_epoch += 1,
            _ => {}
        }
    }

    fn note_trainer(&mut self, action: &TrainerAction) {
        let epoch = self.trainer.epoch();
        match action {
            TrainerAction::EndOfData => self.epoch_mut(epoch).ended = true,
            TrainerAction::Trained { records } => {
                let out = self.epoch_mut(epoch);
                out.trained_batch_sizes.push(records.len() as u32);
                out.trained.extend_from_slice(records);
            }
            TrainerAction::Dropped { records } => {
                let out = self.epoch_mut(epoch);
                out.dropped_batch_sizes.push(records.len() as u32);
                out.dropped.extend_from_slice(records);
            }
            TrainerAction::SetSource { epoch } => {
                self.worker_epoch.iter_mut().for_each(|e| *e = *epoch);
                self.epoch_mut(*epoch);
            }
            TrainerAction::Acquired { .. } | TrainerAction::SetSourceRefused { .. } => {}
        }
    }

    /// One sentence per live thread saying what it waits on (for a hang report).
    fn blocked(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .workers
            .iter()
            .enumerate()
            .map(|(w, worker)| {
                let own = self.bufs.state(BufferId::Worker(w as u32));
                match worker.pc() {
                    WorkerPc::Dead(failure) => format!("worker {w} has exited: {failure}"),
                    WorkerPc::AwaitRecycle => {
                        format!("worker {w} is parked after its end marker (its buffer is {own})")
                    }
                    _ => {
                        format!("worker {w} waits for its buffer to be ReadyForWrite (it is {own})")
                    }
                }
            })
            .collect();
        out.push(format!(
            "the collector {}",
            self.collector.waiting_on(&self.bufs)
        ));
        out.push(format!(
            "the trainer waits for the broadcast buffer to be ReadyForRead (it is {})",
            self.bufs.state(BufferId::Broadcast)
        ));
        out
    }
}

/// Validates `cfg`, then runs it to the end under `sched`.
pub fn run(cfg: &ReaderConfig, sched: &mut dyn Scheduler) -> Result<RunOutput, ConfigError> {
    Ok(Run::new(cfg)?.run_with(sched))
}
