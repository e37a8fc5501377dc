//! The reader model against HugeCTR's Norm data reader: its own unit-test case, several
//! worker counts, repeat mode, broken, truncated and corrupt files, the retry hang, each
//! quirk with and without its fix, and the buffer protocol under many interleavings.

use std::collections::BTreeSet;

use proptest::prelude::*;
use trainsim::check::reader_output::{buffer_protocol, exactly_once, terminates, Verdict};
use trainsim::reader::{
    run, ActorId, CheckKind, Consumer, FileSource, Outcome, Prefer, ReaderConfig, ReaderFix,
    RecordId, RoundRobin, RunOutput, SeededScheduler,
};

/// HugeCTR's data reader unit test: 10 files of `batchsize * 2 + 10` = 74 records, batch 32.
fn hugectr_case(workers: u32) -> ReaderConfig {
    let mut cfg = ReaderConfig::new(workers, 10, 74, 32);
    cfg.consumer = Consumer::ReadBatch;
    cfg
}

/// `parts` as a flat sequence: `[(32, 2), (4, 1)]` is `[32, 32, 4]`.
fn seq(parts: &[(u32, usize)]) -> Vec<u32> {
    parts
        .iter()
        .flat_map(|&(size, n)| std::iter::repeat_n(size, n))
        .collect()
}

fn run_rr(cfg: &ReaderConfig) -> RunOutput {
    run(cfg, &mut RoundRobin::default()).expect("valid config")
}

fn with_fix(mut cfg: ReaderConfig, fix: ReaderFix) -> ReaderConfig {
    cfg.fixes.insert(fix);
    cfg
}

/// Schedulers that stress different interleavings: round-robin, workers first (every buffer
/// full before the collector moves), trainer first, and seeded random ones.
fn schedulers(workers: u32) -> Vec<Box<dyn trainsim::reader::Scheduler>> {
    let mut workers_first: Vec<ActorId> = (0..workers).map(ActorId::Worker).collect();
    workers_first.extend([ActorId::Collector, ActorId::Trainer]);
    let mut consumers_first = vec![ActorId::Trainer, ActorId::Collector];
    consumers_first.extend((0..workers).rev().map(ActorId::Worker));
    let mut all: Vec<Box<dyn trainsim::reader::Scheduler>> = vec![
        Box::new(RoundRobin::default()),
        Box::new(Prefer::new(workers_first)),
        Box::new(Prefer::new(consumers_first)),
    ];
    all.extend((0..5u64).map(|s| Box::new(SeededScheduler::new(s)) as Box<_>));
    all
}

/// Runs `cfg` under every scheduler: the collector's strict round-robin makes the output the
/// same whatever the interleaving, and the buffer protocol must hold in each.
fn run_all(cfg: &ReaderConfig) -> RunOutput {
    let reference = run_rr(cfg);
    for mut sched in schedulers(cfg.workers) {
        let out = run(cfg, sched.as_mut()).expect("valid config");
        assert_eq!(buffer_protocol(&out.events), Verdict::Held);
        assert_eq!(
            out.epochs, reference.epochs,
            "output depends on the interleaving"
        );
        let same_end = match (&out.outcome, &reference.outcome) {
            (Outcome::Hang { epoch: a, .. }, Outcome::Hang { epoch: b, .. }) => a == b,
            (a, b) => a == b,
        };
        assert!(same_end, "{:?} vs {:?}", out.outcome, reference.outcome);
    }
    reference
}

fn sizes(out: &RunOutput, epoch: usize) -> &[u32] {
    &out.epochs[epoch].batch_sizes
}

fn held(v: Verdict) {
    assert_eq!(v, Verdict::Held);
}

fn violated_with(v: Verdict, needle: &str) {
    assert!(
        v.violations().iter().any(|x| x.sentence.contains(needle)),
        "expected a violation containing {needle:?}, got {v:?}"
    );
}

