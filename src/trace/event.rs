//! The typed events a run records: what the checks read and the trace hash covers.
//!
//! Events are facts observed by the simulated processes, stamped with the moment of the run
//! they happened at (cut to the whole microsecond, the trace's unit) and the node they happened on, a [`TraceNode`] that
//! serializes as `node-N` or, for the dedicated store machine, `store`. Nothing here holds a `HashMap`, so the
//! canonical serialization is stable.

use super::buffer_events::BufferEvent;
use super::node::TraceNode;
use crate::scenario::model::{FaultName, NodeRole, Signal};
use crate::sim_time::{SimDuration, SimInstant};
use serde::Serialize;
use strum::VariantArray;

/// One recorded event.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    /// When it happened: a whole microsecond of the run, written as `at_us`.
    #[serde(rename = "at_us", with = "crate::sim_time::whole_us")]
    pub at: SimInstant,
    /// The node it happened on, when one applies.
    pub node: Option<TraceNode>,
    pub kind: EventKind,
}

/// The worker group's final state when an agent process ends (torch's `WorkerState`, as
/// `run()` returns it), named as torch names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, strum::Display, strum::IntoStaticStr)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[strum(serialize_all = "SCREAMING_SNAKE_CASE")]
pub enum AgentState {
    Succeeded,
    Failed,
    /// Ended by SIGTERM (`SignalException`) with its workers stopped.
    Stopped,
}

/// torch's `WorkerState`, as the agent's worker group moves through it, named as torch's enum
/// value prints. `LocalElasticAgent` reports a failed process as FAILED; it never reports
/// UNHEALTHY, so neither does the model.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    strum::Display,
    strum::IntoStaticStr,
    strum::EnumString,
)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[strum(serialize_all = "SCREAMING_SNAKE_CASE")]
pub enum WorkerGroupState {
    Init,
    Healthy,
    Unhealthy,
    Failed,
    Succeeded,
    Stopped,
}

/// Why an agent process ended by itself. The variant is the fact the checks read; the text
/// is for people only, and the trace carries the two as one sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExitReason {
    /// The restart budget (`max_restarts`) is spent: the job failed as it promised to.
    /// `last_failure` says what made the last restart necessary.
    BudgetSpent { last_failure: String },
    /// A signal torchrun had no handler for ended it by its default action, at once: no
    /// shutdown, no log line, and its workers (in sessions of their own) never see it.
    /// SIGTERM before the first workers start; a user signal not in `--signals-to-handle`
    /// at any time, after which the workers train on, orphaned.
    SignalDefaultAction { signal: Signal },
    /// Any other end: success, SIGTERM, or an error, in words.
    Other(String),
}

impl ExitReason {
    /// What the trace appends to the last failure when the budget is spent.
    const BUDGET_SPENT: &'static str = " and no restarts remain";

    /// The exit code of a torchrun ended by `reason`'s text when a signal's default action
    /// ended it (`-number`, as `Popen` reports it); `None` for any other end.
    pub fn default_action_exit_code(reason: &str) -> Option<i32> {
        Signal::VARIANTS
            .iter()
            .find(|&&signal| ExitReason::SignalDefaultAction { signal }.to_string() == reason)
            .map(|signal| -signal.number())
    }
}

impl std::fmt::Display for ExitReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExitReason::BudgetSpent { last_failure } => {
                write!(f, "{last_failure}{}", Self::BUDGET_SPENT)
            }
            ExitReason::SignalDefaultAction {
                signal: Signal::Term,
            } => f.write_str(
                "SIGTERM before the first workers started: the default action ended torchrun",
            ),
            ExitReason::SignalDefaultAction { signal } => write!(
                f,
                "{signal}: torchrun has no handler for it, and its default action ended the \
                 agent (exit -{}); its workers never saw it and train on, orphaned",
                signal.number()
            ),
            ExitReason::Other(text) => f.write_str(text),
        }
    }
}

impl From<&str> for ExitReason {
    fn from(text: &str) -> Self {
        ExitReason::Other(text.to_owned())
    }
}

impl From<String> for ExitReason {
    fn from(text: String) -> Self {
        ExitReason::Other(text)
    }
}

/// The sentence, as the trace has always carried it.
impl Serialize for ExitReason {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// What kind of error `next_rendezvous()` raised, named as the trace spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, strum::Display, strum::EnumString)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum RendezvousErrorKind {
    /// `RendezvousClosedError`.
    Closed,
    /// `RendezvousTimeoutError`.
    Timeout,
    /// `RendezvousGracefulExitError`.
    GracefulExit,
    /// `RendezvousConnectionError`: the store could not be reached.
    StoreUnreachable,
    /// `RendezvousStateError`.
    StateError,
}

