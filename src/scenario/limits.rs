//! Bounds on every scenario value, so a hostile or mistaken file is an error, never an
//! out-of-memory or a run that cannot end. Names carry their unit last.

use crate::sim_time::SimDuration;

/// Largest scenario file `load` reads; bigger files are refused before parsing.
pub const FILE_BYTES_MAX: u64 = 64 * 1024 * 1024;
/// Longest `name`, in characters.
pub const NAME_CHARS_MAX: usize = 200;
/// Longest `description`, in characters.
pub const DESCRIPTION_CHARS_MAX: usize = 10_000;
/// Largest `seed`: TOML integers are signed 64-bit.
pub const SEED_MAX: u64 = i64::MAX as u64;
/// Longest simulated time budget: 7 days.
pub const TIME_LIMIT_US_MAX: u64 = SimDuration::from_secs(7 * 24 * 3_600).as_us();
/// Most nodes in a cluster, started and spare together.
pub const NODES_MAX: u32 = 4096;
/// Most GPUs on one node.
pub const GPUS_PER_NODE_MAX: u32 = 64;
/// Most worker processes on one node.
pub const NPROC_PER_NODE_MAX: u32 = 256;
/// Largest clock offset, either way: 1 day.
pub const CLOCK_SKEW_US_MAX: u64 = SimDuration::from_secs(24 * 3_600).as_us();
/// Linux's default `net.ipv4.tcp_retries2`, and the most the format takes (at 60, TCP gives
/// up on a silent peer after about 93 minutes).
pub const TCP_RETRIES2_DEFAULT: u32 = 15;
/// TCPStore's default timeout, the c10d backend's `read_timeout` unless `[rendezvous]
/// read_timeout` says otherwise.
pub const READ_TIMEOUT_DEFAULT: SimDuration = SimDuration::from_secs(60);
pub const TCP_RETRIES2_MAX: u32 = 60;
/// From a worker's uncaught error (or normal end) until its process has exited, measured on
/// torch 2.15.0 with gloo on the conformance machine (`conformance/measure_exit.py`, see
/// docs/fidelity.md "Worker exit").
pub const WORKER_EXIT_TIME_DEFAULT: SimDuration = SimDuration::from_ms(1_100);
/// torchrun's default rendezvous port, where the c10d store listens on its host.
pub const RENDEZVOUS_STORE_PORT: u16 = 29400;
/// The highest port a training script may pick for its process group
/// (`job.script_master_port`): below Linux's ephemeral range (32768 up), where the simulated
/// hosts hand out free ports.
pub const SCRIPT_MASTER_PORT_MAX: u16 = 32767;
/// The most `[cluster] store_cost_scale` takes: a store a hundred times slower than the
/// calibration machine's.
pub const STORE_COST_SCALE_MAX: f64 = 100.0;
/// Longest one-way network latency: 60 s.
pub const LATENCY_US_MAX: u64 = SimDuration::from_secs(60).as_us();
/// Fastest link or GPU transfer: 100 Tbps.
pub const BANDWIDTH_BITS_PER_SEC_MAX: u64 = 100_000_000_000_000;
/// Largest GPU memory: 16 TiB.
pub const GPU_MEMORY_BYTES_MAX: u64 = 16 << 40;
/// Largest relative GPU compute speed (h100 = 1).
pub const GPU_COMPUTE_SPEED_MAX: f64 = 1_000.0;
/// Longest custom GPU profile name, in characters.
pub const GPU_NAME_CHARS_MAX: usize = 64;
/// Longest `[torch]` path, in characters: Linux's `PATH_MAX`.
pub const TORCH_PATH_CHARS_MAX: usize = 4096;
/// Longest timeout or interval of the rendezvous and the agent: 1 day.
pub const TIMEOUT_US_MAX: u64 = SimDuration::from_secs(24 * 3_600).as_us();
/// Most keep-alive attempts before a node is considered dead.
pub const KEEP_ALIVE_MAX_ATTEMPT_MAX: u32 = 1_000;
/// Most entries in `rendezvous.fixes`.
pub const FIXES_MAX: usize = 64;
/// Largest `agent.max_restarts`.
pub const MAX_RESTARTS_MAX: u32 = 10_000;
/// Most optimizer steps in a job.
pub const STEPS_MAX: u64 = 10_000_000;
/// Longest step time at complexity 1: 1 hour.
pub const STEP_TIME_US_MAX: u64 = SimDuration::from_secs(3_600).as_us();
/// Largest model (all-reduced bytes per step): 16 TiB.
pub const MODEL_SIZE_BYTES_MAX: u64 = 16 << 40;
/// Most samples in the dataset: 2^25 (33.5 M). The samplers materialise a permutation of the
/// whole dataset every epoch, as torch does, so this bounds a run's memory (268 MB of indices).
pub const DATASET_LEN_MAX: u64 = 1 << 25;
/// torch's default process-group timeout for NCCL (`default_pg_nccl_timeout`, 10 minutes).
pub const COLLECTIVE_TIMEOUT_US_DEFAULT: u64 = 600_000_000;
/// torch's default process-group timeout for every other backend, gloo's included
/// (`default_pg_timeout`, 30 minutes).
pub const GLOO_COLLECTIVE_TIMEOUT_US_DEFAULT: u64 = 1_800_000_000;
/// How long NCCL takes to abort a worker whose peer's processes died and closed their
/// connections: pytorch#150916 logs the survivor's `ncclRemoteError` 1.39 s after the dead
/// node's agent sent its worker SIGTERM (NCCL 2.21.5; the socket transport and torch's
/// watchdog poll are the same in the NCCL 2.30.7 torch 2.15 bundles).
pub const NCCL_PEER_EXIT_DETECTION_US_DEFAULT: u64 = 1_400_000;
/// Most entries in a `dist = "list"` complexity (it must equal the dataset length).
pub const COMPLEXITY_LIST_LEN_MAX: u64 = 1 << 20;
/// Largest per-sample complexity.
pub const COMPLEXITY_MAX: u64 = 1_000_000;
/// Largest lognormal sigma.
pub const COMPLEXITY_SIGMA_MAX: f64 = 10.0;
/// Largest per-rank (sampler) or global (reader) batch.
pub const BATCH_SIZE_MAX: u64 = 1 << 20;
/// Most reader worker threads per node.
pub const READER_WORKERS_MAX: u32 = 256;
/// Most reader files.
pub const READER_FILES_MAX: u32 = 100_000;
/// Most records in one reader file (the reader model counts them in 32 bits).
pub const READER_RECORDS_PER_FILE_MAX: u64 = u32::MAX as u64;
/// Most records over all reader files: the reader model's bound, which keeps a run's
/// delivery logs bounded.
pub const READER_RECORDS_MAX: u64 = 10_000_000;
/// Longest per-record parse time of a reader worker.
pub const READER_PARSE_TIME_US_MAX: u64 = 1_000_000;
/// Largest reader record.
pub const READER_RECORD_SIZE_BYTES_MAX: u64 = 1 << 30;
/// Most entries in `reader.corrupt_records`.
pub const READER_CORRUPT_RECORDS_MAX: usize = 1 << 20;
/// Most faults in one scenario.
pub const FAULTS_MAX: usize = 10_000;
/// Largest GPU slowdown factor of a `gpu_slow` fault.
pub const GPU_SLOW_FACTOR_MAX: f64 = 1_000.0;
/// Largest `expect.rounds` bound.
pub const ROUNDS_MAX: u64 = 1_000_000;
/// Largest `expect.restarts` count for one node.
pub const EXPECT_RESTARTS_MAX: u32 = MAX_RESTARTS_MAX;
