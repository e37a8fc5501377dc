//! `agent.ranks`: the worker ranks agents learned through the store are unique, contiguous
//! and what torch's assignment algorithm gives for the round's role infos.

use super::kind::kind_enum;
use super::membership::RoundId;
use super::run_model::{Observer, RunModel};
use super::{InvariantResult, Violation};
use crate::agent::ranks::{assign_worker_ranks, GroupRole};
use crate::invariant::Invariant;
use crate::sim_time::SimInstant;
use crate::trace::{Event, EventKind, TraceNode};
use std::collections::BTreeMap;
#[cfg(test)]
use {super::run_model::replay, crate::trace::Trace};

kind_enum! {
    /// The ways `agent.ranks` breaks.
    pub enum RanksKind {
        /// A group rank's block of global ranks reaches past the world.
        OutsideWorld,
        /// One global rank went to two group ranks.
        Overlap,
        /// A group rank's figures differ from torch's assignment algorithm's.
        AlgorithmMismatch,
    }
}

/// One agent's `RanksAssigned`, as the check needs it.
#[derive(Debug, Clone)]
struct Assigned {
    at: SimInstant,
    node: Option<TraceNode>,
    role: String,
    local_world_size: u64,
    base_global_rank: u64,
    world_size: u64,
    base_role_rank: u64,
    role_world_size: u64,
}

/// `agent.ranks`: per round, every reported block of global ranks lies inside the world and
/// overlaps no other; when every group rank of the round reported, the blocks cover
/// 0..world_size exactly and every figure equals what the assignment algorithm computes
/// from the reported role infos in group-rank order. Not applicable when no ranks were
/// assigned.
#[cfg(test)]
pub(super) fn ranks(trace: &Trace) -> InvariantResult {
    let mut observer = Ranks::default();
    replay(trace, &mut [&mut observer]);
    observer.finish()
}

/// `agent.ranks` as an observer of the replay: it gathers every round's world size and
/// assignments as they come, and judges each round once the run is over (a round's last
/// assignment may come at any time).
#[derive(Default)]
pub(super) struct Ranks {
    /// The world size each round completed with.
    group_sizes: BTreeMap<RoundId, u32>,
    /// Each round's assignments by group rank.
    rounds: BTreeMap<RoundId, BTreeMap<u32, Assigned>>,
}

impl Ranks {
    pub fn finish(self) -> InvariantResult {
        let mut violations = Vec::new();
        for (round, by_group_rank) in &self.rounds {
            check_blocks(*round, by_group_rank, &mut violations);
            let complete = self
                .group_sizes
                .get(round)
                .is_some_and(|n| by_group_rank.len() == *n as usize);
            if complete {
                check_algorithm(*round, by_group_rank, &mut violations);
            }
        }
        let applicable = !self.rounds.is_empty();
        InvariantResult::judge(Invariant::AgentRanks, applicable, violations)
    }
}

impl Observer<'_> for Ranks {
    fn before(&mut self, _model: &RunModel, event: &Event) {
        let (group_sizes, rounds) = (&mut self.group_sizes, &mut self.rounds);
        match &event.kind {
            EventKind::RendezvousCompleted {
                round,
                world_size,
                store_incarnation,
                ..
            } => {
                let round = RoundId {
                    store_incarnation: *store_incarnation,
                    round: *round,
                };
                group_sizes.insert(round, *world_size);
            }
            EventKind::RanksAssigned {
                round,
                store_incarnation,
                group_rank,
                role,
                local_world_size,
                base_global_rank,
                world_size,
                base_role_rank,
                role_world_size,
                ..
            } => {
                let assigned = Assigned {
                    at: event.at,
                    node: event.node,
                    role: role.clone(),
                    local_world_size: u64::from(*local_world_size),
                    base_global_rank: *base_global_rank,
                    world_size: *world_size,
                    base_role_rank: *base_role_rank,
                    role_world_size: *role_world_size,
                };
                let round = RoundId {
                    store_incarnation: *store_incarnation,
                    round: *round,
                };
                rounds
                    .entry(round)
                    .or_default()
                    .insert(*group_rank, assigned);
            }
            _ => {}
        }
    }
}

