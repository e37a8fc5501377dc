//! One node's torchrun process on the torch control plane: its Python threads as tasks.
//!
//! The process's main thread runs torch's `torch.distributed.run.main` with the node's
//! command line; every thread torch starts (the rendezvous keep-alive timer) becomes a task of
//! its own on the node. Each task resumes its thread, serves the call the thread comes back
//! with (`calls`), and resumes it again with the answer, until the thread ends. The process
//! ends when its main thread does, as a Python process does: its other threads die with it.
//!
//! SIGTERM (`stop`) follows torchrun: before its workers start, torchrun has no handler and
//! the signal ends the process; after, it raises torch's `SignalException` in the main
//! thread, at once in a sleep or a wait, and when a store call in progress returns (its
//! timeout restarted by the signal, `world::interrupts`). A user signal torchrun does not
//! handle ends the process at once and leaves its workers running.

use super::host::{self, Host};
use super::{argv, calls, TorchPlane};
use crate::mutant::Mutants;
use crate::rendezvous::handler::KEEP_ALIVE_TAIL;
use crate::scenario::model::Signal;
use crate::sim_time::reading_as_secs_f64;
use crate::trace::{AgentState, ExitReason};
use crate::world::interrupts::{InterruptibleThread, Interrupts};
use crate::world::{AgentExit, NodeEnv, TaskHandle};
use futures::channel::oneshot;
use futures::future::{select, Either, FutureExt};
use rand::RngCore;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// One run's share of the torch control plane: its leased host and its parked threads.
pub struct TorchRun {
    host: Mutex<Option<Host>>,
    plane: TorchPlane,
    started: AtomicBool,
    /// Threads waiting on a Python lock, event or thread's end, by key.
    parks: Mutex<BTreeMap<String, Vec<oneshot::Sender<()>>>>,
    pub(super) mutants: Arc<Mutants>,
}

impl TorchRun {
    /// Leases a host for one run. A plane that cannot start was refused before any run
    /// started (`torch_plane::probe`), so a failure here is the harness's.
    pub fn lease(plane: &TorchPlane, mutants: Arc<Mutants>) -> Arc<TorchRun> {
        let host = host::lease(plane).unwrap_or_else(|e| panic!("the torch host: {e}"));
        Arc::new(TorchRun {
            host: Mutex::new(Some(host)),
            plane: plane.clone(),
            started: AtomicBool::new(false),
            parks: Mutex::default(),
            mutants,
        })
    }

    /// One command to the host and its answer; a host that fails ends the run as the
    /// harness's failure, naming the node.
    pub(super) fn ask(&self, node: &str, message: Value) -> Value {
        match self.try_ask(&message) {
            Ok(answer) => answer,
            Err(e) => panic!("torch's control plane on {node}: {e}"),
        }
    }

    /// [`TorchRun::ask`] for the paths that must not panic (a process's end while the run
    /// unwinds): a failed host's error is the caller's to drop.
    pub(super) fn try_ask(&self, message: &Value) -> Result<Value, host::HostError> {
        // A run that panicked while asking leaves the lock poisoned; the host is still the
        // one it leased, marked broken if it failed.
        let mut host = self.host.lock().unwrap_or_else(|e| e.into_inner());
        let host = host.as_mut().expect("the host is leased for the whole run");
        host.ask(message)
    }

    /// torch's `major.minor` on the leased host (checked supported when it started).
    pub(super) fn torch_release(&self) -> (u32, u32) {
        let host = self.host.lock().unwrap_or_else(|e| e.into_inner());
        let host = host.as_ref().expect("the host is leased for the whole run");
        host::torch_release(&host.info.torch_version).expect("checked when the host started")
    }

    pub(super) fn park(&self, key: &str) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        self.parks
            .lock()
            .expect("parks lock")
            .entry(key.to_owned())
            .or_default()
            .push(tx);
        rx
    }

    pub(super) fn unpark(&self, key: &str) {
        let woken = self.parks.lock().expect("parks lock").remove(key);
        for tx in woken.unwrap_or_default() {
            let _ = tx.send(());
        }
    }

    /// The run's environment, set in the host once, before its first torchrun starts.
    fn begin(&self, env: &NodeEnv) {
        if !self.started.swap(true, Ordering::Relaxed) {
            let run_env = argv::run_env(env.scenario());
            self.ask(&env.name, json!({"cmd": "run", "env": run_env}));
        }
    }

    /// The plane this run's host runs.
    pub fn plane(&self) -> &TorchPlane {
        &self.plane
    }
}

