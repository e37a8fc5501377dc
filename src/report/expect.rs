//! `[expect]` checking: each unmet expectation becomes one sentence.
//!
//! The invariants are part of it: those named in `expect.violations` must be `violated`,
//! every other one `held` or `not_applicable` (the contract's definition of a pass).

use super::{AgentSummary, ExpectResult, RoundSummary};
use crate::check::{InvariantResult, Status};
use crate::scenario::model::{node_name, Expect, Outcome};

/// Compares what happened with what the scenario expects.
pub(super) fn check(
    expect: &Expect,
    outcome: Outcome,
    rounds: &[RoundSummary],
    agents: &[AgentSummary],
    invariants: &[InvariantResult],
) -> ExpectResult {
    let mut failures = Vec::new();
    if let Some(wanted) = expect.outcome {
        if wanted != outcome {
            failures.push(format!(
                "expected outcome {}, got {}",
                wanted.as_str(),
                outcome.as_str()
            ));
        }
    }
    if let Some((min, max)) = expect.rounds {
        // Rounds are already one entry per distinct round number.
        let got = rounds.len() as u64;
        if got < min || got > max {
            let wanted = if min == max {
                format!("{min}")
            } else {
                format!("{min} to {max}")
            };
            failures.push(format!("expected {wanted} completed rounds, got {got}"));
        }
    }
    for (&index, &wanted) in &expect.restarts {
        let node = node_name(index);
        let got = agents
            .iter()
            .find(|a| a.node == node)
            .map_or(0, |a| a.restarts);
        if got != wanted {
            failures.push(format!(
                "expected {node} to restart {wanted} times, it restarted {got}"
            ));
        }
    }
    failures.extend(final_round_failures(expect, rounds));
    failures.extend(invariant_failures(expect, invariants));
    ExpectResult {
        met: failures.is_empty(),
        failures,
    }
}

/// Sentences for what the last completed round was expected to be: its world size and its
/// participants in rank order.
fn final_round_failures(expect: &Expect, rounds: &[RoundSummary]) -> Vec<String> {
    let mut failures = Vec::new();
    if let Some(wanted) = expect.final_world_size {
        match rounds.last() {
            Some(last) if last.world_size == wanted => {}
            Some(last) => failures.push(format!(
                "expected final world size {wanted}, got {} (round {})",
                last.world_size, last.round
            )),
            None => failures.push(format!(
                "expected final world size {wanted}, but no round completed"
            )),
        }
    }
    if let Some(wanted) = &expect.final_participants {
        let wanted: Vec<String> = wanted.iter().map(|&n| node_name(n)).collect();
        match rounds.last() {
            Some(last) if last.participants == wanted => {}
            Some(last) => failures.push(format!(
                "expected round {}'s participants in rank order to be {}, got {}",
                last.round,
                wanted.join(" "),
                last.participants.join(" ")
            )),
            None => failures.push(format!(
                "expected final participants {}, but no round completed",
                wanted.join(" ")
            )),
        }
    }
    failures
}

/// Sentences for invariants whose verdict differs from what the scenario expects.
fn invariant_failures(expect: &Expect, invariants: &[InvariantResult]) -> Vec<String> {
    let mut failures = Vec::new();
    for name in &expect.violations {
        match invariants.iter().find(|r| &r.name == name) {
            None => failures.push(format!(
                "expected {name} to be violated, but no invariant has that name"
            )),
            Some(r) if r.status == Status::Violated => {}
            Some(r) => failures.push(format!(
                "expected {name} to be violated, it was {}",
                r.status.as_str()
            )),
        }
    }
    for r in invariants {
        if r.status != Status::Violated || expect.violations.contains(&r.name) {
            continue;
        }
        let first = r.violations.first().map_or("", |v| v.message.as_str());
        let more = match r.violations.len() {
            0 | 1 => String::new(),
            n => format!(" (and {} more)", n - 1),
        };
        failures.push(format!("{} was violated: {first}{more}", r.name));
    }
    failures
}
