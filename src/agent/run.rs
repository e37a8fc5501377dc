//! The elastic agent's run loop on one node, following torch's `SimpleElasticAgent._invoke_run`
//! and `launch_agent`: rendezvous, start workers, monitor every `monitor_interval`, restart on
//! failure while the budget lasts, restart uncounted on a membership change, and the exit
//! barrier on success. The process around it, and its signals, are `super::process`.

use super::policy::{assert_group_transition, AgentFix, Decision, RestartPolicy, WorkerGroupState};
use super::rank_exchange::{
    exchange_ranks, group_restart_count_max, identical_ranks, publish_restart_count, AssignedRanks,
    DEFAULT_ROLE,
};
use crate::job::bootstrap::{AgentStoreRule, WorkerBootstrap};
use crate::job::{self, GroupPlan, WorkerStatus};
use crate::mutant::Mutants;
use crate::rendezvous::handler::{RendezvousError, RendezvousHandler, RendezvousInfo};
use crate::rendezvous::settings::RendezvousSettings;
use crate::sim_time::{span_between_readings, SimDuration, SimInstant};
use crate::store::service::StoreClient;
use crate::store::signal_gate::SignalGate;
use crate::trace::{AgentState, EventKind, ExitReason};
use crate::world::quiet::Settle;
use crate::world::wake::Wake;
use crate::world::{time, AgentExit, NodeEnv};
use futures::future::{select, Either};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

pub use crate::scenario::model::RUN_ID;

/// The rendezvous settings of a scenario, with the planted bugs (mutants) the command line
/// switched on; a scenario file never sets them.
pub fn settings_with_mutants(env: &NodeEnv, mutants: &Mutants) -> RendezvousSettings {
    RendezvousSettings::of_scenario(&env.scenario().rendezvous, mutants.rendezvous.clone())
}

/// The rendezvous settings of a scenario, without mutants.
pub fn settings_of(env: &NodeEnv) -> RendezvousSettings {
    RendezvousSettings::of_scenario(&env.scenario().rendezvous, Default::default())
}

/// How long the agent waits for its workers to exit after SIGTERM: they die at once (no
/// handler is installed for it), and `Popen.wait`'s poll backs off to 50 ms between looks.
/// Far below torch's `shutdown_timeout` (30 s), after which it would send SIGKILL.
const WORKERS_EXIT_WAIT: SimDuration = SimDuration::from_ms(50);

/// The agent's wait in `_shutdown` / `_stop_workers` for its workers to be gone.
pub(super) async fn stop_workers_wait() {
    time::sleep(WORKERS_EXIT_WAIT).await;
}

/// A running worker group on this node.
struct Workers {
    info: RendezvousInfo,
    status: Arc<Mutex<WorkerStatus>>,
}

impl Workers {
    /// torch's `_stop_workers`: SIGTERM ends the workers at once (their peers' connections
    /// reset), and the agent waits for them to exit.
    async fn stop(self, env: &NodeEnv, reason: &str) {
        self.end(env);
        stop_workers_wait().await;
        record_stopped(env, reason);
    }

    /// The workers ended on their own: nothing is left to stop or wait for.
    fn exited(self, env: &NodeEnv) {
        self.end(env);
        record_stopped(env, "succeeded");
    }

    /// Their task is gone and their connections closed.
    fn end(self, env: &NodeEnv) {
        env.end_workers();
    }
}

fn record_stopped(env: &NodeEnv, reason: &str) {
    env.record(EventKind::WorkersStopped {
        pid: env.pid,
        reason: reason.into(),
    });
}

/// The worker group's state as torch's `WorkerGroup.state`, recorded when it changes.
struct GroupState {
    last: Option<WorkerGroupState>,
}

impl GroupState {
    fn enter(&mut self, env: &NodeEnv, state: WorkerGroupState) {
        assert_group_transition(self.last, state);
        if self.last == Some(state) {
            return;
        }
        self.last = Some(state);
        env.record(EventKind::WorkerGroupState {
            pid: env.pid,
            state,
        });
    }
}

