//! The run signature both sides of a conformance check produce: rounds, per-node outcomes,
//! whether the job finished.
//!
//! It is deliberately coarse. Round numbers and times depend on how fast processes start
//! (real torch spends seconds importing itself; simulated agents start at once), so a round
//! is only its world size and its member nodes, in the order rounds completed. Per node it
//! keeps the final state, the exit code of its last agent process and the restarts it
//! counted. The real side comes from `conformance/signature.py`; the simulated side from a
//! report, here.
//!
//! A restart loop repeats one round over and over, as many times as its timing allows, so
//! consecutive rounds of the same world size and members are one entry that only says
//! whether it came more than once ([`collapse_repeats`]): two loops compare equal whatever
//! their lengths, and a round that came once still differs from one that came again.
//! `signature.py` collapses the same way, and [`super::real::parse_signature`] collapses
//! what it reads, so signatures saved before the collapse compare too.

use crate::report::Report;
use crate::scenario::model::NodeIndex;
pub use crate::scenario::node::node_order;
use crate::trace::ExitReason;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// One completed rendezvous round.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RoundSig {
    pub world_size: u32,
    /// The member nodes, by node index (not rank order), each once.
    pub members: Vec<String>,
    /// The same round (world size and members) came two or more times in a row; how many
    /// times is left out.
    #[serde(default)]
    pub repeated: bool,
}

/// `rounds` with every run of consecutive rounds of the same world size and members made
/// one entry, `repeated` when the run was longer than one. Idempotent.
pub fn collapse_repeats(rounds: Vec<RoundSig>) -> Vec<RoundSig> {
    let mut out: Vec<RoundSig> = Vec::with_capacity(rounds.len());
    for round in rounds {
        match out.last_mut() {
            Some(last)
                if (last.world_size, &last.members) == (round.world_size, &round.members) =>
            {
                last.repeated = true;
            }
            _ => out.push(round),
        }
    }
    out
}

/// What one node ended as.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NodeSig {
    /// `SUCCEEDED`, `FAILED`, `STOPPED`, `KILLED` or `RUNNING`.
    pub final_state: String,
    /// The last agent process's exit code: negative for a signal, absent while running.
    pub exit_code: Option<i32>,
    /// Restarts counted after failures, over all the node's agent processes.
    pub restarts: u32,
}

/// A run's signature.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Signature {
    pub rounds: Vec<RoundSig>,
    pub nodes: BTreeMap<String, NodeSig>,
    pub finished: bool,
}

/// torchrun's exit code for SIGTERM: `SignalException` escapes `main`, and Python exits 1
/// (measured on torch 2.15.0).
pub const EXIT_SIGTERM: i32 = 1;
/// torchrun's exit code after a redundant node's graceful exit: `SimpleElasticAgent.run`
/// returns no result and `launch_agent`'s `result.is_failed()` raises (measured on torch
/// 2.15.0).
pub const EXIT_GRACEFUL: i32 = 1;
/// A SIGKILLed process, as Python's `subprocess` reports it.
pub const EXIT_KILLED: i32 = -9;

/// The exit code torchrun's process gives for an agent that ended in `final_state` with
/// `exit_reason` (the simulator's report does not carry exit codes).
pub fn exit_code_of(final_state: &str, exit_reason: &str) -> Option<i32> {
    match final_state {
        "SUCCEEDED" => Some(0),
        "FAILED" => Some(ExitReason::default_action_exit_code(exit_reason).unwrap_or(1)),
        "KILLED" => Some(EXIT_KILLED),
        "STOPPED" if is_graceful_exit(exit_reason) => Some(EXIT_GRACEFUL),
        "STOPPED" => Some(EXIT_SIGTERM),
        _ => None,
    }
}

