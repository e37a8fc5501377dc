//! The run report: the contract's JSON (v1), text for people, `expect` checking and the
//! exit code of a batch of runs.
//!
//! A [`Report`] is plain data whose fields serialize in the contract's order, so the JSON
//! line is just its serde form. The summaries (rounds, agents, job) are computed from the
//! trace here; the verdicts come from `check`.

pub mod analytic;
pub mod compare;
pub mod diff;
mod expect;
pub mod explain;
pub mod goodput;
pub mod goodput_summary;
pub mod html;
pub mod rounds_story;
mod text;

pub use text::{verdict_block, VERDICT_AS_EXPECTED, VERDICT_UNEXPECTED};

use crate::check::InvariantResult;
use crate::scenario::model::Scenario;
pub(crate) use crate::scenario::node::node_order;
use crate::trace::{EventKind, RunEnd, Trace, TraceNode};
use serde::Serialize;
use std::collections::BTreeMap;

/// The report of one run, in the contract's field order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// The scenario's `name`.
    pub scenario: String,
    /// The scenario file as given on the command line.
    pub file: String,
    pub seed: u64,
    /// SHA-256 of the canonical trace, hex.
    pub trace_hash: String,
    pub sim_time_us: u64,
    /// How many events the trace holds.
    pub events: u64,
    /// `succeeded`, `failed` or `timed_out`.
    pub outcome: String,
    /// Completed rounds, by round number.
    pub rounds: Vec<RoundSummary>,
    /// Every node whose agent ever started, by node index.
    pub agents: Vec<AgentSummary>,
    pub job: JobSummary,
    /// Present exactly when the scenario has a `[reader]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reader: Option<ReaderSummary>,
    /// Every invariant, in the contract's order.
    pub invariants: Vec<InvariantResult>,
    pub expect: ExpectResult,
    /// The command that replays this run.
    pub repro: String,
    /// Productive training time against the job's wall time, the rest by cause, and the
    /// job's fate in one sentence.
    pub goodput: goodput::Goodput,
    /// Present when the scenario has a `[job.eval]` and the job trained a step: the
    /// evaluation pass over the world the job last trained in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eval: Option<crate::job::eval::EvalPass>,
    /// Present when the run's control plane was torch's own elastic code (`--torch`, or a
    /// `[torch]` table): which torch and Python ran, and the overlay's hash. Absent for the
    /// Rust model, so a model run's report is as it always was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub torch: Option<crate::torch_plane::TorchInfo>,
}

/// One completed rendezvous round.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoundSummary {
    pub round: u64,
    /// Which process of the rendezvous store the round was agreed in (1 for the first): a
    /// restarted store starts a new rendezvous whose rounds count from 0 again.
    pub store_incarnation: u64,
    /// The earliest completion of the round any node reported.
    pub completed_at_us: u64,
    /// Node names, index = rank, as the earliest completion saw them.
    pub participants: Vec<String>,
    pub world_size: u32,
}

/// One node's agent over the whole run (all its processes).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentSummary {
    pub node: String,
    /// Counted restarts (the ones that spend max_restarts), summed over its processes.
    pub restarts: u32,
    /// The last exit state; `KILLED` if it was killed last; `RUNNING` if it never ended.
    pub final_state: String,
    /// Membership-change restarts (free in torch), summed over its processes.
    pub membership_restarts: u32,
    /// Agent processes it ran (1, plus one per `restart` of a killed node).
    pub processes: u32,
    /// `TORCHELASTIC_RESTART_COUNT` its last worker group started with.
    pub restart_count: u32,
    /// The last state its worker group entered (torch's `WorkerState`), empty if none.
    pub worker_group_state: String,
    /// Why its last process exited, in words; empty if it was killed or still runs.
    pub exit_reason: String,
}

/// Training progress.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobSummary {
    /// The step of the last `Step` event, 0 if none.
    pub steps_done: u64,
    /// Samples consumed by all ranks, counting re-executed steps again.
    pub samples_seen: u64,
    /// Data epochs some group trained through to the end.
    pub epochs: u64,
    /// The scenario's `job.steps`, for the text report's "step S of N"; not a contract
    /// field, so the JSON leaves it out.
    #[serde(skip)]
    pub steps_asked: u64,
}

