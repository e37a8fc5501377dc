//! The scenario file as written: serde types that mirror the TOML, every key optional so
//! defaults and "required" messages live in one place (`validate`). Unknown keys are denied;
//! quantities are `units` types, so a malformed one is refused here, at its span.

use super::model::{CheckKind, Outcome, SamplerKind};
use super::units::{Bandwidth, Duration, Offset, Size};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawScenario {
    pub name: Option<String>,
    pub description: Option<String>,
    pub seed: Option<u64>,
    pub time_limit: Option<Duration>,
    pub end_with_job: Option<bool>,
    pub cluster: Option<RawCluster>,
    pub network: Option<RawNetwork>,
    pub rendezvous: Option<RawRendezvous>,
    pub agent: Option<RawAgent>,
    pub job: Option<RawJob>,
    pub reader: Option<RawReader>,
    /// `[gpu_profile]`: the contract's place for a custom GPU (`[cluster.gpu_profile]` is an
    /// accepted alias).
    pub gpu_profile: Option<RawGpuProfile>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<RawFault>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failures: Option<RawFailures>,
    pub expect: Option<RawExpect>,
    /// Written after `[expect]` and only when present, so files without it are unchanged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub torch: Option<RawTorch>,
}

/// `[torch]`: run torch's own elastic code on every node instead of the Rust model.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawTorch {
    pub python: Option<String>,
    pub elastic_src: Option<String>,
}

/// `[failures]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawFailures {
    pub rate_per_node_day: Option<f64>,
    pub weibull_shape: Option<f64>,
    pub kinds: Option<std::collections::BTreeMap<super::model::FailureKind, f64>>,
    pub after: Option<super::model::AfterFailure>,
    pub repair_time: Option<Duration>,
    pub replace_delay: Option<Duration>,
    pub preemption_grace: Option<Duration>,
    pub from: Option<Duration>,
    pub until: Option<Duration>,
}

/// `[cluster]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawCluster {
    pub nodes: Option<u32>,
    pub spare_nodes: Option<u32>,
    pub gpus_per_node: Option<u32>,
    pub gpu: Option<String>,
    pub store: Option<String>,
    pub clock_skew: Option<BTreeMap<String, Offset>>,
    pub gpu_profile: Option<RawGpuProfile>,
    pub tcp_retries2: Option<u32>,
    pub store_cost_scale: Option<f64>,
    pub one_machine: Option<bool>,
}

/// `[gpu_profile]` (or `[cluster.gpu_profile]`): a GPU model of the user's own.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawGpuProfile {
    pub name: Option<String>,
    pub memory: Option<Size>,
    pub h2d_bandwidth: Option<Bandwidth>,
    pub d2d_bandwidth: Option<Bandwidth>,
    pub compute_speed: Option<f64>,
}

/// `[network]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawNetwork {
    pub latency: Option<Vec<Duration>>,
    pub loss: Option<f64>,
    pub bandwidth: Option<Bandwidth>,
    pub store_host_bandwidth: Option<Bandwidth>,
}

/// `[rendezvous]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawRendezvous {
    pub min_nodes: Option<u32>,
    pub max_nodes: Option<u32>,
    pub join_timeout: Option<Duration>,
    pub last_call_timeout: Option<Duration>,
    pub close_timeout: Option<Duration>,
    pub heartbeat_timeout: Option<Duration>,
    pub keep_alive_interval: Option<Duration>,
    pub keep_alive_max_attempt: Option<u32>,
    pub cas_backoff_max: Option<Duration>,
    pub read_timeout: Option<Duration>,
    pub fixes: Option<Vec<String>>,
}

/// `[agent]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawAgent {
    pub nproc_per_node: Option<u32>,
    pub max_restarts: Option<u32>,
    pub monitor_interval: Option<Duration>,
    pub exit_barrier_timeout: Option<Duration>,
    pub start_time: Option<Duration>,
    pub start_time_jitter: Option<Duration>,
    pub relaunch: Option<super::model::Relaunch>,
    pub relaunch_delay: Option<Duration>,
    pub relaunch_max: Option<u32>,
    pub share_store: Option<bool>,
    pub worker_identical: Option<bool>,
    pub signals_to_handle: Option<Vec<String>>,
    pub fixes: Option<Vec<String>>,
}

