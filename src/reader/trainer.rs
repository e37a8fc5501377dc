//! The training (main) thread as the reader sees it: takes batches off the broadcast buffer
//! as `Model::train` or `read_a_batch_to_device` does, and starts each epoch with
//! `set_source`.

use super::buffer::{ActorId, BufferId, BufferState, Buffers};
use super::config::{Consumer, ReaderConfig, ReaderFix};
use super::files::RecordId;
use super::worker::Worker;

/// Where the training thread is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrainerPc {
    /// Spinning to take the broadcast buffer (`ReadyForRead` → `Reading`).
    Acquire,
    /// Holds a non-empty batch; next it trains on it or drops it, then frees the buffer.
    Release {
        /// The batch.
        records: Vec<RecordId>,
    },
    /// Got the end marker with epochs left: calls `set_source` on every worker.
    SetSource,
    /// Done: the last epoch ended, or the repeat-mode budget was reached.
    Finished,
    /// `set_source` threw: this worker was not at end-of-data.
    Refused {
        /// The worker that refused.
        worker: u32,
    },
}

/// What one trainer step did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrainerAction {
    /// Took a batch of this size off the broadcast buffer.
    Acquired {
        /// Records in the batch.
        size: u32,
    },
    /// Took the end marker and freed the buffer at once (`read_a_batch_to_device`).
    EndOfData,
    /// Trained on the batch and freed the buffer (`ready_to_collect`).
    Trained {
        /// The batch.
        records: Vec<RecordId>,
    },
    /// `Model::train` dropped an incomplete batch and freed the buffer.
    Dropped {
        /// The batch.
        records: Vec<RecordId>,
    },
    /// Every worker accepted the new source; epoch `epoch` begins.
    SetSource {
        /// The epoch that begins.
        epoch: u32,
    },
    /// A worker refused `set_source`; the run cannot go on.
    SetSourceRefused {
        /// The worker that refused.
        worker: u32,
    },
}

/// The training thread's state.
#[derive(Debug, Clone)]
pub struct Trainer {
    pc: TrainerPc,
    epoch: u32,
    batches_taken: u32,
}

impl Trainer {
    /// A trainer at the start of epoch 0 (whose `set_source` happened before any thread ran).
    pub fn new() -> Self {
        Trainer {
            pc: TrainerPc::Acquire,
            epoch: 0,
            batches_taken: 0,
        }
    }

    /// Where the thread is.
    pub fn pc(&self) -> &TrainerPc {
        &self.pc
    }

    /// The epoch the trainer is in.
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// Whether the run is over from the trainer's side.
    pub fn is_done(&self) -> bool {
        matches!(self.pc, TrainerPc::Finished | TrainerPc::Refused { .. })
    }

    /// Whether the next step can make progress.
    pub fn enabled(&self, bufs: &Buffers) -> bool {
        match self.pc {
            TrainerPc::Acquire => bufs.state(BufferId::Broadcast) == BufferState::ReadyForRead,
            TrainerPc::Release { .. } | TrainerPc::SetSource => true,
            TrainerPc::Finished | TrainerPc::Refused { .. } => false,
        }
    }

