//! The `reader.*` invariants as pure functions over one reader model run's output:
//! `exactly_once`, `buffer_protocol` and `terminates`. `check::reader` rebuilds that output
//! from a run's trace and judges it with these; the reader model's tests call them directly.

use std::collections::{BTreeMap, BTreeSet};

use super::kind::kind_enum;
use super::Kind;
use crate::reader::buffer::{ActorId, BufferEvent, BufferId, BufferState};
use crate::reader::config::ReaderConfig;
use crate::reader::files::{Dataset, RecordId};
use crate::reader::run::{Outcome, RunOutput};

/// Most example records one violation sentence names.
const EXAMPLES_MAX: usize = 5;

kind_enum! {
    /// The ways `reader.exactly_once` breaks.
    pub enum ExactlyOnceKind {
        /// An intact record was never delivered in an epoch that ended.
        RecordSkipped,
        /// A record was delivered more than once in one epoch.
        DeliveredTwice,
        /// A corrupt or unreadable record was delivered.
        CorruptDelivered,
        /// `Model::train` dropped delivered records with an incomplete batch (HugeCTR's
        /// default for the last batch of an epoch).
        DroppedWithIncompleteBatch,
    }
}

kind_enum! {
    /// The ways `reader.buffer_protocol` breaks.
    pub enum BufferProtocolKind {
        /// A move was logged leaving another state than the buffer was in.
        StateMismatch,
        /// A move the protocol forbids.
        ForbiddenMove,
        /// An allowed move made by another actor than the side that owns it.
        WrongActor,
    }
}

kind_enum! {
    /// The ways `reader.terminates` breaks.
    pub enum TerminatesKind {
        /// Every thread is blocked: the trainer waits forever.
        Hang,
        /// `set_source` refused a new epoch because a worker was not at end-of-data.
        SetSourceRefused,
        /// The run did not finish within its step budget.
        StepLimit,
        /// An epoch asked for never delivered its end-of-data marker.
        EpochUnfinished,
    }
}

/// One broken promise, in a sentence.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Violation {
    /// The epoch it concerns, when one does.
    pub epoch: Option<u32>,
    /// The run's step it happened at, when one applies (buffer moves).
    pub step: Option<u64>,
    /// What went wrong.
    pub sentence: String,
    /// Which way the invariant broke.
    pub kind: Kind,
}

/// An invariant's verdict over one run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum Verdict {
    /// It held.
    Held,
    /// It was broken, with one violation per distinct problem.
    Violated(Vec<Violation>),
    /// It does not apply to this run, and why.
    NotApplicable(String),
}

impl Verdict {
    fn from_violations(violations: Vec<Violation>) -> Verdict {
        if violations.is_empty() {
            Verdict::Held
        } else {
            Verdict::Violated(violations)
        }
    }

    /// Whether it was violated.
    pub fn is_violated(&self) -> bool {
        matches!(self, Verdict::Violated(_))
    }

    /// The violations (none unless violated).
    pub fn violations(&self) -> &[Violation] {
        match self {
            Verdict::Violated(v) => v,
            _ => &[],
        }
    }
}

fn examples<'a>(ids: impl IntoIterator<Item = &'a RecordId>) -> String {
    let shown: Vec<String> = ids
        .into_iter()
        .take(EXAMPLES_MAX)
        .map(|r| r.to_string())
        .collect();
    shown.join(", ")
}