/// torch's `_invoke_run`: the monitor loop. The group starts in INIT, is HEALTHY once its
/// workers run, takes the monitored state (FAILED, SUCCEEDED) each tick, and is STOPPED
/// between a restart's stop and the next start.
pub(super) async fn invoke_run(
    env: &NodeEnv,
    handler: &RendezvousHandler,
    store: &StoreClient,
    mutants: &Arc<Mutants>,
    gate: &Arc<SignalGate>,
) -> Result<AgentExit, RendezvousError> {
    let agent = &env.scenario().agent;
    let mut policy = RestartPolicy::new(agent.max_restarts, agent.fixes.iter().copied().collect());
    let launch = Launch {
        highest_step: Arc::new(AtomicU64::new(0)),
        mutants: Arc::clone(mutants),
        signal_gate: Arc::clone(gate),
    };
    let mut group = GroupState { last: None };
    group.enter(env, WorkerGroupState::Init);
    let mut workers = initialize_workers(env, handler, store, &mut policy, &launch).await?;
    group.enter(env, WorkerGroupState::Healthy);
    let wake = env.monitor_wake();
    let settle = quiet_settle(env);
    let mut quiet = false;
    loop {
        next_tick(env, handler, &wake, agent.monitor_interval, quiet).await;
        // Whatever changes from here on is seen by this tick or wakes the next one.
        wake.clear();
        let status = monitor(env, &workers);
        if status != WorkerStatus::Healthy {
            // About to act: whoever sleeps through a quiet window wakes first.
            env.set_busy();
        }
        let (decision, why) = match status {
            WorkerStatus::Succeeded => {
                return Ok(succeeded(env, store, &mut group, workers).await);
            }
            WorkerStatus::Failed {
                local_rank,
                exit_code,
                reason,
            } => worker_failed(env, &mut group, &mut policy, local_rank, exit_code, reason),
            WorkerStatus::Healthy => match nodes_waiting(handler, &mut policy, &workers.info).await
            {
                Ok(decision) => (decision, MEMBER_CAME_BACK.into()),
                Err(e) => return Err(shut_down_on_error(env, workers, e).await),
            },
        };
        quiet = decision == Decision::Continue;
        match decision {
            Decision::Continue => env.set_quiet(settle),
            Decision::GiveUp => {
                env.set_busy();
                workers.stop(env, "no restarts remain").await;
                group.enter(env, WorkerGroupState::Failed);
                return Ok(AgentExit {
                    state: AgentState::Failed,
                    reason: ExitReason::BudgetSpent { last_failure: why },
                });
            }
            Decision::Restart { counted, reason } => {
                env.set_busy();
                record_restart(env, counted, policy.restart_count(), reason.name());
                workers.stop(env, reason.stop_reason()).await;
                group.enter(env, WorkerGroupState::Stopped);
                workers = initialize_workers(env, handler, store, &mut policy, &launch).await?;
                group.enter(env, WorkerGroupState::Healthy);
            }
        }
    }
}

/// Why a healthy group restarts when the rendezvous has nodes waiting.
const MEMBER_CAME_BACK: &str = "a member of the group came back as a new process";

/// `SimpleElasticAgent.run`'s `finally`: an error leaving `_invoke_run` while workers run
/// goes through `_shutdown` first, which stops them.
async fn shut_down_on_error(
    env: &NodeEnv,
    workers: Workers,
    e: RendezvousError,
) -> RendezvousError {
    workers
        .stop(env, "the agent failed and shut them down")
        .await;
    e
}

/// The group succeeded: its workers have exited (that is how the monitor saw it), and the
/// agent goes straight to the exit barrier, as `_invoke_run` does.
async fn succeeded(
    env: &NodeEnv,
    store: &StoreClient,
    group: &mut GroupState,
    workers: Workers,
) -> AgentExit {
    group.enter(env, WorkerGroupState::Succeeded);
    let info = workers.info.clone();
    workers.exited(env);
    exit_barrier(env, store, &info).await;
    AgentExit {
        state: AgentState::Succeeded,
        reason: "every worker finished".into(),
    }
}

/// A worker failed: records it, and decides with the restart policy whether the group
/// restarts or the agent gives up (never that it keeps monitoring). Returns the decision
/// and the failure it answers.
fn worker_failed(
    env: &NodeEnv,
    group: &mut GroupState,
    policy: &mut RestartPolicy,
    local_rank: u32,
    exit_code: i32,
    reason: String,
) -> (Decision, String) {
    env.record(EventKind::WorkerFailed {
        pid: env.pid,
        local_rank,
        exit_code,
        reason: reason.clone(),
    });
    env.clear_worker_crash();
    group.enter(env, WorkerGroupState::Failed);
    let why = format!("worker {local_rank} failed ({reason})");
    let decision = policy.on_failure();
    // A failed group is never left running: torch restarts it or gives up.
    assert_ne!(
        decision,
        Decision::Continue,
        "the policy kept monitoring a group whose {why}"
    );
    (decision, why)
}