/// What one node's ranks trained on in one step, in a few numbers: batch `batch` of the
/// epoch as the sampler deals it to global ranks `first_rank .. first_rank + ranks` of a
/// world of `world_size` ranks, and a digest of the sample ids they were actually given. A
/// checker can deal the epoch again from the sampler and compare, without the trace listing
/// sample ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct TrainedOn {
    pub batch: u64,
    pub world_size: u64,
    pub first_rank: u64,
    pub ranks: u32,
    /// [`samples_digest`](super::samples_digest) of the node's batches, local rank 0 first.
    pub samples_digest: u64,
}

/// The steps of a run after its first, as one `Step` event records them: each step's
/// [`samples_digest`](super::samples_digest) in order, and the time between consecutive steps' ends (a run is
/// recorded in pieces of evenly spaced steps). Empty for a single step.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct StepRun {
    #[serde(rename = "step_us", with = "crate::sim_time::span_whole_us")]
    pub step: SimDuration,
    pub later_digests: Vec<u64>,
}

impl StepRun {
    /// A lone step, serialized as before runs existed.
    pub fn is_single(&self) -> bool {
        self.later_digests.is_empty()
    }

    /// How many steps the event records.
    pub fn steps(&self) -> u64 {
        self.later_digests.len() as u64 + 1
    }
}

/// One step of a `Step` event, as if it had been recorded alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepView {
    /// When the step ended.
    pub at: SimInstant,
    pub step: u64,
    pub trained: TrainedOn,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Serialize, strum::IntoStaticStr)]