/// An epoch's delivered records against the intact ones: those never delivered, those
/// delivered more than once and those that are not intact, each with its kind and what it
/// says, in the order the report lists them.
fn record_lists(
    intact: &BTreeSet<RecordId>,
    delivered: &[RecordId],
) -> [(ExactlyOnceKind, Vec<RecordId>, &'static str); 3] {
    let mut counts: BTreeMap<RecordId, u32> = BTreeMap::new();
    for id in delivered {
        *counts.entry(*id).or_default() += 1;
    }
    let missing = intact
        .iter()
        .filter(|id| !counts.contains_key(id))
        .copied()
        .collect();
    let repeated = counts
        .iter()
        .filter(|(_, &n)| n > 1)
        .map(|(id, _)| *id)
        .collect();
    let foreign = counts
        .keys()
        .filter(|id| !intact.contains(id))
        .copied()
        .collect();
    [
        (
            ExactlyOnceKind::RecordSkipped,
            missing,
            "intact records were never delivered",
        ),
        (
            ExactlyOnceKind::DeliveredTwice,
            repeated,
            "records were delivered more than once",
        ),
        (
            ExactlyOnceKind::CorruptDelivered,
            foreign,
            "corrupt or unreadable records were delivered",
        ),
    ]
}

/// `reader.exactly_once`: with `repeat = false`, in every epoch that ended, the collector
/// hands out each intact record exactly once and no other record, and the consumer trains on
/// every record it was handed. Epochs that never ended are `terminates`' business.
pub fn exactly_once(cfg: &ReaderConfig, out: &RunOutput) -> Verdict {
    if cfg.repeat {
        return Verdict::NotApplicable("repeat mode has no epochs: files are read again".into());
    }
    let intact = Dataset::new(cfg).intact_records();
    let mut violations = Vec::new();
    for (e, epoch) in out.epochs.iter().enumerate().filter(|(_, ep)| ep.ended) {
        let at = Some(e as u32);
        let mut say = |kind: ExactlyOnceKind, sentence: String| {
            violations.push(Violation {
                epoch: at,
                step: None,
                sentence,
                kind: kind.into(),
            })
        };
        let record_lists = record_lists(&intact, &epoch.delivered);
        for (kind, ids, what) in record_lists
            .into_iter()
            .filter(|(_, ids, _)| !ids.is_empty())
        {
            let shown = examples(&ids);
            say(
                kind,
                format!("epoch {e}: {} {what}, e.g. {shown}", ids.len()),
            );
        }
        if !epoch.dropped.is_empty() {
            say(
                ExactlyOnceKind::DroppedWithIncompleteBatch,
                format!(
                "epoch {e}: Model::train dropped {} delivered records in incomplete batches of sizes {:?}, e.g. {}",
                epoch.dropped.len(),
                epoch.dropped_batch_sizes,
                examples(&epoch.dropped)
            ),
            );
        }
    }
    Verdict::from_violations(violations)
}

/// The moves the protocol allows, and which side of the buffer may make each.
fn allowed(from: BufferState, to: BufferState) -> Option<Side> {
    use BufferState::*;
    match (from, to) {
        (ReadyForWrite, Writing) | (Writing, ReadyForRead) => Some(Side::Writer),
        // The collector gives the broadcast buffer back unused when a worker's end marker
        // was not the last one: a claim released without publishing.
        (Writing, ReadyForWrite) => Some(Side::Writer),
        (ReadyForRead, Reading) | (Reading, ReadyForWrite) | (Reading, FileEof) => {
            Some(Side::Reader)
        }
        (FileEof, ReadyForWrite) => Some(Side::SetSource),
        _ => None,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Writer,
    Reader,
    SetSource,
}

fn side_actor(buffer: BufferId, side: Side) -> ActorId {
    match side {
        Side::Writer => buffer.writer(),
        Side::Reader => buffer.reader(),
        Side::SetSource => ActorId::Trainer,
    }
}

/// `reader.buffer_protocol`: every buffer moves only ReadyForWrite → Writing → ReadyForRead
/// → Reading → ReadyForWrite, a reader may park a buffer at FileEOF, which only `set_source`
/// leaves; a writer may release an unused claim. Each move is made by the buffer's own writer
/// or reader, and each starts from the state the previous move left.
pub fn buffer_protocol(events: &[BufferEvent]) -> Verdict {
    let mut state: BTreeMap<BufferId, BufferState> = BTreeMap::new();
    let mut violations = Vec::new();
    for ev in events {
        let known = *state.entry(ev.buffer).or_insert(BufferState::ReadyForWrite);
        let mut say = |kind: BufferProtocolKind, what: String| {
            violations.push(Violation {
                epoch: None,
                step: Some(ev.step),
                sentence: format!("step {}: {} {what}", ev.step, ev.buffer),
                kind: kind.into(),
            })
        };
        if ev.from != known {
            say(
                BufferProtocolKind::StateMismatch,
                format!("was logged leaving {} but was {known}", ev.from),
            );
        }
        match allowed(ev.from, ev.to) {
            None => say(
                BufferProtocolKind::ForbiddenMove,
                format!("moved {} → {}, which the protocol forbids", ev.from, ev.to),
            ),
            Some(side) if side_actor(ev.buffer, side) != ev.actor => say(
                BufferProtocolKind::WrongActor,
                format!(
                    "moved {} → {} by {}, not by {}",
                    ev.from,
                    ev.to,
                    ev.actor,
                    side_actor(ev.buffer, side)
                ),
            ),
            Some(_) => {}
        }
        state.insert(ev.buffer, ev.to);
    }
    Verdict::from_violations(violations)
}

/// `reader.terminates`: the run ends without a hang, a refused `set_source` or a spent step
/// budget, and in epoch mode every epoch asked for ends with the end-of-data marker.
pub fn terminates(cfg: &ReaderConfig, out: &RunOutput) -> Verdict {
    let mut violations = Vec::new();
    match &out.outcome {
        Outcome::Finished => {}
        Outcome::Hang {
            step,
            epoch,
            blocked,
        } => violations.push(Violation {
            epoch: Some(*epoch),
            step: Some(*step),
            sentence: format!(
                "epoch {epoch} hangs at step {step}: every thread is blocked: {}",
                blocked.join("; ")
            ),
            kind: TerminatesKind::Hang.into(),
        }),
        Outcome::SetSourceRefused { epoch, worker } => violations.push(Violation {
            epoch: Some(*epoch),
            step: None,
            sentence: format!(
                "epoch {epoch} cannot start: set_source throws because worker {worker} is not at end-of-data"
            ),
            kind: TerminatesKind::SetSourceRefused.into(),
        }),
        Outcome::StepLimit { steps } => violations.push(Violation {
            epoch: None,
            step: Some(*steps),
            sentence: format!("the run did not finish within its budget of {steps} steps"),
            kind: TerminatesKind::StepLimit.into(),
        }),
    }
    let unfinished: BTreeSet<u32> = if cfg.repeat || out.outcome != Outcome::Finished {
        BTreeSet::new()
    } else {
        (0..cfg.epochs)
            .filter(|&e| out.epochs.get(e as usize).is_none_or(|ep| !ep.ended))
            .collect()
    };
    for e in unfinished {
        violations.push(Violation {
            epoch: Some(e),
            step: None,
            sentence: format!("epoch {e} never delivered the end-of-data marker"),
            kind: TerminatesKind::EpochUnfinished.into(),
        });
    }
    Verdict::from_violations(violations)
}
