//! Simulated data files and HugeCTR's `FileSource`: which file a worker opens next, what its
//! header says, and what reading each record yields under each check type.

use std::collections::BTreeSet;
use std::fmt;

use super::config::{CheckKind, ReaderConfig};

/// How many times HugeCTR retries an open, and re-opens after a bad header, before giving up
/// (`MAX_TRY` in the checker's `next_source` and in the worker's `read_new_file`).
pub const OPEN_TRIES_MAX: u32 = 10;

/// One record: its file and its position in that file.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct RecordId {
    /// File index in the file list.
    pub file: u32,
    /// Record position inside the file.
    pub record: u32,
}

impl RecordId {
    /// The record at `record` in `file`.
    pub fn new(file: u32, record: u32) -> Self {
        RecordId { file, record }
    }
}

impl fmt::Display for RecordId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({}, {})", self.file, self.record)
    }
}

/// A data file's header, field for field as HugeCTR's `DataSetHeader` lays it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// 1 for check sum, 0 for none.
    pub error_check: u32,
    /// Records the file announces.
    pub number_of_records: u32,
    /// Label floats per record.
    pub label_dim: u32,
    /// Dense floats per record.
    pub dense_dim: u32,
    /// Sparse slots per record.
    pub slot_num: u32,
}

/// What one attempt to read the record under a worker's cursor yields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordRead {
    /// The record's bytes were read (and, with `check = sum`, its sum matched). Under
    /// `check = none` this may be a corrupt or missing record that nothing noticed.
    Ok(RecordId),
    /// The record's sum did not match: its bytes are consumed, the worker stays in the file.
    ChecksumFailed(RecordId),
    /// The file ended before the record (a broken read): the worker must open the next file.
    Broken,
}

/// Result of the source's `next_source`: HugeCTR's `Success`, `EndOfFile`, `FileCannotOpen`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenResult {
    /// A file is open.
    Opened(u32),
    /// No file is left (never in repeat mode).
    EndOfData,
    /// The chosen file could not be opened; the source already moved past it.
    CannotOpen(u32),
}

/// The simulated dataset: every file's header, its length on disk, its corrupt records.
#[derive(Debug, Clone)]
pub struct Dataset {
    cfg_check: CheckKind,
    files: u32,
    records_per_file: u32,
    slot_num: u32,
    broken: BTreeSet<u32>,
    bad_header: BTreeSet<u32>,
    corrupt: BTreeSet<RecordId>,
    /// Records on disk per file, `records_per_file` unless truncated.
    on_disk: Vec<u32>,
}

impl Dataset {
    /// The files `cfg` describes (the configuration must be valid).
    pub fn new(cfg: &ReaderConfig) -> Self {
        let on_disk = (0..cfg.files)
            .map(|f| {
                cfg.truncated_files
                    .get(&f)
                    .copied()
                    .unwrap_or(cfg.records_per_file)
            })
            .collect();
        Dataset {
            cfg_check: cfg.check,
            files: cfg.files,
            records_per_file: cfg.records_per_file,
            slot_num: cfg.slot_num,
            broken: cfg.broken_files.clone(),
            bad_header: cfg.bad_header_files.clone(),
            corrupt: cfg.corrupt_records.clone(),
            on_disk,
        }
    }

    /// Files in the list.
    pub fn files(&self) -> u32 {
        self.files
    }

    /// Whether `file` can be opened.
    pub fn can_open(&self, file: u32) -> bool {
        assert!(file < self.files, "file {file} is outside the list");
        !self.broken.contains(&file)
    }

    /// The header of an openable file. A bad-header file was written for another slot count.
    pub fn header(&self, file: u32) -> Header {
        assert!(self.can_open(file), "file {file} cannot be opened");
        let slot_num = if self.bad_header.contains(&file) {
            self.slot_num + 1
        } else {
            self.slot_num
        };
        // Label and dense widths are those of HugeCTR's unit test; the model never varies
        // them because a mismatch there is a configuration error, not a data fault.
        Header {
            error_check: self.cfg_check.header_code(),
            number_of_records: self.records_per_file,
            label_dim: 2,
            dense_dim: 64,
            slot_num,
        }
    }

