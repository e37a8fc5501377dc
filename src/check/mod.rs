//! Named invariants over a run's trace, one family per file, each `held`, `violated` or
//! `not_applicable`.
//!
//! Every check is a pure function of the scenario, the run's seed, the trace and how the
//! run ended: it never reaches back into the world. `check_all` lists all of the contract's invariants in
//! the contract's order, so a report always names every one of them, even those whose
//! subsystem has not been built yet (they say `not_applicable`).
//!
//! The `rendezvous.*` and `agent.*` invariants follow the agents and the rendezvous through
//! the run: each is an observer of one shared replay of it (`run_model`), and all of them are
//! judged in one walk over the trace.

mod agent;
mod bootstrap;
mod job;
mod kind;
mod membership;
mod ranks;
pub(crate) mod reader;
pub mod reader_output;
mod rendezvous;
mod restart_loop;
mod resume;
mod run_model;
mod sampler;
mod sampler_deal;
mod sampler_epoch;
mod sampler_reshuffle;
#[cfg(test)]
pub(crate) mod testkit;

use crate::scenario::model::Scenario;
use crate::sim_time::{SimDuration, SimInstant};
use crate::trace::{RunEnd, Trace, TraceNode};
use serde::Serialize;
use std::collections::BTreeMap;

pub use crate::invariant::Invariant;
pub use agent::{NoZombieStepsKind, RestartBudgetKind};
pub use bootstrap::BootstrapKind;
pub use job::ProgressKind;
pub use kind::Kind;
pub use ranks::RanksKind;
pub use reader_output::{BufferProtocolKind, ExactlyOnceKind, TerminatesKind};
pub use rendezvous::{AgreementKind, BoundsKind, ClosedIsFinalKind, ExclusiveKind, LivenessKind};
pub use restart_loop::RestartLoopKind;
pub use resume::ResumesKind;
pub use sampler::CoverageKind;
pub use sampler_reshuffle::ReshuffledKind;

/// How long `rendezvous.liveness` gives waiting nodes to complete a round once the faults
/// are over; a run that ends sooner cannot be judged on it (the fuzzer sizes its cases'
/// time limits by it).
pub(crate) use rendezvous::completion_bound as liveness_completion_bound;

/// How long `job.resumes_after_heal` gives a job to train again once its faults are over
/// (the fuzzer sizes its cases' time limits by it too).
pub(crate) use resume::resume_bound;

/// The verdict of one invariant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Status {
    /// What it talks about happened, and it held every time.
    Held,
    /// It failed at least once; the violations say where.
    Violated,
    /// Nothing it talks about happened in this run.
    NotApplicable,
}

impl Status {
    /// The status as the report spells it.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// One place an invariant failed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Violation {
    /// The moment of the event that showed the failure (or of the missed deadline), written
    /// as `at_us`.
    #[serde(rename = "at_us", with = "crate::sim_time::whole_us")]
    pub at: SimInstant,
    /// The node it happened on, when one applies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<TraceNode>,
    /// One sentence saying what went wrong.
    pub message: String,
    /// Which way the invariant broke; the same for every violation that broke it the same
    /// way, however the sentence reads (the fuzzer buckets findings by it).
    pub kind: Kind,
}

impl Violation {
    /// A violation of `kind` at `at`, on `node` when one applies.
    pub fn new(
        at: SimInstant,
        node: Option<TraceNode>,
        kind: impl Into<Kind>,
        message: impl Into<String>,
    ) -> Self {
        Violation {
            at,
            node,
            message: message.into(),
            kind: kind.into(),
        }
    }

    /// `at 12.5 s on node-1` (without the node when none applies), as reports show it.
    pub fn when_and_where(&self) -> String {
        match &self.node {
            Some(node) => format!("at {} on {node}", at_secs(self.at)),
            None => format!("at {}", at_secs(self.at)),
        }
    }
}

/// One invariant's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InvariantResult {
    /// The stable name, an [`Invariant`]'s.
    pub name: String,
    pub status: Status,
    /// Empty unless `status` is `Violated`.
    pub violations: Vec<Violation>,
}

impl InvariantResult {
    /// The result of an invariant whose subject did not occur in the run.
    pub fn not_applicable(invariant: Invariant) -> Self {
        InvariantResult {
            name: invariant.name().to_owned(),
            status: Status::NotApplicable,
            violations: Vec::new(),
        }
    }