// How the expected sequences follow from HugeCTR's code (v3.7 `data_reader_worker.hpp`,
// `file_source.hpp`, `data_collector.hpp`):
//
// - `FileSource` gives worker w of W the files w, w+W, w+2W, … < 10, so with 74 records a
//   file, worker w reads 74 × ceil((10 - w) / W) records in one stream.
// - A worker fills each batch across file boundaries and opens the next file eagerly after a
//   file's last record, so end-of-data is seen while reading the last record: it publishes
//   its remainder `n mod 32` as a short batch (a full one if it divides), then the size-0
//   marker on its next call.
// - The collector visits workers in strict round-robin, waiting on the one at its cursor; a
//   size-0 marker marks the worker done and the cursor then skips it. So round k holds
//   batch k of every worker that still has one, in worker order.
//
// W=1: 740 = 23·32 + 4                                    → 32×23, 4
// W=2: files {0,2,4,6,8} and {1,3,5,7,9}: 370 = 11·32 + 18 each
//      rounds 0-10: 32,32; round 11: 18,18                  → 32×22, 18, 18
// W=3: {0,3,6,9}: 296 = 9·32 + 8; {1,4,7} and {2,5,8}: 222 = 6·32 + 30
//      rounds 0-5: 32,32,32; round 6: 32,30,30; round 7: 32 (workers 1, 2 end);
//      round 8: 32; round 9: 8                              → 32×19, 30, 30, 32, 32, 8
// W=4: {0,4,8}, {1,5,9}: 222 = 6·32 + 30; {2,6}, {3,7}: 148 = 4·32 + 20
//      rounds 0-3: 32×4; round 4: 32,32,20,20; round 5: 32,32 (workers 2, 3 end);
//      round 6: 30,30                                       → 32×18, 20, 20, 32, 32, 30, 30
// W=5: two files each: 148 = 4·32 + 20                     → 32×20, 20×5
// W=10: one file each: 74 = 2·32 + 10                       → 32×20, 10×10

#[test]
fn hugectr_unit_test_case_one_worker() {
    let cfg = hugectr_case(1);
    let out = run_all(&cfg);
    assert_eq!(out.outcome, Outcome::Finished);
    assert_eq!(sizes(&out, 0), seq(&[(32, 23), (4, 1)]));
    assert_eq!(out.epochs[0].delivered.len(), 740);
    // One worker reads its files in order, so records come out in file order.
    let in_order: Vec<RecordId> = (0..10)
        .flat_map(|f| (0..74).map(move |r| RecordId::new(f, r)))
        .collect();
    assert_eq!(out.epochs[0].delivered, in_order);
    held(exactly_once(&cfg, &out));
    held(terminates(&cfg, &out));
}

#[test]
fn worker_counts_give_hugectrs_sequences() {
    let expected: [(u32, Vec<u32>); 5] = [
        (2, seq(&[(32, 22), (18, 2)])),
        (3, seq(&[(32, 19), (30, 2), (32, 2), (8, 1)])),
        (4, seq(&[(32, 18), (20, 2), (32, 2), (30, 2)])),
        (5, seq(&[(32, 20), (20, 5)])),
        (10, seq(&[(32, 20), (10, 10)])),
    ];
    for (workers, want) in expected {
        let cfg = hugectr_case(workers);
        let out = run_all(&cfg);
        assert_eq!(sizes(&out, 0), want, "{workers} workers");
        held(exactly_once(&cfg, &out));
        held(terminates(&cfg, &out));
    }
}

#[test]
fn several_epochs_repeat_the_sequence_through_set_source() {
    let mut cfg = hugectr_case(3);
    cfg.epochs = 3;
    let out = run_all(&cfg);
    assert_eq!(out.outcome, Outcome::Finished);
    assert_eq!(out.epochs.len(), 3);
    for e in 0..3 {
        assert_eq!(sizes(&out, e), seq(&[(32, 19), (30, 2), (32, 2), (8, 1)]));
        assert!(out.epochs[e].ended);
    }
    held(exactly_once(&cfg, &out));
    held(terminates(&cfg, &out));
}

#[test]
fn model_train_drops_incomplete_batches_unless_fixed() {
    let mut cfg = hugectr_case(4);
    cfg.consumer = Consumer::ModelTrain;
    let out = run_all(&cfg);
    assert_eq!(out.epochs[0].trained_batch_sizes, seq(&[(32, 20)]));
    assert_eq!(out.epochs[0].dropped_batch_sizes, vec![20, 20, 30, 30]);
    violated_with(
        exactly_once(&cfg, &out),
        "Model::train dropped 100 delivered records",
    );

    let fixed = with_fix(cfg, ReaderFix::TrainKeepsIncompleteBatches);
    let out = run_all(&fixed);
    assert_eq!(out.epochs[0].trained_batch_sizes, *sizes(&out, 0));
    held(exactly_once(&fixed, &out));
}

