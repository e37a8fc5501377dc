//! Rendezvous settings: torch's `RendezvousSettings` plus its `RendezvousTimeout`, as spans of
//! simulated time (microseconds in the parity vectors' JSON).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::mutant::Mutant;
use crate::scenario::model::{RendezvousConfig, RUN_ID};
use crate::sim_time::SimDuration;

pub use crate::scenario::torch_defaults::{
    DEFAULT_CLOSE_TIMEOUT_US, DEFAULT_HEARTBEAT_TIMEOUT_US, DEFAULT_JOIN_TIMEOUT_US,
    DEFAULT_KEEP_ALIVE_INTERVAL_US, DEFAULT_KEEP_ALIVE_MAX_ATTEMPT, DEFAULT_LAST_CALL_TIMEOUT_US,
};

pub use crate::fixes::RendezvousFix;

/// The settings every node of one rendezvous shares.
///
/// Field names follow the parity vectors' `settings` object. `fixes` is not part of torch:
/// it names opt-in deviations from torch's behaviour; empty means exactly torch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RendezvousSettings {
    /// The run id; names the store key and the per-round store prefix.
    pub run_id: String,
    /// Fewest participants a round may complete with.
    pub min_nodes: u32,
    /// Most participants a round admits; reaching it completes the round at once.
    pub max_nodes: u32,
    /// Deadline of the exit + join ops of one `next_rendezvous` call.
    #[serde(rename = "join_timeout_us", with = "crate::sim_time::span_whole_us")]
    pub join_timeout: SimDuration,
    /// Extra wait after `min_nodes` is reached before a participant may complete the round.
    #[serde(
        rename = "last_call_timeout_us",
        with = "crate::sim_time::span_whole_us"
    )]
    pub last_call_timeout: SimDuration,
    /// Deadline of the close op.
    #[serde(rename = "close_timeout_us", with = "crate::sim_time::span_whole_us")]
    pub close_timeout: SimDuration,
    /// Deadline of the keep-alive op.
    #[serde(
        rename = "heartbeat_timeout_us",
        with = "crate::sim_time::span_whole_us"
    )]
    pub heartbeat_timeout: SimDuration,
    /// A heartbeat at least this old is due again.
    #[serde(
        rename = "keep_alive_interval_us",
        with = "crate::sim_time::span_whole_us"
    )]
    pub keep_alive_interval: SimDuration,
    /// Missed heartbeats after which sanitize drops a node.
    pub keep_alive_max_attempt: u32,
    /// torch's `cas_backoff_max_seconds`: after a state write that lost, the executor waits
    /// a random time up to this before it goes on. 0 (torch's default) never waits.
    #[serde(
        default,
        rename = "cas_backoff_max_us",
        with = "crate::sim_time::span_whole_us"
    )]
    pub cas_backoff_max: SimDuration,
    /// Opt-in named deviations from torch; empty reproduces torch exactly.
    #[serde(default)]
    pub fixes: BTreeSet<RendezvousFix>,
    /// Planted bugs that only the command line switches on, so the fuzzer can show it
    /// finds them; never set by a scenario file, empty in parity tests.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub mutants: BTreeSet<Mutant>,
}

/// Why a settings value is refused; mirrors the `ValueError`s torch raises.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    /// torch refuses an empty run id.
    #[error("the run id must be a non-empty string")]
    EmptyRunId,
    /// torch requires at least one node.
    #[error("the minimum number of nodes ({0}) must be greater than zero")]
    MinNodesZero(u32),
    /// torch requires max_nodes >= min_nodes.
    #[error("the maximum number of nodes ({max}) must be >= the minimum ({min})")]
    MaxBelowMin {
        /// min_nodes as given.
        min: u32,
        /// max_nodes as given.
        max: u32,
    },
    /// torch's `RendezvousTimeout` requires every timeout to be positive.
    #[error("the {0} timeout must be positive")]
    NonPositiveTimeout(&'static str),
}

impl RendezvousSettings {
    /// Settings with torch's defaults (`DynamicRendezvousHandler.from_backend` and
    /// `RendezvousTimeout()`) for everything but the run id and the node bounds.
    pub fn new(run_id: impl Into<String>, min_nodes: u32, max_nodes: u32) -> Self {
        Self {
            run_id: run_id.into(),
            min_nodes,
            max_nodes,
            join_timeout: SimDuration::from_us(DEFAULT_JOIN_TIMEOUT_US),
            last_call_timeout: SimDuration::from_us(DEFAULT_LAST_CALL_TIMEOUT_US),
            close_timeout: SimDuration::from_us(DEFAULT_CLOSE_TIMEOUT_US),
            heartbeat_timeout: SimDuration::from_us(DEFAULT_HEARTBEAT_TIMEOUT_US),
            keep_alive_interval: SimDuration::from_us(DEFAULT_KEEP_ALIVE_INTERVAL_US),
            keep_alive_max_attempt: DEFAULT_KEEP_ALIVE_MAX_ATTEMPT,
            cas_backoff_max: SimDuration::ZERO,
            fixes: BTreeSet::new(),
            mutants: BTreeSet::new(),
        }
    }

