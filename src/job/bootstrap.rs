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
//!
//! torch 2.15 gives the workers no per-attempt key prefix ("we create a new TCPStore for
//! every retry"), so when the rank-0 agent's store outlives a worker group, the next group
//! finds the last group's keys there. A rank that reads a peer's key before the peer
//! rewrote it gets a dead worker's address. Whether that breaks gloo's full-mesh connect
//! depends on which side of the pair dials (`gloo_mesh`): the side that dials a dead address
//! fails at once (its connects are refused, and gloo retries a refused connect only 3 times,
//! without a pause), and a pair whose sides both wait for the other never connects; the
//! ranks waiting for a connection hang in gloo's connect for 5 times the process-group
//! timeout (measured with `conformance/measure_gloo.py stale` on torch 2.15.0: 20.3 to
//! 20.7 s with a 4 s timeout, about 100 s with 20 s, and the conformance runs' 50 s with
//! 10 s). A fresh store (a new rank-0 agent, or no sharing) has no old keys.
//! What decides the race is when each node's workers publish their address: importing torch
//! and setting up gloo take a different time on each node. Groups of 2 and 3 ranks started
//! at the same moment on this 2-core machine reached their gloo setup 0.02 to 0.43 s apart,
//! 0.13 s between two ranks on average (`conformance/measure_gloo.py spread`, 24 groups),
//! which a uniform 0–400 ms per node matches; so with gloo each node publishes after a
//! seeded 0–400 ms, and its device listens on a port drawn from the node's stream. With
//! NCCL the model reads fresh keys: what a stale NCCL unique id does has not been measured.

use super::gloo_mesh::{initiates, GlooAddress, MeshReads};
use super::{GroupPlan, WorkerStatus};
use crate::fixes::AgentFix;
use crate::rendezvous::handler::MasterAddr;
use crate::scenario::model::{Backend, InitMethod, Scenario};
use crate::sim_time::{SimDuration, SimInstant};
use crate::store::service::StoreClient;
use crate::store::{Keys, Value};
use crate::world::time;
use crate::world::{NodeEnv, TaskHandle};
use crate::world::{PORT_FIRST, PORT_LAST};
use rand::Rng;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

/// Where one node's workers bootstrap their process group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerBootstrap {
    /// `MASTER_ADDR:MASTER_PORT` as given, and what it resolves to.
    pub master: String,
    pub master_addr: Option<SocketAddr>,
    /// This node's workers host the store there themselves (no TCPStore sharing, rank 0).
    pub hosts_store: bool,
}

/// What torchrun's agent put in its workers' environment for their process group.
#[derive(Debug, Clone, Copy)]
pub struct GivenMaster<'a> {
    /// `MASTER_ADDR`: a node address (`node-N`).
    pub addr: &'a str,
    /// `MASTER_PORT`.
    pub port: u16,
    /// `TORCHELASTIC_USE_AGENT_STORE=True`: the agent hosts a store at that address.
    pub agent_store: bool,
}

impl<'a> From<&'a MasterAddr> for GivenMaster<'a> {
    fn from(master: &'a MasterAddr) -> Self {
        GivenMaster {
            addr: &master.addr,
            port: master.port,
            agent_store: master.agent_hosted,
        }
    }
}

/// When torch's `_create_c10d_store` takes the agent as the server of the store at an
/// address, making every rank a client, rather than letting the group's rank 0 host it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentStoreRule {
    /// torch 2.14 and later: only at the worker's `MASTER_ADDR:MASTER_PORT` as its
    /// environment holds them at the call. A script that set `MASTER_PORT` itself before
    /// `env://` still matches, and every rank waits for a server nobody runs.
    AtMasterPort,
    /// torch 2.13 and earlier: at every address.
    EveryAddress,
    /// The fix `agent-store-address-exported`: only at the address the agent serves.
    AtAgentPort,
}

impl AgentStoreRule {
    /// The model's rule: torch 2.15's, unless the scenario turns the fix on.
    pub fn of_model(scenario: &Scenario) -> Self {
        if scenario
            .agent
            .fixes
            .contains(&AgentFix::AgentStoreAddressExported)
        {
            AgentStoreRule::AtAgentPort
        } else {
            AgentStoreRule::AtMasterPort
        }
    }

    /// The rule of torch `major.minor` (the address check arrived in 2.14).
    pub fn of_torch(major: u32, minor: u32) -> Self {
        if (major, minor) >= (2, 14) {
            AgentStoreRule::AtMasterPort
        } else {
            AgentStoreRule::EveryAddress
        }
    }
}