#[test]
fn repeat_mode_overlaps_when_workers_do_not_divide_files() {
    assert_eq!(
        FileSource::file_sequence(0, 3, 10, true, 10),
        vec![0, 3, 6, 9, 2, 5, 8, 1, 4, 7]
    );
    assert_eq!(
        FileSource::file_sequence(1, 3, 10, true, 4),
        vec![1, 4, 7, 0]
    );
    assert_eq!(
        FileSource::file_sequence(0, 3, 10, false, 10),
        vec![0, 3, 6, 9]
    );

    let mut cfg = hugectr_case(3);
    cfg.repeat = true;
    cfg.repeat_batches = 30;
    let out = run_all(&cfg);
    assert_eq!(out.outcome, Outcome::Finished);
    assert_eq!(sizes(&out, 0), seq(&[(32, 30)]));
    // In 30 batches each worker read 320 records: 4 whole files and 24 of a fifth. Worker 0
    // reads 0, 3, 6, 9 and worker 1 reads 1, 4, 7, 0: file 0 comes twice.
    let delivered = &out.epochs[0].delivered;
    let twice = delivered
        .iter()
        .filter(|&&r| r == RecordId::new(0, 0))
        .count();
    assert_eq!(twice, 2);
    assert!(matches!(
        exactly_once(&cfg, &out),
        Verdict::NotApplicable(_)
    ));
    held(terminates(&cfg, &out));

    // With W dividing the file count the sequences are disjoint until they wrap.
    let mut cfg = hugectr_case(2);
    cfg.repeat = true;
    cfg.repeat_batches = 22;
    let out = run_all(&cfg);
    let distinct: BTreeSet<RecordId> = out.epochs[0].delivered.iter().copied().collect();
    assert_eq!(distinct.len(), 22 * 32);
}

#[test]
fn broken_files_are_skipped_by_the_open_retry() {
    let mut cfg = hugectr_case(1);
    cfg.broken_files = BTreeSet::from([3]);
    let out = run_all(&cfg);
    // 9 readable files: 666 = 20·32 + 26.
    assert_eq!(sizes(&out, 0), seq(&[(32, 20), (26, 1)]));
    held(exactly_once(&cfg, &out));

    // Two workers: worker 0 keeps 370 = 11·32 + 18, worker 1 reads 1, 5, 7, 9: 296 = 9·32 + 8.
    // Rounds 0-8: 32,32; round 9: 32, 8; round 10: 32 (worker 1 ends); then 18.
    cfg.workers = 2;
    let out = run_all(&cfg);
    assert_eq!(sizes(&out, 0), seq(&[(32, 19), (8, 1), (32, 1), (18, 1)]));
    held(exactly_once(&cfg, &out));
    held(terminates(&cfg, &out));
}

#[test]
fn broken_read_loses_the_next_files_last_record_unless_fixed() {
    // File 3 is cut after 40 records: reading record 40 is a broken read, so the worker
    // opens file 4, whose record index starts at 1. File 4 then ends after 73 records.
    // 222 + 40 + 73 + 370 = 705 = 22·32 + 1.
    let mut cfg = hugectr_case(1);
    cfg.truncated_files.insert(3, 40);
    let out = run_all(&cfg);
    assert_eq!(sizes(&out, 0), seq(&[(32, 22), (1, 1)]));
    assert!(!out.epochs[0].delivered.contains(&RecordId::new(4, 73)));
    violated_with(
        exactly_once(&cfg, &out),
        "1 intact records were never delivered, e.g. (4, 73)",
    );

    let fixed = with_fix(cfg.clone(), ReaderFix::BrokenReadRecordIndex);
    let out = run_all(&fixed);
    assert_eq!(sizes(&out, 0), seq(&[(32, 22), (2, 1)]));
    held(exactly_once(&fixed, &out));

    // Without a checksum nothing notices the cut: 34 phantom records are delivered.
    let mut none = cfg;
    none.check = CheckKind::None;
    let out = run_all(&none);
    assert_eq!(sizes(&out, 0), seq(&[(32, 23), (4, 1)]));
    violated_with(
        exactly_once(&none, &out),
        "34 corrupt or unreadable records",
    );
}

#[test]
fn corrupt_records_are_skipped_with_check_sum_only() {
    let mut cfg = hugectr_case(2);
    cfg.corrupt_records = BTreeSet::from([RecordId::new(0, 5), RecordId::new(3, 73)]);
    let out = run_all(&cfg);
    // Each worker loses one record: 369 = 11·32 + 17.
    assert_eq!(sizes(&out, 0), seq(&[(32, 22), (17, 2)]));
    assert_eq!(out.epochs[0].skipped.len(), 2);
    held(exactly_once(&cfg, &out));

    cfg.check = CheckKind::None;
    let out = run_all(&cfg);
    assert_eq!(sizes(&out, 0), seq(&[(32, 22), (18, 2)]));
    violated_with(exactly_once(&cfg, &out), "2 corrupt or unreadable records");
}