    /// `not_applicable` when `applicable` is false, else `held` or `violated` by whether
    /// there are violations. Violations found while not applicable still count: a check
    /// that found a failure always says so.
    pub fn judge(invariant: Invariant, applicable: bool, violations: Vec<Violation>) -> Self {
        let status = if !violations.is_empty() {
            Status::Violated
        } else if applicable {
            Status::Held
        } else {
            Status::NotApplicable
        };
        InvariantResult {
            name: invariant.name().to_owned(),
            status,
            violations,
        }
    }
}

/// What every check reads: the scenario, the seed the run was drawn from (a checker that
/// deals an epoch again needs the dataset it drew), the run's trace and how the run ended.
#[derive(Clone, Copy)]
pub(crate) struct Inputs<'a> {
    pub scenario: &'a Scenario,
    pub seed: u64,
    pub trace: &'a Trace,
    pub end: &'a RunEnd,
}

/// Judges one invariant: every invariant of the contract has its check here (the match is
/// exhaustive, so a new invariant cannot go unchecked). `replayed` holds the verdicts of
/// the invariants judged in one replay of the run, taken out as they are asked for.
fn judge_one(
    invariant: Invariant,
    i: &Inputs,
    replayed: &mut BTreeMap<Invariant, InvariantResult>,
) -> InvariantResult {
    match invariant {
        Invariant::RendezvousAgreement
        | Invariant::RendezvousExclusive
        | Invariant::RendezvousBounds
        | Invariant::RendezvousClosedIsFinal
        | Invariant::RendezvousLiveness
        | Invariant::AgentRestartBudget
        | Invariant::AgentNoZombieSteps
        | Invariant::AgentRanks
        | Invariant::AgentBootstrap => replayed
            .remove(&invariant)
            .unwrap_or_else(|| panic!("the replay judges {}", invariant.name())),
        Invariant::JobProgress => job::progress(i.scenario, i.trace, i.end),
        Invariant::SamplerCoverage => sampler::coverage(i.scenario, i.seed, i.trace),
        Invariant::SamplerEpochReshuffled => {
            sampler_reshuffle::epoch_reshuffled(i.scenario, i.seed, i.trace)
        }
        Invariant::ReaderExactlyOnce => reader::exactly_once(i.scenario, i.trace),
        Invariant::ReaderBufferProtocol => reader::buffer_protocol(i.scenario, i.trace),
        Invariant::ReaderTerminates => reader::terminates(i.scenario, i.trace),
        Invariant::JobResumesAfterHeal => resume::resumes_after_heal(i.scenario, i.trace, i.end),
        Invariant::AgentNoRestartLoop => restart_loop::no_restart_loop(i.scenario, i.trace),
    }
}

/// The invariants that follow the agents and the rendezvous through the run, judged by
/// observing one shared replay of it (`run_model`) in one walk over the trace.
fn replayed(i: &Inputs) -> Vec<InvariantResult> {
    let mut agreement = rendezvous::Agreement::default();
    let mut exclusive = rendezvous::Exclusive::default();
    let mut bounds = rendezvous::Bounds::new(i.scenario);
    let mut closed_is_final = rendezvous::ClosedIsFinal::default();
    let mut liveness = rendezvous::Liveness::new(i.scenario);
    let mut budget = agent::RestartBudget::new(i.scenario);
    let mut zombies = agent::NoZombieSteps::default();
    let mut ranks = ranks::Ranks::default();
    let mut bootstrap = bootstrap::Bootstrap::default();
    let model = run_model::replay(
        i.trace,
        &mut [
            &mut agreement,
            &mut exclusive,
            &mut bounds,
            &mut closed_is_final,
            &mut liveness,
            &mut budget,
            &mut zombies,
            &mut ranks,
            &mut bootstrap,
        ],
    );
    vec![
        agreement.finish(),
        exclusive.finish(),
        bounds.finish(),
        closed_is_final.finish(),
        liveness.finish(&model, i.end),
        budget.finish(),
        zombies.finish(),
        ranks.finish(),
        bootstrap.finish(),
    ]
}

