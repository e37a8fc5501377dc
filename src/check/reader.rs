//! The `reader.*` invariants over a run's trace: each worker group's reader on each node is
//! rebuilt from its `reader_*` events into the reader model's output, and the model's pure
//! checks (`reader_output`) judge it. `not_applicable` without a `[reader]`.

use super::reader_output::{self as checks, Verdict};
use super::{InvariantResult, Violation};
use crate::invariant::Invariant;
use crate::job::reader_feed::reader_config;
use crate::reader::feed::expand_runs;
use crate::reader::{EpochOutput, Outcome, ReaderConfig, RunOutput};
use crate::scenario::model::Scenario;
use crate::sim_time::SimInstant;
use crate::trace::{EventKind, Trace, TraceNode};
use std::collections::BTreeMap;

/// One reader as the trace saw it: which node and process ran it, and what it did.
#[derive(Debug, Clone)]
pub(crate) struct ReaderLog {
    pub node: TraceNode,
    pub output: RunOutput,
    /// When each buffer event happened, by the reader's step.
    step_at: BTreeMap<u64, SimInstant>,
    /// When each epoch's end marker was taken.
    ended_at: BTreeMap<u32, SimInstant>,
    hang_at: SimInstant,
    /// The epoch and reason of the reader's hang, if it hung.
    hang: Option<(u32, String)>,
    /// Time the trainer waited on this reader.
    pub stall_us: u64,
}

impl ReaderLog {
    fn epoch(&mut self, epoch: u32) -> &mut EpochOutput {
        let i = epoch as usize;
        if self.output.epochs.len() <= i {
            self.output.epochs.resize(i + 1, EpochOutput::default());
        }
        &mut self.output.epochs[i]
    }
}

/// Every reader in the trace, in the order each first appears (one per node, `pid` and
/// `round`: a restarted group builds a new reader).
pub(crate) fn readers(trace: &Trace) -> Vec<ReaderLog> {
    let mut order: Vec<(TraceNode, u32, u64)> = Vec::new();
    let mut logs: BTreeMap<(TraceNode, u32, u64), ReaderLog> = BTreeMap::new();
    for event in &trace.events {
        let Some(node) = event.node else {
            continue;
        };
        let (pid, round) = match &event.kind {
            EventKind::ReaderBatch { pid, round, .. }
            | EventKind::ReaderEndOfData { pid, round, .. }
            | EventKind::ReaderBuffer { pid, round, .. }
            | EventKind::ReaderSkipped { pid, round, .. }
            | EventKind::ReaderWorkerFailed { pid, round, .. }
            | EventKind::ReaderHang { pid, round, .. } => (*pid, *round),
            _ => continue,
        };
        let key = (node, pid, round);
        let log = logs.entry(key).or_insert_with(|| {
            order.push(key);
            ReaderLog {
                node,
                output: RunOutput {
                    epochs: Vec::new(),
                    events: Vec::new(),
                    outcome: Outcome::Finished,
                    steps: 0,
                },
                step_at: BTreeMap::new(),
                ended_at: BTreeMap::new(),
                hang_at: SimInstant::START,
                hang: None,
                stall_us: 0,
            }
        });
        add(log, event.at, &event.kind);
    }
    order.into_iter().filter_map(|k| logs.remove(&k)).collect()
}

fn add(log: &mut ReaderLog, at: SimInstant, kind: &EventKind) {
    match kind {
        EventKind::ReaderBatch {
            epoch,
            size,
            records,
            trained,
            stall_us,
            ..
        } => {
            log.stall_us = log.stall_us.saturating_add(*stall_us);
            let out = log.epoch(*epoch);
            out.batch_sizes.push(*size);
            out.delivered.extend(expand_runs(records));
            if *trained {
                out.trained_batch_sizes.push(*size);
                out.trained.extend(expand_runs(records));
            } else {
                out.dropped_batch_sizes.push(*size);
                out.dropped.extend(expand_runs(records));
            }
        }
        EventKind::ReaderEndOfData { epoch, .. } => {
            log.epoch(*epoch).ended = true;
            log.ended_at.insert(*epoch, at);
        }
        EventKind::ReaderBuffer { event, .. } => {
            log.step_at.entry(event.step).or_insert(at);
            log.output.events.push(*event);
        }
        EventKind::ReaderSkipped { epoch, records, .. } => {
            log.epoch(*epoch).skipped.extend(expand_runs(records))
        }
        EventKind::ReaderWorkerFailed { .. } => {}
        EventKind::ReaderHang { epoch, reason, .. } => {
            log.hang_at = at;
            log.hang = Some((*epoch, reason.clone()));
        }
        _ => {}
    }
}

