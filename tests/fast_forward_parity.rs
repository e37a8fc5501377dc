//! The fast-forward of quiet windows (`world::quiet`) against the exact path, over every
//! shipped scenario and a range of seeds. Skipping messages changes which random draws each
//! later message gets, so a given seed may take another path through a race; what must not
//! change is each scenario's distribution of verdicts over the seeds: how many runs end in
//! each outcome, violate each invariant, and meet the scenario's expectation. Over seeds
//! 0..20 no count of any scenario moves beyond the noise bound below; two seeds were too
//! few to tell a race's odds from a shift (`gpu_lost_node_drained.toml` fails on the exact
//! path in seeds 0 and 1 and in no other of its first 20).
//!
//! `TRAINSIM_PARITY_SEEDS=N` widens the seed range (default 0..10, which CI runs).

mod common;

use std::collections::BTreeMap;
use trainsim::report::Report;
use trainsim::runner::{Run, RunOptions};
use trainsim::trace::EventKind;

/// What one run's verdict comes to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Verdict {
    outcome: String,
    failing_invariants: Vec<String>,
    expectation_met: bool,
}

fn verdict(report: &Report) -> Verdict {
    Verdict {
        outcome: report.outcome.clone(),
        failing_invariants: report
            .invariants
            .iter()
            .filter(|i| !i.violations.is_empty())
            .map(|i| i.name.clone())
            .collect(),
        expectation_met: report.expect.met,
    }
}

/// How many runs of a scenario fall in each category: an outcome, an invariant violated,
/// the expectation met.
fn categories(verdicts: &[Verdict]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for v in verdicts {
        *counts.entry(format!("outcome {}", v.outcome)).or_default() += 1;
        for name in &v.failing_invariants {
            *counts.entry(format!("violates {name}")).or_default() += 1;
        }
        if v.expectation_met {
            *counts
                .entry("meets its expectation".to_owned())
                .or_default() += 1;
        }
    }
    counts
}

/// Scenarios larger than this (nodes × time limit) are left out: their exact path costs
/// minutes a seed, which is what quiet windows exist to avoid.
const NODE_HOURS_MAX: u64 = 500;

/// How far a category's count may move between the paths over `seeds` seeds and still be
/// seed-to-seed noise: one run, or 15 % of them.
fn noise_runs(seeds: u64) -> usize {
    (seeds as usize * 15).div_ceil(100).max(1)
}

