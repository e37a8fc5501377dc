//! The validated scenario: plain data with every default filled in and every unit resolved.
//!
//! The parser (`scenario::parse`) turns a TOML file into this. Everything downstream reads only
//! this type, so a value here is already known to be in range: times as `SimDuration` and
//! `SimInstant`, sizes in bytes, bandwidths in bits per second, nodes by their index.

pub use super::node::{NodeIndex, NodeRole};
pub use crate::record_check::CheckKind;
use crate::sim_time::SimDuration;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

mod faults;
mod signal;
pub use faults::{
    AfterFailure, FailureKind, FailureProcess, Fault, FaultKind, FaultName, ROLE_STANDIN_NODE,
};
pub use signal::{Signal, SIGNALS_HANDLED_BY_DEFAULT};

/// A whole scenario after validation.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    pub name: String,
    pub description: String,
    /// The file's seed; `--seed` replaces it for a run.
    pub seed: u64,
    /// Simulated time budget; reaching it ends the run with outcome `timed_out`.
    pub time_limit: SimDuration,
    /// The run ends when the job has ended (every agent exited, every node taken down
    /// brought back or replaced), and faults due after that are not applied; otherwise a
    /// `start` or `restart` still to come keeps the run going. On by default with a failure
    /// process, which draws its faults to the end of the time limit.
    pub end_with_job: bool,
    pub cluster: Cluster,
    pub network: Network,
    /// `[rendezvous]`: torch's `DynamicRendezvousHandler` settings as the file gives them;
    /// every agent's handler builds its settings from them (run id [`RUN_ID`]).
    pub rendezvous: RendezvousConfig,
    pub agent: AgentConfig,
    pub job: JobConfig,
    /// The `[reader]` table when present: every node's trainer then takes one reader batch
    /// per step.
    pub reader: Option<ReaderSection>,
    /// Faults in the order of their time (stable for equal times: file order).
    pub faults: Vec<Fault>,
    /// `[failures]`: faults drawn from the run's seed at a rate per node-day, added to
    /// `faults` before the run (see `scenario::failure_draw`).
    pub failures: Option<FailureProcess>,
    pub expect: Expect,
    /// `[torch]`: every node runs torch's own torchrun from this Python instead of the
    /// Rust model; `None` runs the model.
    pub torch: Option<TorchSection>,
}

/// `[cluster]`: which nodes exist and where the store lives.
#[derive(Debug, Clone, PartialEq)]
pub struct Cluster {
    /// Nodes `node-0 .. node-{nodes-1}` start at t = 0.
    pub nodes: u32,
    /// Nodes `node-{nodes} ..` exist but start only on a `start` fault.
    pub spare_nodes: u32,
    pub gpus_per_node: u32,
    pub gpu: GpuProfile,
    pub store: StoreHost,
    /// Initial wall-clock offset per node index, in microseconds (may be negative). Signed
    /// microseconds rather than a time type: an offset is added to a node's own clock
    /// reading, which is signed microseconds too (`sim_time::clock_reading_us`).
    pub clock_skew_us: BTreeMap<u32, i64>,
    /// Linux's `net.ipv4.tcp_retries2` on every host (15 by default).
    pub tcp_retries2: u32,
    /// The CPU time of store requests (the server's, and the rendezvous clients' encoding of
    /// the state) relative to torch 2.15 on the calibration machine; 0 makes the store free.
    pub store_cost_scale: f64,
    /// Every node runs on one machine, as `conformance/driver.py`'s localhost runs do: the
    /// workers' gloo devices publish the machine's one address, so which side of a gloo pair
    /// connects is decided by port numbers rather than by the nodes' addresses.
    pub one_machine: bool,
}

impl Cluster {
    /// All nodes, started or spare.
    pub fn total_nodes(&self) -> u32 {
        self.nodes + self.spare_nodes
    }
}

/// Where the c10d store runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreHost {
    /// Inside the agent process of this node index; it dies with that agent.
    Node(u32),
    /// On a node of its own that no fault names except `store_crash`.
    Dedicated,
}

/// A GPU model: a built-in profile or a `[gpu_profile]` table.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuProfile {
    pub name: String,
    pub memory_bytes: u64,
    pub h2d_bits_per_sec: u64,
    pub d2d_bits_per_sec: u64,
    /// Relative compute speed; h100 is 1.0, a slower GPU is below 1.
    pub compute_speed: f64,
}

/// `[network]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Network {
    pub latency_min: SimDuration,
    pub latency_max: SimDuration,
    pub loss: f64,
    pub bandwidth_bits_per_sec: u64,
    /// The c10d store host's link, which every agent's requests and replies cross.
    pub store_host_bandwidth_bits_per_sec: u64,
}