/// The model configuration the checks judge against (the scenario's, epochs not required).
fn config(scenario: &Scenario) -> Option<ReaderConfig> {
    let mut cfg = reader_config(scenario.reader.as_ref()?);
    // The job ends when its steps are done, not at an epoch boundary: no epoch is owed.
    cfg.epochs = 0;
    Some(cfg)
}

/// The model's violations as the report's: on the reader's node, at the time of the buffer
/// move or end marker they name (a hang: when the trainer found it).
fn located(log: &ReaderLog, verdict: &Verdict, at_hang: bool) -> Vec<Violation> {
    verdict
        .violations()
        .iter()
        .map(|v| {
            let at = match (v.step, v.epoch) {
                _ if at_hang => log.hang_at,
                (Some(step), _) => log
                    .step_at
                    .range(..=step)
                    .next_back()
                    .map_or(SimInstant::START, |(_, t)| *t),
                (None, Some(e)) => log.ended_at.get(&e).copied().unwrap_or(log.hang_at),
                (None, None) => log.hang_at,
            };
            Violation::new(at, Some(log.node), v.kind, v.sentence.clone())
        })
        .collect()
}

fn judge(
    name: Invariant,
    scenario: &Scenario,
    trace: &Trace,
    applies: impl Fn(&ReaderConfig, &ReaderLog) -> bool,
    check: impl Fn(&ReaderConfig, &ReaderLog) -> Verdict,
) -> InvariantResult {
    let Some(cfg) = config(scenario) else {
        return InvariantResult::not_applicable(name);
    };
    let logs = readers(trace);
    let applicable = logs.iter().any(|log| applies(&cfg, log));
    let violations = logs
        .iter()
        .flat_map(|log| located(log, &check(&cfg, log), name == Invariant::ReaderTerminates))
        .collect();
    InvariantResult::judge(name, applicable, violations)
}

/// `reader.exactly_once`: in every epoch a reader ended (repeat = false), each intact record
/// was delivered once and trained on; corrupt ones never.
pub(super) fn exactly_once(scenario: &Scenario, trace: &Trace) -> InvariantResult {
    judge(
        Invariant::ReaderExactlyOnce,
        scenario,
        trace,
        |cfg, log| !cfg.repeat && log.output.epochs.iter().any(|e| e.ended),
        |cfg, log| checks::exactly_once(cfg, &log.output),
    )
}

/// `reader.buffer_protocol`: every buffer of every reader moved only as the protocol allows.
pub(super) fn buffer_protocol(scenario: &Scenario, trace: &Trace) -> InvariantResult {
    judge(
        Invariant::ReaderBufferProtocol,
        scenario,
        trace,
        |_, log| !log.output.events.is_empty(),
        |_, log| checks::buffer_protocol(&log.output.events),
    )
}