/// Two files of 40 records, batch 32, the last 16 records corrupt: the third batch reads
/// 16 failing records, meets end-of-data and is published with size 0.
fn all_corrupt_tail(workers: u32) -> ReaderConfig {
    let mut cfg = ReaderConfig::new(workers, 2, 40, 32);
    cfg.consumer = Consumer::ReadBatch;
    cfg.epochs = 2;
    cfg.corrupt_records = (24..40).map(|r| RecordId::new(1, r)).collect();
    cfg
}

#[test]
fn an_all_corrupt_batch_collides_with_the_end_marker_unless_fixed() {
    let cfg = all_corrupt_tail(1);
    let out = run_all(&cfg);
    // Epoch 0 ends (the empty batch is taken as the end marker), but the worker never
    // reached its own end-of-data path, so the next set_source throws.
    assert_eq!(sizes(&out, 0), vec![32, 32]);
    assert_eq!(out.epochs[0].empty_batches, vec![0]);
    assert_eq!(
        out.outcome,
        Outcome::SetSourceRefused {
            epoch: 1,
            worker: 0
        }
    );
    violated_with(terminates(&cfg, &out), "epoch 1 cannot start");
    held(exactly_once(&cfg, &out));

    let fixed = with_fix(cfg, ReaderFix::EmptyBatchIsEndMarker);
    let out = run_all(&fixed);
    assert_eq!(out.outcome, Outcome::Finished);
    assert_eq!(sizes(&out, 0), vec![32, 32]);
    assert_eq!(sizes(&out, 1), vec![32, 32]);
    held(terminates(&fixed, &out));
    held(exactly_once(&fixed, &out));
}

#[test]
fn ten_unopenable_files_in_a_row_hang_the_collector_unless_fixed() {
    let mut cfg = ReaderConfig::new(1, 20, 10, 8);
    cfg.consumer = Consumer::ReadBatch;
    // Nine in a row are survivable: files 0-4 and 14-19 give 110 = 13·8 + 6.
    cfg.broken_files = (5..14).collect();
    let out = run_all(&cfg);
    assert_eq!(sizes(&out, 0), seq(&[(8, 13), (6, 1)]));
    held(terminates(&cfg, &out));

    // Ten: after file 4 the open retries 5..=14 and the thread dies holding 2 records.
    cfg.broken_files = (5..15).collect();
    let out = run_all(&cfg);
    assert_eq!(sizes(&out, 0), seq(&[(8, 6)]));
    assert_eq!(out.epochs[0].lost.len(), 2);
    assert!(matches!(out.outcome, Outcome::Hang { epoch: 0, .. }));
    violated_with(
        terminates(&cfg, &out),
        "worker 0 has exited: 10 files in a row could not be opened (the last was file 14)",
    );

    let fixed = with_fix(cfg, ReaderFix::WorkerFailureIsEndOfData);
    let out = run_all(&fixed);
    assert_eq!(out.outcome, Outcome::Finished);
    assert_eq!(sizes(&out, 0), seq(&[(8, 6), (2, 1)]));
    held(terminates(&fixed, &out));
    // Files 15-19 were never reached: the fix ends the hang, not the data loss.
    violated_with(
        exactly_once(&fixed, &out),
        "50 intact records were never delivered",
    );
}

#[test]
fn a_dead_worker_stalls_the_others_in_round_robin() {
    // Worker 0 of 2 reads the even files; ten even files in a row (10..=28) cannot be opened.
    let mut cfg = ReaderConfig::new(2, 30, 10, 8);
    cfg.consumer = Consumer::ReadBatch;
    cfg.broken_files = (10..30).step_by(2).collect();
    let out = run_all(&cfg);
    // Worker 0 read 50 records (6 batches, then died with 2); worker 1 keeps going only as
    // far as round 6, where the collector waits on worker 0 forever.
    assert_eq!(sizes(&out, 0), seq(&[(8, 12)]));
    let Outcome::Hang { blocked, .. } = &out.outcome else {
        panic!("expected a hang, got {:?}", out.outcome);
    };
    assert!(blocked[2].contains("the collector waits for worker 0's buffer to be ReadyForRead"));
    assert!(terminates(&cfg, &out).is_violated());

    let fixed = with_fix(cfg, ReaderFix::WorkerFailureIsEndOfData);
    let out = run_all(&fixed);
    assert_eq!(out.outcome, Outcome::Finished);
    // Worker 1 has 150 = 18·8 + 6. Round 6: worker 0's remainder of 2, then worker 1's
    // seventh batch; worker 0 then ends and worker 1 gives its other 11 batches and 6.
    assert_eq!(sizes(&out, 0), seq(&[(8, 12), (2, 1), (8, 12), (6, 1)]));
}

