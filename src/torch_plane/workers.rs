//! The worker processes torch's agent starts, as the simulated job.
//!
//! torch's `LocalElasticAgent` builds each worker's environment and hands it to
//! `start_processes`; the seam hands it here. The round the workers train in is the one this
//! node's rendezvous last completed (as torch's own `next_rendezvous` returned it), and
//! their ranks and bootstrap address are what torch put in their environment, so a stale
//! `MASTER_ADDR` or a wrong `WORLD_SIZE` reaches the simulated process group as it would
//! reach gloo or NCCL. Monitoring and stopping follow the model's agent (`agent::run`).

use crate::job::bootstrap::{AgentStoreRule, GivenMaster, WorkerBootstrap};
use crate::job::{self, GroupPlan, WorkerStatus};
use crate::mutant::Mutants;
use crate::scenario::node::NodeIndex;
use crate::sim_time::SimDuration;
use crate::trace::EventKind;
use crate::world::{time, NodeEnv};
use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

/// One worker's environment, as torch's agent built it (the keys the job reads).
pub type WorkerEnv = BTreeMap<String, String>;

/// A round this node's rendezvous completed, as `next_rendezvous` returned it.
#[derive(Debug, Clone)]
pub struct RoundSeen {
    pub round: u64,
    pub rank: u32,
    pub world_size: u32,
    pub participants: Arc<[NodeIndex]>,
    pub store_incarnation: u64,
}

/// A running worker group on this node.
pub struct Workers {
    status: Arc<Mutex<WorkerStatus>>,
}

/// How long the agent waits for its workers to exit once signalled: as the model's agent
/// (`agent::run`), the workers die at once and `Popen.wait` polls every 50 ms.
const WORKERS_EXIT_WAIT: SimDuration = SimDuration::from_ms(50);

fn var<'a>(env: &'a WorkerEnv, key: &str) -> Result<&'a str, String> {
    env.get(key)
        .map(String::as_str)
        .ok_or_else(|| format!("torch's agent gave its worker no {key}"))
}

fn number(env: &WorkerEnv, key: &str) -> Result<u64, String> {
    let text = var(env, key)?;
    text.parse()
        .map_err(|_| format!("torch's agent gave its worker {key}={text}, not a number"))
}

/// What the workers' environment says of their group.
struct GivenRanks {
    group_rank: u32,
    base_global_rank: u64,
    world_size: u64,
    restart_count: u64,
    master_addr: String,
    master_port: u16,
    agent_store: bool,
    local_world_size: u32,
}

impl GivenRanks {
    fn of(envs: &[WorkerEnv]) -> Result<GivenRanks, String> {
        let first = envs.first().ok_or("torch's agent started no workers")?;
        let port = number(first, "MASTER_PORT")?;
        Ok(GivenRanks {
            group_rank: u32::try_from(number(first, "GROUP_RANK")?).map_err(|e| e.to_string())?,
            base_global_rank: number(first, "RANK")?,
            world_size: number(first, "WORLD_SIZE")?,
            restart_count: number(first, "TORCHELASTIC_RESTART_COUNT")?,
            master_addr: var(first, "MASTER_ADDR")?.to_owned(),
            master_port: u16::try_from(port).map_err(|e| e.to_string())?,
            agent_store: var(first, "TORCHELASTIC_USE_AGENT_STORE").unwrap_or("False") == "True",
            local_world_size: u32::try_from(envs.len()).map_err(|e| e.to_string())?,
        })
    }

    fn master(&self) -> String {
        format!("{}:{}", self.master_addr, self.master_port)
    }

    fn master_given(&self) -> GivenMaster<'_> {
        GivenMaster {
            addr: &self.master_addr,
            port: self.master_port,
            agent_store: self.agent_store,
        }
    }
}

/// The ranks and the start, as the model's agent records them.
fn record_start(
    env: &NodeEnv,
    round: &RoundSeen,
    given: &GivenRanks,
    first: &WorkerEnv,
) -> Result<(), String> {
    env.record(EventKind::RanksAssigned {
        pid: env.pid,
        round: round.round,
        store_incarnation: round.store_incarnation,
        group_rank: given.group_rank,
        role: var(first, "ROLE_NAME").unwrap_or("default").to_owned(),
        local_world_size: given.local_world_size,
        base_global_rank: given.base_global_rank,
        world_size: given.world_size,
        base_role_rank: number(first, "ROLE_RANK")?,
        role_world_size: number(first, "ROLE_WORLD_SIZE")?,
    });
    env.record(EventKind::WorkersStarted {
        pid: env.pid,
        round: round.round,
        group_rank: given.group_rank,
        world_size: round.world_size,
        restart_count: u32::try_from(given.restart_count).unwrap_or(u32::MAX),
        store_incarnation: round.store_incarnation,
        master: given.master(),
    });
    Ok(())
}

/// torch's `_start_workers` reached the simulated processes: records what the model's agent
/// records (ranks, start, resumed checkpoint) and starts the job's workers.
pub fn start(
    env: &NodeEnv,
    round: &RoundSeen,
    envs: &[WorkerEnv],
    highest_step: &Arc<AtomicU64>,
    mutants: &Arc<Mutants>,
    rule: AgentStoreRule,
) -> Result<Workers, String> {
    let given = GivenRanks::of(envs)?;
    record_start(env, round, &given, &envs[0])?;
    let checkpoint = job::resume_from_checkpoint(env, highest_step);
    let plan = GroupPlan {
        round: round.round,
        store_incarnation: round.store_incarnation,
        bootstrap: WorkerBootstrap::of_script(env, given.master_given(), given.group_rank, rule),
        group_rank: given.group_rank,
        members: round.participants.iter().map(|node| node.0).collect(),
        start_step: checkpoint.step,
        checkpoint,
        base_global_rank: given.base_global_rank,
        world_size: given.world_size,
        local_world_size: given.local_world_size,
    };
    let status = Arc::new(Mutex::new(WorkerStatus::Healthy));
    env.spawn_workers(job::train(
        env.clone(),
        plan,
        status.clone(),
        highest_step.clone(),
        Arc::clone(mutants),
    ));
    Ok(Workers { status })
}

impl Workers {
    /// torch's `pcontext.wait(0)`: the workers' state now, a crash the world injected first.
    pub fn poll(&self, env: &NodeEnv) -> WorkerStatus {
        job::monitored(env, &self.status)
    }

    /// torch's `pcontext.close`: the signal ends the workers at once (their peers'
    /// connections reset), and the agent waits for them to exit.
    pub async fn stop(self, env: &NodeEnv, reason: &str) {
        env.end_workers();
        time::sleep(WORKERS_EXIT_WAIT).await;
        env.record(EventKind::WorkersStopped {
            pid: env.pid,
            reason: reason.into(),
        });
    }

    /// The process is gone (its agent exited or was killed): its workers die with it.
    pub fn abandon(self, env: &NodeEnv) {
        env.end_workers();
    }
}
