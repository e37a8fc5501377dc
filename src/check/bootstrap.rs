//! `agent.bootstrap`: every member of a worker group was given the same bootstrap address.
//!
//! The workers of a round initialise one process group through `MASTER_ADDR:MASTER_PORT`.
//! Members sent to different masters can never form it: one side waits for the other's key,
//! the other may not even reach its master. torch 2.15 does this after rank 0 dies, when an
//! agent that stays non-rank-0 keeps its first round's address.

use super::kind::kind_enum;
use super::membership::RoundId;
use super::{InvariantResult, Violation};
use crate::invariant::Invariant;
use crate::trace::{EventKind, Trace};
use std::collections::BTreeMap;

kind_enum! {
    /// The way `agent.bootstrap` breaks.
    pub enum BootstrapKind {
        /// Members of one round's worker group were given different masters.
        MastersDiffer,
    }
}

/// `agent.bootstrap`: per round (of one store incarnation), every `workers_started` names
/// the same master. Not applicable when no workers started.
pub(super) fn bootstrap(trace: &Trace) -> InvariantResult {
    let mut first: BTreeMap<RoundId, (&str, &str)> = BTreeMap::new();
    let mut flagged: std::collections::BTreeSet<RoundId> = Default::default();
    let mut violations = Vec::new();
    for event in &trace.events {
        let EventKind::WorkersStarted {
            round,
            store_incarnation,
            master,
            ..
        } = &event.kind
        else {
            continue;
        };
        let round = RoundId {
            store_incarnation: *store_incarnation,
            round: *round,
        };
        let node = event.node.as_deref().unwrap_or("?");
        match first.get(&round) {
            None => {
                first.insert(round, (node, master));
            }
            Some((other_node, other_master)) if *other_master != master => {
                if flagged.insert(round) {
                    violations.push(Violation::new(
                        event.at_us,
                        Some(node),
                        BootstrapKind::MastersDiffer,
                        format!(
                            "round {round}: {node}'s workers were given master {master}, {other_node}'s were given {other_master}; the group cannot form its process group"
                        ),
                    ));
                }
            }
            Some(_) => {}
        }
    }
    InvariantResult::judge(Invariant::AgentBootstrap, !first.is_empty(), violations)
}
