//! A reader worker thread: HugeCTR's `DataReaderWorker::read_a_batch` over simulated files,
//! then the hand-off of the batch through the worker's own buffer.

use std::fmt;

use super::buffer::{ActorId, BufferId, BufferState, Buffers};
use super::config::{ReaderConfig, ReaderFix};
use super::files::{Dataset, FileSource, Header, OpenResult, RecordId, RecordRead, OPEN_TRIES_MAX};

/// Why a worker thread ended: HugeCTR lets these exceptions escape `read_a_batch`, and the
/// thread function logs them and returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum WorkerFailure {
    /// Ten files in a row could not be opened (the checker's `next_source`).
    OpenRetriesExhausted {
        /// The last file tried.
        last_file: u32,
    },
    /// Ten opened files in a row had a header that did not match (`read_new_file`).
    HeaderRetriesExhausted,
    /// In repeat mode, a whole pass over the files gave no intact record (every one fails
    /// its checksum or every file breaks at once): HugeCTR's worker would read in circles
    /// forever without publishing. The model stops the thread there, so the run stays
    /// bounded; for the collector it is the same as a thread that never publishes again.
    NoIntactRecord,
}

impl fmt::Display for WorkerFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorkerFailure::OpenRetriesExhausted { last_file } => write!(
                f,
                "{OPEN_TRIES_MAX} files in a row could not be opened (the last was file {last_file})"
            ),
            WorkerFailure::NoIntactRecord => f.write_str(
                "a whole pass over the files gave no intact record, so the thread reads in circles forever",
            ),
            WorkerFailure::HeaderRetriesExhausted => write!(
                f,
                "{OPEN_TRIES_MAX} files in a row had a header that did not match"
            ),
        }
    }
}

/// Why reading stopped short of a full batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    EndOfData,
    Failed(WorkerFailure),
}

/// What one `read_a_batch` produced before it touches the buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Produced {
    Batch(Vec<RecordId>),
    EndMarker,
    Died(WorkerFailure),
}

/// What a worker did while reading one batch, for the run's output and for costs later.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadReport {
    /// Record reads attempted (each parses a whole record: the node reads every sample).
    pub records_parsed: u32,
    /// Opens attempted, failed ones included.
    pub opens_tried: u32,
    /// Records whose checksum failed.
    pub skipped: Vec<RecordId>,
    /// The batch ended at end-of-data with no record: published as size 0, it collides with
    /// the end marker.
    pub empty_batch_published: bool,
    /// The thread ended with this failure.
    pub failed: Option<WorkerFailure>,
    /// Records read into the batch that the failure threw away.
    pub lost: Vec<RecordId>,
}

/// Where a worker thread is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkerPc {
    /// About to call `read_a_batch` (reads files; touches no buffer).
    Read,
    /// Waiting to claim its buffer (`ReadyForWrite` → `Writing`) for a batch or end marker.
    Claim {
        /// The batch; empty for an end marker.
        records: Vec<RecordId>,
        /// Whether this is the end-of-data path (sets `is_eof`, then waits to be recycled).
        end_marker: bool,
    },
    /// Owns its buffer; next it fills it and stores `ReadyForRead`.
    Publish {
        /// The batch; empty for an end marker.
        records: Vec<RecordId>,
        /// Whether this is the end-of-data path.
        end_marker: bool,
    },
    /// Published its end marker; spins until `set_source` makes its buffer `ReadyForWrite`.
    AwaitRecycle,
    /// The thread has ended.
    Dead(WorkerFailure),
}

/// What one worker step did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkerAction {
    /// Read a batch's worth of records.
    ReadBatch(ReadReport),
    /// Claimed its buffer.
    Claimed,
    /// Published a batch of this size (0: an end marker or an empty batch).
    Published {
        /// Records in the batch.
        size: u32,
    },
    /// Saw its buffer recycled and goes back to reading.
    Recycled,
}

/// One reader worker: its file source, the file it is in, and its program counter.
#[derive(Debug, Clone)]
pub struct Worker {
    id: u32,
    source: FileSource,
    header: Option<Header>,
    record_index: u32,
    is_eof: bool,
    /// Under the failure fix: the retries ran out, so every later read is end-of-data.
    gave_up: bool,
    /// Record reads since the last intact one (see `WorkerFailure::NoIntactRecord`).
    reads_since_intact: u64,
    pc: WorkerPc,
}

impl Worker {
    /// Worker `id` of `cfg.workers`, with a fresh source, about to read.
    pub fn new(id: u32, cfg: &ReaderConfig) -> Self {
        Worker {
            id,
            source: FileSource::new(id, cfg.workers, cfg.repeat),
            header: None,
            record_index: 0,
            is_eof: false,
            gave_up: false,
            reads_since_intact: 0,
            pc: WorkerPc::Read,
        }
    }

