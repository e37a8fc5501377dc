//! Training steps settled in closed form against the same runs timed one step at a time:
//! the same steps, samples and epochs at the same moments (a run's steps listed one by one), the same verdicts, and fewer
//! simulator events.

mod common;

use trainsim::runner::RunOptions;
use trainsim::trace::{EventKind, Trace, TraceNode};
use trainsim::world::RunStats;

/// The run's report and trace, and what it cost the simulator.
fn run(file: &str, step_by_step: bool) -> (trainsim::report::Report, Trace, RunStats) {
    let options = RunOptions {
        step_by_step,
        ..RunOptions::default()
    };
    common::simulate_and_check(file, options)
}

/// Every step, a run's one by one: (node, step, epoch, batch, samples digest, at_us).
fn steps(trace: &Trace) -> Vec<(Option<TraceNode>, u64, u64, u64, u64, u64)> {
    let mut steps: Vec<_> = trace
        .events
        .iter()
        .flat_map(|e| {
            let epoch = match &e.kind {
                EventKind::Step { epoch, .. } => *epoch,
                _ => 0,
            };
            e.kind.each_step(e.at).map(move |v| {
                let t = v.trained;
                (
                    e.node,
                    v.step,
                    epoch,
                    t.batch,
                    t.samples_digest,
                    v.at.as_us(),
                )
            })
        })
        .collect();
    steps.sort();
    steps
}

/// Every epoch's start and coverage: (node, moment in µs, the event). Runs in closed form
/// cross epochs' ends, which they record as the step loop does at that moment. A start is
/// group rank 0's (its process id left out); a coverage is recorded by whichever node of
/// the group finished the epoch last, which within one moment is the simulator's order.
fn epochs(trace: &Trace) -> Vec<(Option<TraceNode>, u64, String)> {
    let mut epochs: Vec<_> = trace
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::EpochStarted { .. } => {
                let mut kind = e.kind.clone();
                if let EventKind::EpochStarted { pid, .. } = &mut kind {
                    *pid = 0;
                }
                Some((e.node, e.at.as_us(), format!("{kind:?}")))
            }
            EventKind::EpochCovered { .. } => Some((None, e.at.as_us(), format!("{:?}", e.kind))),
            _ => None,
        })
        .collect();
    epochs.sort_by(|a, b| (&a.2, a.0, a.1).cmp(&(&b.2, b.0, b.1)));
    epochs
}

/// The samples each node's ranks trained on, over every step.
fn samples(trace: &Trace) -> std::collections::BTreeMap<Option<TraceNode>, u64> {
    let mut samples = std::collections::BTreeMap::new();
    for e in &trace.events {
        if let EventKind::Step { samples: n, .. } = &e.kind {
            *samples.entry(e.node).or_default() += n;
        }
    }
    samples
}

fn verdicts(report: &trainsim::report::Report) -> Vec<(String, String)> {
    report
        .invariants
        .iter()
        .map(|i| (i.name.clone(), format!("{:?}", i.status)))
        .collect()
}

/// Without a membership change the closed form records every step of every node, with its
/// epoch and samples, within a millisecond of where one-at-a-time timing puts it (madsim
/// adds 50–100 ns of clock noise per task poll, which the closed form does not pay).
#[test]
fn steady_runs_record_the_same_steps_at_the_same_moments() {
    for file in [
        "scenarios/all_nodes_at_max.toml",
        "scenarios/straggler_gpu.toml",
        "scenarios/straggler_window.toml",
        "scenarios/variable_cost_load_balancing.toml",
    ] {
        let (closed_report, closed, closed_stats) = run(file, false);
        let (one_report, one, one_stats) = run(file, true);
        assert_eq!(verdicts(&closed_report), verdicts(&one_report), "{file}");
        let (closed_steps, one_steps) = (steps(&closed), steps(&one));
        assert_eq!(closed_steps.len(), one_steps.len(), "{file}");
        assert!(!closed_steps.is_empty(), "{file}");
        for (c, o) in closed_steps.iter().zip(&one_steps) {
            assert_eq!(
                (&c.0, c.1, c.2, c.3, c.4),
                (&o.0, o.1, o.2, o.3, o.4),
                "{file}"
            );
            assert!(c.5.abs_diff(o.5) < 1_000, "{file}: {c:?} against {o:?}");
        }
        assert_eq!(samples(&closed), samples(&one), "{file}");
        let (closed_epochs, one_epochs) = (epochs(&closed), epochs(&one));
        assert_eq!(closed_epochs.len(), one_epochs.len(), "{file}");
        assert!(closed_epochs.len() > 2, "{file}: the run crosses epochs");
        for (c, o) in closed_epochs.iter().zip(&one_epochs) {
            assert_eq!((&c.0, &c.2), (&o.0, &o.2), "{file}");
            assert!(c.1.abs_diff(o.1) < 1_000, "{file}: {c:?} against {o:?}");
        }
        // A run of evenly spaced steps is one event.
        assert!(
            closed.events.len() < one.events.len(),
            "{file}: {} events in closed form, {} one at a time",
            closed.events.len(),
            one.events.len()
        );
        // Short epochs and checkpoints cut runs often; even so a quarter of the events go.
        assert!(
            closed_stats.sim_events * 4 < one_stats.sim_events * 3,
            "{file}: {} simulator events in closed form, {} one at a time",
            closed_stats.sim_events,
            one_stats.sim_events
        );
    }
}