impl WorkerBootstrap {
    /// Where a node's workers bootstrap: what their agent gave them, as the training script
    /// uses it (`job.init_method`, `job.script_master_port`).
    pub fn of_script(
        env: &NodeEnv,
        given: GivenMaster<'_>,
        group_rank: u32,
        rule: AgentStoreRule,
    ) -> WorkerBootstrap {
        let job = &env.scenario().job;
        let (port, agent_serves) =
            script_store(given.port, job.init_method, job.script_master_port, rule);
        let client_of_agent = given.agent_store && agent_serves;
        WorkerBootstrap {
            master: format!("{}:{port}", given.addr),
            master_addr: env.resolve(given.addr, port),
            hosts_store: !client_of_agent && group_rank == 0,
        }
    }
}

/// The port the script's process group meets at, and whether `_create_c10d_store` takes the
/// agent as the server there under `rule` (when the agent shares its store).
fn script_store(
    given_port: u16,
    init_method: InitMethod,
    script_port: Option<u16>,
    rule: AgentStoreRule,
) -> (u16, bool) {
    let port = script_port.unwrap_or(given_port);
    // What `MASTER_PORT` holds at the call: the script overwrote it for `env://`.
    let master_port_at_call = match init_method {
        InitMethod::Env => port,
        InitMethod::Tcp => given_port,
    };
    let agent_serves = match rule {
        AgentStoreRule::EveryAddress => true,
        AgentStoreRule::AtMasterPort => port == master_port_at_call,
        AgentStoreRule::AtAgentPort => port == given_port,
    };
    (port, agent_serves)
}

/// Runs the bootstrap; on success returns the store server these workers host, if any (it
/// lives as long as the workers).
pub async fn init_process_group(
    env: &NodeEnv,
    plan: &GroupPlan,
) -> Result<Option<TaskHandle<()>>, WorkerStatus> {
    let boot = &plan.bootstrap;
    let timeout = env.scenario().job.collective_timeout;
    let fail = |why: String| WorkerStatus::Failed {
        local_rank: 0,
        exit_code: 1,
        reason: format!("init_process_group through {}: {why}", boot.master),
    };
    let Some(addr) = boot.master_addr else {
        return Err(fail("the address does not resolve".into()));
    };
    let server = boot.hosts_store.then(|| env.serve_store(addr.port()));
    let store = StoreClient::connect(addr, timeout)
        .await
        .map_err(|e| fail(e.to_string()))?;
    // Every group writes the same keys; the value says which group wrote it.
    let group = format!("{}.{}", plan.store_incarnation, plan.round);
    let gloo =
        (env.scenario().job.backend == Backend::Gloo).then(|| GlooSide::of(env, plan, &group));
    let mut value = group.clone();
    if let Some(side) = &gloo {
        let setup_us = env
            .rng(&format!("gloo-setup/{group}"))
            .gen_range(0..=GLOO_SETUP_JITTER.as_us());
        time::sleep(SimDuration::from_us(setup_us)).await;
        side.mesh.publish(&group, side.block, side.address);
        value = side.address.published(&group);
    }
    let addresses = publish_and_wait(env, &store, KEY_PREFIX, plan, &value)
        .await
        .map_err(|e| fail(format!("publishing its address: {e}")))?;
    if let Some(side) = &gloo {
        let addresses = store
            .multi_get(Arc::clone(&addresses))
            .await
            .map_err(|e| fail(format!("reading every rank's address: {e}")))?;
        if let Err((at, why)) = side.read(&group, &addresses, time::now_whole_us()) {
            time::sleep_until_whole_us(at).await;
            let exit = time::now_whole_us().after(env.scenario().job.worker_exit_time);
            side.mesh.exits(&group, side.block, exit);
            return Err(fail(why));
        }
    }
    connect_mesh(env, &store, plan, &group, timeout, gloo.as_ref())
        .await
        .map_err(fail)?;
    Ok(server)
}

/// One node's side of gloo's full mesh (`gloo_mesh`): its device's address and the group's
/// record of what every side read.
struct GlooSide {
    address: GlooAddress,
    /// This node's block of ranks in the group's keys, and the ranks in a block.
    block: u64,
    ranks_per_block: u64,
    mesh: Arc<MeshReads>,
    one_machine: bool,
}

impl GlooSide {
    /// The device listens on a free port, drawn per worker group from the node's stream.
    fn of(env: &NodeEnv, plan: &GroupPlan, group: &str) -> GlooSide {
        let ranks_per_block = u64::from(plan.local_world_size.max(1));
        let port = env
            .rng(&format!("gloo-port/{group}"))
            .gen_range(PORT_FIRST..=PORT_LAST);
        GlooSide {
            address: GlooAddress {
                node: env.index,
                port,
            },
            block: plan.base_global_rank / ranks_per_block,
            ranks_per_block,
            mesh: env.shared::<MeshReads>("job/gloo_mesh"),
            one_machine: env.scenario().cluster.one_machine,
        }
    }

