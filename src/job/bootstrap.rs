//! The workers' process-group bootstrap (`init_process_group` through `MASTER_ADDR` and
//! `MASTER_PORT`): every node's workers reach the store at the address their agent gave
//! them, publish their rank and wait for every other rank's.
//!
//! With TCPStore sharing the store runs in the rank-0 agent and every worker is a client of
//! it; without sharing the group's rank-0 worker hosts it at the address its agent
//! published. Either way a worker whose master is dead cannot connect, and a worker whose
//! peers were sent elsewhere waits for keys that never come: both fail after the process
//! group's timeout, and the agent sees a failed worker. The model bootstraps once per node
//! (its local ranks share the outcome) rather than once per worker.

use super::{GroupPlan, WorkerStatus};
use crate::store::service::StoreClient;
use crate::world::{NodeEnv, TaskHandle};
use std::net::SocketAddr;

/// Where one node's workers bootstrap their process group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerBootstrap {
    /// `MASTER_ADDR:MASTER_PORT` as given, and what it resolves to.
    pub master: String,
    pub master_addr: Option<SocketAddr>,
    /// This node's workers host the store there themselves (no TCPStore sharing, rank 0).
    pub hosts_store: bool,
}

/// Runs the bootstrap; on success returns the store server these workers host, if any (it
/// lives as long as the workers).
pub async fn init_process_group(
    env: &NodeEnv,
    plan: &GroupPlan,
) -> Result<Option<TaskHandle<()>>, WorkerStatus> {
    let boot = &plan.bootstrap;
    let timeout_us = env.scenario().job.collective_timeout_us;
    let fail = |why: String| WorkerStatus::Failed {
        local_rank: 0,
        exit_code: 1,
        reason: format!("init_process_group through {}: {why}", boot.master),
    };
    let Some(addr) = boot.master_addr else {
        return Err(fail("the address does not resolve".into()));
    };
    let server = boot.hosts_store.then(|| env.serve_store(addr.port()));
    let store = StoreClient::connect(addr, timeout_us)
        .await
        .map_err(|e| fail(e.to_string()))?;
    // The keys of this group's attempt: a group is one round of one rendezvous.
    let prefix = format!("/worker/{}.{}", plan.store_incarnation, plan.round);
    let own = format!("{prefix}/rank_{}", plan.group_rank);
    store
        .set(&own, plan.base_global_rank.to_string().into_bytes())
        .await
        .map_err(|e| fail(e.to_string()))?;
    let keys: Vec<String> = (0..plan.members.len())
        .map(|rank| format!("{prefix}/rank_{rank}"))
        .collect();
    store
        .wait(&keys)
        .await
        .map_err(|e| fail(format!("waiting for every rank: {e}")))?;
    Ok(server)
}