/// `[agent]`: `LocalElasticAgent` settings.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentConfig {
    pub nproc_per_node: u32,
    pub max_restarts: u32,
    pub monitor_interval: SimDuration,
    pub exit_barrier_timeout: SimDuration,
    /// From an agent process's launch until it creates its rendezvous handler: starting
    /// Python and importing torch (about 4 s for each of 3 or 4 agents starting together
    /// on the 2-core conformance machine).
    pub start_time: SimDuration,
    /// Each agent process adds a uniform draw below this to `start_time` (from the run's
    /// seed): processes starting together do not finish their imports together.
    pub start_time_jitter: SimDuration,
    /// torch's TCPStore sharing: the rank-0 agent hosts the workers' store and publishes
    /// its address; `false` is `TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`.
    pub share_store: bool,
    /// `TORCH_ELASTIC_WORKER_IDENTICAL=1`: every agent computes its workers' ranks from its
    /// group rank and `nproc_per_node`, with no role-info exchange through the store.
    pub worker_identical: bool,
    /// torchrun's `--signals-to-handle`: the signals its agent catches, to stop its workers
    /// with the same signal; any other signal's default action ends the agent alone (its
    /// workers, in sessions of their own, run on). In the order of `Signal`, each once.
    pub signals_to_handle: Vec<Signal>,
    /// Opt-in named deviations from torch's agent behaviour.
    pub fixes: Vec<crate::fixes::AgentFix>,
    /// What relaunches torchrun on a node when its agent process exits by itself (a
    /// Kubernetes `restartPolicy`, a job controller); `Never` is torchrun alone.
    pub relaunch: Relaunch,
    /// The wait before the first relaunch of a node; it doubles with each relaunch of that
    /// node, up to [`RELAUNCH_DELAY_CAP`] (the kubelet's crash-loop back-off).
    pub relaunch_delay: SimDuration,
    /// Relaunches per node at most.
    pub relaunch_max: u32,
}

/// The longest wait between relaunches: the kubelet's crash-loop back-off cap, 5 minutes.
pub const RELAUNCH_DELAY_CAP: SimDuration = SimDuration::from_us(300_000_000);

/// `agent.relaunch`: which of an agent process's own exits relaunch torchrun.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    serde::Deserialize,
    schemars::JsonSchema,
    serde::Serialize,
    strum::Display,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Relaunch {
    /// Nothing relaunches it (`restartPolicy: Never`).
    #[default]
    Never,
    /// An exit other than SUCCEEDED relaunches it (`OnFailure`).
    OnFailure,
    /// Every exit relaunches it (`Always`).
    Always,
}

/// `[job]`: the training job.
#[derive(Debug, Clone, PartialEq)]
pub struct JobConfig {
    pub steps: u64,
    pub step_time: SimDuration,
    pub model_size_bytes: u64,
    /// Steps between checkpoints; a restarted group resumes from the last one.
    pub checkpoint_every: u64,
    /// The process group's timeout: a collective whose peer is gone fails after it.
    pub collective_timeout: SimDuration,
    /// From a worker process's spawn until it calls `init_process_group`: starting Python
    /// and importing torch and the training script (4 to 7 s on the conformance machine).
    pub worker_start_time: SimDuration,
    /// Each node's workers add a uniform draw below this to `worker_start_time`, per
    /// worker group (from the run's seed).
    pub worker_start_jitter: SimDuration,
    /// From a worker's uncaught error or normal end until its process has exited: the
    /// interpreter's teardown. Its agent sees the failure (`pcontext.wait`), and its peers'
    /// connections to it close, only then. A worker killed by a signal exits at once.
    pub worker_exit_time: SimDuration,
    /// How long group rank 0 writes each checkpoint while training waits (a blocking
    /// `torch.save`); the checkpoint counts once written.
    pub checkpoint_save_time: SimDuration,
    /// How long a restarted group's workers load the checkpoint before their first step.
    pub checkpoint_load_time: SimDuration,
    /// The process group's backend, which decides how a collective meets a dead peer.
    pub backend: Backend,
    /// NCCL only: how long after a peer's processes died on a live host (their connections
    /// closed) the watchdog aborts the worker; `None` waits for `collective_timeout`.
    pub nccl_peer_exit_detection: Option<SimDuration>,
    pub dataset: Dataset,
    pub sampler: SamplerConfig,
    /// When the training script calls the sampler's `set_epoch`.
    pub set_epoch: SetEpoch,
    /// The signal the training script checkpoints on: a handler that asks the group's rank 0
    /// to write a checkpoint after the step in progress, and training goes on.
    pub checkpoint_on_signal: Option<Signal>,
    /// The `init_method` the training script passes to `init_process_group`.
    pub init_method: InitMethod,
    /// A port the training script picks itself for its process group's store, instead of
    /// the `MASTER_PORT` torchrun gave it: set in `MASTER_PORT` before `env://`, or written
    /// in its `tcp://` address.
    pub script_master_port: Option<u16>,
    /// `[job.eval]`: an evaluation pass after training, when the scenario has one.
    pub eval: Option<EvalConfig>,
}