/// The state a signature gives an agent that ended in `final_state` with `exit_reason`. A
/// redundant node's graceful exit is `STOPPED`, as the real side reads it from the log
/// (`Rendezvous gracefully exited`), though its torchrun then fails with exit code 1.
pub fn signature_state<'a>(final_state: &'a str, exit_reason: &str) -> &'a str {
    if final_state == "FAILED" && is_graceful_exit(exit_reason) {
        "STOPPED"
    } else {
        final_state
    }
}

/// How the report's exit reason of a redundant node's graceful exit begins.
const GRACEFUL_EXIT: &str = "graceful exit";

/// The exit reason torch's own code gives the same exit on the `[torch]` plane: after the
/// graceful exit `SimpleElasticAgent.run` returns no result, and `launch_agent` calls
/// `is_failed()` on it.
const TORCH_GRACEFUL_EXIT: &str = "AttributeError: 'NoneType' object has no attribute 'is_failed'";

/// Whether `exit_reason` is a redundant node's graceful exit, on either plane.
fn is_graceful_exit(exit_reason: &str) -> bool {
    exit_reason.starts_with(GRACEFUL_EXIT) || exit_reason == TORCH_GRACEFUL_EXIT
}

/// The signature of a simulated run, read from its public report.
pub fn from_report(report: &Report, steps: u64) -> Signature {
    let mut rounds: Vec<_> = report.rounds.iter().collect();
    rounds.sort_by_key(|r| (r.completed_at_us, r.round));
    let rounds = rounds
        .into_iter()
        .map(|r| {
            let members: BTreeSet<(u64, String)> =
                r.participants.iter().map(|p| node_order(p)).collect();
            RoundSig {
                world_size: r.world_size,
                members: members.into_iter().map(|(_, name)| name).collect(),
                repeated: false,
            }
        })
        .collect();
    let rounds = collapse_repeats(rounds);
    let nodes = report
        .agents
        .iter()
        .map(|a| {
            let final_state = signature_state(&a.final_state, &a.exit_reason);
            let sig = NodeSig {
                exit_code: exit_code_of(final_state, &a.exit_reason),
                final_state: final_state.to_owned(),
                restarts: a.restarts,
            };
            (a.node.clone(), sig)
        })
        .collect();
    Signature {
        rounds,
        nodes,
        finished: report.outcome == "succeeded" || report.job.steps_done >= steps,
    }
}

impl Signature {
    /// One line for people: `rounds 3{0,1,2} > 2{0,1} | node-0 SUCCEEDED(0) r1, … | finished`.
    pub fn compact(&self) -> String {
        let rounds: Vec<String> = self.rounds.iter().map(round_compact).collect();
        let mut nodes: Vec<(&String, &NodeSig)> = self.nodes.iter().collect();
        nodes.sort_by_key(|(name, _)| node_order(name));
        let nodes: Vec<String> = nodes
            .into_iter()
            .map(|(name, n)| format!("{name} {}", node_compact(n)))
            .collect();
        let rounds = if rounds.is_empty() {
            "no round".to_owned()
        } else {
            format!("rounds {}", rounds.join(" > "))
        };
        let finished = if self.finished {
            "finished"
        } else {
            "not finished"
        };
        format!("{rounds} | {} | {finished}", nodes.join(", "))
    }
}

/// `3{0,1,2}`: the world size and the member node indices; `3{0,1,2}×2+` for a round that
/// came two or more times in a row.
pub fn round_compact(r: &RoundSig) -> String {
    let members: Vec<String> = r
        .members
        .iter()
        .map(|m| match m.parse::<NodeIndex>() {
            Ok(node) => node.0.to_string(),
            Err(_) => m.clone(),
        })
        .collect();
    let repeated = if r.repeated { "×2+" } else { "" };
    format!("{}{{{}}}{repeated}", r.world_size, members.join(","))
}

/// `SUCCEEDED(0) r1`: final state, exit code (`-` while running) and counted restarts.
pub fn node_compact(n: &NodeSig) -> String {
    let code = n.exit_code.map_or("-".to_owned(), |c| c.to_string());
    format!("{}({code}) r{}", n.final_state, n.restarts)
}