#[serde(tag = "type", rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum EventKind {
    /// A scheduled fault was applied; `detail` is a one-line description. A fault aimed at a
    /// role (`node = "rank0"`) names it in `role`, and the event's node is the node that held
    /// the role then.
    FaultApplied {
        fault: FaultName,
        detail: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        role: Option<NodeRole>,
    },
    /// A fault aimed at a role no node held when it fired (`rank0` before any rendezvous
    /// round completed) did nothing; `reason` says why.
    FaultSkipped {
        fault: FaultName,
        role: NodeRole,
        reason: String,
    },
    /// An agent process started (at t = 0, on `start` or on `restart`); pids are new each time.
    AgentStarted { pid: u32 },
    /// The agent process ended: `state` is the worker group's final state
    /// (`SUCCEEDED`, `FAILED`, `STOPPED`), `reason` says why (serialized as a sentence).
    AgentExited {
        pid: u32,
        state: AgentState,
        reason: ExitReason,
    },
    /// The agent process was killed (SIGKILL or power loss); nothing ran after this.
    AgentKilled { pid: u32 },
    /// The agent called `next_rendezvous()`.
    RendezvousJoining { pid: u32 },
    /// `next_rendezvous()` returned: this node sees round `round` complete with these
    /// participants (sorted by rank) and got `rank` out of `world_size`.
    RendezvousCompleted {
        pid: u32,
        round: u64,
        rank: u32,
        world_size: u32,
        /// The participants' nodes, index = rank (shared by the nodes that saw one world);
        /// written as their names.
        participants: std::sync::Arc<[crate::scenario::node::NodeIndex]>,
        /// The rendezvous store's incarnation: rounds of different incarnations are
        /// different rendezvous.
        store_incarnation: u64,
    },
    /// `next_rendezvous()` raised: `error` is `closed`, `timeout`, `store_unreachable`, ...;
    /// `message` is the sentence torch would log.
    RendezvousFailed {
        pid: u32,
        error: RendezvousErrorKind,
        message: String,
    },
    /// This node's op committed `closed = true` to the shared state.
    RendezvousClosed {
        pid: u32,
        round: u64,
        /// The store incarnation whose rendezvous was closed (a restarted store's is new).
        store_incarnation: u64,
    },
    /// A node's keep-alive heartbeat was written to the shared state.
    Heartbeat { pid: u32 },
    /// The agent started its worker group for a round, giving its workers `master` (the
    /// `MASTER_ADDR:MASTER_PORT` their process group bootstraps through).
    WorkersStarted {
        pid: u32,
        round: u64,
        group_rank: u32,
        world_size: u32,
        restart_count: u32,
        store_incarnation: u64,
        master: String,
    },
    /// The agent started the TCPStore server it hosts for its workers (TCPStore sharing).
    WorkerStoreStarted { pid: u32, port: u16 },
    /// The agent learned its workers' ranks through the store (torch's
    /// `_assign_worker_ranks`): local worker `i` gets global rank `base_global_rank + i` and
    /// role rank `base_role_rank + i`.
    RanksAssigned {
        pid: u32,
        round: u64,
        store_incarnation: u64,
        group_rank: u32,
        role: String,
        local_world_size: u32,
        base_global_rank: u64,
        world_size: u64,
        base_role_rank: u64,
        role_world_size: u64,
    },
    /// The agent stopped its worker group (before a restart or at exit).
    WorkersStopped { pid: u32, reason: String },
    /// A worker failed (a `worker_crash`, or a collective timed out).
    WorkerFailed {
        pid: u32,
        local_rank: u32,
        exit_code: i32,
        reason: String,
    },
    /// The agent restarts its workers. `counted` restarts spend `max_restarts`;
    /// membership-change restarts are not counted.
    AgentRestart {
        pid: u32,
        counted: bool,
        restart_count: u32,
        reason: String,
    },
    /// The agent's worker group entered a state of torch's `WorkerState` (`INIT`, `HEALTHY`,
    /// `UNHEALTHY`, `FAILED`, `SUCCEEDED`, `STOPPED`); recorded on each change only.
    WorkerGroupState { pid: u32, state: WorkerGroupState },
    /// The group on this node reached global step `step`, in data epoch `epoch`, its ranks
    /// having trained on `samples` samples, as `trained` says where. One event may record a
    /// run of steps taken in closed form: `run` then holds the digests of the steps after
    /// the first (`trained` names the first step's batch and digest) and the spacing of their
    /// ends, so a week of training records one event per run rather than per step;
    /// [`EventKind::each_step`] lists the steps one by one.
    Step {
        pid: u32,
        round: u64,
        step: u64,
        epoch: u64,
        samples: u64,
        trained: TrainedOn,
        #[serde(skip_serializing_if = "StepRun::is_single")]
        run: StepRun,
    },
    /// A checkpoint of step `step` was written.
    Checkpoint { pid: u32, step: u64 },
    /// The group's samplers were set to `epoch` (`set_epoch`) for a world of `world_size`
    /// ranks, starting at batch `first_batch` of `batches` per rank. Recorded by group rank 0.
    EpochStarted {
        pid: u32,
        round: u64,
        store_incarnation: u64,
        epoch: u64,
        world_size: u64,
        first_batch: u64,
        batches: u64,
    },
    /// Every node of the group finished `epoch`: what its ranks trained on, as the job's own
    /// sample ledger counted it (the report's summary; `sampler.coverage` judges the
    /// `Step` records instead).
    EpochCovered {
        round: u64,
        store_incarnation: u64,
        epoch: u64,
        world_size: u64,
        first_batch: u64,
        samples: u64,
        distinct: u64,
        ranks: u64,
        rank_samples_min: u64,
        rank_samples_max: u64,
    },
    /// A group (re)started from checkpoint `step`, losing `lost_steps` of progress.
    ResumedFromCheckpoint {
        pid: u32,
        step: u64,
        lost_steps: u64,
    },
    /// The store server started (on its host's agent process or the dedicated node).
    StoreStarted,
    /// The store server died with its in-memory state.
    StoreDied { reason: String },
    /// The run ended: every started agent exited, or the time limit was reached.
    RunEnded { outcome: String },
    /// The node's trainer took a reader batch of `size` records in reader epoch `epoch`
    /// (`records` as `[file, first record, count]` runs, in batch order), after waiting
    /// `stall_us` for it. `trained` is false when `Model::train` dropped it as incomplete.
    /// A reader is one worker group's `DataReader`: `pid` and `round` name it.
    ReaderBatch {
        pid: u32,
        round: u64,
        epoch: u32,
        size: u32,
        records: Vec<[u32; 3]>,
        trained: bool,
        stall_us: u64,
    },
    /// The trainer took the end-of-data marker of reader epoch `epoch`.
    ReaderEndOfData { pid: u32, round: u64, epoch: u32 },
    /// A reader buffer changed state (`event.step` orders them within the reader).
    ReaderBuffer {
        pid: u32,
        round: u64,
        event: BufferEvent,
    },
    /// A reader worker skipped records whose checksum failed (`[file, first, count]` runs).
    ReaderSkipped {
        pid: u32,
        round: u64,
        epoch: u32,
        worker: u32,
        records: Vec<[u32; 3]>,
    },
    /// A reader worker's retries ran out; `lost` records of its batch in hand were dropped.
    ReaderWorkerFailed {
        pid: u32,
        round: u64,
        epoch: u32,
        worker: u32,
        reason: String,
        lost: u32,
    },
    /// The trainer will never get another batch: the reader hangs (or refused a new epoch).
    ReaderHang {
        pid: u32,
        round: u64,
        epoch: u32,
        reason: String,
    },
}