    /// Runs the thread one step (the caller checked [`Self::enabled`]).
    pub fn step(
        &mut self,
        cfg: &ReaderConfig,
        bufs: &mut Buffers,
        workers: &mut [Worker],
    ) -> TrainerAction {
        assert!(self.enabled(bufs), "the trainer stepped while blocked");
        let me = ActorId::Trainer;
        let dst = BufferId::Broadcast;
        match std::mem::replace(&mut self.pc, TrainerPc::Acquire) {
            TrainerPc::Acquire => {
                let took = bufs.cas(dst, me, BufferState::ReadyForRead, BufferState::Reading);
                assert!(took, "enabled() promised a ready batch");
                let records = bufs.get(dst).records.clone();
                if records.is_empty() {
                    bufs.store(dst, me, BufferState::ReadyForWrite);
                    self.pc = self.after_epoch(cfg);
                    return TrainerAction::EndOfData;
                }
                let size = u32::try_from(records.len()).expect("batch size fits u32");
                self.pc = TrainerPc::Release { records };
                TrainerAction::Acquired { size }
            }
            TrainerPc::Release { records } => {
                // Nobody else moves the broadcast buffer while the trainer reads it.
                assert_eq!(
                    bufs.state(dst),
                    BufferState::Reading,
                    "the trainer releases {dst}, which it no longer holds"
                );
                bufs.store(dst, me, BufferState::ReadyForWrite);
                self.batches_taken = self
                    .batches_taken
                    .checked_add(1)
                    .expect("batches taken overflow u32");
                if cfg.repeat && self.batches_taken >= cfg.repeat_batches {
                    self.pc = TrainerPc::Finished;
                }
                if Self::drops(cfg, records.len()) {
                    TrainerAction::Dropped { records }
                } else {
                    TrainerAction::Trained { records }
                }
            }
            TrainerPc::SetSource => self.set_source(cfg, bufs, workers),
            TrainerPc::Finished | TrainerPc::Refused { .. } => unreachable!("never enabled"),
        }
    }

    /// `Model::train` loops past batches smaller than the full size (HugeCTR's comment calls
    /// it a stopgap for epoch mode); `read_a_batch_to_device` keeps everything.
    fn drops(cfg: &ReaderConfig, size: usize) -> bool {
        let incomplete = size < cfg.batch_size as usize;
        cfg.consumer == Consumer::ModelTrain
            && incomplete
            && !cfg.has_fix(ReaderFix::TrainKeepsIncompleteBatches)
    }

    /// After the end marker. In repeat mode no `set_source` comes: `Model::fit`'s loop over
    /// `max_iter` ignores the `false` that `Model::train` returns for it and asks for the next
    /// batch, as a `read_a_batch_to_device` loop does. The end marker only reaches the
    /// trainer once every worker has ended, which in repeat mode no worker does but by giving
    /// up, so that batch never comes: HugeCTR's trainer spins, and the run hangs.
    fn after_epoch(&self, cfg: &ReaderConfig) -> TrainerPc {
        if cfg.repeat {
            TrainerPc::Acquire
        } else if self.epoch + 1 < cfg.epochs {
            TrainerPc::SetSource
        } else {
            TrainerPc::Finished
        }
    }

    /// `DataReaderWorkerGroup::set_source`: worker by worker; the first refusal throws, so
    /// the workers before it already have their new source.
    fn set_source(
        &mut self,
        cfg: &ReaderConfig,
        bufs: &mut Buffers,
        workers: &mut [Worker],
    ) -> TrainerAction {
        for (w, worker) in workers.iter_mut().enumerate() {
            if !worker.set_source(cfg, bufs) {
                let worker = u32::try_from(w).expect("worker index fits u32");
                self.pc = TrainerPc::Refused { worker };
                return TrainerAction::SetSourceRefused { worker };
            }
        }
        self.epoch += 1;
        assert!(
            self.epoch < cfg.epochs,
            "set_source started epoch {} of {}",
            self.epoch,
            cfg.epochs
        );
        self.pc = TrainerPc::Acquire;
        TrainerAction::SetSource { epoch: self.epoch }
    }
}

impl Default for Trainer {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[should_panic(
        expected = "the trainer releases the broadcast buffer, which it no longer holds"
    )]
    fn a_release_of_a_buffer_not_held_stops_the_run() {
        let cfg = ReaderConfig::new(1, 1, 4, 2);
        let mut bufs = Buffers::new(1);
        let mut trainer = Trainer {
            pc: TrainerPc::Release {
                records: Vec::new(),
            },
            epoch: 0,
            batches_taken: 0,
        };
        trainer.step(&cfg, &mut bufs, &mut []);
    }
}
