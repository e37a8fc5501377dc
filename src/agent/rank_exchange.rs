//! Worker rank assignment through the store, as torch's `_assign_worker_ranks` does it:
//! every agent publishes its role info, group rank 0 (collocated with the store in torchrun)
//! computes everyone's ranks with the pure algorithm in `agent::ranks`, and every agent
//! reads back its own assignment.

use super::ranks::{assign_worker_ranks, GroupRole};
use crate::rendezvous::handler::RendezvousInfo;
use crate::store::service::{StoreClient, StoreError};
use crate::store::Value;
use serde::{Deserialize, Serialize};

/// torchrun's role when none is given.
pub const DEFAULT_ROLE: &str = "default";
const ROLE_INFO_PREFIX: &str = "torchelastic/role_info/";
const ASSIGNED_RANKS_PREFIX: &str = "torchelastic/assigned_ranks/";

/// What one agent publishes about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct RoleInfo {
    role: String,
    rank: u32,
    local_world_size: u64,
}

/// What an agent reads back: the ranks of its local worker 0, and the sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssignedRanks {
    pub base_global_rank: u64,
    pub world_size: u64,
    pub base_role_rank: u64,
    pub role_world_size: u64,
}

/// The ranks every agent computes for itself when its workers are identical
/// (`TORCH_ELASTIC_WORKER_IDENTICAL=1`): no store round trip, so no member can hold it up.
pub fn identical_ranks(info: &RendezvousInfo, local_world_size: u64) -> AssignedRanks {
    let world_size = u64::from(info.world_size) * local_world_size;
    let base = u64::from(info.rank) * local_world_size;
    AssignedRanks {
        base_global_rank: base,
        world_size,
        base_role_rank: base,
        role_world_size: world_size,
    }
}

/// Runs the exchange for this agent in the round `info`; `prefix` is the round's store
/// prefix (`torch.rendezvous.<run_id>.<round>/`).
pub async fn exchange_ranks(
    store: &StoreClient,
    prefix: &str,
    info: &RendezvousInfo,
    local_world_size: u64,
) -> Result<AssignedRanks, StoreError> {
    let me = RoleInfo {
        role: DEFAULT_ROLE.into(),
        rank: info.rank,
        local_world_size,
    };
    let encoded = serde_json::to_vec(&me).expect("role info serializes");
    store
        .set(&format!("{prefix}{ROLE_INFO_PREFIX}{}", info.rank), encoded)
        .await?;
    if info.rank == 0 {
        publish_assignments(store, prefix, info.world_size).await?;
    }
    // Blocks until rank 0 has written it, up to the store's timeout.
    let bytes = store
        .get(&format!("{prefix}{ASSIGNED_RANKS_PREFIX}{}", info.rank))
        .await?;
    serde_json::from_slice(&bytes)
        .map_err(|e| StoreError::Refused(format!("bad assigned ranks: {e}")))
}

/// Group rank 0's part: read every role info, compute, write every assignment at once.
async fn publish_assignments(
    store: &StoreClient,
    prefix: &str,
    group_world_size: u32,
) -> Result<(), StoreError> {
    let keys: Vec<String> = (0..group_world_size)
        .map(|r| format!("{prefix}{ROLE_INFO_PREFIX}{r}"))
        .collect();
    let roles = role_infos(&store.multi_get(keys).await?, group_world_size)?;
    let entries = assign_worker_ranks(&roles)
        .iter()
        .enumerate()
        .map(|(group_rank, workers)| {
            let first = workers.first();
            let assigned = AssignedRanks {
                base_global_rank: first.map_or(0, |w| w.global_rank),
                world_size: first.map_or(0, |w| w.world_size),
                base_role_rank: first.map_or(0, |w| w.role_rank),
                role_world_size: first.map_or(0, |w| w.role_world_size),
            };
            let value = serde_json::to_vec(&assigned).expect("ranks serialize");
            (
                format!("{prefix}{ASSIGNED_RANKS_PREFIX}{group_rank}"),
                value,
            )
        })
        .collect();
    store.multi_set(entries).await
}

/// The role infos of group ranks 0..`group_world_size`, from one `multi_get` of their keys.
fn role_infos(values: &[Value], group_world_size: u32) -> Result<Vec<GroupRole>, StoreError> {
    assert_answers_every_key(values.len(), group_world_size, "role infos");
    values
        .iter()
        .map(|bytes| {
            let info: RoleInfo = serde_json::from_slice(bytes)
                .map_err(|e| StoreError::Refused(format!("bad role info: {e}")))?;
            Ok(GroupRole {
                role: info.role,
                local_world_size: info.local_world_size,
            })
        })
        .collect()
}

/// TCPStore's `multi_get` answers one value per key asked, in order.
fn assert_answers_every_key(values: usize, keys: u32, what: &str) {
    assert_eq!(
        values, keys as usize,
        "a multi_get of {keys} {what} answered {values} values"
    );
}

/// Where the agent fix `shared-restart-count` publishes each agent's restart count; torch
/// has no such key.
const RESTART_COUNT_PREFIX: &str = "torchelastic/restart_count/";

/// `shared-restart-count`, first half: publish this agent's restart count for the round.
/// Called before [`exchange_ranks`], so once rank 0 has read every role info, every count
/// is in the store too.
pub async fn publish_restart_count(
    store: &StoreClient,
    prefix: &str,
    info: &RendezvousInfo,
    restart_count: u32,
) -> Result<(), StoreError> {
    let key = format!("{prefix}{RESTART_COUNT_PREFIX}{}", info.rank);
    store
        .set(&key, restart_count.to_string().into_bytes())
        .await
}

/// `shared-restart-count`, second half: the highest restart count of the round's agents
/// (blocks until every agent of the round has published its own).
pub async fn group_restart_count_max(
    store: &StoreClient,
    prefix: &str,
    info: &RendezvousInfo,
) -> Result<u32, StoreError> {
    let keys: Vec<String> = (0..info.world_size)
        .map(|r| format!("{prefix}{RESTART_COUNT_PREFIX}{r}"))
        .collect();
    let counts = store.multi_get(keys).await?;
    assert_answers_every_key(counts.len(), info.world_size, "restart counts");
    let mut max = 0;
    for bytes in counts {
        let count = std::str::from_utf8(&bytes)
            .ok()
            .and_then(|text| text.parse::<u32>().ok())
            .ok_or_else(|| StoreError::Refused("bad restart count".into()))?;
        max = max.max(count);
    }
    Ok(max)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role_info(local_world_size: u64) -> Value {
        let info = RoleInfo {
            role: DEFAULT_ROLE.into(),
            rank: 0,
            local_world_size,
        };
        Value::from(serde_json::to_vec(&info).expect("role info serializes"))
    }

    #[test]
    fn role_infos_are_read_in_group_rank_order() {
        let roles = role_infos(&[role_info(2), role_info(3)], 2).expect("valid infos");
        let sizes: Vec<u64> = roles.iter().map(|r| r.local_world_size).collect();
        assert_eq!(sizes, vec![2, 3]);
        assert!(role_infos(&[Value::from(&b"nope"[..])], 1).is_err());
    }

    #[test]
    #[should_panic(expected = "a multi_get of 3 role infos answered 2 values")]
    fn a_short_multi_get_answer_fires() {
        let _ = role_infos(&[role_info(1), role_info(1)], 3);
    }
}
