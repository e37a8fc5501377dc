//! `trainsim bench --torch PYTHON`'s workloads: torch's own elastic code as the control plane,
//! on a three-node job and on the fuzz workload's cases.

use super::{round2, timed, Figures, BENCH_SEED};
use crate::fuzz;
use crate::runner::{Run, RunOptions};
use crate::scenario::{self, model::TorchSection};
use crate::torch_plane::{self, TorchPlane};
use serde_json::json;

/// The workloads that need a Python with torch, in the order they run.
pub const TORCH_WORKLOADS: &[&str] = &["torch-three-nodes", "torch-fuzz"];

/// Cases `torch-fuzz` runs (the fuzz workload's first ones).
pub const TORCH_FUZZ_CASES: u64 = 40;

/// Three nodes, one killed after the first round: the survivors re-form and finish.
const THREE_NODES_TOML: &str = r#"
name = "bench torch: three nodes, one killed"
seed = 1
time_limit = "30m"

[cluster]
nodes = 3

[rendezvous]
min_nodes = 2
max_nodes = 3

[agent]
max_restarts = 1

[job]
steps = 400
step_time = "200ms"
checkpoint_every = 50

[[faults]]
at = "40s"
kind = "kill"
node = "node-2"
"#;

/// Runs one torch workload on `plane`.
pub fn run(workload: &str, plane: &TorchPlane) -> Result<Figures, String> {
    match workload {
        "torch-three-nodes" => three_nodes(plane),
        "torch-fuzz" => fuzz_cases(plane),
        _ => Err(format!("unknown workload `{workload}`")),
    }
}

fn three_nodes(plane: &TorchPlane) -> Result<Figures, String> {
    // The host's start (Python, importing torch) is paid once per thread; timed apart.
    let info = torch_plane::probe(plane).map_err(|e| e.to_string())?;
    let (start_wall_us, started) = timed(|| torch_plane::host::start_another(plane));
    started.map_err(|e| e.to_string())?;
    let scenario = scenario::parse(THREE_NODES_TOML, "bench-torch-three-nodes.toml")
        .expect("the three-node scenario is valid");
    let options = RunOptions {
        torch: Some(plane.clone()),
        ..RunOptions::default()
    };
    let run = Run::of(&scenario, "bench-torch-three-nodes.toml")
        .seed(BENCH_SEED)
        .options(options);
    let (wall_us, report) = timed(|| run.report());
    let report = report.map_err(|e| e.to_string())?;
    let (model_wall_us, model) = timed(|| {
        Run::of(&scenario, "bench-torch-three-nodes.toml")
            .seed(BENCH_SEED)
            .report()
    });
    model.map_err(|e| e.to_string())?;
    Ok(Figures::new(
        "torch-three-nodes",
        json!({
            "torch": info.torch_version,
            "host_start_wall_us": start_wall_us,
            "wall_us": wall_us,
            "sim_time_us": report.sim_time_us,
            "speedup": round2(report.sim_time_us as f64 / wall_us.max(1) as f64),
            "model_wall_us": model_wall_us,
            "outcome": report.outcome,
        }),
    ))
}

fn fuzz_cases(plane: &TorchPlane) -> Result<Figures, String> {
    torch_plane::probe(plane).map_err(|e| e.to_string())?;
    let jobs = fuzz::parallel::default_jobs();
    let torch = TorchSection {
        python: plane.python.display().to_string(),
        elastic_src: plane.elastic_src.as_ref().map(|p| p.display().to_string()),
    };
    let (wall_us, failing) = timed(|| {
        fuzz::campaign::run_cases_on(
            fuzz::FuzzTarget::Rendezvous,
            BENCH_SEED,
            0..TORCH_FUZZ_CASES,
            jobs,
            Some(torch),
        )
    });
    Ok(Figures::new(
        "torch-fuzz",
        json!({
            "cases": TORCH_FUZZ_CASES,
            "jobs": jobs,
            "failing": failing,
            "wall_us": wall_us,
            "cases_per_s": round2(TORCH_FUZZ_CASES as f64 * 1e6 / wall_us.max(1) as f64),
        }),
    ))
}
