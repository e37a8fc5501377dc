//! Rendezvous settings: torch's `RendezvousSettings` plus its `RendezvousTimeout`, in microseconds.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::mutant::Mutant;
use crate::scenario::model::{RendezvousConfig, RUN_ID};

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
    pub join_timeout_us: u64,
    /// Extra wait after `min_nodes` is reached before a participant may complete the round.
    pub last_call_timeout_us: u64,
    /// Deadline of the close op.
    pub close_timeout_us: u64,
    /// Deadline of the keep-alive op.
    pub heartbeat_timeout_us: u64,
    /// A heartbeat at least this old is due again.
    pub keep_alive_interval_us: u64,
    /// Missed heartbeats after which sanitize drops a node.
    pub keep_alive_max_attempt: u32,
    /// torch's `cas_backoff_max_seconds`: after a state write that lost, the executor waits
    /// a random time up to this before it goes on. 0 (torch's default) never waits.
    #[serde(default)]
    pub cas_backoff_max_us: u64,
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
            join_timeout_us: DEFAULT_JOIN_TIMEOUT_US,
            last_call_timeout_us: DEFAULT_LAST_CALL_TIMEOUT_US,
            close_timeout_us: DEFAULT_CLOSE_TIMEOUT_US,
            heartbeat_timeout_us: DEFAULT_HEARTBEAT_TIMEOUT_US,
            keep_alive_interval_us: DEFAULT_KEEP_ALIVE_INTERVAL_US,
            keep_alive_max_attempt: DEFAULT_KEEP_ALIVE_MAX_ATTEMPT,
            cas_backoff_max_us: 0,
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
            join_timeout_us: config.join_timeout.as_us(),
            last_call_timeout_us: config.last_call_timeout.as_us(),
            close_timeout_us: config.close_timeout.as_us(),
            heartbeat_timeout_us: config.heartbeat_timeout.as_us(),
            keep_alive_interval_us: config.keep_alive_interval.as_us(),
            keep_alive_max_attempt: config.keep_alive_max_attempt,
            cas_backoff_max_us: config.cas_backoff_max.as_us(),
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
            ("join", self.join_timeout_us),
            ("last_call", self.last_call_timeout_us),
            ("close", self.close_timeout_us),
            ("heartbeat", self.heartbeat_timeout_us),
        ];
        for (name, value_us) in timeouts {
            if value_us == 0 {
                return Err(SettingsError::NonPositiveTimeout(name));
            }
        }
        Ok(())
    }

    /// Age past which sanitize treats a heartbeat as dead:
    /// `keep_alive_interval × keep_alive_max_attempt`, as torch's `_sanitize` computes it.
    pub fn heartbeat_expiry_us(&self) -> i64 {
        let expiry = self
            .keep_alive_interval_us
            .saturating_mul(u64::from(self.keep_alive_max_attempt));
        crate::sim_time::clock_span_us(expiry)
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
        assert_eq!(s.heartbeat_expiry_us(), 15_000_000);
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
        s.close_timeout_us = 0;
        assert_eq!(
            s.validate(),
            Err(SettingsError::NonPositiveTimeout("close"))
        );
    }
}