impl Drop for TorchRun {
    fn drop(&mut self) {
        let Some(mut host) = self.host.lock().unwrap_or_else(|e| e.into_inner()).take() else {
            return;
        };
        if self.started.load(Ordering::Relaxed) && host.ask(&json!({"cmd": "end_run"})).is_err() {
            return;
        }
        host::give_back(host);
    }
}

/// One torchrun process: what its threads share.
pub struct Proc {
    pub(super) env: NodeEnv,
    pub(super) run: Arc<TorchRun>,
    pub(super) state: Mutex<calls::ProcState>,
    /// Set when torchrun installed its signal handlers (with its workers).
    pub(super) signal_handler: AtomicBool,
    /// What its Python's reads and writes of the rendezvous state cost.
    pub(super) rendezvous_state: calls::StateCosts,
    /// The handled signals its main thread's store calls meet.
    interrupts: Arc<Interrupts>,
    ended: AtomicBool,
    children: Mutex<Vec<TaskHandle<()>>>,
}

impl Proc {
    /// A signal's default action ends the process but not its workers: they are let go,
    /// still running, before the process's end would stop them.
    fn orphan_workers(&self) {
        // The world keeps them registered until they exit; only `abandon` would end them.
        let _orphans = self.state.lock().expect("state lock").workers.take();
    }

    /// The process is over: its remaining threads and workers die with it.
    fn end(&self) {
        if self.ended.swap(true, Ordering::Relaxed) {
            return;
        }
        // Runs in a drop while a panic unwinds too: a poisoned lock still holds its value.
        for child in self
            .children
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            child.abort();
        }
        if let Some(workers) = self
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .workers
            .take()
        {
            workers.abandon(&self.env);
        }
        // Ended while the run unwinds from a failed host: nothing is left to kill.
        let _ = self
            .run
            .try_ask(&json!({"cmd": "kill", "pid": self.env.pid}));
    }

    /// What every reply carries beside its answer: the node's clocks, and whether its
    /// workers run at this moment. Time stands still while Python runs, so torch's
    /// `pcontext.wait(0)` in the same slice reads exactly this, with no round trip of its own.
    fn stamp(&self, reply: &mut Value) {
        reply["clock"] = self.clock();
        if calls::workers_running(self) {
            reply["workers"] = json!("running");
        }
    }

    pub(super) fn clock(&self) -> Value {
        json!([
            reading_as_secs_f64(self.env.now_mono_us()),
            reading_as_secs_f64(self.env.now_utc_us())
        ])
    }

    /// A thread torch started: a task of its own on this node.
    pub(super) fn spawn_thread(self: &Arc<Self>, fiber: u64) {
        let proc = Arc::clone(self);
        let task = crate::world::spawn(async move {
            let _ = drive(&proc, fiber, json!({})).await;
        });
        self.children.lock().expect("children lock").push(task);
    }
}

/// Killed (the task dropped with the node): the process's Python unwinds.
struct EndOnDrop(Arc<Proc>);

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        self.0.end();
    }
}

/// Resumes `fiber` with `first` and serves its calls until it ends; its exit as the host
/// said it, or `None` when the process ended first.
async fn drive(proc: &Arc<Proc>, fiber: u64, first: Value) -> Option<Value> {
    let mut reply = first;
    loop {
        if proc.ended.load(Ordering::Relaxed) {
            return None;
        }
        let message = match resume(proc, fiber, reply) {
            Ok(call) => call,
            Err(exit) => return Some(exit),
        };
        reply = calls::serve(proc, &message).await;
    }
}

/// Resumes `fiber` with `reply`: its next call, or (`Err`) its exit, after which whoever
/// waits for the thread's end is woken.
fn resume(proc: &Proc, fiber: u64, mut reply: Value) -> Result<Value, Value> {
    proc.stamp(&mut reply);
    let mut message = proc.run.ask(
        &proc.env.name,
        json!({"cmd": "resume", "fiber": fiber, "reply": reply}),
    );
    match message.get_mut("exit") {
        Some(exit) => {
            proc.run.unpark(&format!("exit:{fiber}"));
            Err(exit.take())
        }
        None => Ok(message),
    }
}

/// How the main thread ended.
enum MainEnd {
    Exit(Value),
    /// A signal torchrun had no handler for: SIGTERM before its workers started, or a user
    /// signal not in `--signals-to-handle`.
    KilledBySignal(Signal),
}