    /// Takes every rank's address as read: an earlier group's is recorded. Fails with when
    /// and why if this side dials a dead worker: an earlier group's address is refused at
    /// once (gloo retries a refused connect only 3 times, without a pause), and a peer of
    /// this group that failed first refuses, or resets, the connect when its process exits.
    fn read(
        &self,
        group: &str,
        values: &[Value],
        now: SimInstant,
    ) -> Result<(), (SimInstant, String)> {
        let mut refused: Option<(SimInstant, u64, &str)> = None;
        for (peer, value) in (0u64..).zip(values) {
            let Some((written_by, address)) = GlooAddress::parse(value.bytes()) else {
                let rank = peer * self.ranks_per_block;
                return Err((now, format!("rank {rank}'s address is unreadable")));
            };
            if peer == self.block {
                continue;
            }
            let stale = written_by != group;
            if stale {
                self.mesh.read_stale(group, self.block, peer, address);
            }
            if !initiates(self.address, address, self.one_machine) {
                continue;
            }
            let failure = if stale {
                Some((
                    now,
                    peer,
                    "address is an earlier group's, a dead worker's: connection refused",
                ))
            } else {
                let why = "worker failed before the mesh connected: connection refused or reset";
                self.mesh
                    .exit_of(group, peer)
                    .map(|exit| (exit.max(now), peer, why))
            };
            // The first failure in time ends the connect; on a tie, the lowest rank's.
            refused = refused
                .into_iter()
                .chain(failure)
                .min_by_key(|&(at, ..)| at);
        }
        refused
            .map(|(at, peer, why)| {
                let rank = peer * self.ranks_per_block;
                (at, format!("gloo connectFullMesh: rank {rank}'s {why}"))
            })
            .map_or(Ok(()), Err)
    }
}

/// The mesh is up only when every rank connected: one that dialled a dead address never
/// does, and the others' connects time out (gloo's after 5 process-group timeouts), as do
/// both sides of a pair that each wait for the other to dial. Fails with why.
async fn connect_mesh(
    env: &NodeEnv,
    store: &StoreClient,
    plan: &GroupPlan,
    group: &str,
    timeout: SimDuration,
    gloo: Option<&GlooSide>,
) -> Result<(), String> {
    let connect_timeout = match gloo {
        Some(_) => timeout.saturating_mul(GLOO_CONNECT_TIMEOUTS),
        None => timeout,
    };
    store.set_timeout(connect_timeout);
    let connecting_since = time::now_whole_us();
    let gloo_timeout = || {
        format!(
            "gloo connectFullMesh: connect timeout after {} us: a rank never connected",
            connect_timeout.as_us()
        )
    };
    let prefix = format!("{KEY_PREFIX}/connected/{group}");
    let connected = publish_and_wait(env, store, &prefix, plan, "1").await;
    connected.map_err(|e| {
        let waited = time::now_whole_us().since(connecting_since);
        if gloo.is_some() && waited >= connect_timeout {
            gloo_timeout()
        } else {
            format!("connecting to every rank: {e}")
        }
    })?;
    if let Some(side) = gloo {
        // Every side has read by now (each publishes its key after reading).
        if !side.mesh.all_pairs_connect(group, side.one_machine) {
            time::sleep_until_whole_us(connecting_since.after(connect_timeout)).await;
            return Err(gloo_timeout());
        }
    }
    Ok(())
}

/// Writes this node's `value` under `prefix/rank_<its first global rank>` and waits until
/// every node block of the workers' world (`WORLD_SIZE`, from the rank assignment) has a
/// key there; returns the keys. The world comes from the workers' environment, not from
/// this node's view of the round, as in torch: a node whose view of the round disagrees
/// (sanitize dropped a participant before `_get_world`) waits for ranks its view lacks.
async fn publish_and_wait(
    env: &NodeEnv,
    store: &StoreClient,
    prefix: &str,
    plan: &GroupPlan,
    value: &str,
) -> Result<Keys, crate::store::service::StoreError> {
    let block = u64::from(plan.local_world_size.max(1));
    let keys = env.shared::<KeyLists>("job/bootstrap_keys").keys(
        prefix,
        plan.world_size.div_ceil(block),
        block,
    );
    let own = format!("{prefix}/rank_{}", plan.base_global_rank);
    store.set(&own, value.as_bytes().to_vec()).await?;
    store.wait(Arc::clone(&keys)).await?;
    Ok(keys)
}

/// The key lists the run's nodes wait for, each made once: every node of a round waits for
/// the same keys of every node block, and making and comparing them node by node cost a
/// round of N nodes N² formatted keys.
#[derive(Default)]
struct KeyLists {
    /// The latest lists, newest first, by prefix, node blocks and block size.
    latest: Mutex<VecDeque<(KeyListOf, Keys)>>,
}

