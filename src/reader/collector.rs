//! The background collector thread: HugeCTR's `BackgroundDataCollectorThread::start` loop,
//! one iteration per step, visiting worker buffers in strict round-robin and moving each
//! batch to the broadcast buffer.

use super::buffer::{ActorId, BufferId, BufferState, Buffers};
use super::files::RecordId;

/// What one collector iteration did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CollectorAction {
    /// The worker at the cursor already sent its end marker this epoch: move on.
    SkippedDoneWorker {
        /// The worker skipped.
        worker: u32,
    },
    /// Took the worker's buffer (`ReadyForRead` → `Reading`) but the broadcast buffer is
    /// still busy; the next iterations keep the worker buffer and retry only the broadcast.
    HeldSource {
        /// The worker whose buffer is held.
        worker: u32,
    },
    /// Took a worker's end marker while other workers still have data: parks the worker's
    /// buffer at `FileEOF` and gives back the broadcast claim unused.
    WorkerEnded {
        /// The worker that ended.
        worker: u32,
    },
    /// Copied a worker's batch to the broadcast buffer for the trainer.
    Broadcast {
        /// The worker it came from.
        worker: u32,
        /// The batch.
        records: Vec<RecordId>,
    },
    /// Every worker has ended: handed the trainer the end marker and reset for the next epoch.
    EndOfEpoch {
        /// The worker whose marker was the last.
        worker: u32,
    },
}

/// The collector's round-robin cursor and its per-epoch record of ended workers.
#[derive(Debug, Clone)]
pub struct Collector {
    workers: u32,
    counter: u32,
    ended: Vec<bool>,
    ended_count: u32,
    /// The `reader-double-publish` mutant is on.
    double_publish: bool,
    /// Under the mutant: the held source's batch was already broadcast once.
    republishing: bool,
}

impl Collector {
    /// A collector over `workers` worker buffers, starting at worker 0.
    pub fn new(workers: u32) -> Self {
        assert!(workers > 0, "the collector needs a worker");
        Collector {
            workers,
            counter: 0,
            ended: vec![false; workers as usize],
            ended_count: 0,
            double_publish: false,
            republishing: false,
        }
    }

    /// Switches the `reader-double-publish` mutant on: a planted bug for the fuzzer's canary.
    pub fn with_double_publish(mut self) -> Self {
        self.double_publish = true;
        self
    }

    /// The worker the collector is waiting on or visiting next.
    pub fn cursor(&self) -> u32 {
        self.counter
    }

    fn advance(&mut self) {
        self.counter = (self.counter + 1) % self.workers;
        assert!(
            self.ended_count < self.workers,
            "the cursor moved on with all {} workers ended (the epoch should have reset)",
            self.workers
        );
    }

    /// Whether the next iteration changes anything; otherwise the thread is spinning.
    pub fn enabled(&self, bufs: &Buffers) -> bool {
        if self.ended[self.counter as usize] {
            return true;
        }
        let dst = bufs.state(BufferId::Broadcast);
        assert_ne!(
            dst,
            BufferState::Writing,
            "the collector never keeps the broadcast claim"
        );
        match bufs.state(BufferId::Worker(self.counter)) {
            BufferState::ReadyForRead => true,
            BufferState::Reading => dst == BufferState::ReadyForWrite,
            _ => false,
        }
    }

