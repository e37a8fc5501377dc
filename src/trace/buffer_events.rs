//! The reader's buffer events, as the trace records them: which HugeCTR buffer changed state,
//! by which thread's atomic operation. Defined here, with the other event types, so the
//! trace does not reach up into the reader; the reader re-exports them.

use std::fmt;

/// HugeCTR's `BufferState`, displayed as HugeCTR spells its members.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, strum::Display,
)]
pub enum BufferState {
    /// The reader took an end marker: the buffer is parked until the next `set_source`.
    #[strum(serialize = "FileEOF")]
    FileEof,
    /// The reader owns the buffer.
    Reading,
    /// Holds a batch (or an end marker) for the reader.
    ReadyForRead,
    /// The writer owns the buffer.
    Writing,
    /// Free for the writer.
    ReadyForWrite,
}

/// One of the threads the model runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum ActorId {
    /// Reader worker thread `w`: writes its own buffer.
    Worker(u32),
    /// The background collector thread: reads worker buffers, writes the broadcast buffer.
    Collector,
    /// The training (main) thread: reads the broadcast buffer and calls `set_source`.
    Trainer,
}

impl fmt::Display for ActorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ActorId::Worker(w) => write!(f, "worker {w}"),
            ActorId::Collector => f.write_str("the collector"),
            ActorId::Trainer => f.write_str("the trainer"),
        }
    }
}

/// A buffer: a worker's thread buffer or the node's broadcast buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum BufferId {
    /// Worker `w`'s buffer (writer: worker `w`, reader: the collector).
    Worker(u32),
    /// The broadcast buffer (writer: the collector, reader: the trainer).
    Broadcast,
}

impl BufferId {
    /// The one thread that writes this buffer.
    pub fn writer(self) -> ActorId {
        match self {
            BufferId::Worker(w) => ActorId::Worker(w),
            BufferId::Broadcast => ActorId::Collector,
        }
    }

    /// The one thread that reads this buffer.
    pub fn reader(self) -> ActorId {
        match self {
            BufferId::Worker(_) => ActorId::Collector,
            BufferId::Broadcast => ActorId::Trainer,
        }
    }
}

impl fmt::Display for BufferId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BufferId::Worker(w) => write!(f, "worker {w}'s buffer"),
            BufferId::Broadcast => f.write_str("the broadcast buffer"),
        }
    }
}

/// The atomic operation that changed a state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum AtomicOp {
    /// A successful `compare_exchange` (failed ones change nothing and are not logged).
    CompareExchange,
    /// A plain `store`, which HugeCTR uses to release a buffer it owns.
    Store,
}

/// One state change of one buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct BufferEvent {
    /// The run's step count when it happened.
    pub step: u64,
    /// Which buffer.
    pub buffer: BufferId,
    /// Which thread changed it.
    pub actor: ActorId,
    /// How.
    pub op: AtomicOp,
    /// State before.
    pub from: BufferState,
    /// State after.
    pub to: BufferState,
}