    /// Where the thread is.
    pub fn pc(&self) -> &WorkerPc {
        &self.pc
    }

    /// HugeCTR's `is_eof_`: set when the end marker is published, cleared by `set_source`.
    pub fn is_eof(&self) -> bool {
        self.is_eof
    }

    fn buffer(&self) -> BufferId {
        BufferId::Worker(self.id)
    }

    /// `set_source` for this worker: a new source from the list's start and a fresh checker;
    /// HugeCTR refuses (returns `false` here) unless the worker is at end-of-data.
    pub fn set_source(&mut self, cfg: &ReaderConfig, bufs: &mut Buffers) -> bool {
        if !self.is_eof {
            return false;
        }
        self.source = FileSource::new(self.id, cfg.workers, cfg.repeat);
        self.header = None;
        self.record_index = 0;
        self.is_eof = false;
        self.gave_up = false;
        self.reads_since_intact = 0;
        // HugeCTR stores `ReadyForWrite` unconditionally; the log shows the state it left.
        bufs.store(self.buffer(), ActorId::Trainer, BufferState::ReadyForWrite);
        true
    }

    /// Whether the next step can make progress (a spinning or dead thread cannot).
    pub fn enabled(&self, bufs: &Buffers) -> bool {
        let free = bufs.state(self.buffer()) == BufferState::ReadyForWrite;
        match self.pc {
            WorkerPc::Read | WorkerPc::Publish { .. } => true,
            WorkerPc::Claim { .. } | WorkerPc::AwaitRecycle => free,
            WorkerPc::Dead(_) => false,
        }
    }

    /// Runs the thread to its next buffer interaction (or through one).
    pub fn step(&mut self, ds: &Dataset, cfg: &ReaderConfig, bufs: &mut Buffers) -> WorkerAction {
        assert!(
            self.enabled(bufs),
            "worker {} stepped while blocked",
            self.id
        );
        let me = ActorId::Worker(self.id);
        match std::mem::replace(&mut self.pc, WorkerPc::Read) {
            WorkerPc::Read => {
                let mut report = ReadReport::default();
                self.pc = match self.read_a_batch(ds, cfg, &mut report) {
                    Produced::Batch(records) => WorkerPc::Claim {
                        records,
                        end_marker: false,
                    },
                    Produced::EndMarker => WorkerPc::Claim {
                        records: Vec::new(),
                        end_marker: true,
                    },
                    Produced::Died(failure) => WorkerPc::Dead(failure),
                };
                WorkerAction::ReadBatch(report)
            }
            WorkerPc::Claim {
                records,
                end_marker,
            } => {
                // `wait_until_h2d_ready`: the only way a worker takes its buffer.
                let claimed = bufs.cas(
                    self.buffer(),
                    me,
                    BufferState::ReadyForWrite,
                    BufferState::Writing,
                );
                assert!(claimed, "enabled() promised a free buffer");
                self.pc = WorkerPc::Publish {
                    records,
                    end_marker,
                };
                WorkerAction::Claimed
            }
            WorkerPc::Publish {
                records,
                end_marker,
            } => self.publish(records, end_marker, bufs),
            WorkerPc::AwaitRecycle => WorkerAction::Recycled,
            WorkerPc::Dead(_) => unreachable!("a dead worker is never enabled"),
        }
    }

    fn publish(
        &mut self,
        records: Vec<RecordId>,
        end_marker: bool,
        bufs: &mut Buffers,
    ) -> WorkerAction {
        assert!(
            !end_marker || records.is_empty(),
            "an end marker carries no record"
        );
        let size = u32::try_from(records.len()).expect("batch size fits u32");
        bufs.put_records(self.buffer(), records);
        if end_marker {
            self.is_eof = true;
        }
        bufs.store(
            self.buffer(),
            ActorId::Worker(self.id),
            BufferState::ReadyForRead,
        );
        // After its end marker HugeCTR's worker spins until its buffer is recycled.
        self.pc = if end_marker {
            WorkerPc::AwaitRecycle
        } else {
            WorkerPc::Read
        };
        WorkerAction::Published { size }
    }

    /// `read_a_batch` up to the hand-off: open a file if none is open (end-of-data here means
    /// the end marker), then read until the batch is full or the data ends.
    fn read_a_batch(
        &mut self,
        ds: &Dataset,
        cfg: &ReaderConfig,
        report: &mut ReadReport,
    ) -> Produced {
        if self.gave_up {
            return Produced::EndMarker;
        }
        if self.source.open_file().is_none() {
            match self.read_new_file(ds, cfg, report) {
                Ok(()) => {}
                Err(Stop::EndOfData) => return Produced::EndMarker,
                Err(Stop::Failed(failure)) => {
                    return self.on_failure(failure, Vec::new(), cfg, report)
                }
            }
        }
        let mut records = Vec::with_capacity(cfg.batch_size as usize);
        while records.len() < cfg.batch_size as usize {
            match self.read_one(ds, cfg, &mut records, report) {
                Ok(()) => {}
                Err(Stop::EndOfData) => return self.short_batch(records, cfg, report),
                Err(Stop::Failed(failure)) => {
                    return self.on_failure(failure, records, cfg, report)
                }
            }
        }
        Produced::Batch(records)
    }