impl EventKind {
    /// The snake_case name of the event type, as serialized.
    pub fn type_name(&self) -> &'static str {
        self.into()
    }

    /// The steps a `Step` event recorded at `at`, first to last, each as if recorded
    /// alone; nothing for any other event.
    pub fn each_step(&self, at: SimInstant) -> impl Iterator<Item = StepView> + '_ {
        let (step, trained, run) = match self {
            EventKind::Step {
                step, trained, run, ..
            } => (*step, *trained, Some(run)),
            _ => (0, TrainedOn::default(), None),
        };
        let digests = run.map(|r| {
            std::iter::once(trained.samples_digest).chain(r.later_digests.iter().copied())
        });
        let last = run.map_or(0, |r| r.steps() - 1);
        let step_time = run.map_or(SimDuration::ZERO, |r| r.step);
        digests
            .into_iter()
            .flatten()
            .zip(0u64..)
            .map(move |(digest, i)| {
                let before_last = last - i;
                StepView {
                    at: at.before(step_time.saturating_mul(before_last)),
                    step: step - before_last,
                    trained: TrainedOn {
                        batch: trained.batch + i,
                        samples_digest: digest,
                        ..trained
                    },
                }
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json<T: Serialize>(value: &T) -> String {
        serde_json::to_string(value).unwrap()
    }

    #[test]
    fn an_exit_reason_serializes_as_its_sentence() {
        let spent = ExitReason::BudgetSpent {
            last_failure: "worker 0 failed (worker_crash)".into(),
        };
        assert_eq!(
            json(&spent),
            r#""worker 0 failed (worker_crash) and no restarts remain""#
        );
        assert_eq!(
            json(&ExitReason::from("every worker finished")),
            r#""every worker finished""#
        );
        let exited = EventKind::AgentExited {
            pid: 7,
            state: AgentState::Failed,
            reason: spent,
        };
        assert_eq!(
            json(&exited),
            r#"{"type":"agent_exited","pid":7,"state":"FAILED","reason":"worker 0 failed (worker_crash) and no restarts remain"}"#
        );
    }

    #[test]
    fn typed_event_fields_keep_their_trace_names() {
        let states = [
            WorkerGroupState::Init,
            WorkerGroupState::Healthy,
            WorkerGroupState::Unhealthy,
            WorkerGroupState::Failed,
            WorkerGroupState::Succeeded,
            WorkerGroupState::Stopped,
        ];
        let names: Vec<String> = states.iter().map(json).collect();
        assert_eq!(
            names,
            [
                r#""INIT""#,
                r#""HEALTHY""#,
                r#""UNHEALTHY""#,
                r#""FAILED""#,
                r#""SUCCEEDED""#,
                r#""STOPPED""#
            ]
        );
        for state in states {
            assert_eq!(format!("\"{state}\""), json(&state));
        }
        let errors = [
            RendezvousErrorKind::Closed,
            RendezvousErrorKind::Timeout,
            RendezvousErrorKind::GracefulExit,
            RendezvousErrorKind::StoreUnreachable,
            RendezvousErrorKind::StateError,
        ];
        let names: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(
            names,
            [
                "closed",
                "timeout",
                "graceful_exit",
                "store_unreachable",
                "state_error"
            ]
        );
        for error in errors {
            assert_eq!(format!("\"{error}\""), json(&error));
        }
        assert_eq!(AgentState::Stopped.to_string(), "STOPPED");
        let fault = EventKind::FaultApplied {
            fault: FaultName::PowerOff,
            detail: "d".into(),
            role: None,
        };
        assert_eq!(
            json(&fault),
            r#"{"type":"fault_applied","fault":"power_off","detail":"d"}"#
        );
        assert_eq!(fault.type_name(), "fault_applied");
        assert_eq!(EventKind::StoreStarted.type_name(), "store_started");
    }
}