/// The reader pipeline's deliveries, as node-0's trainer took them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReaderSummary {
    /// node-0's reader epochs in order; a restarted worker group's new reader starts at
    /// epoch 0 again and its epochs follow the earlier reader's.
    pub epochs: Vec<ReaderEpoch>,
    /// Time node-0's trainer waited for batches (the pipeline fell behind), over the run.
    pub stall_us: u64,
}

/// One reader epoch as node-0's collector handed it out.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReaderEpoch {
    /// Batch sizes in order, the end-of-data marker not counted.
    pub batch_sizes: Vec<u64>,
    pub records_delivered: u64,
    pub records_skipped: u64,
}

/// Whether `[expect]` and the invariant verdicts were as the scenario says.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExpectResult {
    pub met: bool,
    /// One sentence per unmet expectation.
    pub failures: Vec<String>,
}

impl Report {
    /// Whether the run passed: every expectation met, invariants included.
    pub fn passed(&self) -> bool {
        self.expect.met
    }

    /// The report as one line of JSON (no trailing newline).
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).expect("a report always serializes")
    }

    /// The report for people: the job's story and the verdict first, then the details; the
    /// last line is the repro command.
    pub fn to_text(&self) -> String {
        text::render(self)
    }

    /// One line for one seed of a batch that passed: seed, job, ETTR, verdict.
    pub fn to_batch_line(&self) -> String {
        text::batch_line(self)
    }
}

/// The process exit code for a batch of runs: 0 when every run passed, else 1.
pub fn exit_code(reports: &[Report]) -> i32 {
    if reports.iter().all(Report::passed) {
        0
    } else {
        1
    }
}

/// The command that replays a run, with the file quoted when the shell needs it.
pub fn repro_line(file: &str, seed: u64) -> String {
    let plain = !file.is_empty()
        && file
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./-+:=@%,".contains(c));
    let file = if plain {
        file.to_owned()
    } else {
        format!("'{}'", file.replace('\'', r"'\''"))
    };
    format!("trainsim run {file} --seed {seed}")
}

/// Builds the report of one run, given its verdicts and its trace's hash (`Trace::hash_hex`).
pub fn build(
    scenario: &Scenario,
    file: &str,
    seed: u64,
    trace: &Trace,
    end: &RunEnd,
    invariants: Vec<InvariantResult>,
    trace_hash: String,
) -> Report {
    let rounds = rounds(trace);
    let agents = agents(trace);
    let expect = expect::check(&scenario.expect, end.outcome, &rounds, &agents, &invariants);
    Report {
        scenario: scenario.name.clone(),
        file: file.to_owned(),
        seed,
        trace_hash,
        sim_time_us: end.ended_at.as_us(),
        events: trace.events.len() as u64,
        outcome: end.outcome.as_str().to_owned(),
        rounds,
        agents,
        job: job(trace, scenario.job.steps),
        reader: scenario.reader.as_ref().map(|_| reader(trace)),
        invariants,
        expect,
        repro: repro_line(file, seed),
        goodput: goodput::measure(scenario, trace, end),
        eval: scenario
            .job
            .eval
            .as_ref()
            .zip(last_world_size(trace))
            .map(|(eval, world_size)| crate::job::eval::EvalPass::of(eval, world_size)),
        // The runner, which knows which plane ran, fills it in.
        torch: None,
    }
}

/// The world, in ranks, of the last step the job trained; `None` if it trained none.
fn last_world_size(trace: &Trace) -> Option<u64> {
    trace
        .events
        .iter()
        .rev()
        .find_map(|event| match &event.kind {
            EventKind::Step { trained, .. } if trained.world_size > 0 => Some(trained.world_size),
            _ => None,
        })
}

