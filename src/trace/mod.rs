//! The trace: typed events recorded during a run, bounded, with a canonical hash, and its
//! Chrome/Perfetto export.

pub mod buffer_events;
pub mod event;
pub mod node;
pub mod perfetto;

pub use event::{
    samples_digest, AgentState, Event, EventKind, ExitReason, RendezvousErrorKind, StepRun,
    StepView, TrainedOn, WorkerGroupState,
};
pub use node::TraceNode;

use sha2::{Digest, Sha256};
use std::sync::{Arc, Mutex};

/// The most events one run may record; past it the run stops with a harness error.
pub const EVENTS_MAX: usize = 2_000_000;

/// Everything a finished run hands to the checks and the report.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Trace {
    /// Events in time order; events of one moment in the order they were recorded (steps
    /// settled in closed form are recorded late and put in place when the run ends).
    pub events: Vec<Event>,
    /// True when `EVENTS_MAX` was reached and later events were dropped.
    pub truncated: bool,
}

impl Trace {
    /// SHA-256 over the canonical serialization: one JSON object per event, newline-separated.
    /// Struct fields serialize in declaration order, so equal traces give equal hashes.
    pub fn hash_hex(&self) -> String {
        let mut hasher = Sha256::new();
        let mut line = Vec::new();
        for event in &self.events {
            line.clear();
            serde_json::to_writer(&mut line, event).expect("events always serialize");
            line.push(b'\n');
            hasher.update(&line);
        }
        hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// The canonical serialization, one event per line, for diffing two runs.
    pub fn canonical_lines(&self) -> Vec<String> {
        self.events
            .iter()
            .map(|e| serde_json::to_string(e).expect("events always serialize"))
            .collect()
    }
}

/// Collects events from the simulated processes. Cloning shares the same buffer.
///
/// It is an observer, not a channel: simulated code never reads it back.
#[derive(Debug, Clone, Default)]
pub struct Recorder {
    inner: Arc<Mutex<Trace>>,
}

impl Recorder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one event; past `EVENTS_MAX` it only marks the trace truncated.
    pub fn record(&self, at_us: u64, node: Option<TraceNode>, kind: EventKind) {
        let mut trace = self.inner.lock().expect("recorder lock is never poisoned");
        if trace.events.len() >= EVENTS_MAX {
            trace.truncated = true;
            return;
        }
        trace.events.push(Event { at_us, node, kind });
    }

    /// Whether the bound was hit.
    pub fn truncated(&self) -> bool {
        self.inner
            .lock()
            .expect("recorder lock is never poisoned")
            .truncated
    }

    /// Takes the recorded trace out.
    pub fn finish(&self) -> Trace {
        let mut trace =
            std::mem::take(&mut *self.inner.lock().expect("recorder lock is never poisoned"));
        // Stable: events of one moment keep the order they were recorded in.
        trace.events.sort_by_key(|e| e.at_us);
        trace
    }
}

/// How a run ended, as the world saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunEnd {
    /// Simulated time when the run ended.
    pub sim_time_us: u64,
    pub outcome: crate::scenario::model::Outcome,
}