    /// Reads the record at `cursor` in `file` under `check`. `CheckSum` turns a read past
    /// the end into a broken read and a wrong sum into a failure; `CheckNone` ignores the
    /// source's errors, so both come back as ordinary records.
    pub fn read_record(&self, file: u32, cursor: u32, check: CheckKind) -> RecordRead {
        assert!(
            cursor < self.records_per_file,
            "cursor past the header's count"
        );
        let id = RecordId::new(file, cursor);
        let past_end = cursor >= self.on_disk[file as usize];
        match check {
            CheckKind::Sum if past_end => RecordRead::Broken,
            CheckKind::Sum if self.corrupt.contains(&id) => RecordRead::ChecksumFailed(id),
            CheckKind::Sum | CheckKind::None => RecordRead::Ok(id),
        }
    }

    /// Whether a record can be read as written: its file opens with a matching header, the
    /// record is on disk and not corrupt.
    pub fn is_intact(&self, id: RecordId) -> bool {
        id.file < self.files
            && id.record < self.on_disk[id.file as usize]
            && !self.broken.contains(&id.file)
            && !self.bad_header.contains(&id.file)
            && !self.corrupt.contains(&id)
    }

    /// Every intact record, sorted.
    pub fn intact_records(&self) -> BTreeSet<RecordId> {
        (0..self.files)
            .flat_map(|f| (0..self.records_per_file).map(move |r| RecordId::new(f, r)))
            .filter(|&id| self.is_intact(id))
            .collect()
    }
}

/// HugeCTR's `FileSource` for one worker: worker `offset` of `stride` takes file ids
/// `offset, offset + stride, …`; repeat mode wraps them modulo the file count, otherwise the
/// first id past the list is end-of-data. The counter advances on every attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSource {
    offset: u32,
    stride: u32,
    counter: u64,
    repeat: bool,
    open: Option<OpenFile>,
}

/// The file a source has open and the next record position in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenFile {
    /// File index.
    pub file: u32,
    /// Next record position to read.
    pub cursor: u32,
}

impl FileSource {
    /// The source for worker `offset` of `stride` workers.
    pub fn new(offset: u32, stride: u32, repeat: bool) -> Self {
        assert!(offset < stride, "worker {offset} of {stride}");
        FileSource {
            offset,
            stride,
            counter: 0,
            repeat,
            open: None,
        }
    }

    /// The file id the next `next_source` call asks the list for, if any.
    pub fn peek_file(&self, files: u32) -> Option<u32> {
        let id = u64::from(self.offset) + self.counter * u64::from(self.stride);
        if self.repeat {
            Some((id % u64::from(files)) as u32)
        } else {
            u32::try_from(id).ok().filter(|&id| id < files)
        }
    }

    /// Closes the open file and opens the next one in this worker's sequence.
    pub fn next_source(&mut self, ds: &Dataset) -> OpenResult {
        self.open = None;
        let file = self.peek_file(ds.files());
        self.counter += 1;
        let Some(file) = file else {
            return OpenResult::EndOfData;
        };
        if !ds.can_open(file) {
            return OpenResult::CannotOpen(file);
        }
        self.open = Some(OpenFile { file, cursor: 0 });
        OpenResult::Opened(file)
    }

    /// The open file, if any.
    pub fn open_file(&self) -> Option<OpenFile> {
        self.open
    }

    /// Reads the record under the cursor and moves the cursor past it.
    pub fn read_record(&mut self, ds: &Dataset, check: CheckKind) -> RecordRead {
        let open = self
            .open
            .as_mut()
            .expect("a record is read only from an open file");
        let read = ds.read_record(open.file, open.cursor, check);
        open.cursor += 1;
        read
    }

    /// The first `n` file ids this worker's source asks for (whether or not they open).
    pub fn file_sequence(
        worker: u32,
        workers: u32,
        files: u32,
        repeat: bool,
        n: usize,
    ) -> Vec<u32> {
        let mut source = FileSource::new(worker, workers, repeat);
        let mut ids = Vec::new();
        while ids.len() < n {
            let Some(id) = source.peek_file(files) else {
                break;
            };
            ids.push(id);
            source.counter += 1;
        }
        ids
    }
}