/// Restarts, membership changes, lost members and paused ones cut runs in the middle: the
/// verdicts, rounds and restarts stay those of one-at-a-time timing.
#[test]
fn cut_runs_keep_every_verdict() {
    for file in [
        "scenarios/pause_resume.toml",
        "scenarios/store_host_paused_past_timeout.toml",
        "scenarios/worker_crash_restart.toml",
        "scenarios/scale_down.toml",
        "scenarios/dedicated_store_crash.toml",
        "scenarios/gpu_lost_spends_restarts.toml",
        "scenarios/fast_rejoin_bypasses_max_restarts.toml",
    ] {
        let (closed, _, _) = run(file, false);
        let (one, _, _) = run(file, true);
        assert_eq!(verdicts(&closed), verdicts(&one), "{file}");
        assert_eq!(closed.outcome, one.outcome, "{file}");
        let rounds = |r: &trainsim::report::Report| -> Vec<(u64, u32, usize)> {
            r.rounds
                .iter()
                .map(|x| (x.round, x.world_size, x.participants.len()))
                .collect()
        };
        assert_eq!(rounds(&closed), rounds(&one), "{file}");
        let restarts = |r: &trainsim::report::Report| -> Vec<u32> {
            r.agents.iter().map(|a| a.restarts).collect()
        };
        assert_eq!(restarts(&closed), restarts(&one), "{file}");
    }
}

/// A run of steps is one trace event at its last step, but a sampler fault is reported at
/// the step that showed it: with the planted off-by-one sampler, the closed form puts each
/// `sampler.coverage` violation where one-at-a-time timing (one event per step) does.
#[test]
fn a_misdealt_step_is_reported_at_its_own_moment() {
    let file = "scenarios/all_nodes_at_max.toml";
    let options = |step_by_step| {
        let mut options = RunOptions {
            step_by_step,
            ..RunOptions::default()
        };
        options
            .mutants
            .insert(trainsim::mutant::Mutant::SamplerOffByOne);
        options
    };
    let violations = |report: &trainsim::report::Report| {
        report
            .invariants
            .iter()
            .filter(|i| i.name == "sampler.coverage")
            .flat_map(|i| i.violations.iter())
            // A run's message counts the samples of all its steps: compared up to them.
            .map(|v| {
                let what = v.message.split(" (").take(2).collect::<Vec<_>>().join(" (");
                (v.node, what, v.at.as_us())
            })
            .collect::<Vec<_>>()
    };
    let (closed, _, _) = common::simulate_and_check(file, options(false));
    let (one, _, _) = common::simulate_and_check(file, options(true));
    let (mut closed, mut one) = (violations(&closed), violations(&one));
    // Paired by what was found and where: two nodes' violations a microsecond apart on one
    // path may share a moment on the other.
    closed.sort_by(|a, b| (&a.1, a.0, a.2).cmp(&(&b.1, b.0, b.2)));
    one.sort_by(|a, b| (&a.1, a.0, a.2).cmp(&(&b.1, b.0, b.2)));
    assert!(!closed.is_empty(), "the planted bug is found");
    assert_eq!(closed.len(), one.len(), "{closed:#?}\n{one:#?}");
    for (c, o) in closed.iter().zip(&one) {
        assert_eq!((c.0, &c.1), (o.0, &o.1));
        assert!(
            c.2.abs_diff(o.2) < 1_000,
            "closed form {c:?}, one at a time {o:?}"
        );
    }
}