/// `job.set_epoch`: where the training script calls `sampler.set_epoch`. Without a call the
/// sampler keeps the epoch it had, and a shuffled sampler deals that epoch's order again.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    serde::Deserialize,
    schemars::JsonSchema,
    serde::Serialize,
    strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum SetEpoch {
    /// `set_epoch(epoch)` before each epoch's first batch, as torch's documentation says.
    #[default]
    Start,
    /// Never called: every epoch deals epoch 0's order.
    Never,
    /// `set_epoch(epoch)` after the epoch's last batch, with the number of the epoch just
    /// finished: each epoch deals the previous one's order, and a worker group's first epoch
    /// deals epoch 0's (its sampler is new).
    Late,
}

impl SetEpoch {
    /// The epoch a group's sampler deals for data epoch `epoch`, the group having begun
    /// training at data epoch `first_epoch` with a new sampler (set to epoch 0).
    pub fn sampler_epoch(self, epoch: u64, first_epoch: u64) -> u64 {
        match self {
            SetEpoch::Start => epoch,
            SetEpoch::Never => 0,
            SetEpoch::Late if epoch <= first_epoch => 0,
            SetEpoch::Late => epoch - 1,
        }
    }
}

/// `job.init_method`: how the training script tells `init_process_group` where its
/// process group's store is.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    serde::Deserialize,
    schemars::JsonSchema,
    serde::Serialize,
    strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum InitMethod {
    /// `env://`: the address in `MASTER_ADDR` and `MASTER_PORT`.
    #[default]
    Env,
    /// `tcp://MASTER_ADDR:port`, with `job.script_master_port` (or torchrun's
    /// `MASTER_PORT` when the script sets none).
    Tcp,
}

/// `[job.eval]`: one evaluation pass after training over a `DistributedSampler` with
/// shuffling off, as evaluation scripts build it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EvalConfig {
    /// Samples in the evaluation set.
    pub len: u64,
    /// The eval sampler's `drop_last`: cut the tail instead of padding to an even split.
    pub drop_last: bool,
}

/// `[rendezvous]` as plain values: torch's `RendezvousSettings` and `RendezvousTimeout`
/// as simulated spans, the c10d backend's `cas_backoff_max_seconds`, and the opt-in fixes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RendezvousConfig {
    /// Fewest participants a round may complete with.
    pub min_nodes: u32,
    /// Most participants a round admits; reaching it completes the round at once.
    pub max_nodes: u32,
    pub join_timeout: SimDuration,
    pub last_call_timeout: SimDuration,
    pub close_timeout: SimDuration,
    pub heartbeat_timeout: SimDuration,
    pub keep_alive_interval: SimDuration,
    pub keep_alive_max_attempt: u32,
    pub cas_backoff_max: SimDuration,
    /// The c10d backend's `read_timeout` (`--rdzv-conf read_timeout=N`, 60 s by default): the
    /// rendezvous store client's timeout, for its connect and for every blocking read.
    pub read_timeout: SimDuration,
    /// Opt-in named deviations from torch; empty reproduces torch exactly.
    pub fixes: std::collections::BTreeSet<crate::fixes::RendezvousFix>,
}

/// The run id (torchrun's `--rdzv-id`) every agent of a scenario uses.
pub const RUN_ID: &str = "trainsim";

/// The `job.nccl_peer_exit_detection` that never notices a closed peer: the watchdog's
/// timeout decides, as every NCCL death did before the detection was modelled.
pub const NEVER: &str = "never";

/// `job.backend`: the collective library the workers' process group uses.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    serde::Deserialize,
    schemars::JsonSchema,
    serde::Serialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// A collective whose peer's processes died fails when NCCL reports the closed
    /// connection (`nccl_peer_exit_detection`); one whose peer is silent fails after the
    /// process-group timeout (NCCL's watchdog).
    #[default]
    Nccl,
    /// A dead peer's connections reset and the collective fails at once; a silent peer
    /// costs the timeout (gloo on CPU).
    Gloo,
}