    /// The settings every agent's handler of a scenario takes: the file's `[rendezvous]`,
    /// with the scenario's run id and the planted bugs the command line switched on.
    pub fn of_scenario(config: &RendezvousConfig, mutants: BTreeSet<Mutant>) -> Self {
        Self {
            run_id: RUN_ID.to_owned(),
            min_nodes: config.min_nodes,
            max_nodes: config.max_nodes,
            join_timeout: config.join_timeout,
            last_call_timeout: config.last_call_timeout,
            close_timeout: config.close_timeout,
            heartbeat_timeout: config.heartbeat_timeout,
            keep_alive_interval: config.keep_alive_interval,
            keep_alive_max_attempt: config.keep_alive_max_attempt,
            cas_backoff_max: config.cas_backoff_max,
            fixes: config.fixes.clone(),
            mutants,
        }
    }

    /// The checks torch makes when a handler or timeout object is built.
    pub fn validate(&self) -> Result<(), SettingsError> {
        if self.run_id.is_empty() {
            return Err(SettingsError::EmptyRunId);
        }
        if self.min_nodes < 1 {
            return Err(SettingsError::MinNodesZero(self.min_nodes));
        }
        if self.max_nodes < self.min_nodes {
            return Err(SettingsError::MaxBelowMin {
                min: self.min_nodes,
                max: self.max_nodes,
            });
        }
        let timeouts = [
            ("join", self.join_timeout),
            ("last_call", self.last_call_timeout),
            ("close", self.close_timeout),
            ("heartbeat", self.heartbeat_timeout),
        ];
        for (name, timeout) in timeouts {
            if timeout.is_zero() {
                return Err(SettingsError::NonPositiveTimeout(name));
            }
        }
        Ok(())
    }

    /// Age past which sanitize treats a heartbeat as dead:
    /// `keep_alive_interval × keep_alive_max_attempt`, as torch's `_sanitize` computes it.
    pub fn heartbeat_expiry(&self) -> SimDuration {
        self.keep_alive_interval
            .saturating_mul(u64::from(self.keep_alive_max_attempt))
    }

    /// Whether the opt-in deviation from torch is switched on.
    pub fn has_fix(&self, fix: RendezvousFix) -> bool {
        self.fixes.contains(&fix)
    }

    /// Whether the planted bug is switched on.
    pub fn has_mutant(&self, mutant: Mutant) -> bool {
        self.mutants.contains(&mutant)
    }

    /// The store key holding the encoded state (torch's c10d backend: `torch.rendezvous.<run_id>`).
    pub fn state_key(&self) -> String {
        format!("torch.rendezvous.{}", self.run_id)
    }

    /// The key prefix of the store handed out for `round`
    /// (torch: `torch.rendezvous.<run_id>.<round>`).
    pub fn round_store_prefix(&self, round: u64) -> String {
        format!("torch.rendezvous.{}.{}", self.run_id, round)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_torch_and_validate() {
        let s = RendezvousSettings::new("run", 1, 2);
        assert_eq!(s.heartbeat_expiry(), SimDuration::from_secs(15));
        assert!(s.validate().is_ok());
        assert_eq!(s.state_key(), "torch.rendezvous.run");
        assert_eq!(s.round_store_prefix(3), "torch.rendezvous.run.3");
    }

    #[test]
    fn validate_refuses_what_torch_refuses() {
        assert_eq!(
            RendezvousSettings::new("", 1, 1).validate(),
            Err(SettingsError::EmptyRunId)
        );
        assert_eq!(
            RendezvousSettings::new("r", 0, 1).validate(),
            Err(SettingsError::MinNodesZero(0))
        );
        assert!(matches!(
            RendezvousSettings::new("r", 3, 2).validate(),
            Err(SettingsError::MaxBelowMin { .. })
        ));
        let mut s = RendezvousSettings::new("r", 1, 1);
        s.close_timeout = SimDuration::ZERO;
        assert_eq!(
            s.validate(),
            Err(SettingsError::NonPositiveTimeout("close"))
        );
    }
}