    /// One iteration of the collector loop (the caller checked [`Self::enabled`]).
    pub fn step(&mut self, bufs: &mut Buffers) -> CollectorAction {
        assert!(self.enabled(bufs), "the collector stepped while spinning");
        assert!(
            self.ended_count < self.workers,
            "reset once every worker ended"
        );
        let worker = self.counter;
        if self.ended[worker as usize] {
            self.advance();
            return CollectorAction::SkippedDoneWorker { worker };
        }
        let me = ActorId::Collector;
        let src = BufferId::Worker(worker);
        let dst = BufferId::Broadcast;
        // Source first, then destination, with `&&` short-circuit as in HugeCTR: a held
        // source is recognised by its `Reading` state on later iterations.
        let src_held = bufs.state(src) == BufferState::Reading
            || bufs.cas(src, me, BufferState::ReadyForRead, BufferState::Reading);
        assert!(src_held, "enabled() promised the source");
        if !bufs.cas(dst, me, BufferState::ReadyForWrite, BufferState::Writing) {
            return CollectorAction::HeldSource { worker };
        }
        assert!(
            !self.republishing || self.double_publish,
            "the collector republishes worker {worker}'s batch without the planted bug"
        );
        let records = bufs.get(src).records.clone();
        if records.is_empty() {
            // Size 0 means "this worker is done", whether or not it meant it.
            self.ended[worker as usize] = true;
            self.ended_count += 1;
            assert!(
                self.ended_count <= self.workers,
                "{} of {} workers ended",
                self.ended_count,
                self.workers
            );
            bufs.store(src, me, BufferState::FileEof);
            if self.ended_count != self.workers {
                self.advance();
                bufs.store(dst, me, BufferState::ReadyForWrite);
                return CollectorAction::WorkerEnded { worker };
            }
        }
        bufs.put_records(dst, records.clone());
        let action = if records.is_empty() {
            self.start_next_epoch();
            CollectorAction::EndOfEpoch { worker }
        } else if self.double_publish && worker > 0 && !self.republishing {
            // The planted bug: keep the source held, so the next iteration sends it again.
            self.republishing = true;
            CollectorAction::Broadcast { worker, records }
        } else {
            self.republishing = false;
            bufs.store(src, me, BufferState::ReadyForWrite);
            self.advance();
            CollectorAction::Broadcast { worker, records }
        };
        bufs.store(dst, me, BufferState::ReadyForRead);
        action
    }

    /// Every worker has ended: forgets who ended and puts the cursor back on worker 0.
    fn start_next_epoch(&mut self) {
        assert!(
            self.ended.iter().all(|e| *e),
            "the epoch ended with workers {:?} still reading",
            (0u32..)
                .zip(&self.ended)
                .filter(|(_, e)| !**e)
                .map(|(w, _)| w)
                .collect::<Vec<_>>()
        );
        self.ended.iter_mut().for_each(|e| *e = false);
        self.ended_count = 0;
        self.counter = 0;
    }

    /// Why the collector is spinning, as a sentence fragment.
    pub fn waiting_on(&self, bufs: &Buffers) -> String {
        let src = BufferId::Worker(self.counter);
        match bufs.state(src) {
            BufferState::Reading => format!(
                "holds {src} and waits for the broadcast buffer to be ReadyForWrite (it is {})",
                bufs.state(BufferId::Broadcast)
            ),
            state => format!("waits for {src} to be ReadyForRead (it is {state})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Buffers where worker 0 published a one-record batch.
    fn published() -> Buffers {
        let mut bufs = Buffers::new(2);
        let w0 = BufferId::Worker(0);
        let me = ActorId::Worker(0);
        assert!(bufs.cas(w0, me, BufferState::ReadyForWrite, BufferState::Writing));
        bufs.put_records(w0, vec![RecordId { file: 0, record: 0 }]);
        bufs.store(w0, me, BufferState::ReadyForRead);
        bufs
    }

    #[test]
    fn a_published_batch_is_broadcast() {
        let mut bufs = published();
        let action = Collector::new(2).step(&mut bufs);
        assert!(matches!(
            action,
            CollectorAction::Broadcast { worker: 0, .. }
        ));
    }

    #[test]
    #[should_panic(expected = "the collector republishes worker 0's batch without the planted bug")]
    fn a_republish_without_the_mutant_stops_the_run() {
        let mut bufs = published();
        let mut collector = Collector::new(2);
        collector.republishing = true;
        collector.step(&mut bufs);
    }
}