/// Runs every invariant's check over the trace, in the contract's order ([`Invariant`]'s).
pub fn check_all(
    scenario: &Scenario,
    seed: u64,
    trace: &Trace,
    end: &RunEnd,
) -> Vec<InvariantResult> {
    let inputs = Inputs {
        scenario,
        seed,
        trace,
        end,
    };
    let mut replayed: BTreeMap<Invariant, InvariantResult> = replayed(&inputs)
        .into_iter()
        .map(|result| (name_of(&result), result))
        .collect();
    <Invariant as strum::VariantArray>::VARIANTS
        .iter()
        .map(|&invariant| {
            let result = judge_one(invariant, &inputs, &mut replayed);
            assert_eq!(
                result.name,
                invariant.name(),
                "an invariant's check must report under its own name"
            );
            for v in &result.violations {
                assert_eq!(
                    v.kind.invariant(),
                    invariant,
                    "a violation of {} must carry one of its own kinds, not {}",
                    invariant.name(),
                    v.kind
                );
            }
            result
        })
        .collect()
}

/// The invariant a result reports under.
fn name_of(result: &InvariantResult) -> Invariant {
    result
        .name
        .parse()
        .unwrap_or_else(|_| panic!("{} is an invariant's name", result.name))
}

/// When the failure a violation reports began: its moment, less the bound that had to run
/// out before an "eventually" property could be called missed (a stall began when training
/// stopped, a stuck survivor when its participant died, not when the bound ran out).
pub fn began_at(scenario: &Scenario, violation: &Violation) -> SimInstant {
    let bound = match violation.kind {
        Kind::JobResumesAfterHeal(ResumesKind::NoStepAfterHeal) => resume_bound(scenario),
        Kind::RendezvousLiveness(LivenessKind::NoRoundInTime) => {
            rendezvous::completion_bound(scenario)
        }
        Kind::RendezvousLiveness(LivenessKind::SurvivorStuck) => {
            rendezvous::survivor_bound(scenario)
        }
        _ => SimDuration::ZERO,
    };
    violation.at.before(bound)
}

/// Formats microseconds as seconds for sentences (`12.5 s`).
pub(crate) fn secs(us: u64) -> String {
    span_secs(SimDuration::from_us(us))
}

/// Formats a moment of the run as seconds since it began, for sentences (`12.5 s`).
pub(crate) fn at_secs(at: SimInstant) -> String {
    span_secs(at.since_start())
}

/// Formats a span as seconds to the microsecond, for sentences (`12.5 s`).
pub(crate) fn span_secs(span: SimDuration) -> String {
    let (whole, frac) = (span.as_secs(), span.subsec_us());
    if frac == 0 {
        format!("{whole} s")
    } else {
        let text = format!("{whole}.{frac:06}");
        format!("{} s", text.trim_end_matches('0'))
    }
}

#[cfg(test)]
mod tests {
    use super::testkit::*;
    use super::*;

    #[test]
    fn check_all_names_every_invariant_in_contract_order() {
        let results = check_all(&scenario(), 1, &trace(vec![]), &end(1, "succeeded"));
        let names: Vec<&str> = results.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, Invariant::names().collect::<Vec<_>>());
    }

    #[test]
    fn empty_failed_trace_is_not_applicable_everywhere() {
        let results = check_all(&scenario(), 1, &trace(vec![]), &end(1, "failed"));
        for result in &results {
            assert_eq!(result.status, Status::NotApplicable, "{}", result.name);
        }
    }

    #[test]
    fn judge_prefers_violations_then_applicability() {
        let v = Violation::new(
            SimInstant::from_us(1),
            None,
            ProgressKind::SucceededShort,
            "x",
        );
        assert_eq!(
            InvariantResult::judge(Invariant::JobProgress, false, vec![v]).status,
            Status::Violated
        );
        assert_eq!(
            InvariantResult::judge(Invariant::JobProgress, true, vec![]).status,
            Status::Held
        );
        assert_eq!(
            InvariantResult::judge(Invariant::JobProgress, false, vec![]).status,
            Status::NotApplicable
        );
    }

    #[test]
    fn secs_prints_short_decimals() {
        assert_eq!(secs(12_500_000), "12.5 s");
        assert_eq!(secs(3_000_000), "3 s");
        assert_eq!(secs(1), "0.000001 s");
    }

    #[test]
    fn violation_omits_missing_node_in_json() {
        let kind = BoundsKind::AboveMax;
        let without =
            serde_json::to_string(&Violation::new(SimInstant::from_us(5), None, kind, "m"))
                .unwrap();
        assert_eq!(without, r#"{"at_us":5,"message":"m","kind":"above-max"}"#);
        let with = serde_json::to_string(&Violation::new(
            SimInstant::from_us(5),
            Some(TraceNode::node(1)),
            kind,
            "m",
        ))
        .unwrap();
        assert_eq!(
            with,
            r#"{"at_us":5,"node":"node-1","message":"m","kind":"above-max"}"#
        );
    }
}
