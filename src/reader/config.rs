//! The reader model's settings: dataset shape, faults planted in the files, the consumer,
//! budgets, and the named opt-in fixes, validated in one place.

use std::collections::{BTreeMap, BTreeSet};

use super::files::RecordId;

pub use crate::fixes::ReaderFix;
pub use crate::record_check::CheckKind;

/// Most reader worker threads.
pub const WORKERS_MAX: u32 = 1024;
/// Most records over all files, so a run's logs stay bounded. The scenario format's own
/// limit may not exceed it (the job asserts so where it hands the reader its section).
pub const RECORDS_MAX: u64 = 10_000_000;
/// Most epochs a run may ask for.
pub const EPOCHS_MAX: u32 = 1000;

/// Who takes batches off the broadcast buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum Consumer {
    /// `Model::train`: drops batches smaller than the full batch size unless fixed.
    ModelTrain,
    /// `read_a_batch_to_device` as HugeCTR's data reader unit test calls it: keeps all.
    ReadBatch,
}

/// Why a configuration cannot be run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A count that must be at least 1 is 0.
    #[error("`{0}` must be at least 1")]
    Zero(&'static str),
    /// More workers than files: HugeCTR's `FileSource` refuses this from v3.4.1 on.
    #[error("{workers} workers need at least as many files, got {files}")]
    MoreWorkersThanFiles {
        /// Worker threads asked for.
        workers: u32,
        /// Files in the list.
        files: u32,
    },
    /// A size over one of the model's limits.
    #[error("`{name}` is {value}, over the limit of {max}")]
    OverLimit {
        /// The setting.
        name: &'static str,
        /// Its value.
        value: u64,
        /// The limit.
        max: u64,
    },
    /// A file or record that the dataset does not have.
    #[error("{0} is outside the dataset")]
    OutOfRange(String),
    /// The batch cannot be split evenly over every GPU of every node (HugeCTR's
    /// `DataReader` refuses it), or `node` is not one of the nodes.
    #[error(
        "batch_size {batch_size} does not split evenly over {nodes} nodes × {gpus_per_node} GPUs (node {node})"
    )]
    BadSlice {
        /// Global batch size.
        batch_size: u32,
        /// Nodes sharing each batch.
        nodes: u32,
        /// GPUs of each node.
        gpus_per_node: u32,
        /// This node.
        node: u32,
    },
}

/// Everything one run of the reader model needs; plain data, validated by [`Self::validate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReaderConfig {
    /// Reader worker threads on the node (`num_workers`).
    pub workers: u32,
    /// Files in the file list.
    pub files: u32,
    /// Records each file's header announces.
    pub records_per_file: u32,
    /// Global batch size.
    pub batch_size: u32,
    /// Repeat mode: file ids wrap and the data never ends.
    pub repeat: bool,
    /// How records are checked.
    pub check: CheckKind,
    /// Slots per record, written in every header and expected by the reader.
    pub slot_num: u32,
    /// Files that cannot be opened.
    pub broken_files: BTreeSet<u32>,
    /// Records whose bytes are corrupt: they fail the checksum with `check = sum`.
    pub corrupt_records: BTreeSet<RecordId>,
    /// Files cut short: file → how many records are on disk before the cut. Reading past the
    /// cut is a broken read (with `check = sum`) that sends the worker to its next file.
    pub truncated_files: BTreeMap<u32, u32>,
    /// Files whose header does not match the reader (wrong slot count).
    pub bad_header_files: BTreeSet<u32>,
    /// Nodes sharing each batch; each keeps only its dense slice.
    pub nodes: u32,
    /// GPUs of each node: every batch must split evenly over all GPUs of all nodes.
    pub gpus_per_node: u32,
    /// This node's index among `nodes`.
    pub node: u32,
    /// Who consumes the broadcast batches.
    pub consumer: Consumer,
    /// Epochs to run in epoch mode (each after a `set_source`).
    pub epochs: u32,
    /// In repeat mode, batches the consumer takes before the run stops.
    pub repeat_batches: u32,
    /// Step budget: reaching it ends the run as `StepLimit`, never an endless loop.
    pub steps_max: u64,
    /// Opt-in deviations from HugeCTR; empty is HugeCTR.
    pub fixes: BTreeSet<ReaderFix>,
    /// Planted bugs switched on (only `Mutant::ReaderDoublePublish` acts here); empty is
    /// HugeCTR.
    pub mutants: BTreeSet<crate::mutant::Mutant>,
}