    /// One pass of HugeCTR's batch loop body: read a record; a checksum failure skips it and
    /// stays in the file, a broken read opens the next file; then count the record and open
    /// the next file once the header's count is reached.
    fn read_one(
        &mut self,
        ds: &Dataset,
        cfg: &ReaderConfig,
        records: &mut Vec<RecordId>,
        report: &mut ReadReport,
    ) -> Result<(), Stop> {
        report.records_parsed += 1;
        self.reads_since_intact += 1;
        // More reads than records and files together without an intact one is a full pass
        // that found nothing; only repeat mode gets here (otherwise the data ends).
        if self.reads_since_intact > cfg.records_total() + u64::from(cfg.files) {
            return Err(Stop::Failed(WorkerFailure::NoIntactRecord));
        }
        let mut reopened = false;
        match self.source.read_record(ds, cfg.check) {
            RecordRead::Ok(id) => {
                self.reads_since_intact = 0;
                records.push(id)
            }
            RecordRead::ChecksumFailed(id) => report.skipped.push(id),
            RecordRead::Broken => {
                self.read_new_file(ds, cfg, report)?;
                reopened = true;
            }
        }
        // HugeCTR increments the index even after the broken-read recovery just reset it to
        // 0 for the new file, so that file ends one record early: its last record is lost.
        if !(reopened && cfg.has_fix(ReaderFix::BrokenReadRecordIndex)) {
            self.record_index += 1;
        }
        let header = self.header.expect("a file is open, so its header was read");
        if self.record_index >= header.number_of_records {
            self.read_new_file(ds, cfg, report)?;
        }
        Ok(())
    }

    /// `read_new_file`: up to ten times, move to the next file (the checker itself retries
    /// failed opens up to ten times) and accept it if its header matches.
    fn read_new_file(
        &mut self,
        ds: &Dataset,
        cfg: &ReaderConfig,
        report: &mut ReadReport,
    ) -> Result<(), Stop> {
        if self.gave_up {
            return Err(Stop::EndOfData);
        }
        for _ in 0..OPEN_TRIES_MAX {
            let file = self.checker_next_source(ds, report)?;
            let header = ds.header(file);
            self.header = Some(header);
            self.record_index = 0;
            let check_matches = header.error_check == cfg.check.header_code();
            if !check_matches || header.slot_num != cfg.slot_num {
                continue;
            }
            return Ok(());
        }
        Err(Stop::Failed(WorkerFailure::HeaderRetriesExhausted))
    }

    /// The checker's `next_source`: retry failed opens, each retry on the next file.
    fn checker_next_source(&mut self, ds: &Dataset, report: &mut ReadReport) -> Result<u32, Stop> {
        let mut last_file = 0;
        for _ in 0..OPEN_TRIES_MAX {
            report.opens_tried += 1;
            match self.source.next_source(ds) {
                OpenResult::Opened(file) => return Ok(file),
                OpenResult::EndOfData => return Err(Stop::EndOfData),
                OpenResult::CannotOpen(file) => last_file = file,
            }
        }
        Err(Stop::Failed(WorkerFailure::OpenRetriesExhausted {
            last_file,
        }))
    }

    /// End-of-data inside the batch loop: HugeCTR publishes what was read, even nothing.
    fn short_batch(
        &mut self,
        records: Vec<RecordId>,
        cfg: &ReaderConfig,
        report: &mut ReadReport,
    ) -> Produced {
        if records.is_empty() {
            if cfg.has_fix(ReaderFix::EmptyBatchIsEndMarker) {
                return Produced::EndMarker;
            }
            report.empty_batch_published = true;
        }
        Produced::Batch(records)
    }

    /// Retries ran out: HugeCTR's thread dies with the batch in hand; the fix ends the
    /// worker's data instead.
    fn on_failure(
        &mut self,
        failure: WorkerFailure,
        records: Vec<RecordId>,
        cfg: &ReaderConfig,
        report: &mut ReadReport,
    ) -> Produced {
        report.failed = Some(failure);
        if !cfg.has_fix(ReaderFix::WorkerFailureIsEndOfData) {
            report.lost = records;
            return Produced::Died(failure);
        }
        self.gave_up = true;
        if records.is_empty() {
            Produced::EndMarker
        } else {
            Produced::Batch(records)
        }
    }
}
