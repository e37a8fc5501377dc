//! proptest strategies that draw whole scenarios for the rendezvous target.
//!
//! A case starts from `scenario::default_scenario` and sets: 2–6 nodes plus 0–2 spares,
//! node bounds with min ≤ nodes ≤ max ≤ nodes + spares, a short job (50–200 steps of
//! 200 ms), a 13 min time limit (see [`case_time_limit`]) and a fault plan. The plan is swarm-style: each case first
//! picks which fault kinds are enabled, then draws 0–6 faults among them, so some cases
//! hammer one kind and others mix many. Paired faults (kill+restart, pause+resume,
//! partition+heal, clog+unclog) are drawn as one unit so a plan is always valid. Every
//! time falls in 0–120 s. Everything drawn is within the validation bounds; a test
//! asserts it round-trips through `to_toml` and `parse`.

use crate::scenario;
use crate::scenario::model::{Fault, FaultKind, FaultName, Scenario};
use crate::sim_time::{offset_us_of_ms, SimDuration, SimInstant};
use proptest::prelude::*;
use std::collections::BTreeSet;

/// One fuzz case: a scenario and the seed to run it with.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    pub scenario: Scenario,
    pub seed: u64,
}

/// The fault kinds a plan draws from, in the order of the enabled-kinds mask's bits.
pub const FAULT_KINDS: [FaultName; 9] = [
    FaultName::Kill,
    FaultName::Restart,
    FaultName::Start,
    FaultName::Stop,
    FaultName::Pause,
    FaultName::Partition,
    FaultName::ClogLink,
    FaultName::ClockSkew,
    FaultName::WorkerCrash,
];

/// Latest fault time, in microseconds (120 s).
pub const FAULT_AT_MAX: SimInstant = SimInstant::from_us(120_000_000);

/// A case's simulated time limit: the latest fault time plus the window in which
/// `rendezvous.liveness` expects waiting nodes to complete a round (join + last-call
/// timeouts + heartbeat expiry + slack: 655 s with torch's defaults), rounded up to a whole
/// minute, so a stall that begins as the last fault ends can still be judged (the window
/// `job.resumes_after_heal` gives a job to train again is used when it is longer). With the
/// defaults the cases draw that is 13 min. A shorter limit stops cases before torch's join
/// timeout (600 s) and the process group's collective timeout (10 min) fire, which hides the
/// paths behind them; a longer one only simulates jobs that have nothing left to show.
pub fn case_time_limit(scenario: &Scenario) -> SimDuration {
    let window =
        crate::check::liveness_completion_bound(scenario).max(crate::check::resume_bound(scenario));
    FAULT_AT_MAX
        .since_start()
        .saturating_add(window)
        .ceil_to(SimDuration::from_ms(60_000))
}

/// One drawn fault before it is made valid: which enabled kind, which nodes, when, for
/// how long (paired faults) and by how much (clock skew).
#[derive(Debug, Clone, PartialEq)]
pub struct FaultDraw {
    pub kind_pick: usize,
    pub node: u32,
    pub other: u32,
    pub at_ms: u64,
    pub span_ms: u64,
    pub skew_ms: i64,
}

fn fault_draw() -> impl Strategy<Value = FaultDraw> {
    (
        0usize..FAULT_KINDS.len(),
        0u32..8,
        0u32..8,
        0u64..=FAULT_AT_MAX.since_start().as_ms(),
        1u64..=60_000,
        -20_000i64..=20_000,
    )
        .prop_map(
            |(kind_pick, node, other, at_ms, span_ms, skew_ms)| FaultDraw {
                kind_pick,
                node,
                other,
                at_ms,
                span_ms,
                skew_ms,
            },
        )
}

/// Whole cases. Every part is drawn independently (no `prop_flat_map`) and made consistent
/// afterwards, so shrinking can simplify each part on its own: fewer faults, fewer nodes,
/// lower bounds, a shorter job.
pub fn case() -> impl Strategy<Value = Case> {
    (
        (2u32..=6, 0u32..=2, 0u32..6, 0u32..=2, 50u64..=200),
        // Swarm testing: a non-empty mask of enabled kinds.
        1u16..(1 << FAULT_KINDS.len()),
        proptest::collection::vec(fault_draw(), 0..=6),
        any::<u64>(),
    )
        .prop_map(|(shape, mask, draws, seed)| {
            let (nodes, spares, min_pick, max_extra, steps) = shape;
            build_case(
                nodes,
                spares,
                (min_pick, max_extra),
                steps,
                mask,
                &draws,
                seed,
            )
        })
}

/// Cases of one fixed shape (`trainsim bench`'s fuzz workload): `nodes` started and
/// `spares` spare nodes, `steps` steps of 200 ms, with node bounds and fault plans drawn as
/// [`case`] draws them.
pub fn case_of_shape(nodes: u32, spares: u32, steps: u64) -> impl Strategy<Value = Case> {
    (
        (0u32..nodes, 0u32..=spares),
        1u16..(1 << FAULT_KINDS.len()),
        proptest::collection::vec(fault_draw(), 0..=6),
        any::<u64>(),
    )
        .prop_map(move |(bounds, mask, draws, seed)| {
            build_case(nodes, spares, bounds, steps, mask, &draws, seed)
        })
}

