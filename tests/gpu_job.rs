//! The job on virtual GPUs does what issue #4 promises, in simulated time (never wall time):
//! a 3x slow GPU stretches a compute-bound job about 3x, and Bagua's load-balancing sampler
//! shortens a job whose samples vary widely in cost.

use std::path::Path;
use trainsim::scenario::{self, Scenario};

fn load(name: &str) -> (Scenario, String) {
    let file = format!("scenarios/{name}");
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(&file);
    (
        scenario::load(&path).unwrap_or_else(|e| panic!("{e}")),
        file,
    )
}

/// Simulated microseconds from the first training step to the last.
fn training_span_us(scenario: &Scenario, file: &str) -> u64 {
    let (report, trace) = trainsim::runner::Run::of(scenario, file)
        .traced()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.outcome, "succeeded", "{file}: {}", report.repro);
    let steps: Vec<u64> = trace
        .events
        .iter()
        .flat_map(|e| e.kind.each_step(e.at).map(|step| step.at.as_us()))
        .collect();
    steps.last().expect("steps were taken") - steps.first().expect("steps were taken")
}

#[test]
fn a_3x_slow_gpu_stretches_a_compute_bound_job_about_3x() {
    let (slow, file) = load("straggler_gpu.toml");
    let mut healthy = slow.clone();
    healthy.faults.clear();
    let ratio = training_span_us(&slow, &file) as f64 / training_span_us(&healthy, &file) as f64;
    assert!((2.85..=3.05).contains(&ratio), "slowdown ratio {ratio:.3}");
}

#[test]
fn the_load_balancing_sampler_shortens_a_variable_cost_job() {
    let (plain, plain_file) = load("variable_cost_plain.toml");
    let (balanced, balanced_file) = load("variable_cost_load_balancing.toml");
    assert_eq!(
        plain.job.dataset, balanced.job.dataset,
        "the twins train the same data"
    );
    let plain_us = training_span_us(&plain, &plain_file);
    let balanced_us = training_span_us(&balanced, &balanced_file);
    assert!(
        (balanced_us as f64) < 0.8 * plain_us as f64,
        "load balancing {balanced_us} us vs plain {plain_us} us"
    );
}

#[test]
fn a_slowdown_window_only_slows_steps_inside_it() {
    let (windowed, file) = load("straggler_window.toml");
    let mut healthy = windowed.clone();
    healthy.faults.clear();
    let extra_us = training_span_us(&windowed, &file) - training_span_us(&healthy, &file);
    // 30 s at 4x is 30 s of wall progress that would have taken 7.5 s: ~22.5 s extra,
    // give or take the step straddling each edge of the window.
    assert!(
        (21_000_000..=24_500_000).contains(&extra_us),
        "extra {extra_us} us"
    );
}

#[test]
fn a_slow_gpu_starves_a_copy_bound_reader_pipeline() {
    let (slow, file) = load("reader_slow_gpu_starves.toml");
    let mut healthy = slow.clone();
    healthy.faults.clear();
    let stall_us = |s: &Scenario| {
        let report = trainsim::runner::Run::of(s, &file)
            .report()
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(report.passed(), "{}", report.repro);
        report.reader.expect("the scenario has a reader").stall_us
    };
    let (slow_us, healthy_us) = (stall_us(&slow), stall_us(&healthy));
    // Measured: about 1.49 s against 0.51 s.
    assert!(
        slow_us > healthy_us + 800_000,
        "stalled {slow_us} us vs {healthy_us} us"
    );
}