fn seeds() -> u64 {
    std::env::var("TRAINSIM_PARITY_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10)
}

#[test]
fn quiet_windows_keep_every_verdict_distribution_of_the_suite() {
    let mut files: Vec<_> = std::fs::read_dir("scenarios")
        .expect("scenarios/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    let exact = RunOptions {
        exact_control_plane: true,
        ..RunOptions::default()
    };
    let (mut runs, mut runs_differing) = (0, 0);
    let mut moved = Vec::new();
    for path in &files {
        let file = path.display().to_string();
        let scenario = trainsim::scenario::load(path).expect("a shipped scenario loads");
        let nodes = u64::from(scenario.cluster.nodes);
        if nodes * scenario.time_limit.as_us() / 3_600_000_000 > NODE_HOURS_MAX {
            eprintln!("{file}: left out, over {NODE_HOURS_MAX} node-hours");
            continue;
        }
        let (mut fast, mut slow) = (Vec::new(), Vec::new());
        for seed in 0..seeds() {
            let run = |options: RunOptions| {
                let report = Run::of(&scenario, &file)
                    .seed(seed)
                    .options(options)
                    .report();
                verdict(&report.unwrap_or_else(|e| panic!("{file} seed {seed}: {e}")))
            };
            fast.push(run(RunOptions::default()));
            slow.push(run(exact.clone()));
            runs += 1;
            runs_differing += usize::from(fast.last() != slow.last());
        }
        let (fast, slow) = (categories(&fast), categories(&slow));
        let keys: std::collections::BTreeSet<&String> = fast.keys().chain(slow.keys()).collect();
        for key in keys {
            let (f, s) = (
                fast.get(key).copied().unwrap_or(0),
                slow.get(key).copied().unwrap_or(0),
            );
            if f.abs_diff(s) > noise_runs(seeds()) {
                moved.push(format!("{file}: {key}: {s} runs exact, {f} fast"));
            }
        }
    }
    eprintln!("{runs_differing} of {runs} runs got another verdict with quiet windows");
    assert!(runs > 0, "no scenario ran");
    assert!(
        moved.is_empty(),
        "quiet windows moved verdict counts beyond noise ({} runs each):\n{}\n         TRAINSIM_PARITY_SEEDS={} cargo test --release --test fast_forward_parity",
        seeds(),
        moved.join("\n"),
        seeds()
    );
    // Across the suite, a verdict may change for a given seed only rarely.
    assert!(
        runs_differing * 20 <= runs,
        "{runs_differing} of {runs} runs got another verdict with quiet windows (at most 5 %)\n         TRAINSIM_PARITY_SEEDS={} cargo test --release --test fast_forward_parity",
        seeds()
    );
}

/// Keep-alives written while the survivors of `tests/data/replacement_wait.toml` wait: from
/// 240 s (the kill at 120 s, its settle and the survivors' re-join are over) until the spare
/// starts at 420 s.
fn waiting_keep_alives(trace: &trainsim::trace::Trace) -> usize {
    trace
        .events
        .iter()
        .filter(|e| (240_000_000..420_000_000).contains(&e.at.as_us()))
        .filter(|e| matches!(e.kind, EventKind::Heartbeat { .. }))
        .count()
}

/// Survivors waiting for a replacement only poll and keep alive: quiet windows skip that
/// wait (no keep-alive is written between the settle after the kill and the spare's start),
/// and the run keeps its verdict and rounds.
#[test]
fn a_wait_for_a_replacement_is_fast_forwarded() {
    let file = "tests/data/replacement_wait.toml";
    let run = |exact_control_plane: bool| {
        let options = RunOptions {
            exact_control_plane,
            ..RunOptions::default()
        };
        let (report, trace, _) = common::simulate_and_check(file, options);
        (report, waiting_keep_alives(&trace))
    };
    let (fast, fast_keep_alives) = run(false);
    let (exact, exact_keep_alives) = run(true);
    assert!(
        fast.expect.met && exact.expect.met,
        "{file}: expectation not met"
    );
    assert_eq!(verdict(&fast), verdict(&exact), "{file}");
    assert_eq!(fast.rounds.len(), exact.rounds.len(), "{file}");
    // Seven survivors keep alive every 5 s for 180 s on the exact path.
    assert!(exact_keep_alives > 200, "{file}: {exact_keep_alives} exact");
    assert_eq!(
        fast_keep_alives, 0,
        "{file}: keep-alives written in a quiet wait"
    );
}

/// The replacement wait with skewed wall clocks: keep-alives written while the survivors
/// wait (as in the test above), and the run's verdict and rounds.
fn skewed_wait(skews_us: &[(u32, i64)], exact_control_plane: bool) -> (Verdict, usize, usize) {
    let file = "tests/data/replacement_wait.toml";
    let mut scenario = trainsim::scenario::load(std::path::Path::new(file)).expect("loads");
    scenario.cluster.clock_skew_us = skews_us.iter().copied().collect();
    let options = RunOptions {
        exact_control_plane,
        ..RunOptions::default()
    };
    let (report, trace) = Run::of(&scenario, file)
        .options(options)
        .traced()
        .unwrap_or_else(|e| panic!("{file} with skews {skews_us:?}: {e}"));
    assert!(report.expect.met, "{file} with skews {skews_us:?}");
    (
        verdict(&report),
        report.rounds.len(),
        waiting_keep_alives(&trace),
    )
}

/// Clocks a few seconds apart leave every live stamp younger than the expiry in every
/// reader's eyes, so the wait is still skipped; clocks further apart than the routine
/// tolerates (torch's 15 s expiry less a live stamp's oldest: 7.87 s apart here) keep it
/// message by message. Both keep the exact path's verdict and rounds.
#[test]
fn skewed_clocks_skip_a_wait_only_within_what_the_routine_tolerates() {
    let near = [(1, 3_000_000), (5, -2_000_000)];
    let far = [(1, 4_500_000), (5, -4_000_000)];
    for skews in [&near[..], &far[..]] {
        let (fast, fast_rounds, _) = skewed_wait(skews, false);
        let (exact, exact_rounds, exact_keep_alives) = skewed_wait(skews, true);
        assert_eq!(fast, exact, "skews {skews:?}");
        assert_eq!(fast_rounds, exact_rounds, "skews {skews:?}");
        assert!(exact_keep_alives > 200, "{exact_keep_alives} exact");
    }
    assert_eq!(
        skewed_wait(&near, false).2,
        0,
        "clocks 5 s apart skip the wait"
    );
    assert!(
        skewed_wait(&far, false).2 > 200,
        "clocks 8.5 s apart keep the wait message by message"
    );
}