/// The main thread, with SIGTERM delivered as torchrun receives it.
async fn drive_main(proc: &Arc<Proc>, fiber: u64) -> MainEnd {
    let mut stop = pin!(proc.env.stop_signal().fuse());
    let mut signalled = false;
    let mut reply = json!({});
    loop {
        let message = match resume(proc, fiber, reply) {
            Ok(call) => call,
            Err(exit) => return MainEnd::Exit(exit),
        };
        let call = pin!(InterruptibleThread::new(
            Arc::clone(&proc.interrupts),
            calls::serve(proc, &message)
        ));
        if signalled {
            reply = call.await;
            continue;
        }
        reply = match select(call, stop.as_mut()).await {
            Either::Left((reply, _)) => reply,
            Either::Right(((), call)) => {
                signalled = true;
                if let Some(signal) = proc.env.fatal_signal() {
                    return MainEnd::KilledBySignal(signal);
                }
                if !proc.signal_handler.load(Ordering::Relaxed) {
                    return MainEnd::KilledBySignal(Signal::Term);
                }
                let mut reply = if calls::interruptible(&message) {
                    json!({})
                } else {
                    // The store call retries on EINTR with its full timeout again.
                    proc.interrupts
                        .interrupt(crate::world::time::now_whole_us());
                    call.await
                };
                reply["signal"] = json!(15);
                reply
            }
        };
    }
}

/// One torchrun process on node `env`, from its start to its exit.
pub async fn agent_process(env: NodeEnv, run: Arc<TorchRun>) -> AgentExit {
    run.begin(&env);
    let args = match argv::torchrun_args(env.scenario(), env.index) {
        Ok(args) => args,
        Err(why) => panic!("{why}"),
    };
    let seed = env.rng("torch-python").next_u64();
    let spawned = run.ask(
        &env.name,
        json!({"cmd": "spawn_agent", "seed": seed, "argv": args,
               "exit_barrier_timeout_s": env.scenario().agent.exit_barrier_timeout.as_secs_f64(),
               "keep_alive_tail_s": KEEP_ALIVE_TAIL.as_secs_f64(),
               "node": {"index": env.index, "name": env.name, "pid": env.pid}}),
    );
    let fiber = spawned["fiber"]
        .as_u64()
        .expect("the host names the new thread");
    let rendezvous_state = calls::StateCosts::of(env.scenario());
    let proc = Arc::new(Proc {
        env,
        run,
        state: Mutex::default(),
        signal_handler: AtomicBool::new(false),
        rendezvous_state,
        interrupts: Arc::default(),
        ended: AtomicBool::new(false),
        children: Mutex::default(),
    });
    let guard = EndOnDrop(Arc::clone(&proc));
    let end = drive_main(&proc, fiber).await;
    if let MainEnd::KilledBySignal(_) = end {
        // The signal never reaches the workers: they outlive the process, orphaned.
        proc.orphan_workers();
    }
    drop(guard);
    exit_of(&proc, end)
}

/// The agent's exit, as torchrun's exit would be read: its exception, or success.
fn exit_of(proc: &Proc, end: MainEnd) -> AgentExit {
    let exit = match end {
        MainEnd::KilledBySignal(signal) => {
            return AgentExit {
                state: AgentState::Failed,
                reason: ExitReason::SignalDefaultAction { signal },
            }
        }
        MainEnd::Exit(exit) => exit,
    };
    let error = exit.get("error").and_then(Value::as_str);
    let message = exit.get("message").and_then(Value::as_str).unwrap_or("");
    if let Some(error) = error {
        calls::exit_on_rendezvous_error(proc, error, message);
    }
    let last_failure = proc.state.lock().expect("state lock").last_failure.clone();
    let (state, reason) = match (error, exit.get("system_exit").and_then(Value::as_str)) {
        (None, None | Some("0" | "None")) => {
            (AgentState::Succeeded, "every worker finished".into())
        }
        (None, Some(code)) => (AgentState::Failed, format!("torchrun exited {code}").into()),
        (Some("SignalException"), _) => (
            AgentState::Stopped,
            "SIGTERM: the agent shut down its workers".into(),
        ),
        (Some("ChildFailedError"), _) if last_failure.is_some() => (
            AgentState::Failed,
            ExitReason::BudgetSpent {
                last_failure: last_failure.expect("checked"),
            },
        ),
        (Some(error), _) => (AgentState::Failed, format!("{error}: {message}").into()),
    };
    AgentExit { state, reason }
}
