//! The job's side of the reader pipeline: each worker group's trainer on a node takes one
//! reader batch per step from its own `DataReader` (a [`NodeFeed`]), waits for it when the
//! pipeline is behind, starts the next epoch at end of data, and records what happened.
//!
//! A restarted worker group builds a new `DataReader`, as a new HugeCTR process would: it
//! reads from the first file again, in epoch 0. A reader is named in the trace by the
//! agent's `pid` and the group's rendezvous `round`. A `set_source` that HugeCTR refuses
//! throws `IllegalCall` through `Model::fit`, which does not catch it: the training process
//! exits with 1, which the agent sees as a failed worker.

use crate::reader::feed::{record_runs, FeedCosts, WorkerNote};
use crate::reader::{Delivery, NodeFeed, ReaderConfig, RecordId, SetSourceError};
use crate::scenario::model::{ReaderSection, Scenario};
use crate::sim_time::{SimDuration, SimInstant};
use crate::trace::EventKind;
use crate::world::NodeEnv;
use std::collections::BTreeSet;

/// Most epochs one step may run through without a trained batch: past it, `Model::train`
/// is dropping every batch (all are incomplete) and the trainer is reported stuck rather
/// than looping over epochs forever.
pub const EMPTY_EPOCHS_PER_STEP_MAX: u32 = 3;

// A scenario the format accepts is one the reader model accepts: its records fit the model.
const _: () =
    assert!(crate::scenario::limits::READER_RECORDS_MAX <= crate::reader::config::RECORDS_MAX);

/// The reader's settings for the scenario's `[reader]` section as the job runs it (see
/// [`ReaderConfig::as_a_job_runs_it`]): the section's plain values handed to the reader,
/// which builds the rest. No mutant is on: the job switches on the ones the command line
/// names.
pub fn reader_config(r: &ReaderSection) -> ReaderConfig {
    // The format keeps `records_per_file` (so every record index and cut) and `batch_size`
    // within u32: the saturation never bites a validated scenario.
    let narrow = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
    let mut cfg = ReaderConfig::new(
        r.workers,
        r.files,
        narrow(r.records_per_file),
        narrow(r.batch_size),
    );
    cfg.repeat = r.repeat;
    cfg.check = r.check;
    cfg.broken_files = r.broken_files.iter().copied().collect();
    cfg.corrupt_records = r
        .corrupt_records
        .iter()
        .map(|&(file, record)| RecordId::new(file, narrow(record)))
        .collect();
    cfg.truncated_files = r
        .truncated_files
        .iter()
        .map(|&(file, kept)| (file, narrow(kept)))
        .collect();
    cfg.fixes = r.fixes.iter().copied().collect();
    cfg.as_a_job_runs_it()
}

/// The pipeline's costs for a scenario: its reader settings and the node's GPUs.
fn feed_costs(s: &Scenario) -> Option<FeedCosts> {
    let r = s.reader.as_ref()?;
    Some(FeedCosts {
        parse_time: r.parse_time,
        record_size_bytes: r.record_size_bytes,
        h2d_bits_per_sec: s.cluster.gpu.h2d_bits_per_sec,
        d2d_bits_per_sec: s.cluster.gpu.d2d_bits_per_sec,
        gpus: s.cluster.gpus_per_node,
        gpus_total: s.cluster.nodes.saturating_mul(s.cluster.gpus_per_node),
    })
}

/// What the trainer got for one step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Taken {
    /// A batch of `size` records, after waiting `stall` for it (dropped batches and new
    /// epochs on the way included).
    Batch { stall: SimDuration, size: u32 },
    /// No batch will ever come: the trainer waits forever.
    Hang,
    /// The training script raised an exception nothing catches: the process exits with 1.
    Failed {
        /// The exception, in one sentence.
        reason: String,
    },
}

/// How long the trainer waited for a batch it asked for at `asked_at`: the reader hands a
/// batch over no earlier than it was asked for.
fn waited(ready_at: SimInstant, asked_at: SimInstant) -> SimDuration {
    assert!(
        ready_at >= asked_at,
        "a reader batch was ready at {} us, before it was asked for at {} us",
        ready_at.as_us(),
        asked_at.as_us()
    );
    ready_at.since(asked_at)
}

/// One worker group's reader on one node.
#[derive(Debug)]
pub struct ReaderFeed {
    feed: NodeFeed,
    /// HugeCTR's repeat mode: end of data starts no new epoch.
    repeat: bool,
    pid: u32,
    round: u64,
}

