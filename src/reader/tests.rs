//! Unit tests of the reader model's parts: file sequences and reads, configuration checks,
//! single steps of the threads, and the checks on hand-made logs.

use std::collections::BTreeSet;

use super::buffer::{ActorId, AtomicOp, BufferEvent, BufferId, BufferState};
use super::collector::CollectorAction;
use super::config::{CheckKind, ConfigError, Consumer, ReaderConfig};
use super::files::{Dataset, FileSource, OpenResult, RecordId, RecordRead};
use super::run::{run, Action, Outcome, Prefer, RoundRobin, Run, RunOutput};
use crate::check::reader_output::{buffer_protocol, exactly_once, terminates, Verdict};

fn small(workers: u32) -> ReaderConfig {
    let mut cfg = ReaderConfig::new(workers, 4, 5, 4);
    cfg.consumer = Consumer::ReadBatch;
    cfg
}

#[test]
fn file_source_strides_and_ends_or_wraps() {
    assert_eq!(
        FileSource::file_sequence(1, 3, 10, false, 99),
        vec![1, 4, 7]
    );
    assert_eq!(
        FileSource::file_sequence(2, 3, 10, true, 5),
        vec![2, 5, 8, 1, 4]
    );
    let mut cfg = small(1);
    cfg.broken_files = BTreeSet::from([1]);
    let ds = Dataset::new(&cfg);
    let mut src = FileSource::new(0, 2, false);
    assert_eq!(src.next_source(&ds), OpenResult::Opened(0));
    // The failed open still advances the counter: the retry asks for the next file.
    let mut src1 = FileSource::new(1, 2, false);
    assert_eq!(src1.next_source(&ds), OpenResult::CannotOpen(1));
    assert_eq!(src1.open_file(), None);
    assert_eq!(src1.next_source(&ds), OpenResult::Opened(3));
    assert_eq!(src1.next_source(&ds), OpenResult::EndOfData);
    assert_eq!(src.next_source(&ds), OpenResult::Opened(2));
}

#[test]
fn record_reads_depend_on_the_check() {
    let mut cfg = small(1);
    cfg.corrupt_records = BTreeSet::from([RecordId::new(0, 1)]);
    cfg.truncated_files.insert(0, 3);
    let ds = Dataset::new(&cfg);
    let id = RecordId::new;
    assert_eq!(
        ds.read_record(0, 0, CheckKind::Sum),
        RecordRead::Ok(id(0, 0))
    );
    assert_eq!(
        ds.read_record(0, 1, CheckKind::Sum),
        RecordRead::ChecksumFailed(id(0, 1))
    );
    assert_eq!(ds.read_record(0, 3, CheckKind::Sum), RecordRead::Broken);
    assert_eq!(
        ds.read_record(0, 1, CheckKind::None),
        RecordRead::Ok(id(0, 1))
    );
    assert_eq!(
        ds.read_record(0, 4, CheckKind::None),
        RecordRead::Ok(id(0, 4))
    );
    let intact = ds.intact_records();
    assert_eq!(intact.len(), 4 * 5 - 1 - 2);
    assert!(!intact.contains(&id(0, 3)));
}

#[test]
fn config_validation_names_the_problem() {
    let mut cfg = small(5);
    assert_eq!(
        cfg.validate(),
        Err(ConfigError::MoreWorkersThanFiles {
            workers: 5,
            files: 4
        })
    );
    cfg.workers = 2;
    cfg.corrupt_records.insert(RecordId::new(0, 5));
    assert!(matches!(cfg.validate(), Err(ConfigError::OutOfRange(_))));
    cfg.corrupt_records.clear();
    cfg.nodes = 3;
    assert!(matches!(cfg.validate(), Err(ConfigError::BadSlice { .. })));
    cfg.nodes = 2;
    assert_eq!(cfg.validate(), Ok(()));
    assert_eq!(cfg.dense_slice(), 0..2);
    // HugeCTR splits a batch over every GPU: 4 does not split over 2 nodes × 4 GPUs.
    cfg.gpus_per_node = 4;
    assert_eq!(
        cfg.validate(),
        Err(ConfigError::BadSlice {
            batch_size: 4,
            nodes: 2,
            gpus_per_node: 4,
            node: 0
        })
    );
    cfg.gpus_per_node = 2;
    assert_eq!(cfg.validate(), Ok(()));
}

#[test]
fn threads_block_on_buffer_states_and_the_collector_can_hold_a_source() {
    let cfg = small(2);
    let mut r = Run::new(&cfg).unwrap();
    let w0 = ActorId::Worker(0);
    let w1 = ActorId::Worker(1);
    // Nothing is published yet: only the workers can move.
    assert_eq!(r.enabled(), vec![w0, w1]);
    r.step(w0); // read
    r.step(w0); // claim
    assert_eq!(r.buffers().state(BufferId::Worker(0)), BufferState::Writing);
    r.step(w0); // publish
    r.step(w0); // read the next batch; its claim now spins on the full buffer
    assert_eq!(r.enabled(), vec![w1, ActorId::Collector]);
    let Action::Collector(CollectorAction::Broadcast { worker: 0, records }) =
        r.step(ActorId::Collector)
    else {
        panic!("the collector should broadcast worker 0's batch");
    };
    assert_eq!(records.len(), 4);
    // Worker 1 publishes while the trainer has not taken the broadcast buffer yet.
    for _ in 0..3 {
        r.step(w1);
    }
    let held = r.step(ActorId::Collector);
    assert_eq!(
        held,
        Action::Collector(CollectorAction::HeldSource { worker: 1 })
    );
    assert_eq!(r.buffers().state(BufferId::Worker(1)), BufferState::Reading);
    // Holding the source, it waits only on the broadcast buffer.
    assert!(!r.enabled().contains(&ActorId::Collector));
    r.step(ActorId::Trainer);
    r.step(ActorId::Trainer);
    let next = r.step(ActorId::Collector);
    assert!(matches!(
        next,
        Action::Collector(CollectorAction::Broadcast { worker: 1, .. })
    ));
}

