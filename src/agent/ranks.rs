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
    let world_size = groups
        .iter()
        .fold(0, |sum: u64, g| add_workers(sum, g, "the world size"));
    // BTreeMap: deterministic, and the order never reaches the output anyway.
    let mut role_world_sizes: BTreeMap<&str, u64> = BTreeMap::new();
    for group in groups {
        let size = role_world_sizes.entry(&group.role).or_default();
        *size = add_workers(*size, group, "a role's world size");
    }
    let mut next_global_rank = 0;
    let mut next_role_rank: BTreeMap<&str, u64> = BTreeMap::new();
    let assigned = groups
        .iter()
        .map(|group| {
            let base_global_rank = next_global_rank;
            let role_rank_slot = next_role_rank.entry(&group.role).or_default();
            let base_role_rank = *role_rank_slot;
            // Cannot overflow: the totals above did not.
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
        .collect();
    // Every group took its block: the blocks tile 0..world size, and each role's 0..its size.
    assert_eq!(
        next_global_rank, world_size,
        "global ranks end at {next_global_rank}, expected the world size {world_size}"
    );
    assert_eq!(
        next_role_rank, role_world_sizes,
        "role ranks end at {next_role_rank:?}, expected the role world sizes"
    );
    assigned
}

/// `sum` plus the group's workers; a total past u64 is no world torch could run.
fn add_workers(sum: u64, group: &GroupRole, what: &str) -> u64 {
    sum.checked_add(group.local_world_size).unwrap_or_else(|| {
        panic!(
            "{what} overflows u64: {sum} workers so far plus {} of role '{}'",
            group.local_world_size, group.role
        )
    })
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
    #[should_panic(
        expected = "the world size overflows u64: 18446744073709551615 workers so far plus 1 of role 'tr'"
    )]
    fn a_world_past_u64_fires() {
        assign_worker_ranks(&[group("ps", u64::MAX), group("tr", 1)]);
    }

    #[test]
    fn no_groups_no_workers() {
        assert!(assign_worker_ranks(&[]).is_empty());
    }
}