/// `[job.dataset]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    pub len: u64,
    pub complexity: Complexity,
}

/// How the per-sample complexity is drawn.
#[derive(Debug, Clone, PartialEq)]
pub enum Complexity {
    Constant { value: u64 },
    Uniform { min: u64, max: u64 },
    Lognormal { median: f64, sigma: f64 },
    List { values: Vec<u64> },
}

/// `[job.sampler]`.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplerConfig {
    pub kind: SamplerKind,
    pub shuffle: bool,
    pub seed: i64,
    pub drop_last: bool,
    pub random_level: f64,
    pub batch_size: u64,
}

/// `job.sampler.kind`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema, serde::Serialize,
)]
#[serde(rename_all = "snake_case")]
pub enum SamplerKind {
    Distributed,
    LoadBalancing,
}

/// `[reader]`: the HugeCTR-style pipeline feeding every node, as the file gives it. The
/// reader's own settings (`reader::ReaderConfig`) are built from these values by the job
/// that hands them over (`job::reader_feed::reader_config`).
#[derive(Debug, Clone, PartialEq)]
pub struct ReaderSection {
    pub workers: u32,
    pub files: u32,
    pub records_per_file: u64,
    pub batch_size: u64,
    pub repeat: bool,
    pub check: CheckKind,
    pub broken_files: Vec<u32>,
    /// `(file, record)` pairs failing their checksum.
    pub corrupt_records: Vec<(u32, u64)>,
    /// `(file, records on disk)`: files cut short, so reading past the cut is a broken read
    /// that sends the worker to its next file.
    pub truncated_files: Vec<(u32, u64)>,
    /// Time one reader worker thread takes to parse one record.
    pub parse_time: SimDuration,
    /// Bytes of one record as copied to the GPUs.
    pub record_size_bytes: u64,
    /// Opt-in named deviations from HugeCTR.
    pub fixes: Vec<crate::fixes::ReaderFix>,
}

/// `[torch]`: which torch a run's control plane is, with its paths exactly as the file
/// writes them. Relative paths are the file's directory's (see [`TorchSection::resolved`]);
/// the command line resolves them, since only it knows where the file is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TorchSection {
    /// The Python interpreter with torch installed (a venv's `bin/python`).
    pub python: String,
    /// A torch checkout (the directory holding `torch/`) whose elastic Python files are laid
    /// over the installed torch's.
    pub elastic_src: Option<String>,
}

impl TorchSection {
    /// The interpreter and the checkout, each relative path taken as relative to `dir`
    /// (the scenario file's directory), so a file names a venv beside it and runs from any
    /// working directory; absolute paths stay as written. A bare command name (`python3`,
    /// no `/`) stays bare, to be found on `PATH` as a shell finds it.
    pub fn resolved(&self, dir: &Path) -> (PathBuf, Option<PathBuf>) {
        let python = match self.python.contains('/') {
            true => dir.join(&self.python),
            false => PathBuf::from(&self.python),
        };
        (python, self.elastic_src.as_deref().map(|src| dir.join(src)))
    }
}

/// `[expect]`: what must hold besides the invariants.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Expect {
    pub outcome: Option<Outcome>,
    /// Inclusive bounds on the number of completed rounds.
    pub rounds: Option<(u64, u64)>,
    /// Counted restarts per node index.
    pub restarts: BTreeMap<u32, u32>,
    pub final_world_size: Option<u32>,
    /// The last completed round's participants (node indices), in rank order.
    pub final_participants: Option<Vec<u32>>,
    /// Invariant names this scenario must violate.
    pub violations: Vec<String>,
}

/// How a run ended, named as the report and `expect.outcome` spell it.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    strum::IntoStaticStr,
    serde::Deserialize,
    schemars::JsonSchema,
    serde::Serialize,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Outcome {
    Succeeded,
    Failed,
    TimedOut,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The name of node index `i`: `node-i`.
pub fn node_name(i: u32) -> String {
    NodeIndex(i).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use strum::VariantArray;

    #[test]
    fn fault_names_are_the_scenario_files_kinds() {
        for name in FaultName::VARIANTS {
            assert_eq!(name.to_string().parse::<FaultName>(), Ok(*name));
            let json = serde_json::to_string(name).unwrap();
            assert_eq!(json, format!("\"{name}\""));
        }
        assert_eq!(FaultKind::ClogLink { from: 0, to: 1 }.name(), "clog_link");
        assert!("Kill".parse::<FaultName>().is_err());
    }
}