/// `reader.terminates`: no reader hangs; its trainer always gets a batch or an end marker.
/// (The model's own `terminates` also owes every epoch of a fixed count; a job instead
/// stops when its steps are done, so only the hang is judged here, with the job's reason:
/// every thread blocked, or `Model::train` dropping every batch. A refused `set_source` is
/// no hang: it throws, and the worker fails.)
pub(super) fn terminates(scenario: &Scenario, trace: &Trace) -> InvariantResult {
    judge(
        Invariant::ReaderTerminates,
        scenario,
        trace,
        |_, _| true,
        |_, log| match &log.hang {
            None => Verdict::Held,
            Some((epoch, reason)) => Verdict::Violated(vec![checks::Violation {
                epoch: Some(*epoch),
                step: None,
                sentence: format!("epoch {epoch}: the trainer waits forever: {reason}"),
                kind: checks::TerminatesKind::Hang.into(),
            }]),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::super::Status;
    use super::*;
    use crate::reader::{ActorId, AtomicOp, BufferEvent, BufferId, BufferState};

    fn with_reader() -> Scenario {
        let mut s = scenario();
        let text = "name = \"r\"\n[cluster]\ngpus_per_node = 2\n[reader]\nworkers = 1\nfiles = 1\nrecords_per_file = 2\nbatch_size = 2\n";
        s.reader = crate::scenario::parse(text, "r.toml").unwrap().reader;
        s
    }

    fn buffer(step: u64, actor: ActorId, from: BufferState, to: BufferState) -> EventKind {
        EventKind::ReaderBuffer {
            pid: 1,
            round: 0,
            event: BufferEvent {
                step,
                buffer: BufferId::Broadcast,
                actor,
                op: AtomicOp::CompareExchange,
                from,
                to,
            },
        }
    }

    fn batch(records: Vec<[u32; 3]>) -> EventKind {
        EventKind::ReaderBatch {
            pid: 1,
            round: 0,
            epoch: 0,
            size: records.iter().map(|r| r[2]).sum(),
            records,
            trained: true,
            stall_us: 5,
        }
    }

    fn end_of_epoch_0() -> EventKind {
        EventKind::ReaderEndOfData {
            pid: 1,
            round: 0,
            epoch: 0,
        }
    }

    #[test]
    fn without_a_reader_every_reader_invariant_is_not_applicable() {
        let t = trace(vec![e(1, "node-0", batch(vec![[0, 0, 2]]))]);
        for result in [
            exactly_once(&scenario(), &t),
            buffer_protocol(&scenario(), &t),
            terminates(&scenario(), &t),
        ] {
            assert_eq!(result.status, Status::NotApplicable, "{}", result.name);
        }
    }

    #[test]
    fn a_repeated_record_a_wrong_move_and_a_hang_are_located() {
        let s = with_reader();
        use BufferState::*;
        let hang = EventKind::ReaderHang {
            pid: 1,
            round: 0,
            epoch: 1,
            reason: "every reader thread is blocked".into(),
        };
        let t = trace(vec![
            e(
                1,
                "node-0",
                buffer(1, ActorId::Collector, ReadyForWrite, Writing),
            ),
            e(2, "node-0", buffer(2, ActorId::Trainer, Writing, Reading)),
            e(3, "node-0", batch(vec![[0, 0, 2], [0, 1, 1]])),
            e(4, "node-0", end_of_epoch_0()),
            e(9, "node-0", hang),
        ]);
        let once = exactly_once(&s, &t);
        assert_eq!(once.status, Status::Violated);
        assert_eq!(once.violations[0].at.as_us(), 4_000_000);
        assert!(once.violations[0]
            .message
            .contains("more than once, e.g. (0, 1)"));
        assert_eq!(
            once.violations[0].kind,
            checks::ExactlyOnceKind::DeliveredTwice.into()
        );
        let protocol = buffer_protocol(&s, &t);
        assert_eq!(protocol.status, Status::Violated);
        assert_eq!(protocol.violations.len(), 1);
        assert_eq!(protocol.violations[0].at.as_us(), 2_000_000);
        assert_eq!(
            protocol.violations[0].kind,
            checks::BufferProtocolKind::ForbiddenMove.into()
        );
        let ends = terminates(&s, &t);
        assert_eq!(ends.violations[0].at.as_us(), 9_000_000);
        assert_eq!(ends.violations[0].kind, checks::TerminatesKind::Hang.into());
        assert_eq!(ends.violations[0].node, Some(TraceNode::node(0)));
    }

    #[test]
    fn without_the_repeated_record_the_wrong_move_and_the_hang_all_three_hold() {
        let s = with_reader();
        use BufferState::*;
        let good = trace(vec![
            e(
                1,
                "node-0",
                buffer(1, ActorId::Collector, ReadyForWrite, Writing),
            ),
            e(3, "node-0", batch(vec![[0, 0, 2]])),
            e(4, "node-0", end_of_epoch_0()),
        ]);
        for result in [
            exactly_once(&s, &good),
            buffer_protocol(&s, &good),
            terminates(&s, &good),
        ] {
            assert_eq!(result.status, Status::Held, "{}", result.name);
        }
    }
}