/// What names a key list: the prefix, how many node blocks, and their size in ranks.
type KeyListOf = (String, u64, u64);

/// Key lists kept: a round's two (the addresses and the connections), and the last round's.
const KEY_LISTS_MAX: usize = 4;

impl KeyLists {
    /// `prefix/rank_<first rank>` of each of `nodes` blocks of `block` ranks: the list made
    /// before when there is one.
    fn keys(&self, prefix: &str, nodes: u64, block: u64) -> Keys {
        let mut latest = self.latest.lock().expect("key lists lock");
        let kept = latest
            .iter()
            .find(|((p, n, b), _)| p == prefix && *n == nodes && *b == block);
        if let Some((_, keys)) = kept {
            return Arc::clone(keys);
        }
        let keys: Keys = (0..nodes)
            .map(|node| format!("{prefix}/rank_{}", node * block))
            .collect();
        latest.push_front(((prefix.to_owned(), nodes, block), Arc::clone(&keys)));
        latest.truncate(KEY_LISTS_MAX);
        keys
    }
}

/// The spread of gloo's setup time across nodes, before each publishes its address
/// (measured; see the module docs).
const GLOO_SETUP_JITTER: SimDuration = SimDuration::from_ms(400);

/// How many process-group timeouts a gloo rank waits for a peer to connect to it
/// (measured; see the module docs).
const GLOO_CONNECT_TIMEOUTS: u64 = 5;

/// Where the workers' keys live in the store; torch adds no per-attempt prefix.
const KEY_PREFIX: &str = "/worker";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_port_under_env_is_trusted_to_the_agent_from_torch_2_14_unless_fixed() {
        use InitMethod::{Env, Tcp};
        // torchrun's MASTER_PORT is 29500; the script's own is 12355.
        let store =
            |method, own: bool, rule| script_store(29_500, method, own.then_some(12_355), rule);
        let at = AgentStoreRule::of_torch(2, 15);
        assert_eq!(at, AgentStoreRule::AtMasterPort);
        assert_eq!(store(Env, false, at), (29_500, true));
        assert_eq!(store(Env, true, at), (12_355, true));
        assert_eq!(store(Tcp, true, at), (12_355, false));
        assert_eq!(store(Tcp, false, at), (29_500, true));
        let old = AgentStoreRule::of_torch(2, 13);
        assert_eq!(old, AgentStoreRule::EveryAddress);
        assert_eq!(store(Tcp, true, old), (12_355, true));
        let fixed = AgentStoreRule::AtAgentPort;
        assert_eq!(store(Env, true, fixed), (12_355, false));
        assert_eq!(store(Env, false, fixed), (29_500, true));
    }

    #[test]
    fn a_side_that_dials_a_failed_peer_fails_when_its_process_exits() {
        let mesh = Arc::new(MeshReads::default());
        let side = |node: u32, port: u16| GlooSide {
            address: GlooAddress { node, port },
            block: u64::from(node),
            ranks_per_block: 1,
            mesh: Arc::clone(&mesh),
            one_machine: true,
        };
        // Ports compare byte-swapped: 0x0200 dials 0x0100, never the other way round.
        let (low, high) = (side(0, 0x0100), side(1, 0x0200));
        let values = |a: GlooAddress, b: GlooAddress| -> Vec<Value> {
            let value = |x: GlooAddress| Value::from(x.published("0.1").into_bytes());
            vec![value(a), value(b)]
        };
        let at = |ms| SimInstant::START.after(SimDuration::from_ms(ms));
        // Both read each other as published: nobody fails.
        assert!(high
            .read("0.1", &values(low.address, high.address), at(10))
            .is_ok());
        // `low` failed before connecting and exits at 50 ms: `high` dials it, refused or
        // reset then, while `low`'s own view of a failed `high` changes nothing (it listens).
        mesh.exits("0.1", 0, at(50));
        let (when, why) = high
            .read("0.1", &values(low.address, high.address), at(10))
            .unwrap_err();
        assert_eq!(when, at(50));
        assert!(why.contains("rank 0's worker failed"), "{why}");
        mesh.exits("0.1", 1, at(60));
        assert!(low
            .read("0.1", &values(low.address, high.address), at(70))
            .is_ok());
    }

    #[test]
    fn a_key_list_is_made_once_and_names_every_node_block() {
        let lists = KeyLists::default();
        let keys = lists.keys("/worker", 3, 8);
        assert_eq!(
            &*keys,
            ["/worker/rank_0", "/worker/rank_8", "/worker/rank_16"]
        );
        assert!(Arc::ptr_eq(&keys, &lists.keys("/worker", 3, 8)));
        assert_eq!(lists.keys("/worker", 2, 8).len(), 2);
        assert!(!Arc::ptr_eq(&keys, &lists.keys("/other", 3, 8)));
    }
}
