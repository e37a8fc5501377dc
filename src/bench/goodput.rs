//! The `goodput-model` workload: the checkpoint-interval sweep's job over the seeds the
//! literature check uses (`tests/goodput_literature.rs`), one seed after another, so its
//! figure is what one point of that check costs on one core.

use super::{round2, timed, Figures};
use crate::runner::Run;
use crate::scenario;
use serde_json::json;

/// The scenario the check and this workload run, as shipped.
const SWEEP_TOML: &str = include_str!("../../scenarios/checkpoint_interval_sweep.toml");
const SWEEP_FILE: &str = "scenarios/checkpoint_interval_sweep.toml";
/// The seeds of one point of the literature check.
pub const GOODPUT_MODEL_SEEDS: u64 = 16;

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