/// Global-rank blocks lie inside the world and never overlap.
fn check_blocks(
    round: RoundId,
    by_group_rank: &BTreeMap<u32, Assigned>,
    violations: &mut Vec<Violation>,
) {
    let mut owner: BTreeMap<u64, u32> = BTreeMap::new();
    for (group_rank, a) in by_group_rank {
        if a.base_global_rank + a.local_world_size > a.world_size {
            violations.push(Violation::new(
                a.at,
                a.node,
                RanksKind::OutsideWorld,
                format!(
                    "round {round}: group rank {group_rank} got global ranks {}..{} in a world of {}",
                    a.base_global_rank,
                    a.base_global_rank + a.local_world_size,
                    a.world_size
                ),
            ));
        }
        for rank in a.base_global_rank..a.base_global_rank + a.local_world_size {
            if let Some(other) = owner.insert(rank, *group_rank) {
                violations.push(Violation::new(
                    a.at,
                    a.node,
                    RanksKind::Overlap,
                    format!("round {round}: global rank {rank} went to group ranks {other} and {group_rank}"),
                ));
                break;
            }
        }
    }
}

/// With every group rank reported: the figures are the algorithm's.
fn check_algorithm(
    round: RoundId,
    by_group_rank: &BTreeMap<u32, Assigned>,
    violations: &mut Vec<Violation>,
) {
    let roles: Vec<GroupRole> = by_group_rank
        .values()
        .map(|a| GroupRole {
            role: a.role.clone(),
            local_world_size: a.local_world_size,
        })
        .collect();
    let expected = assign_worker_ranks(&roles);
    for ((group_rank, a), workers) in by_group_rank.iter().zip(&expected) {
        let Some(first) = workers.first() else {
            continue;
        };
        let got = (
            a.base_global_rank,
            a.world_size,
            a.base_role_rank,
            a.role_world_size,
        );
        let want = (
            first.global_rank,
            first.world_size,
            first.role_rank,
            first.role_world_size,
        );
        if got != want {
            violations.push(Violation::new(
                a.at,
                a.node,
                RanksKind::AlgorithmMismatch,
                format!(
                    "round {round}: group rank {group_rank} got (global base, world, role base, role world) = {got:?}, the assignment algorithm gives {want:?}"
                ),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::testkit::{completed, e, trace};
    use crate::check::Status;

    fn assigned(group_rank: u32, base: u64, world: u64, role_base: u64) -> EventKind {
        EventKind::RanksAssigned {
            store_incarnation: 1,
            pid: 100 + group_rank,
            round: 0,
            group_rank,
            role: "default".into(),
            local_world_size: 4,
            base_global_rank: base,
            world_size: world,
            base_role_rank: role_base,
            role_world_size: world,
        }
    }

    #[test]
    fn held_for_the_algorithms_assignment() {
        let t = trace(vec![
            e(1, "node-0", completed(100, 0, 0, &[0, 1])),
            e(1, "node-0", assigned(0, 0, 8, 0)),
            e(1, "node-1", assigned(1, 4, 8, 4)),
        ]);
        assert_eq!(ranks(&t).status, Status::Held);
    }

    #[test]
    fn overlapping_blocks_are_violated() {
        let t = trace(vec![
            e(1, "node-0", completed(100, 0, 0, &[0, 1])),
            e(1, "node-0", assigned(0, 0, 8, 0)),
            e(1, "node-1", assigned(1, 2, 8, 4)),
        ]);
        let result = ranks(&t);
        assert_eq!(result.status, Status::Violated);
        assert!(result
            .violations
            .iter()
            .any(|v| v.message.contains("went to group ranks 0 and 1")));
    }

    #[test]
    fn a_role_rank_off_the_algorithm_is_violated() {
        let t = trace(vec![
            e(1, "node-0", completed(100, 0, 0, &[0, 1])),
            e(1, "node-0", assigned(0, 0, 8, 0)),
            e(1, "node-1", assigned(1, 4, 8, 0)),
        ]);
        assert_eq!(ranks(&t).status, Status::Violated);
    }

    #[test]
    fn not_applicable_without_assignments() {
        assert_eq!(ranks(&trace(vec![])).status, Status::NotApplicable);
    }
}