/// `[job]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawJob {
    pub steps: Option<u64>,
    pub step_time: Option<Duration>,
    pub model_size: Option<Size>,
    pub checkpoint_every: Option<u64>,
    pub collective_timeout: Option<Duration>,
    pub worker_start_time: Option<Duration>,
    pub worker_start_jitter: Option<Duration>,
    pub worker_exit_time: Option<Duration>,
    pub checkpoint_save_time: Option<Duration>,
    pub checkpoint_load_time: Option<Duration>,
    pub backend: Option<super::model::Backend>,
    /// A duration, or `"never"`: read as text so that one key takes both.
    pub nccl_peer_exit_detection: Option<String>,
    pub dataset: Option<RawDataset>,
    pub sampler: Option<RawSampler>,
    pub set_epoch: Option<super::model::SetEpoch>,
    pub checkpoint_on_signal: Option<super::model::Signal>,
    pub init_method: Option<super::model::InitMethod>,
    pub script_master_port: Option<u64>,
    pub eval: Option<RawEval>,
}

/// `[job.eval]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawEval {
    pub len: Option<u64>,
    pub drop_last: Option<bool>,
}

/// `[job.dataset]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawDataset {
    pub len: Option<u64>,
    pub complexity: Option<RawComplexity>,
}

/// A complexity distribution, tagged by `dist`; the keys each `dist` takes are checked in
/// `validate` so a key of another distribution gets a message naming the distribution.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawComplexity {
    pub dist: Option<String>,
    pub value: Option<u64>,
    pub min: Option<u64>,
    pub max: Option<u64>,
    pub median: Option<f64>,
    pub sigma: Option<f64>,
    pub values: Option<Vec<u64>>,
}

/// `[job.sampler]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawSampler {
    pub kind: Option<SamplerKind>,
    pub shuffle: Option<bool>,
    pub seed: Option<i64>,
    pub drop_last: Option<bool>,
    pub random_level: Option<f64>,
    pub batch_size: Option<u64>,
}

/// `[reader]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawReader {
    pub workers: Option<u32>,
    pub files: Option<u32>,
    pub records_per_file: Option<u64>,
    pub batch_size: Option<u64>,
    pub repeat: Option<bool>,
    pub check: Option<CheckKind>,
    pub broken_files: Option<Vec<u32>>,
    pub corrupt_records: Option<Vec<(u32, u64)>>,
    pub truncated_files: Option<Vec<(u32, u64)>>,
    pub parse_time: Option<Duration>,
    pub record_size: Option<Size>,
    pub fixes: Option<Vec<String>>,
}

/// One `[[faults]]` entry, tagged by `kind`; which keys each kind takes is checked in
/// `validate` (see `faults::fault_fields`) so a misplaced key gets a message naming the kind.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawFault {
    pub at: Option<Duration>,
    pub kind: Option<String>,
    pub node: Option<String>,
    pub groups: Option<Vec<Vec<String>>>,
    pub from: Option<String>,
    pub to: Option<String>,
    pub latency: Option<Vec<Duration>>,
    pub probability: Option<f64>,
    pub duration: Option<Duration>,
    pub offset: Option<Offset>,
    pub gpu: Option<u32>,
    pub factor: Option<f64>,
    pub local_rank: Option<u32>,
    pub exit_code: Option<i32>,
    pub signal: Option<String>,
}

/// `[expect]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawExpect {
    pub outcome: Option<Outcome>,
    pub rounds: Option<RawRounds>,
    pub restarts: Option<BTreeMap<String, u32>>,
    pub final_world_size: Option<u32>,
    pub final_participants: Option<Vec<String>>,
    pub violations: Option<Vec<String>>,
}

/// `expect.rounds`: an exact count or `{ min, max }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum RawRounds {
    Exact(u64),
    Range { min: Option<u64>, max: Option<u64> },
}

/// Hand-written so a wrong shape gets a sentence instead of serde's "did not match any variant".
impl<'de> Deserialize<'de> for RawRounds {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(RoundsVisitor)
    }
}

struct RoundsVisitor;

impl<'de> serde::de::Visitor<'de> for RoundsVisitor {
    type Value = RawRounds;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a non-negative integer or a table { min = A, max = B }")
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<RawRounds, E> {
        u64::try_from(v)
            .map(RawRounds::Exact)
            .map_err(|_| E::invalid_value(serde::de::Unexpected::Signed(v), &self))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<RawRounds, E> {
        Ok(RawRounds::Exact(v))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<RawRounds, A::Error> {
        let (mut min, mut max) = (None, None);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "min" => min = Some(map.next_value::<u64>()?),
                "max" => max = Some(map.next_value::<u64>()?),
                other => return Err(serde::de::Error::unknown_field(other, &["min", "max"])),
            }
        }
        Ok(RawRounds::Range { min, max })
    }
}
