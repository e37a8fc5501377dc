//! `agent.bootstrap`: every member of a worker group was given the same bootstrap address.
//!
//! The workers of a round initialise one process group through `MASTER_ADDR:MASTER_PORT`.
//! Members sent to different masters can never form it: one side waits for the other's key,
//! the other may not even reach its master. torch 2.15 does this after rank 0 dies, when an
//! agent that stays non-rank-0 keeps its first round's address.

use super::kind::kind_enum;
use super::membership::RoundId;
use super::run_model::{Observer, RunModel};
use super::{InvariantResult, Violation};
use crate::invariant::Invariant;
use crate::trace::{Event, EventKind, TraceNode};
use std::collections::{BTreeMap, BTreeSet};
#[cfg(test)]
use {super::run_model::replay, crate::trace::Trace};

kind_enum! {
    /// The way `agent.bootstrap` breaks.
    pub enum BootstrapKind {
        /// Members of one round's worker group were given different masters.
        MastersDiffer,
    }
}

/// `agent.bootstrap`: per round (of one store incarnation), every `workers_started` names
/// the same master. Not applicable when no workers started.
#[cfg(test)]
pub(super) fn bootstrap(trace: &Trace) -> InvariantResult {
    let mut observer = Bootstrap::default();
    replay(trace, &mut [&mut observer]);
    observer.finish()
}

/// `agent.bootstrap` as an observer of the replay.
#[derive(Default)]
pub(super) struct Bootstrap<'t> {
    /// Each round's first workers' start: its node and the master it was given.
    first: BTreeMap<RoundId, (TraceNode, &'t str)>,
    /// Rounds already reported, so a round with many members is reported once.
    flagged: BTreeSet<RoundId>,
    violations: Vec<Violation>,
}

impl Bootstrap<'_> {
    pub fn finish(self) -> InvariantResult {
        let applicable = !self.first.is_empty();
        InvariantResult::judge(Invariant::AgentBootstrap, applicable, self.violations)
    }
}

impl<'t> Observer<'t> for Bootstrap<'t> {
    fn before(&mut self, _model: &RunModel, event: &'t Event) {
        let EventKind::WorkersStarted {
            round,
            store_incarnation,
            master,
            ..
        } = &event.kind
        else {
            return;
        };
        let round = RoundId {
            store_incarnation: *store_incarnation,
            round: *round,
        };
        // An agent process records its workers' start on its own node, so the event names
        // it; one that did not could not be told apart from another member and is passed over.
        let Some(node) = event.node else {
            return;
        };
        match self.first.get(&round) {
            None => {
                self.first.insert(round, (node, master));
            }
            Some((other_node, other_master)) if *other_master != master => {
                if self.flagged.insert(round) {
                    self.violations.push(Violation::new(
                        event.at,
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
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::super::Status;
    use super::*;

    fn with_master(pid: u32, group_rank: u32, master: &str) -> EventKind {
        let mut kind = workers_started(pid, 0, group_rank, 3);
        if let EventKind::WorkersStarted { master: m, .. } = &mut kind {
            *m = master.into();
        }
        kind
    }

    #[test]
    fn one_master_per_round_holds() {
        let t = trace(vec![
            e(1, "node-0", workers_started(100, 0, 0, 2)),
            e(1, "node-1", workers_started(101, 0, 1, 2)),
        ]);
        assert_eq!(bootstrap(&t).status, Status::Held);
        assert_eq!(bootstrap(&trace(vec![])).status, Status::NotApplicable);
    }

    #[test]
    fn two_masters_in_a_round_are_reported_once_on_the_later_node() {
        let t = trace(vec![
            e(1, "node-0", with_master(100, 0, "node-0:32768")),
            e(1, "node-2", with_master(102, 2, "node-9:1")),
            e(2, "node-10", with_master(110, 1, "node-9:1")),
        ]);
        let r = bootstrap(&t);
        assert_eq!(r.status, Status::Violated);
        assert_eq!(r.violations.len(), 1, "{:?}", r.violations);
        assert_eq!(r.violations[0].node, Some(TraceNode::node(2)));
        assert!(r.violations[0]
            .message
            .contains("node-2's workers were given master node-9:1, node-0's"));
    }
}
