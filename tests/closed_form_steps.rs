//! Training steps settled in closed form against the same runs timed one step at a time:
//! the same steps, samples and epochs at the same moments, the same verdicts, and fewer
//! simulator events.

use trainsim::runner::{Run, RunOptions};
use trainsim::trace::{EventKind, Trace, TraceNode};
use trainsim::world::RunStats;

/// The run's report and trace, and what it cost the simulator.
fn run(file: &str, step_by_step: bool) -> (trainsim::report::Report, Trace, RunStats) {
    let scenario = trainsim::scenario::load(std::path::Path::new(file)).unwrap();
    let options = RunOptions {
        step_by_step,
        ..RunOptions::default()
    };
    let one = Run::of(&scenario, file).options(options);
    let run = one.simulate().expect("the run finishes");
    let report = one.check(&run.trace, &run.end).expect("the checks run");
    (report, run.trace, run.stats)
}

/// Every step record: (node, step, epoch, samples, at_us).
fn steps(trace: &Trace) -> Vec<(Option<TraceNode>, u64, u64, u64, u64)> {
    let mut steps: Vec<_> = trace
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Step {
                step,
                epoch,
                samples,
                ..
            } => Some((e.node, *step, *epoch, *samples, e.at_us)),
            _ => None,
        })
        .collect();
    steps.sort();
    steps
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
            assert_eq!((&c.0, c.1, c.2, c.3), (&o.0, o.1, o.2, o.3), "{file}");
            assert!(c.4.abs_diff(o.4) < 1_000, "{file}: {c:?} against {o:?}");
        }
        // Short epochs and checkpoints cut runs often; even so a quarter of the events go.
        assert!(
            closed_stats.sim_events * 4 < one_stats.sim_events * 3,
            "{file}: {} simulator events in closed form, {} one at a time",
            closed_stats.sim_events,
            one_stats.sim_events
        );
    }
}

/// Restarts, membership changes and lost members cut runs in the middle: the verdicts,
/// rounds and restarts stay those of one-at-a-time timing.
#[test]
fn cut_runs_keep_every_verdict() {
    for file in [
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