/// node-0's readers: batch sizes per epoch (the end marker not counted), records
/// delivered and skipped, and the trainer's stall.
fn reader(trace: &Trace) -> ReaderSummary {
    let mut summary = ReaderSummary {
        epochs: Vec::new(),
        stall_us: 0,
    };
    let logs = crate::check::reader::readers(trace);
    for log in logs.iter().filter(|l| l.node == TraceNode::node(0)) {
        summary.stall_us = summary.stall_us.saturating_add(log.stall_us);
        summary
            .epochs
            .extend(log.output.epochs.iter().map(|e| ReaderEpoch {
                batch_sizes: e.batch_sizes.iter().map(|&s| u64::from(s)).collect(),
                records_delivered: e.delivered.len() as u64,
                records_skipped: e.skipped.len() as u64,
            }));
    }
    summary
}

/// Completed rounds, each as its earliest completion saw it.
/// Rounds are ordered by store incarnation, then number: a later incarnation's rounds came
/// later.
fn rounds(trace: &Trace) -> Vec<RoundSummary> {
    let mut by_round: BTreeMap<(u64, u64), RoundSummary> = BTreeMap::new();
    for event in &trace.events {
        if let EventKind::RendezvousCompleted {
            round,
            world_size,
            participants,
            store_incarnation,
            ..
        } = &event.kind
        {
            // Events are in time order, so the first one seen is the earliest.
            let key = (*store_incarnation, *round);
            by_round.entry(key).or_insert_with(|| RoundSummary {
                round: *round,
                store_incarnation: *store_incarnation,
                completed_at_us: event.at.as_us(),
                participants: participants.iter().map(ToString::to_string).collect(),
                world_size: *world_size,
            });
        }
    }
    by_round.into_values().collect()
}

/// Every node whose agent ever started: its restarts, processes, restart count, worker
/// group state and final state.
fn agents(trace: &Trace) -> Vec<AgentSummary> {
    let mut by_node: BTreeMap<TraceNode, AgentSummary> = BTreeMap::new();
    for event in &trace.events {
        let Some(node) = event.node else {
            continue;
        };
        if let EventKind::AgentStarted { .. } = &event.kind {
            let summary = by_node.entry(node).or_insert_with(|| AgentSummary {
                node: node.to_string(),
                restarts: 0,
                final_state: String::new(),
                membership_restarts: 0,
                processes: 0,
                restart_count: 0,
                worker_group_state: String::new(),
                exit_reason: String::new(),
            });
            summary.final_state = "RUNNING".to_owned();
            summary.processes += 1;
            summary.exit_reason.clear();
            continue;
        }
        let Some(summary) = by_node.get_mut(&node) else {
            continue;
        };
        match &event.kind {
            EventKind::AgentExited { state, reason, .. } => {
                summary.final_state = state.to_string();
                summary.exit_reason = reason.to_string();
            }
            EventKind::AgentKilled { .. } => summary.final_state = "KILLED".to_owned(),
            EventKind::AgentRestart { counted: true, .. } => summary.restarts += 1,
            EventKind::AgentRestart { counted: false, .. } => summary.membership_restarts += 1,
            EventKind::WorkersStarted { restart_count, .. } => {
                summary.restart_count = *restart_count;
            }
            EventKind::WorkerGroupState { state, .. } => {
                summary.worker_group_state = state.to_string();
            }
            _ => {}
        }
    }
    by_node.into_values().collect()
}

/// Steps done, samples consumed and epochs finished.
///
/// `samples_seen` adds up what every node's ranks trained on in each step they completed,
/// re-executed steps counted again; `epochs` counts the distinct data epochs some group
/// finished (the ledger's `EpochCovered`).
fn job(trace: &Trace, steps_asked: u64) -> JobSummary {
    let mut steps_done = 0;
    let mut samples_seen: u64 = 0;
    let mut epochs = std::collections::BTreeSet::new();
    for event in &trace.events {
        match &event.kind {
            EventKind::Step { step, samples, .. } => {
                steps_done = *step;
                samples_seen = samples_seen.saturating_add(*samples);
            }
            EventKind::EpochCovered { epoch, .. } => {
                epochs.insert(*epoch);
            }
            _ => {}
        }
    }
    JobSummary {
        steps_done,
        samples_seen,
        epochs: epochs.len() as u64,
        steps_asked,
    }
}

#[cfg(test)]
mod tests;