#[test]
fn whole_small_run_under_workers_first_schedule() {
    let cfg = small(2);
    let order = vec![
        ActorId::Worker(0),
        ActorId::Worker(1),
        ActorId::Collector,
        ActorId::Trainer,
    ];
    let out = run(&cfg, &mut Prefer::new(order)).unwrap();
    // Worker 0: files 0, 2 (10 = 4 + 4 + 2); worker 1: files 1, 3.
    assert_eq!(out.epochs[0].batch_sizes, vec![4, 4, 4, 4, 2, 2]);
    assert_eq!(out.outcome, Outcome::Finished);
    assert_eq!(buffer_protocol(&out.events), Verdict::Held);
    // Every worker buffer ends parked at FileEOF; the broadcast buffer is free.
    let last = |b: BufferId| out.events.iter().rev().find(|e| e.buffer == b).unwrap().to;
    assert_eq!(last(BufferId::Worker(0)), BufferState::FileEof);
    assert_eq!(last(BufferId::Worker(1)), BufferState::FileEof);
    assert_eq!(last(BufferId::Broadcast), BufferState::ReadyForWrite);
}

fn event(buffer: BufferId, actor: ActorId, from: BufferState, to: BufferState) -> BufferEvent {
    BufferEvent {
        step: 1,
        buffer,
        actor,
        op: AtomicOp::CompareExchange,
        from,
        to,
    }
}

#[test]
fn buffer_protocol_flags_forbidden_moves_wrong_threads_and_gaps() {
    use BufferState::*;
    let b = BufferId::Worker(0);
    let w = ActorId::Worker(0);
    let forbidden = [event(b, w, ReadyForWrite, ReadyForRead)];
    assert!(buffer_protocol(&forbidden).violations()[0]
        .sentence
        .contains("ReadyForWrite → ReadyForRead, which the protocol forbids"));
    let wrong_thread = [event(b, ActorId::Collector, ReadyForWrite, Writing)];
    assert!(buffer_protocol(&wrong_thread).violations()[0]
        .sentence
        .contains("by the collector, not by worker 0"));
    let gap = [
        event(b, w, ReadyForWrite, Writing),
        event(b, ActorId::Collector, ReadyForRead, Reading),
    ];
    assert!(buffer_protocol(&gap).violations()[0]
        .sentence
        .contains("was logged leaving ReadyForRead but was Writing"));
    let fine = [
        event(
            BufferId::Broadcast,
            ActorId::Collector,
            ReadyForWrite,
            Writing,
        ),
        event(
            BufferId::Broadcast,
            ActorId::Collector,
            Writing,
            ReadyForRead,
        ),
        event(BufferId::Broadcast, ActorId::Trainer, ReadyForRead, Reading),
        event(
            BufferId::Broadcast,
            ActorId::Trainer,
            Reading,
            ReadyForWrite,
        ),
    ];
    assert_eq!(buffer_protocol(&fine), Verdict::Held);
}

#[test]
fn exactly_once_flags_duplicates_and_missing_records() {
    let cfg = small(1);
    let mut out: RunOutput = run(&cfg, &mut RoundRobin::default()).unwrap();
    assert_eq!(exactly_once(&cfg, &out), Verdict::Held);
    let first = out.epochs[0].delivered[0];
    out.epochs[0].delivered.push(first);
    out.epochs[0]
        .delivered
        .retain(|r| *r != RecordId::new(3, 4));
    let v = exactly_once(&cfg, &out);
    let text: Vec<&str> = v.violations().iter().map(|x| x.sentence.as_str()).collect();
    assert_eq!(
        text,
        vec![
            "epoch 0: 1 intact records were never delivered, e.g. (3, 4)",
            "epoch 0: 1 records were delivered more than once, e.g. (0, 0)",
        ]
    );
}

#[test]
fn the_step_budget_ends_a_run_and_terminates_says_so() {
    let mut cfg = small(2);
    cfg.steps_max = 7;
    let out = run(&cfg, &mut RoundRobin::default()).unwrap();
    assert_eq!(out.outcome, Outcome::StepLimit { steps: 7 });
    assert_eq!(out.steps, 7);
    assert!(terminates(&cfg, &out).violations()[0]
        .sentence
        .contains("budget of 7 steps"));
}

#[test]
fn repeat_mode_with_no_intact_record_stops_the_worker_instead_of_spinning() {
    let mut cfg = small(1);
    cfg.repeat = true;
    cfg.corrupt_records = (0..4)
        .flat_map(|f| (0..5).map(move |r| RecordId::new(f, r)))
        .collect();
    let out = run(&cfg, &mut RoundRobin::default()).unwrap();
    assert!(
        matches!(out.outcome, Outcome::Hang { .. }),
        "{:?}",
        out.outcome
    );
    assert_eq!(
        out.epochs[0].worker_failures,
        vec![(0, super::worker::WorkerFailure::NoIntactRecord)]
    );
    assert!(terminates(&cfg, &out).is_violated());
}