#[test]
fn ten_bad_headers_in_a_row_end_the_worker() {
    let mut cfg = ReaderConfig::new(1, 20, 10, 8);
    cfg.consumer = Consumer::ReadBatch;
    cfg.bad_header_files = (3..13).collect();
    let out = run_all(&cfg);
    assert!(matches!(out.outcome, Outcome::Hang { .. }));
    violated_with(
        terminates(&cfg, &out),
        "10 files in a row had a header that did not match",
    );

    cfg.bad_header_files = (3..12).collect();
    let out = run_all(&cfg);
    // Files 0-2 and 12-19: 110 = 13·8 + 6.
    assert_eq!(sizes(&out, 0), seq(&[(8, 13), (6, 1)]));
    held(exactly_once(&cfg, &out));
}

#[test]
fn each_node_keeps_its_dense_slice_but_reads_everything() {
    let mut cfg = hugectr_case(4);
    cfg.nodes = 2;
    cfg.node = 1;
    let out = run_all(&cfg);
    assert_eq!(sizes(&out, 0), seq(&[(32, 18), (20, 2), (32, 2), (30, 2)]));
    // Node 1 keeps positions 16..32 of each batch: 16 per full batch, 4 of a 20, 14 of a 30.
    assert_eq!(out.epochs[0].dense_kept.len(), 20 * 16 + 2 * 4 + 2 * 14);
    held(exactly_once(&cfg, &out));
}

fn faulty_config(workers: u32, seed_bits: u32, fixes: bool) -> ReaderConfig {
    let mut cfg = ReaderConfig::new(workers, 10, 37, 16);
    cfg.consumer = Consumer::ReadBatch;
    cfg.epochs = 2;
    if seed_bits & 1 != 0 {
        cfg.broken_files.insert(seed_bits % 10);
    }
    if seed_bits & 2 != 0 {
        cfg.truncated_files.insert((seed_bits / 3) % 10, 20);
    }
    if seed_bits & 4 != 0 {
        cfg.corrupt_records
            .insert(RecordId::new(seed_bits % 10, seed_bits % 37));
    }
    if fixes {
        cfg.fixes = <ReaderFix as strum::VariantArray>::VARIANTS
            .iter()
            .copied()
            .collect();
    }
    cfg
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever the interleaving, the buffers follow the protocol and the output equals the
    /// round-robin schedule's.
    #[test]
    fn buffer_protocol_holds_under_any_schedule(
        workers in 1u32..=5,
        faults in 0u32..64,
        fixes in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let cfg = faulty_config(workers, faults, fixes);
        let reference = run_rr(&cfg);
        let out = run(&cfg, &mut SeededScheduler::new(seed)).unwrap();
        prop_assert_eq!(buffer_protocol(&out.events), Verdict::Held);
        prop_assert_eq!(&out.epochs, &reference.epochs);
        if fixes {
            prop_assert_eq!(terminates(&cfg, &out), Verdict::Held);
        }
    }
}

#[test]
fn in_repeat_mode_the_fixed_worker_failure_ends_the_data_and_the_trainer_waits() {
    // Two workers in repeat mode; worker 0's files 0, 2, …, 18 cannot be opened, so its ten
    // open retries run out at once. With the fix it sends its end marker; worker 1 keeps
    // wrapping round its own files, and the collector skips the ended worker 0.
    let mut cfg = ReaderConfig::new(2, 20, 10, 8);
    cfg.consumer = Consumer::ReadBatch;
    cfg.repeat = true;
    cfg.repeat_batches = 30;
    cfg.broken_files = (0..20).step_by(2).collect();
    let fixed = with_fix(cfg.clone(), ReaderFix::WorkerFailureIsEndOfData);
    let out = run_all(&fixed);
    assert_eq!(out.outcome, Outcome::Finished);
    assert_eq!(sizes(&out, 0), seq(&[(8, 30)]));

    // Both workers' files broken: every worker ends, so the end marker reaches the trainer.
    // Repeat mode has no `set_source`: the loop asks for the next batch, which never comes.
    let mut all_broken = fixed;
    all_broken.broken_files = (0..20).collect();
    // Which worker gives up first depends on the schedule; the hang does not.
    let out = run_rr(&all_broken);
    let Outcome::Hang { blocked, .. } = &out.outcome else {
        panic!("expected a hang, got {:?}", out.outcome);
    };
    assert_eq!(
        blocked.last().map(String::as_str),
        Some("the trainer waits for the broadcast buffer to be ReadyForRead (it is ReadyForWrite)")
    );
    assert!(terminates(&all_broken, &out).is_violated());
}
