//! The buffers batches pass through (one per worker, one broadcast buffer), their HugeCTR
//! `BufferState`s changed only by atomic compare-exchange or store, and the log of every
//! change, from which the buffer-protocol invariant is checked.

use super::files::RecordId;

pub use crate::trace::buffer_events::{ActorId, AtomicOp, BufferEvent, BufferId, BufferState};

/// A buffer's state and contents. A batch of size 0 is the end marker, exactly as
/// HugeCTR's `current_batch_size == 0` is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Buffer {
    /// Current state.
    pub state: BufferState,
    /// The records of the batch it holds, in batch order.
    pub records: Vec<RecordId>,
}

/// All buffers of one node plus the event log; the only way to change a state.
#[derive(Debug, Clone)]
pub struct Buffers {
    workers: Vec<Buffer>,
    broadcast: Buffer,
    events: Vec<BufferEvent>,
    step: u64,
}

impl Buffers {
    /// `workers` worker buffers and a broadcast buffer, all `ReadyForWrite` and empty.
    pub fn new(workers: u32) -> Self {
        let free = Buffer {
            state: BufferState::ReadyForWrite,
            records: Vec::new(),
        };
        Buffers {
            workers: vec![free.clone(); workers as usize],
            broadcast: free,
            events: Vec::new(),
            step: 0,
        }
    }

    /// Sets the step number stamped on the following events.
    pub fn set_step(&mut self, step: u64) {
        self.step = step;
    }

    /// The buffer `id`.
    pub fn get(&self, id: BufferId) -> &Buffer {
        match id {
            BufferId::Worker(w) => &self.workers[w as usize],
            BufferId::Broadcast => &self.broadcast,
        }
    }

    fn get_mut(&mut self, id: BufferId) -> &mut Buffer {
        match id {
            BufferId::Worker(w) => &mut self.workers[w as usize],
            BufferId::Broadcast => &mut self.broadcast,
        }
    }

    /// `id`'s state (an atomic load).
    pub fn state(&self, id: BufferId) -> BufferState {
        self.get(id).state
    }

    /// Atomic compare-exchange: moves `id` from `expected` to `new` and logs it, or fails
    /// and changes nothing.
    pub fn cas(
        &mut self,
        id: BufferId,
        actor: ActorId,
        expected: BufferState,
        new: BufferState,
    ) -> bool {
        assert_ne!(expected, new, "a compare-exchange must change the state");
        // Claims are made by a buffer's own threads: its writer or its reader.
        assert!(
            actor == id.writer() || actor == id.reader(),
            "{actor} compare-exchanged {id}, which it neither writes nor reads"
        );
        if self.state(id) != expected {
            return false;
        }
        self.set(id, actor, AtomicOp::CompareExchange, new);
        true
    }

    /// Atomic store of `new` into `id`, logged.
    pub fn store(&mut self, id: BufferId, actor: ActorId, new: BufferState) {
        self.set(id, actor, AtomicOp::Store, new);
    }

    /// Replaces the records `id` holds; only its owner may, so it must be claimed.
    pub fn put_records(&mut self, id: BufferId, records: Vec<RecordId>) {
        let buffer = self.get_mut(id);
        assert_eq!(
            buffer.state,
            BufferState::Writing,
            "{id} written while not claimed"
        );
        buffer.records = records;
    }

    fn set(&mut self, id: BufferId, actor: ActorId, op: AtomicOp, new: BufferState) {
        // Besides a buffer's own threads only the trainer touches it, in `set_source`.
        assert!(
            actor == id.writer() || actor == id.reader() || actor == ActorId::Trainer,
            "{actor} changed {id}, which it neither writes nor reads"
        );
        let step = self.step;
        let buffer = self.get_mut(id);
        let from = buffer.state;
        buffer.state = new;
        self.events.push(BufferEvent {
            step,
            buffer: id,
            actor,
            op,
            from,
            to: new,
        });
    }

    /// Every logged state change, in order.
    pub fn events(&self) -> &[BufferEvent] {
        &self.events
    }

    /// Moves the event log out (at the end of a run).
    pub fn take_events(&mut self) -> Vec<BufferEvent> {
        std::mem::take(&mut self.events)
    }
}

#[cfg(test)]
mod tests {
    use super::{ActorId, BufferId, BufferState, Buffers};

    #[test]
    #[should_panic(
        expected = "the trainer compare-exchanged worker 0's buffer, which it neither writes nor reads"
    )]
    fn a_claim_by_a_thread_outside_the_buffer_stops_the_run() {
        let mut bufs = Buffers::new(1);
        bufs.cas(
            BufferId::Worker(0),
            ActorId::Trainer,
            BufferState::ReadyForWrite,
            BufferState::Writing,
        );
    }

    #[test]
    fn buffer_states_display_as_hugectr_names_them() {
        let names: Vec<String> = [
            BufferState::FileEof,
            BufferState::Reading,
            BufferState::ReadyForRead,
            BufferState::Writing,
            BufferState::ReadyForWrite,
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        assert_eq!(
            names,
            [
                "FileEOF",
                "Reading",
                "ReadyForRead",
                "Writing",
                "ReadyForWrite"
            ]
        );
    }
}
