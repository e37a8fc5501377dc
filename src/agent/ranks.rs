//! Worker rank assignment of torch's elastic agent (the general, store-coordinated path of
//! `SimpleElasticAgent._assign_worker_ranks`), as a pure function.

use std::collections::BTreeMap;

/// What one agent (group rank) declares: its role and how many workers it runs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GroupRole {
    /// The role name (workers of one role share a role rank space).
    pub role: String,
    /// Number of workers this agent starts.
    pub local_world_size: u64,
}

/// The ranks of one worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WorkerRanks {
    /// Index among the agent's own workers.
    pub local_rank: u64,
    /// Index among all workers of all agents.
    pub global_rank: u64,
    /// Index among the workers of the same role.
    pub role_rank: u64,
    /// Total number of workers.
    pub world_size: u64,
    /// Number of workers of this role.
    pub role_world_size: u64,
}

/// Assigns ranks to every worker of every group: `result[g][l]` is local worker `l` of group
/// rank `g`.
///
/// Global ranks are handed out in group-rank order, and role ranks in group-rank order among
/// the groups of that role, each group taking a contiguous block of its `local_world_size`.
pub fn assign_worker_ranks(groups: &[GroupRole]) -> Vec<Vec<WorkerRanks>> {
    let world_size: u64 = groups.iter().map(|g| g.local_world_size).sum();
    // BTreeMap: deterministic, and the order never reaches the output anyway.
    let mut role_world_sizes: BTreeMap<&str, u64> = BTreeMap::new();
    for group in groups {
        *role_world_sizes.entry(&group.role).or_default() += group.local_world_size;
    }
    let mut next_global_rank = 0;
    let mut next_role_rank: BTreeMap<&str, u64> = BTreeMap::new();
    groups
        .iter()
        .map(|group| {
            let base_global_rank = next_global_rank;
            let role_rank_slot = next_role_rank.entry(&group.role).or_default();
            let base_role_rank = *role_rank_slot;
            next_global_rank += group.local_world_size;
            *role_rank_slot += group.local_world_size;
            let role_world_size = role_world_sizes[group.role.as_str()];
            (0..group.local_world_size)
                .map(|local_rank| WorkerRanks {
                    local_rank,
                    global_rank: base_global_rank + local_rank,
                    role_rank: base_role_rank + local_rank,
                    world_size,
                    role_world_size,
                })
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(role: &str, local_world_size: u64) -> GroupRole {
        GroupRole {
            role: role.to_string(),
            local_world_size,
        }
    }

    #[test]
    fn role_ranks_continue_across_groups_of_the_same_role() {
        let ranks = assign_worker_ranks(&[group("ps", 2), group("tr", 1), group("ps", 1)]);
        let summary: Vec<Vec<(u64, u64, u64)>> = ranks
            .iter()
            .map(|g| {
                g.iter()
                    .map(|w| (w.global_rank, w.role_rank, w.role_world_size))
                    .collect()
            })
            .collect();
        assert_eq!(
            summary,
            vec![vec![(0, 0, 3), (1, 1, 3)], vec![(2, 0, 1)], vec![(3, 2, 3)]]
        );
        assert!(ranks.iter().flatten().all(|w| w.world_size == 4));
    }

    #[test]
    fn no_groups_no_workers() {
        assert!(assign_worker_ranks(&[]).is_empty());
    }
}
