//! One agent process from its start to its exit, as torch's `launch_agent` runs it: the
//! store client and rendezvous handler it creates, the run loop (`super::run`), and the
//! signals that end it, handled (`SignalException`) or by their default action.

use super::policy::closes_rendezvous_on_exit;
use super::run::{invoke_run, settings_with_mutants, stop_workers_wait};
use crate::mutant::Mutants;
use crate::rendezvous::handler::{RendezvousError, RendezvousHandler};
use crate::scenario::model::Signal;
use crate::sim_time::SimDuration;
use crate::store::service::StoreClient;
use crate::store::signal_gate::{MainThread, SignalGate};
use crate::trace::{AgentState, EventKind, ExitReason};
use crate::world::{time, AgentExit, NodeEnv};
use futures::future::{select, Either};
use std::sync::Arc;

/// torch's `shutdown_timeout`: how long `_shutdown` waits for workers that caught its
/// signal before it sends SIGKILL.
const SHUTDOWN_TIMEOUT: SimDuration = SimDuration::from_secs(30);

/// One agent process, from start to exit, with the run's planted bugs (none for torch's
/// behaviour) switched on in its rendezvous settings and handed to its workers.
pub async fn agent_process(env: NodeEnv, mutants: Arc<Mutants>) -> AgentExit {
    let settings = settings_with_mutants(&env, &mutants);
    // `create_backend` makes the one TCPStore client the whole agent process uses.
    let read_timeout = env.scenario().rendezvous.read_timeout;
    let store = match StoreClient::connect(env.store_addr(), read_timeout).await {
        Ok(store) => store,
        Err(e) => {
            return AgentExit {
                state: AgentState::Failed,
                reason: e.to_string().into(),
            }
        }
    };
    let handler = match RendezvousHandler::create(env.clone(), settings, store.clone()).await {
        Ok(h) => h,
        Err(e) => return rendezvous_error_exit(&env, e),
    };
    let gate = Arc::new(SignalGate::default());
    let run = Box::pin(MainThread::new(
        Arc::clone(&gate),
        invoke_run(&env, &handler, &store, &mutants, &gate),
    ));
    let signalled = Box::pin(signal_arrival(&env, &gate));
    let exit = match select(run, signalled).await {
        // The default action ends the process at once, with no shutdown and no log line.
        // The run future owns the workers' handle: dropping it leaves any running group
        // alive, orphaned, as the signal never reached it.
        Either::Right((Arrival::DefaultAction(signal), run)) => {
            drop(run);
            AgentExit {
                state: AgentState::Failed,
                reason: ExitReason::SignalDefaultAction { signal },
            }
        }
        Either::Right((Arrival::Handled, run)) => signal_exception(&env, &handler, run).await,
        Either::Left((result, _signalled)) => {
            let exit = match result {
                Ok(exit) => exit,
                Err(e) => rendezvous_error_exit(&env, e),
            };
            // `launch_agent` closes the rendezvous on every other exit, success included
            // (unless the fix `keep-open-on-failure` keeps it open for a failed agent).
            if closes_rendezvous_on_exit(exit.state, &env.scenario().agent.fixes) {
                handler.shutdown().await;
            } else {
                handler.stop_heartbeats().await;
            }
            exit
        }
    };
    exit
}

/// How a signal to the agent takes effect.
enum Arrival {
    /// torchrun has no handler for it: its default action ends the process.
    DefaultAction(Signal),
    /// torchrun's handler raises `SignalException` in the main thread.
    Handled,
}

/// Waits for a signal to this agent and for the moment it acts. A user signal torchrun
/// does not handle, or SIGTERM before torchrun installed its handler, ends the process at
/// once; a handled one acts when the main thread's store call in progress returns.
async fn signal_arrival(env: &NodeEnv, gate: &SignalGate) -> Arrival {
    env.stop_signal().await;
    if let Some(signal) = env.fatal_signal() {
        return Arrival::DefaultAction(signal);
    }
    if !gate.handler_installed() {
        return Arrival::DefaultAction(Signal::Term);
    }
    gate.deliver(time::now_whole_us()).await;
    Arrival::Handled
}

/// torchrun's `SignalException` path: the workers stop (unless a script that checkpoints on
/// the signal trains on through the shutdown timeout), and the process exits without
/// closing the rendezvous (so the rest of the job can go on without this node) or waiting
/// for a keep-alive in flight.
async fn signal_exception(
    env: &NodeEnv,
    handler: &RendezvousHandler,
    run: impl std::future::Future + Unpin,
) -> AgentExit {
    let caught = env.stop_signal_caught();
    // A script that checkpoints on the signal caught it and trains on: the agent
    // waits out its shutdown timeout before SIGKILL (31.6 s measured on torch 2.15).
    if caught.is_some() && caught == env.scenario().job.checkpoint_on_signal {
        let _ = select(run, Box::pin(time::sleep(SHUTDOWN_TIMEOUT))).await;
    } else {
        drop(run);
    }
    // The signal reaches the workers: they die on a live host, so their connections close.
    env.end_workers();
    stop_workers_wait().await;
    handler.abandon_heartbeats();
    let signal = caught.map_or("SIGTERM".to_owned(), |s| s.to_string());
    AgentExit {
        state: AgentState::Stopped,
        reason: format!("{signal}: the agent shut down its workers").into(),
    }
}

/// Records a rendezvous error and turns it into the agent's exit. Every error fails the
/// agent. A graceful exit too: `SimpleElasticAgent.run` logs it and returns no result, and
/// `launch_agent` then fails on that missing result (`'NoneType' object has no attribute
/// 'is_failed'`), so a redundant node's torchrun exits 1 once the rendezvous closes.
fn rendezvous_error_exit(env: &NodeEnv, e: RendezvousError) -> AgentExit {
    env.record(EventKind::RendezvousFailed {
        pid: env.pid,
        error: e.kind(),
        message: e.to_string(),
    });
    match e {
        RendezvousError::GracefulExit(_) => AgentExit {
            state: AgentState::Failed,
            reason: format!(
                "graceful exit ({e}); launch_agent then fails on the missing run result"
            )
            .into(),
        },
        _ => AgentExit {
            state: AgentState::Failed,
            reason: e.to_string().into(),
        },
    }
}