/// One case from its drawn parts; `bounds` = (min_nodes pick, max_nodes beyond `nodes`).
fn build_case(
    nodes: u32,
    spares: u32,
    (min_pick, max_extra): (u32, u32),
    steps: u64,
    mask: u16,
    draws: &[FaultDraw],
    seed: u64,
) -> Case {
    let mut s = scenario::default_scenario("fuzz case");
    s.cluster.nodes = nodes;
    s.cluster.spare_nodes = spares;
    // min ≤ nodes ≤ max ≤ nodes + spares.
    s.rendezvous.min_nodes = 1 + min_pick % nodes;
    s.rendezvous.max_nodes = nodes + max_extra.min(spares);
    s.job.steps = steps;
    s.job.step_time = SimDuration::from_ms(200);
    s.faults = fault_plan(nodes, spares, mask, draws);
    // The validator's order: by time, stable for equal times.
    s.faults.sort_by_key(|f| f.at);
    s.time_limit = case_time_limit(&s);
    // TOML integers are signed: keep the seed within them.
    Case {
        scenario: s,
        seed: seed >> 1,
    }
}

/// Turns draws into valid faults among the kinds `mask` enables.
fn fault_plan(nodes: u32, spares: u32, mask: u16, draws: &[FaultDraw]) -> Vec<Fault> {
    let enabled: Vec<FaultName> = FAULT_KINDS
        .iter()
        .enumerate()
        .filter(|(i, _)| mask & (1 << i) != 0)
        .map(|(_, k)| *k)
        .collect();
    let mut started: BTreeSet<u32> = BTreeSet::new();
    let mut out = Vec::new();
    for d in draws {
        let kind = enabled[d.kind_pick % enabled.len()];
        let at_time = SimInstant::from_start(SimDuration::from_ms(d.at_ms));
        // The second fault of a pair, still within 120 s.
        let later_time = at_time
            .after(SimDuration::from_ms(d.span_ms))
            .min(FAULT_AT_MAX);
        let node = d.node % nodes;
        let at = |kind| Fault::at(at_time, kind);
        let later = |kind| Fault::at(later_time, kind);
        match kind {
            FaultName::Kill => out.push(at(FaultKind::Kill { node })),
            FaultName::Restart => {
                out.push(at(FaultKind::Kill { node }));
                out.push(later(FaultKind::Restart { node }));
            }
            // A spare starts at most once; with no spare left the draw adds nothing.
            FaultName::Start if spares > 0 => {
                let spare = nodes + d.node % spares;
                if started.insert(spare) {
                    out.push(at(FaultKind::Start { node: spare }));
                }
            }
            FaultName::Stop => out.push(at(FaultKind::Stop { node })),
            FaultName::Pause => {
                out.push(at(FaultKind::Pause { node }));
                out.push(later(FaultKind::Resume { node }));
            }
            FaultName::Partition => {
                let rest: Vec<u32> = (0..nodes + spares).filter(|&n| n != node).collect();
                out.push(at(FaultKind::Partition {
                    groups: vec![rest, vec![node]],
                }));
                out.push(later(FaultKind::Heal));
            }
            FaultName::ClogLink => {
                let to = (node + 1 + d.other % (nodes - 1)) % nodes;
                out.push(at(FaultKind::ClogLink { from: node, to }));
                out.push(later(FaultKind::UnclogLink { from: node, to }));
            }
            FaultName::ClockSkew => out.push(at(FaultKind::ClockSkew {
                node,
                offset_us: offset_us_of_ms(d.skew_ms),
            })),
            FaultName::WorkerCrash => out.push(at(FaultKind::WorkerCrash {
                node,
                local_rank: 0,
                exit_code: 1,
            })),
            _ => {}
        }
    }
    out
}

/// Asserts that 500 cases drawn by `strategy` (from a generator seeded by `seed_byte`) each
/// round-trip through `to_toml` and `parse`: every drawn scenario is a valid file.
#[cfg(test)]
pub(crate) fn assert_cases_round_trip(strategy: impl Strategy<Value = Case>, seed_byte: u8) {
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    let config = Config {
        cases: 500,
        failure_persistence: None,
        ..Config::default()
    };
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[seed_byte; 32]);
    let mut runner = TestRunner::new_with_rng(config, rng);
    runner
        .run(&strategy, |case| {
            let text = scenario::to_toml(&case.scenario);
            let back = scenario::parse(&text, "drawn.toml")
                .map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
            prop_assert_eq!(back, case.scenario);
            Ok(())
        })
        .expect("every drawn scenario parses back to itself");
}

#[cfg(test)]
mod tests {
    use crate::sim_time::{SimDuration, SimInstant};

    #[test]
    fn the_time_limit_covers_the_last_fault_and_the_liveness_window() {
        let s = crate::scenario::default_scenario("t");
        let limit = super::case_time_limit(&s);
        // torch's defaults: 120 s of faults + 600 s join + 30 s last call + 15 s expiry + 10 s.
        assert_eq!(limit, SimDuration::from_ms(13 * 60_000));
        let window = crate::check::liveness_completion_bound(&s);
        assert!(super::FAULT_AT_MAX.after(window) <= SimInstant::from_start(limit));
    }

    #[test]
    fn every_drawn_scenario_round_trips_through_toml() {
        super::assert_cases_round_trip(super::case(), 7);
    }
}