/// Waits for the monitor's next tick that can see something new. Ticks fall every
/// `interval` from now, as torch's `time.sleep(monitor_interval)` loop puts them. After a
/// `quiet` tick (workers healthy, nobody waiting) the ticks that would only re-read the
/// same worker status and the same cached rendezvous state are skipped: the wait ends at the
/// first tick at which the holder's cache has gone stale (that tick reads the store), or at
/// the first tick after a worker crash, the workers' end or a keep-alive sync (`wake`).
/// Skipping changes no decision; it saves one event per idle tick. A tick woken less than
/// 1 ms before it is due lands 1 ms after the wake (madsim's shortest sleep).
async fn next_tick(
    env: &NodeEnv,
    handler: &RendezvousHandler,
    wake: &Arc<Wake>,
    interval: SimDuration,
    quiet: bool,
) {
    // Validation makes `monitor_interval` positive; the tick arithmetic divides by it. A
    // skipped wait resumes on a grid read on the whole-microsecond clock, so the grid's
    // step is whole microseconds too.
    let grid = interval.floor_to(SimDuration::from_us(1));
    assert!(!grid.is_zero(), "the monitor ticks every 0 us");
    // Not read while an op (a keep-alive) holds the rendezvous state: the monitor never
    // waits on that lock before looking at its workers.
    let fresh_until_mono_us = handler.cache_fresh_until_mono_us();
    let (true, Some(fresh_until_mono_us)) = (quiet, fresh_until_mono_us) else {
        time::sleep(interval).await;
        return;
    };
    let start = time::now_whole_us();
    if env.sleep_through_window(wake) {
        // Every agent only repeats its routine: sleep until something may change, then
        // go on at the next tick of the grid.
        wake.notified().await;
        handler.count_skipped_reads(start, grid);
        time::sleep_until_whole_us(start.after(first_tick_after(start, grid))).await;
        return;
    }
    // The first tick strictly after the cache's last fresh moment reads the store.
    let fresh_for = span_between_readings(env.now_mono_us(), fresh_until_mono_us);
    let to_stale = fresh_for.floor_to(grid).saturating_add(grid);
    let idle = std::pin::pin!(time::sleep(to_stale));
    if let Either::Right(((), _)) = select(idle, wake.notified()).await {
        time::sleep_until_whole_us(start.after(first_tick_after(start, grid))).await;
    }
}

/// The span from `start` to the first tick of its grid of `interval`s at or after now, and
/// at least one tick: where a monitor woken early resumes.
fn first_tick_after(start: SimInstant, interval: SimDuration) -> SimDuration {
    let now = time::now_whole_us();
    assert!(
        now >= start,
        "simulated time never runs backwards while the monitor waits"
    );
    now.since(start).ceil_to(interval).max(interval)
}

/// How long after a disturbance this agent's routine is simulated message by message
/// before a quiet window may skip it (the same settle as a join's wait).
fn quiet_settle(env: &NodeEnv) -> Settle {
    let scenario = env.scenario();
    crate::rendezvous::quiet_wait::settle(
        &settings_of(env),
        scenario.agent.monitor_interval,
        scenario.network.latency_max,
    )
}

/// The HEALTHY branch: torch asks `num_nodes_waiting()`; the waiting nodes' addresses are
/// read only when the fix `count-rejoined-failures` needs them.
async fn nodes_waiting(
    handler: &RendezvousHandler,
    policy: &mut RestartPolicy,
    info: &RendezvousInfo,
) -> Result<Decision, RendezvousError> {
    let waiting_count = handler.num_nodes_waiting().await?;
    let waiting = if waiting_count > 0 && policy.has_fix(AgentFix::CountRejoinedFailures) {
        handler.waiting_nodes().await?
    } else {
        Vec::new()
    };
    Ok(policy.on_nodes_waiting(waiting_count, &waiting, &info.participants))
}

/// Records a worker-group restart; `counted` ones spend `max_restarts`.
fn record_restart(env: &NodeEnv, counted: bool, restart_count: u32, reason: &str) {
    env.record(EventKind::AgentRestart {
        pid: env.pid,
        counted,
        restart_count,
        reason: reason.into(),
    });
}

/// torch's `_monitor_workers` for local processes, with crashes injected by the world.
fn monitor(env: &NodeEnv, workers: &Workers) -> WorkerStatus {
    job::monitored(env, &workers.status)
}

/// What every worker group this agent starts shares: the highest step its workers ever
/// completed, across groups (so the agent can tell how many steps a restart lost), and the
/// run's planted bugs.
struct Launch {
    highest_step: Arc<AtomicU64>,
    mutants: Arc<Mutants>,
    /// Where `PContext.start` installs torchrun's SIGTERM handler.
    signal_gate: Arc<SignalGate>,
}

