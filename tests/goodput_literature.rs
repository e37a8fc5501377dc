//! Where torch recovers cleanly, trainsim's goodput agrees with the literature's closed
//! forms: the mean ETTR over seeds with Kokolis et al.'s model, and a checkpoint-interval
//! sweep's peak with Daly's optimum (`trainsim::report::analytic`).
//!
//! The model's inputs come from the scenario's settings and from two plain runs of it: the
//! step's length from a run without failures, and the restart overhead u0 from the
//! difference one hand-placed crash makes. The model then has to predict the failure
//! process over many seeds, where failures fall anywhere in a checkpoint interval.

use std::path::Path;
use trainsim::report::analytic::{JobReliability, KOKOLIS_VALID_LOAD_MAX};
use trainsim::report::Report;
use trainsim::runner::Run;
use trainsim::scenario::model::{Fault, FaultKind, Scenario};

const FILE: &str = "scenarios/checkpoint_interval_sweep.toml";
/// Seeds per mean: the per-seed ETTR's spread here is about 1.5 points, so the mean's
/// standard error is under half a point, well inside the model's 5 %.
const SEEDS: u64 = 16;
/// Kokolis et al.'s stated error for the model.
const RELATIVE_ERROR_MAX: f64 = 0.05;

fn scenario() -> Scenario {
    trainsim::scenario::load(Path::new(FILE)).expect("the sweep scenario loads")
}

fn report(scenario: &Scenario, seed: u64) -> Report {
    Run::of(scenario, FILE)
        .seed(seed)
        .report()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The time a run spent on restarts besides lost progress: detection, rendezvous, worker
/// start and restore.
fn recovery_s(report: &Report) -> f64 {
    let badput = &report.goodput.badput_us;
    let us = ["detection", "rendezvous_restart", "worker_start_restore"]
        .iter()
        .map(|cause| badput.get(*cause).copied().unwrap_or(0))
        .sum::<u64>();
    us as f64 / 1e6
}

/// The settings the model takes, measured on the scenario without its failure process.
struct Measured {
    step_s: f64,
    restart_overhead_s: f64,
}

fn measure(scenario: &Scenario) -> Measured {
    let mut quiet = scenario.clone();
    quiet.failures = None;
    let calm = report(&quiet, 0);
    assert_eq!(calm.outcome, "succeeded");
    let step_s = calm.goodput.productive_us as f64 / 1e6 / quiet.job.steps as f64;
    let mut one_crash = quiet.clone();
    one_crash.faults.push(Fault {
        at: trainsim::sim_time::SimInstant::from_us(3_000_000_000),
        kind: FaultKind::WorkerCrash {
            node: 2,
            local_rank: 3,
            exit_code: 1,
        },
        role: None,
    });
    let crashed = report(&one_crash, 0);
    assert_eq!(crashed.outcome, "succeeded");
    let restart_overhead_s = recovery_s(&crashed) - recovery_s(&calm);
    // A clean recovery: worker start and checkpoint load, plus a few seconds of monitor
    // tick, NCCL's peer-exit detection and rendezvous.
    let start_and_load_s = scenario
        .job
        .worker_start_time
        .saturating_add(scenario.job.checkpoint_load_time)
        .as_secs_f64();
    assert!(
        restart_overhead_s > start_and_load_s && restart_overhead_s < start_and_load_s + 10.0,
        "one crash cost {restart_overhead_s} s of recovery"
    );
    Measured {
        step_s,
        restart_overhead_s,
    }
}

fn model(scenario: &Scenario, measured: &Measured) -> JobReliability {
    let failures = scenario.failures.as_ref().expect("a failure process");
    JobReliability {
        nodes: scenario.cluster.nodes,
        failures_per_node_day: failures.rate_per_node_day,
        restart_overhead_s: measured.restart_overhead_s,
        checkpoint_interval_s: scenario.job.checkpoint_every as f64 * measured.step_s,
        checkpoint_write_s: scenario.job.checkpoint_save_time.as_secs_f64(),
    }
}

/// Every seed's ETTR, the seeds shared between two threads (each run has its own runtime).
fn ettrs(scenario: &Scenario) -> Vec<f64> {
    let seeds: Vec<u64> = (0..SEEDS).collect();
    let halves: Vec<Vec<f64>> = std::thread::scope(|scope| {
        let workers: Vec<_> = seeds
            .chunks(seeds.len().div_ceil(2))
            .map(|chunk| {
                scope.spawn(move || {
                    chunk
                        .iter()
                        .map(|seed| {
                            let r = report(scenario, *seed);
                            assert_eq!(r.outcome, "succeeded", "seed {seed}");
                            r.goodput.ettr
                        })
                        .collect::<Vec<f64>>()
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    halves.concat()
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

fn with(scenario: &Scenario, checkpoint_every: u64, rate_per_node_day: f64) -> Scenario {
    let mut s = scenario.clone();
    s.job.checkpoint_every = checkpoint_every;
    s.failures.as_mut().expect("failures").rate_per_node_day = rate_per_node_day;
    s
}

/// One sweep of the checkpoint interval around Daly's optimum, plus a rarer failure process:
/// every point inside the model's validity range must agree with Kokolis et al., and the
/// sweep must peak near Daly's optimum (one test, so the runs are shared).
#[test]
fn goodput_agrees_with_kokolis_and_peaks_near_dalys_optimum() {
    let base = scenario();
    let measured = measure(&base);
    let rate = base.failures.as_ref().unwrap().rate_per_node_day;
    let optimum_s = model(&base, &measured).daly_optimal_interval_s();
    println!(
        "step {:.4} s, restart overhead u0 {:.2} s, Daly's optimum {optimum_s:.1} s",
        measured.step_s, measured.restart_overhead_s
    );
    let factors = [0.25, 0.5, 1.0, 2.0, 4.0];
    let mut variants: Vec<(u64, f64)> = factors
        .iter()
        .map(|factor| ((optimum_s * factor / measured.step_s).round() as u64, rate))
        .collect();
    variants.push((240, rate / 2.0));
    let mut sweep = Vec::new();
    for (every, rate) in variants {
        let variant = with(&base, every.max(1), rate);
        let job = model(&variant, &measured);
        let predicted = job.kokolis_expected_ettr();
        let simulated = mean(&ettrs(&variant));
        let error = simulated / predicted - 1.0;
        let valid = job.failure_load() <= KOKOLIS_VALID_LOAD_MAX;
        println!(
            "every {every} steps, {rate}/node-day, load {:.3}: trainsim {simulated:.4}, model \
             {predicted:.4} ({:+.2} %){}",
            job.failure_load(),
            error * 100.0,
            if valid {
                ""
            } else {
                ", outside the model's range"
            }
        );
        assert!(
            !valid || error.abs() <= RELATIVE_ERROR_MAX,
            "checkpoint_every {every}, rate {rate}: trainsim {simulated}, Kokolis {predicted}"
        );
        sweep.push(simulated);
    }
    let sweep = &sweep[..factors.len()];
    let best = (0..sweep.len())
        .max_by(|a, b| sweep[*a].total_cmp(&sweep[*b]))
        .unwrap();
    assert!(
        (1..=3).contains(&best),
        "the sweep peaks at {}x Daly's optimum of {optimum_s:.1} s: {sweep:?}",
        factors[best]
    );
    // A quarter and four times the optimum are clearly worse: more writes, or more
    // progress lost per failure.
    assert!(
        sweep[2] > sweep[0] + 0.01 && sweep[2] > sweep[4] + 0.01,
        "{sweep:?}"
    );
}
