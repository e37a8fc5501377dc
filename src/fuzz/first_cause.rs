//! A finding's first cause in time: of the violations that count, the one whose failure
//! began first (a stall from the moment training stopped, a stuck survivor from its
//! participant's death, not from when a bound ran out), and what the agent whose failure
//! ended the job was waiting for. The minimizer keeps the faults a finding needs; this says
//! where the failure started, which is often later than the fault and elsewhere.

use super::signature::{case_options, CASE_FILE};
use super::strategy::Case;
use crate::check::{began_at, span_secs, ResumesKind, Violation};
use crate::mutant::Mutant;
use crate::report::goodput::AGENT_FAILED;
use crate::scenario::model::Scenario;
use crate::sim_time::SimInstant;
use crate::trace::{EventKind, Trace};

/// Most characters of an agent's exit reason the sentence keeps (store keys can be long).
const REASON_CHARS_MAX: usize = 240;

/// `from 2.19 s (node-1's kill): rendezvous.liveness:survivor-stuck: …; node-0's agent failed
/// first: the connection to the C10d store has failed: wait timeout …, keys: …`. `None` when
/// the case runs with no counted violation (or cannot be run).
pub fn first_cause(case: &Case, counted: &[String], mutant: Option<Mutant>) -> Option<String> {
    let (report, trace) = crate::runner::Run::of(&case.scenario, CASE_FILE)
        .seed(case.seed)
        .options(case_options(&case.scenario, mutant))
        .traced()
        .ok()?;
    let (began, after, first) = report
        .invariants
        .iter()
        .flat_map(|result| &result.violations)
        .filter(|v| counted.contains(&v.kind.to_string()))
        .map(|v| {
            let (began, after) = began(&case.scenario, &trace, v);
            (began, after, v)
        })
        .min_by_key(|(began, _, _)| *began)?;
    let after = after.map(|what| format!(" ({what})")).unwrap_or_default();
    let mut cause = format!(
        "from {}{after}: {}: {}",
        span_secs(began.since_start()),
        first.kind,
        first.message
    );
    if let Some((node, reason)) = report.goodput.fate.split_once(AGENT_FAILED) {
        let node = node.rsplit(": ").next().unwrap_or(node);
        let reason: String = reason.chars().take(REASON_CHARS_MAX).collect();
        cause.push_str(&format!("; {node}'s agent failed first: {reason}"));
    }
    Some(cause)
}

/// When a violation's failure began, and after what. A whole job that failed began to fail
/// at the last thing that could have moved it on before it did (its last step, a round
/// completing, a fault), named; any other violation at [`began_at`].
fn began(scenario: &Scenario, trace: &Trace, v: &Violation) -> (SimInstant, Option<String>) {
    if v.kind != ResumesKind::FailedWhileHealthy.into() {
        return (began_at(scenario, v), None);
    }
    let last = trace
        .events
        .iter()
        .take_while(|event| event.at <= v.at)
        .filter_map(|event| {
            let what = match &event.kind {
                EventKind::Step { step, .. } => format!("step {step}"),
                EventKind::RendezvousCompleted { round, .. } => format!("round {round} completed"),
                EventKind::FaultApplied { fault, .. } => match event.node {
                    Some(node) => format!("{fault} of {node}"),
                    None => fault.to_string(),
                },
                _ => return None,
            };
            Some((event.at, what))
        })
        .last();
    match last {
        Some((at, what)) => (at, Some(what)),
        None => (v.at, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_killed_participant_is_traced_to_the_kill_not_to_the_bound() {
        // The triage test's case: node-1 dies 75 ms after round 0 completed, and the four
        // survivors wait out the collective timeout.
        let case =
            super::super::triage::tests::kill_case(5, 0, 5, 2_190_000, 1_776_612_806_655_204_715);
        let (verdict, _) = super::super::signature::judge(&case.scenario, case.seed, None);
        let cause = first_cause(&case, &verdict.counted, None).expect("a cause");
        assert!(
            cause.starts_with("from 2.19 s: rendezvous.liveness:survivor-stuck: "),
            "{cause}"
        );
        assert_eq!(first_cause(&case, &[], None), None);
    }
}
