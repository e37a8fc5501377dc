//! The trace: typed events recorded during a run, bounded, with a canonical hash, and its
//! Chrome/Perfetto export; beside it, the run's story (`story`), outside the hash.

pub mod buffer_events;
pub mod digest;
pub mod event;
pub mod node;
pub mod perfetto;
pub mod story;

pub use digest::samples_digest;
pub use event::{
    AgentState, Event, EventKind, ExitReason, RendezvousErrorKind, StepRun, StepView, TrainedOn,
    WorkerGroupState,
};
pub use node::TraceNode;
pub use story::{RendezvousStep, Story};

use crate::sim_time::SimInstant;
use sha2::{Digest, Sha256};
use std::sync::{Arc, Mutex};

/// The most events one run may record; past it the run stops with a harness error.
pub const EVENTS_MAX: usize = 2_000_000;
/// The most training steps the `step` events of one run may hold (a run of steps is one
/// event carrying each step's digest): a simulated week of 256 nodes holds about 14
/// million. Past it the run stops with the same harness error.
pub const STEPS_MAX: u64 = 40_000_000;

/// Events a recorder makes room for once a run outgrows its first buffer (32 MiB of address
/// space, touched only as events come): growing the buffer by doubling would copy it each
/// time into fresh memory the system must fault in, about a tenth of the reference run's
/// thread. A simulated week of 256 nodes records about 230 thousand events; a longer run
/// still grows past it.
const EVENTS_RESERVED: usize = 1 << 18;
const _: () = assert!(EVENTS_RESERVED <= EVENTS_MAX);

/// Events a recorder makes room for when it is made: a short run (a fuzz case records a
/// few hundred) never takes the large buffer, which the allocator maps afresh for each run
/// and the system zeroes as it is touched. Moving this many events once is cheap.
const EVENTS_FIRST: usize = 1 << 12;
const _: () = assert!(EVENTS_FIRST <= EVENTS_RESERVED);

/// Everything a finished run hands to the checks and the report.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Trace {
    /// Events in time order; events of one moment in the order they were recorded (steps
    /// settled in closed form are recorded late and put in place when the run ends).
    pub events: Vec<Event>,
    /// True when `EVENTS_MAX` or `STEPS_MAX` was reached and later events were dropped.
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
    inner: Arc<Mutex<Recording>>,
}

/// The trace being recorded, how many training steps its `step` events hold, and the
/// story recorded beside it.
#[derive(Debug, Default)]
struct Recording {
    trace: Trace,
    steps: u64,
    story: Story,
}

impl Recorder {
    pub fn new() -> Self {
        let recording = Recording {
            trace: Trace {
                events: Vec::with_capacity(EVENTS_FIRST),
                truncated: false,
            },
            steps: 0,
            story: Story::default(),
        };
        Recorder {
            inner: Arc::new(Mutex::new(recording)),
        }
    }

    /// Records one event; past `EVENTS_MAX` events or `STEPS_MAX` steps it only marks the
    /// trace truncated.
    pub fn record(&self, at: SimInstant, node: Option<TraceNode>, kind: EventKind) {
        let mut recording = self.inner.lock().expect("recorder lock is never poisoned");
        let steps = match &kind {
            EventKind::Step { run, .. } => run.steps(),
            _ => 0,
        };
        let r = &mut *recording;
        if !fits(r.trace.events.len(), r.steps, steps) {
            r.trace.truncated = true;
            return;
        }
        r.steps += steps;
        let events = &mut r.trace.events;
        if events.len() == events.capacity() && events.capacity() < EVENTS_RESERVED {
            events.reserve_exact(EVENTS_RESERVED - events.len());
        }
        events.push(Event { at, node, kind });
    }

    /// Records one rendezvous step in the story, with the lists `lists` makes when they fit
    /// its bound (see [`Story::keep`]). The trace's events, hash and bounds are untouched.
    pub fn record_rendezvous_step(
        &self,
        step: RendezvousStep,
        lists: impl FnOnce() -> story::RendezvousLists,
    ) {
        let mut recording = self.inner.lock().expect("recorder lock is never poisoned");
        recording.story.keep(step, lists);
    }

    /// Whether a bound was hit.
    pub fn truncated(&self) -> bool {
        self.inner
            .lock()
            .expect("recorder lock is never poisoned")
            .trace
            .truncated
    }

    /// Takes the recorded trace out.
    pub fn finish(&self) -> Trace {
        self.finish_with_story().0
    }

    /// Takes the recorded trace and story out, each in time order.
    pub fn finish_with_story(&self) -> (Trace, Story) {
        let mut recording =
            std::mem::take(&mut *self.inner.lock().expect("recorder lock is never poisoned"));
        sort_by_time(&mut recording.trace.events);
        recording.story.sort();
        (recording.trace, recording.story)
    }
}

/// Puts events in time order; events of one moment keep the order they were recorded in.
///
/// A stable sort would copy the events into a scratch buffer as large as half the trace,
/// fresh memory the system must fault in on every run. The (moment, recorded position)
/// keys are sorted instead, an eighth of the size, and the events moved along the
/// permutation's cycles in place.
fn sort_by_time(events: &mut [Event]) {
    if events.is_sorted_by_key(|e| e.at) {
        return;
    }
    const PLACED: u32 = u32::MAX;
    let position = |i: usize| u32::try_from(i).expect("EVENTS_MAX fits in u32");
    let mut order: Vec<(SimInstant, u32)> = events
        .iter()
        .enumerate()
        .map(|(i, e)| (e.at, position(i)))
        .collect();
    order.sort_unstable();
    // `order[j].1` names the position whose event belongs at `j`. Each cycle carries its
    // first event forward, swapping each place's own event into it.
    for start in 0..order.len() {
        let mut at = start;
        while order[at].1 != PLACED {
            let from = order[at].1 as usize;
            order[at].1 = PLACED;
            if from == start {
                break;
            }
            events.swap(at, from);
            at = from;
        }
    }
}

/// Whether one more event, holding `more_steps` steps, fits a trace of `events` events that
/// hold `steps` steps.
fn fits(events: usize, steps: u64, more_steps: u64) -> bool {
    events < EVENTS_MAX && steps.saturating_add(more_steps) <= STEPS_MAX
}

/// How a run ended, as the world saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunEnd {
    /// When the run ended, to the whole microsecond.
    pub ended_at: SimInstant,
    pub outcome: crate::scenario::model::Outcome,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_is_bounded_in_events_and_in_the_steps_they_hold() {
        assert!(fits(0, 0, 1));
        assert!(fits(EVENTS_MAX - 1, STEPS_MAX - 10, 10));
        assert!(!fits(EVENTS_MAX, 0, 0), "past the events");
        assert!(!fits(1, STEPS_MAX - 10, 11), "past the steps");
        assert!(!fits(1, u64::MAX, 1), "no overflow");
    }

    fn event(at_us: u64, id: u64) -> Event {
        Event {
            at: SimInstant::from_us(at_us),
            node: None,
            kind: EventKind::Checkpoint { pid: 0, step: id },
        }
    }

    proptest::proptest! {
        #[test]
        fn sorting_by_time_in_place_is_the_stable_sort(
            moments in proptest::collection::vec(0u64..12, 0..200),
        ) {
            let mut events: Vec<Event> =
                moments.iter().enumerate().map(|(i, &at)| event(at, i as u64)).collect();
            let mut stable = events.clone();
            stable.sort_by_key(|e| e.at);
            sort_by_time(&mut events);
            proptest::prop_assert_eq!(events, stable);
        }
    }
}
