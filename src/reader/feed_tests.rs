//! Tests of the timed feed: what each copy costs and who pays it, when a broadcast may
//! start, and `set_source` refusals.

use super::*;
use crate::reader::config::{Consumer, ReaderFix};
use crate::sim_time::SimInstant;

/// 1 µs to parse a record, 1 µs to copy one from host to device, 0.25 µs device to device;
/// two GPUs on the node, four in all (two nodes).
fn costs() -> FeedCosts {
    FeedCosts {
        parse_time: crate::sim_time::SimDuration::from_us(1),
        record_size_bytes: 1000,
        h2d_bits_per_sec: 8_000_000_000,
        d2d_bits_per_sec: 32_000_000_000,
        gpus: 2,
        gpus_total: 4,
    }
}

/// What a trainer saw over one epoch: per batch, when it asked and when it had the batch.
struct Epoch {
    sizes: Vec<usize>,
    asked_ready_us: Vec<(u64, u64)>,
}

impl Epoch {
    fn stall_us(&self) -> u64 {
        self.asked_ready_us.iter().map(|(a, r)| r - a).sum()
    }
}

/// Takes batches until the first end marker, computing `step_us(k)` after batch `k`.
fn epoch(
    cfg: &ReaderConfig,
    costs: FeedCosts,
    slowdowns: &[f64],
    step_us: impl Fn(usize) -> u64,
) -> Epoch {
    let mut feed = NodeFeed::new(cfg, costs, SimInstant::START).unwrap();
    let mut out = Epoch {
        sizes: Vec::new(),
        asked_ready_us: Vec::new(),
    };
    let mut now = 0;
    loop {
        match feed.next_batch(SimInstant::from_us(now), slowdowns) {
            Delivery::Batch {
                ready_at, records, ..
            } => {
                out.asked_ready_us.push((now, ready_at.as_us()));
                now = ready_at.as_us() + step_us(out.sizes.len());
                out.sizes.push(records.len());
            }
            Delivery::EndOfData { .. } => return out,
            Delivery::Hang { reason, .. } => panic!("hang: {reason}"),
        }
    }
}

fn read_batch(workers: u32, files: u32, records_per_file: u32, batch: u32) -> ReaderConfig {
    let mut cfg = ReaderConfig::new(workers, files, records_per_file, batch);
    cfg.consumer = Consumer::ReadBatch;
    cfg
}

#[test]
fn hugectrs_unit_test_case_through_the_feed() {
    let sizes = epoch(&read_batch(1, 10, 74, 32), costs(), &[], |_| 100).sizes;
    assert_eq!(sizes.len(), 24);
    assert!(sizes[..23].iter().all(|&s| s == 32));
    assert_eq!(sizes[23], 4);
}

#[test]
fn copies_cost_their_bandwidth_and_a_broadcast_one_slice() {
    // 10 records of 1000 B at 8 Gbps; twice as long on a GPU at half speed.
    assert_eq!(costs().h2d(10, 1.0).as_us(), 10);
    assert_eq!(costs().h2d(10, 2.0).as_us(), 20);
    // A batch of 16 over 4 GPUs: each GPU gets its slice of 4 records, all at once, so the
    // number of GPUs on the node does not matter, only the slowest of them.
    assert_eq!(costs().broadcast(16, 1.0).as_us(), 1);
    let eight_local = FeedCosts { gpus: 8, ..costs() };
    assert_eq!(eight_local.broadcast(16, 1.0).as_us(), 1);
    assert_eq!(costs().broadcast(16, 3.0).as_us(), 3);
    let one_gpu = FeedCosts {
        gpus_total: 1,
        ..costs()
    };
    assert_eq!(one_gpu.broadcast(16, 1.0).as_us(), 4);
}

#[test]
fn reading_and_worker_copies_overlap_compute_and_each_other() {
    let cfg = read_batch(2, 4, 64, 16);
    // A slow trainer waits only for the first batch: parse 16, copy 16, broadcast 1.
    let slow = epoch(&cfg, costs(), &[], |_| 10_000);
    assert_eq!(slow.stall_us(), 16 + 16 + 1);
    // A fast trainer waits on the workers: each needs 32 µs per batch of its own, and the
    // two copy at once, so a batch comes about every 16 µs, not every 32.
    let fast = epoch(&cfg, costs(), &[], |_| 1);
    let batches = fast.sizes.len() as u64;
    assert_eq!(batches, 16);
    let span_us = fast.asked_ready_us.last().unwrap().1;
    assert!(span_us >= 16 * (batches - 1), "span {span_us}");
    assert!(span_us < 20 * batches, "span {span_us}");
}