impl ReaderFeed {
    /// A new `DataReader` for the group of `round`; `Ok(None)` when the scenario has no
    /// `[reader]`. `Err` is the exception HugeCTR's `DataReader` constructor raises in the
    /// training script, for a batch that does not split evenly over every GPU of every node
    /// (the scenario's other reader settings were validated with the file). `mutants` are
    /// the reader's planted bugs the command line switched on.
    pub fn start(
        env: &NodeEnv,
        round: u64,
        mutants: &BTreeSet<crate::mutant::Mutant>,
    ) -> Result<Option<ReaderFeed>, String> {
        let scenario = env.scenario();
        let Some(reader) = scenario.reader.as_ref() else {
            return Ok(None);
        };
        let cluster = &scenario.cluster;
        let gpus_total = u64::from(cluster.nodes) * u64::from(cluster.gpus_per_node);
        if !reader.batch_size.is_multiple_of(gpus_total.max(1)) {
            return Err(format!(
                "HugeCTR DataReader: batch_size {} does not split evenly over the {gpus_total} \
                 GPUs of the job ({} nodes × {} gpus_per_node)",
                reader.batch_size, cluster.nodes, cluster.gpus_per_node
            ));
        }
        let mut cfg = reader_config(reader);
        cfg.mutants = mutants.clone();
        let Some(costs) = feed_costs(scenario) else {
            return Ok(None);
        };
        // The pipeline's clock counts whole microseconds.
        let start = crate::world::time::now_whole_us();
        let feed =
            NodeFeed::new(&cfg, costs, start).map_err(|e| format!("HugeCTR DataReader: {e}"))?;
        Ok(Some(ReaderFeed {
            feed,
            repeat: reader.repeat,
            pid: env.pid,
            round,
        }))
    }

    /// The trainer asks for its next batch at `now` (a whole microsecond, the pipeline's
    /// clock); copies to each of the node's GPUs run as slow as that GPU is now (a
    /// `gpu_slow` window stretches them too).
    pub fn take_batch(&mut self, env: &NodeEnv, now: SimInstant) -> Taken {
        let gpus = env.scenario().cluster.gpus_per_node;
        let slowdowns: Vec<f64> = env.gpus_now(gpus).iter().map(|g| g.slowdown).collect();
        let mut at = now;
        let mut empty_epochs = 0;
        loop {
            let delivery = self.feed.next_batch(at.cut_to_whole_us(), &slowdowns);
            self.flush(env);
            match delivery {
                Delivery::Batch {
                    ready_at,
                    epoch,
                    records,
                    trained,
                } => {
                    let size = records.len() as u32;
                    env.record(EventKind::ReaderBatch {
                        pid: self.pid,
                        round: self.round,
                        epoch,
                        size,
                        records: record_runs(&records),
                        trained,
                        stall_us: waited(ready_at, at).as_us(),
                    });
                    if trained {
                        let stall = waited(ready_at, now);
                        return Taken::Batch { stall, size };
                    }
                    at = ready_at;
                }
                Delivery::EndOfData { ready_at, epoch } => {
                    env.record(EventKind::ReaderEndOfData {
                        pid: self.pid,
                        round: self.round,
                        epoch,
                    });
                    empty_epochs += 1;
                    if empty_epochs > EMPTY_EPOCHS_PER_STEP_MAX {
                        let reason = format!(
                            "{EMPTY_EPOCHS_PER_STEP_MAX} epochs in a row gave no full batch: Model::train drops them all"
                        );
                        return self.hang(env, epoch, reason);
                    }
                    if self.repeat {
                        // No `set_source` in repeat mode: the trainer asks for the next batch.
                        at = ready_at;
                        continue;
                    }
                    let started = self.feed.set_source(ready_at);
                    self.flush(env);
                    match started {
                        Ok(_) => {}
                        Err(SetSourceError::Refused { worker }) => {
                            let reason = SetSourceError::Refused { worker }.to_string();
                            return Taken::Failed { reason };
                        }
                        Err(e @ SetSourceError::NotAtEndOfData) => {
                            unreachable!("set_source right after the end marker: {e}")
                        }
                    }
                    at = ready_at;
                }
                Delivery::Hang { epoch, reason } => return self.hang(env, epoch, reason),
            }
        }
    }

    fn hang(&self, env: &NodeEnv, epoch: u32, reason: String) -> Taken {
        env.record(EventKind::ReaderHang {
            pid: self.pid,
            round: self.round,
            epoch,
            reason,
        });
        Taken::Hang
    }

    /// Records the buffer changes and worker notes since the last flush.
    fn flush(&mut self, env: &NodeEnv) {
        for event in self.feed.take_buffer_events() {
            env.record(EventKind::ReaderBuffer {
                pid: self.pid,
                round: self.round,
                event,
            });
        }
        for note in self.feed.take_worker_notes() {
            env.record(match note {
                WorkerNote::Skipped {
                    worker,
                    epoch,
                    records,
                } => EventKind::ReaderSkipped {
                    pid: self.pid,
                    round: self.round,
                    epoch,
                    worker,
                    records: record_runs(&records),
                },
                WorkerNote::Failed {
                    worker,
                    epoch,
                    failure,
                    lost,
                } => EventKind::ReaderWorkerFailed {
                    pid: self.pid,
                    round: self.round,
                    epoch,
                    worker,
                    reason: failure.to_string(),
                    lost,
                },
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_ready_when_asked_costs_no_wait() {
        let us = SimInstant::from_us;
        assert_eq!(waited(us(500), us(500)), SimDuration::ZERO);
        assert_eq!(waited(us(700), us(500)), SimDuration::from_us(200));
    }

    #[test]
    #[should_panic(
        expected = "a reader batch was ready at 400 us, before it was asked for at 500 us"
    )]
    fn a_batch_ready_before_it_was_asked_for_stops_the_run() {
        waited(SimInstant::from_us(400), SimInstant::from_us(500));
    }
}
