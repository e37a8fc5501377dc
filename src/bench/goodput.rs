//! The goodput workloads. `goodput-model`: the checkpoint-interval sweep's job over the
//! seeds the literature check uses (`tests/goodput_literature.rs`), one seed after another,
//! so its figure is what one point of that check costs on one core. `goodput-batch`: what
//! `trainsim run --seeds 0..100 --jobs 2` costs on the shipped 128-node simulated day.
//! `week-256`: one simulated week of a 256-node job under a failure process.

use super::{round2, timed, Figures};
use crate::runner::Run;
use crate::scenario;
use serde_json::json;

/// The scenario the check and this workload run, as shipped.
const SWEEP_TOML: &str = include_str!("../../scenarios/checkpoint_interval_sweep.toml");
const SWEEP_FILE: &str = "scenarios/checkpoint_interval_sweep.toml";
/// The seeds of one point of the literature check.
pub const GOODPUT_MODEL_SEEDS: u64 = 16;

/// The 128-node day, as shipped.
const DAY_TOML: &str = include_str!("../../scenarios/failure_process_128_nodes_one_day.toml");
const DAY_FILE: &str = "scenarios/failure_process_128_nodes_one_day.toml";
/// The week of 256 nodes.
const WEEK_TOML: &str = include_str!("week_256.toml");
const WEEK_FILE: &str = "src/bench/week_256.toml";

/// Seeds and threads of `goodput-batch`.
pub const GOODPUT_BATCH_SEEDS: u64 = 100;
pub const GOODPUT_BATCH_JOBS: usize = 2;

/// Runs the 128-node day over its seeds on two threads, as `run --seeds --jobs 2` does, and
/// reports the wall time and the batch's goodput (mean ETTR, runs that finished).
pub fn goodput_batch() -> Result<Figures, String> {
    let scenario = scenario::parse(DAY_TOML, DAY_FILE).map_err(|e| e.to_string())?;
    let seeds: Vec<u64> = (0..GOODPUT_BATCH_SEEDS).collect();
    let (wall_us, reports) = timed(|| {
        crate::fuzz::parallel::map(
            &seeds,
            GOODPUT_BATCH_JOBS,
            |&seed| Run::of(&scenario, DAY_FILE).seed(seed).report(),
            |_| {},
        )
    });
    let reports = reports
        .into_iter()
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let runs = reports.len() as f64;
    let sim_time_us: u64 = reports.iter().map(|r| r.sim_time_us).sum();
    let finished = reports.iter().filter(|r| r.outcome == "succeeded").count();
    let ettr_mean = reports.iter().map(|r| r.goodput.ettr).sum::<f64>() / runs;
    Ok(Figures::new(
        "goodput-batch",
        json!({
            "runs": reports.len(),
            "jobs": GOODPUT_BATCH_JOBS,
            "wall_us": wall_us,
            "sim_time_us": sim_time_us,
            "speedup": round2(sim_time_us as f64 / wall_us as f64),
            "finished": finished,
            "ettr_mean_percent": round2(ettr_mean * 100.0),
        }),
    ))
}

/// Runs the seeds and reports the wall time, the simulated time and the mean ETTR (which
/// the check compares with Kokolis et al.'s model).
pub fn goodput_model() -> Result<Figures, String> {
    let scenario = scenario::parse(SWEEP_TOML, SWEEP_FILE).map_err(|e| e.to_string())?;
    let (wall_us, reports) = timed(|| {
        (0..GOODPUT_MODEL_SEEDS)
            .map(|seed| Run::of(&scenario, SWEEP_FILE).seed(seed).report())
            .collect::<Result<Vec<_>, _>>()
    });
    let reports = reports.map_err(|e| e.to_string())?;
    let sim_time_us: u64 = reports.iter().map(|r| r.sim_time_us).sum();
    let ettr_mean =
        reports.iter().map(|r| r.goodput.ettr).sum::<f64>() / GOODPUT_MODEL_SEEDS as f64;
    Ok(Figures::new(
        "goodput-model",
        json!({
            "runs": GOODPUT_MODEL_SEEDS,
            "wall_us": wall_us,
            "runs_per_sec": round2(GOODPUT_MODEL_SEEDS as f64 / (wall_us as f64 / 1e6)),
            "sim_time_us": sim_time_us,
            "speedup": round2(sim_time_us as f64 / wall_us as f64),
            "ettr_mean_percent": round2(ettr_mean * 100.0),
        }),
    ))
}

/// Runs the simulated week once (the bench's seed) and reports the wall time, how far the
/// job got and its goodput.
pub fn week_256() -> Result<Figures, String> {
    let scenario = scenario::parse(WEEK_TOML, WEEK_FILE).map_err(|e| e.to_string())?;
    let one = Run::of(&scenario, WEEK_FILE).seed(super::BENCH_SEED);
    let (wall_us, report) = timed(|| one.report());
    let report = report.map_err(|e| e.to_string())?;
    Ok(Figures::new(
        "week-256",
        json!({
            "wall_us": wall_us,
            "sim_time_us": report.sim_time_us,
            "speedup": round2(report.sim_time_us as f64 / wall_us as f64),
            "outcome": report.outcome,
            "steps_done": report.job.steps_done,
            "rounds": report.rounds.len(),
            "events": report.events,
            "ettr_percent": round2(report.goodput.ettr * 100.0),
        }),
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_week_is_a_valid_scenario_of_256_nodes_for_a_week() {
        let s = crate::scenario::parse(super::WEEK_TOML, super::WEEK_FILE).expect("valid");
        assert_eq!(s.cluster.nodes, 256);
        assert_eq!(
            s.time_limit,
            crate::sim_time::SimDuration::from_secs(7 * 24 * 3_600)
        );
        assert!(s.failures.is_some(), "a failure process");
    }
}