#[test]
fn each_worker_copies_to_gpu_w_mod_local_gpus() {
    // Workers 0 and 2 copy to GPU 0, worker 1 to GPU 1: a slow GPU 0 holds up two batches
    // of every three, a slow GPU 1 only one.
    let cfg = read_batch(3, 6, 32, 16);
    let healthy = epoch(&cfg, costs(), &[], |_| 1).stall_us();
    let slow_gpu0 = epoch(&cfg, costs(), &[4.0, 1.0], |_| 1).stall_us();
    let slow_gpu1 = epoch(&cfg, costs(), &[1.0, 4.0], |_| 1).stall_us();
    assert!(
        healthy < slow_gpu1 && slow_gpu1 < slow_gpu0,
        "healthy {healthy}, slow GPU 1 {slow_gpu1}, slow GPU 0 {slow_gpu0}"
    );
}

#[test]
fn a_broadcast_starts_no_earlier_than_the_trainer_took_the_last_batch() {
    // Device-to-device as slow as host-to-device: a broadcast of 16 takes 4 µs.
    let costs = FeedCosts {
        d2d_bits_per_sec: 8_000_000_000,
        ..costs()
    };
    let broadcast_us = costs.broadcast(16, 1.0).as_us();
    assert_eq!(broadcast_us, 4);
    let cfg = read_batch(2, 4, 64, 16);
    // The trainer computes slowly for five batches, then not at all: the buffers are full
    // when the speed changes, and from then on each batch waits for its own broadcast.
    let seen = epoch(&cfg, costs, &[], |k| if k < 5 { 1_000 } else { 0 });
    for (k, pair) in seen.asked_ready_us.windows(2).enumerate() {
        let ((_, took_us), (asked_us, ready_us)) = (pair[0], pair[1]);
        assert!(ready_us >= asked_us);
        assert!(
            ready_us >= took_us + broadcast_us,
            "batch {} was ready at {ready_us} us, the trainer took batch {k} at {took_us} us",
            k + 1
        );
    }
    // Right after the change, the trainer stalls for a broadcast on every batch.
    let (asked_us, ready_us) = seen.asked_ready_us[6];
    assert!(ready_us - asked_us >= broadcast_us);
}

/// One worker, two files of 40, batch 32, the last 16 records of file 1 corrupt: the third
/// batch reads nothing at end of data.
fn all_corrupt_tail() -> ReaderConfig {
    let mut cfg = read_batch(1, 2, 40, 32);
    cfg.epochs = 2;
    cfg.corrupt_records = (24..40).map(|r| RecordId::new(1, r)).collect();
    cfg
}

/// Takes batches until the end marker, then calls `set_source`.
fn set_source_after_one_epoch(cfg: &ReaderConfig) -> Result<u32, SetSourceError> {
    let mut feed = NodeFeed::new(cfg, costs(), SimInstant::START).unwrap();
    assert_eq!(
        feed.set_source(SimInstant::START),
        Err(SetSourceError::NotAtEndOfData)
    );
    loop {
        match feed.next_batch(SimInstant::START, &[]) {
            Delivery::Batch { .. } => {}
            Delivery::EndOfData { ready_at, .. } => return feed.set_source(ready_at),
            Delivery::Hang { reason, .. } => panic!("hang: {reason}"),
        }
    }
}

#[test]
fn a_refused_set_source_is_hugectrs_illegal_call() {
    let refused = set_source_after_one_epoch(&all_corrupt_tail());
    assert_eq!(refused, Err(SetSourceError::Refused { worker: 0 }));
    let reason = refused.unwrap_err().to_string();
    assert!(reason.contains("IllegalCall"), "{reason}");
    let mut fixed = all_corrupt_tail();
    fixed.fixes.insert(ReaderFix::EmptyBatchIsEndMarker);
    assert_eq!(set_source_after_one_epoch(&fixed), Ok(1));
}

#[test]
fn a_dead_worker_hangs_the_feed_and_runs_round_trip() {
    let mut cfg = ReaderConfig::new(1, 12, 4, 4);
    cfg.broken_files = (0..10).collect();
    let mut feed = NodeFeed::new(&cfg, costs(), SimInstant::START).unwrap();
    let delivery = feed.next_batch(SimInstant::START, &[]);
    assert!(matches!(delivery, Delivery::Hang { .. }));
    let records = [(0, 1), (0, 2), (0, 4), (1, 5)].map(|(f, r)| RecordId::new(f, r));
    let runs = record_runs(&records);
    assert_eq!(runs, vec![[0, 1, 2], [0, 4, 1], [1, 5, 1]]);
    assert!(expand_runs(&runs).eq(records));
}