impl ReaderConfig {
    /// A fault-free epoch-mode configuration with HugeCTR's defaults elsewhere: check sum,
    /// one node, `Model::train` as consumer, one epoch.
    pub fn new(workers: u32, files: u32, records_per_file: u32, batch_size: u32) -> Self {
        ReaderConfig {
            workers,
            files,
            records_per_file,
            batch_size,
            repeat: false,
            check: CheckKind::Sum,
            slot_num: 10,
            broken_files: BTreeSet::new(),
            corrupt_records: BTreeSet::new(),
            truncated_files: BTreeMap::new(),
            bad_header_files: BTreeSet::new(),
            nodes: 1,
            gpus_per_node: 1,
            node: 0,
            consumer: Consumer::ModelTrain,
            epochs: 1,
            repeat_batches: 100,
            steps_max: 10_000_000,
            fixes: BTreeSet::new(),
            mutants: BTreeSet::new(),
        }
    }

    /// This configuration as a training job runs it: every node reads all files (one node's
    /// view), `Model::train` consumes, epochs go on until the model's bound, and the run's
    /// own budgets never stop it early (the job's steps and time limit do).
    pub fn as_a_job_runs_it(self) -> Self {
        ReaderConfig {
            consumer: Consumer::ModelTrain,
            epochs: EPOCHS_MAX,
            repeat_batches: u32::MAX,
            steps_max: u64::MAX,
            ..self
        }
    }

    /// Whether the named fix is on.
    pub fn has_fix(&self, fix: ReaderFix) -> bool {
        self.fixes.contains(&fix)
    }

    /// Total records the headers announce.
    pub fn records_total(&self) -> u64 {
        u64::from(self.files) * u64::from(self.records_per_file)
    }

    /// The batch positions whose dense part this node keeps (HugeCTR's
    /// `batch_size_start_idx..batch_size_end_idx`, with one equal share per node).
    pub fn dense_slice(&self) -> std::ops::Range<u32> {
        let per_node = self.batch_size / self.nodes;
        self.node * per_node..(self.node + 1) * per_node
    }

    /// Checks every setting; a run is only built from a valid configuration.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (name, value) in [
            ("workers", self.workers),
            ("files", self.files),
            ("records_per_file", self.records_per_file),
            ("batch_size", self.batch_size),
            ("slot_num", self.slot_num),
            ("nodes", self.nodes),
            ("gpus_per_node", self.gpus_per_node),
            ("epochs", self.epochs),
            ("repeat_batches", self.repeat_batches),
        ] {
            if value == 0 {
                return Err(ConfigError::Zero(name));
            }
        }
        over("workers", self.workers.into(), WORKERS_MAX.into())?;
        over("records", self.records_total(), RECORDS_MAX)?;
        over("epochs", self.epochs.into(), EPOCHS_MAX.into())?;
        if self.workers > self.files {
            return Err(ConfigError::MoreWorkersThanFiles {
                workers: self.workers,
                files: self.files,
            });
        }
        let gpus_total = u64::from(self.nodes) * u64::from(self.gpus_per_node);
        if !u64::from(self.batch_size).is_multiple_of(gpus_total) || self.node >= self.nodes {
            return Err(ConfigError::BadSlice {
                batch_size: self.batch_size,
                nodes: self.nodes,
                gpus_per_node: self.gpus_per_node,
                node: self.node,
            });
        }
        self.validate_faults()
    }

    fn validate_faults(&self) -> Result<(), ConfigError> {
        let files = self
            .broken_files
            .iter()
            .chain(self.bad_header_files.iter())
            .chain(self.truncated_files.keys());
        if let Some(f) = files.into_iter().find(|&&f| f >= self.files) {
            return Err(ConfigError::OutOfRange(format!("file {f}")));
        }
        let bad_record = self
            .corrupt_records
            .iter()
            .find(|r| r.file >= self.files || r.record >= self.records_per_file);
        if let Some(r) = bad_record {
            return Err(ConfigError::OutOfRange(format!("record {r}")));
        }
        match self
            .truncated_files
            .iter()
            .find(|(_, &kept)| kept > self.records_per_file)
        {
            Some((f, kept)) => Err(ConfigError::OutOfRange(format!(
                "truncation of file {f} after {kept} records"
            ))),
            None => Ok(()),
        }
    }
}

fn over(name: &'static str, value: u64, max: u64) -> Result<(), ConfigError> {
    if value > max {
        return Err(ConfigError::OverLimit { name, value, max });
    }
    Ok(())
}
