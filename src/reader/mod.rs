//! A pure, deterministic model of HugeCTR's "Norm" data reader (tags v3.1 to v23.09): worker
//! threads parse files into their own buffers, a collector moves those buffers round-robin to
//! the broadcast buffer, and the trainer consumes them. Where those tags differ, the model
//! follows v3.4.1 and later: more workers than files is refused (earlier tags let the extra
//! workers end at once, or in repeat mode read other workers' files again).
//!
//! There is no simulator here: a [`run::Run`] steps one thread at a time in an order chosen
//! by a caller's [`run::Scheduler`], logs every buffer state change, detects hangs, and hands
//! back per-epoch output that the pure checks of `check::reader_output` judge. HugeCTR's
//! quirks are reproduced by default; each has a named opt-in fix (see
//! [`config::ReaderFix`]).

pub mod buffer;
pub mod collector;
pub mod config;
pub mod feed;
pub mod files;
pub mod run;
pub mod trainer;
pub mod worker;

#[cfg(test)]
mod tests;

pub use buffer::{ActorId, AtomicOp, BufferEvent, BufferId, BufferState};
pub use config::{CheckKind, ConfigError, Consumer, ReaderConfig, ReaderFix};
pub use feed::{Delivery, FeedCosts, NodeFeed, SetSourceError, WorkerNote};
pub use files::{FileSource, RecordId};
pub use run::{
    run, Action, EpochOutput, Outcome, Prefer, RoundRobin, Run, RunOutput, Scheduler, Scripted,
    SeededScheduler,
};