/// torch's `_initialize_workers`: rendezvous, assign ranks, then start the workers from the
/// last checkpoint with the restart count (`TORCHELASTIC_RESTART_COUNT`) of this moment.
async fn initialize_workers(
    env: &NodeEnv,
    handler: &RendezvousHandler,
    store: &StoreClient,
    policy: &mut RestartPolicy,
    launch: &Launch,
) -> Result<Workers, RendezvousError> {
    let info = handler.next_rendezvous().await?;
    env.record(EventKind::RendezvousCompleted {
        pid: env.pid,
        round: info.round,
        rank: info.rank,
        world_size: info.world_size,
        participants: info.participants.clone(),
        store_incarnation: info.store_incarnation,
    });
    if let Some(rank0) = info.participants.first() {
        super::rank0::round_completed(env, info.store_incarnation, info.round, rank0.0);
    }
    let prefix = format!("{}/", settings_of(env).round_store_prefix(info.round));
    let shared = policy.has_fix(AgentFix::SharedRestartCount);
    if shared {
        publish_restart_count(store, &prefix, &info, policy.restart_count()).await?;
    }
    let local_world_size = env.scenario().agent.nproc_per_node;
    let ranks = if env.scenario().agent.worker_identical {
        identical_ranks(&info, u64::from(local_world_size))
    } else {
        exchange_ranks(store, &prefix, &info, u64::from(local_world_size)).await?
    };
    if shared {
        policy.adopt_group_count(group_restart_count_max(store, &prefix, &info).await?);
    }
    env.record(EventKind::RanksAssigned {
        pid: env.pid,
        round: info.round,
        store_incarnation: info.store_incarnation,
        group_rank: info.rank,
        role: DEFAULT_ROLE.into(),
        local_world_size,
        base_global_rank: ranks.base_global_rank,
        world_size: ranks.world_size,
        base_role_rank: ranks.base_role_rank,
        role_world_size: ranks.role_world_size,
    });
    Ok(start_workers(
        env,
        info,
        &ranks,
        policy.restart_count(),
        launch,
    ))
}

/// torch's `_start_workers`: the one place a [`GroupPlan`] is built, from the round and the
/// assigned ranks.
fn start_workers(
    env: &NodeEnv,
    info: RendezvousInfo,
    ranks: &AssignedRanks,
    restart_count: u32,
    launch: &Launch,
) -> Workers {
    let highest_step = &launch.highest_step;
    launch.signal_gate.install_handler();
    env.record(EventKind::WorkersStarted {
        pid: env.pid,
        round: info.round,
        group_rank: info.rank,
        world_size: info.world_size,
        restart_count,
        store_incarnation: info.store_incarnation,
        master: info.master.to_string(),
    });
    let checkpoint = job::resume_from_checkpoint(env, highest_step);
    let start_step = checkpoint.step;
    let members = info.participants.iter().map(|node| node.0).collect();
    let rule = AgentStoreRule::of_model(env.scenario());
    let plan = GroupPlan {
        round: info.round,
        store_incarnation: info.store_incarnation,
        bootstrap: WorkerBootstrap::of_script(env, (&info.master).into(), info.rank, rule),
        group_rank: info.rank,
        members,
        start_step,
        checkpoint,
        base_global_rank: ranks.base_global_rank,
        world_size: ranks.world_size,
        local_world_size: env.scenario().agent.nproc_per_node,
    };
    let status = Arc::new(Mutex::new(WorkerStatus::Healthy));
    env.spawn_workers(job::train(
        env.clone(),
        plan,
        status.clone(),
        highest_step.clone(),
        Arc::clone(&launch.mutants),
    ));
    Workers { info, status }
}

/// torch's `_exit_barrier`: every agent of the group waits (up to the barrier timeout) for the
/// others to finish; errors are logged, never raised. It runs on the agent's shared client
/// (the round's prefix store over it): while it waits for the last member, the client's
/// lock is held, so this agent's keep-alives wait too and its heartbeat goes stale. The
/// barrier timeout is set on the client (`store_timeout`) and, as `store_timeout` restores
/// it without a `finally`, stays set when the barrier raises.
async fn exit_barrier(env: &NodeEnv, store: &StoreClient, info: &RendezvousInfo) {
    let timeout = env.scenario().agent.exit_barrier_timeout;
    let prefix = format!(
        "{}/torchelastic/agent/terminal_state",
        settings_of(env).round_store_prefix(info.round)
    );
    let count_key = format!("{prefix}/num_members");
    let last_key = format!("{prefix}/last_member");
    let old_timeout = store.timeout();
    store.set_timeout(timeout);
    let barrier = async {
        let arrived = store.add(&count_key, 1).await?;
        if arrived == info.world_size as i64 {
            store.set(&last_key, b"<val_ignored>".to_vec()).await?;
        }
        store.wait(vec![last_key]).await
    };
    if barrier.await.is_ok() {
        store.set_timeout(old_timeout);
    }
}
