//! torch's own elastic code as the control plane, on scenarios whose outcome the model's
//! verdicts are known for: the real code must reproduce them, and replay bit for bit.
//!
//! Needs a Python with torch: `TRAINSIM_TORCH_PYTHON`, else `conformance/setup`'s venv
//! (`~/.cache/trainsim/torch/bin/python`). Without one the tests say so and pass, except in
//! CI (`CI=true`), whose `.ci/run` installs torch first and where a missing torch fails.

use std::path::{Path, PathBuf};
use trainsim::report::Report;
use trainsim::runner::{Run, RunOptions};
use trainsim::torch_plane::TorchPlane;

fn torch_python() -> Option<PathBuf> {
    let named = std::env::var_os("TRAINSIM_TORCH_PYTHON").map(PathBuf::from);
    let default = std::env::var_os("HOME")
        .map(|home| Path::new(&home).join(".cache/trainsim/torch/bin/python"));
    let found = named.or(default).filter(|p| p.exists());
    if found.is_none() {
        assert!(
            std::env::var("CI").is_err(),
            "CI runs the torch control plane: set TRAINSIM_TORCH_PYTHON (.ci/run installs torch)"
        );
        eprintln!("no Python with torch: skipping the torch control plane's tests");
    }
    found
}

fn run_on_torch(file: &str, seed: Option<u64>) -> Option<(Report, RunOptions)> {
    let python = torch_python()?;
    let scenario = trainsim::scenario::load(Path::new(file)).expect("the scenario loads");
    let options = RunOptions {
        torch: Some(TorchPlane {
            python,
            elastic_src: None,
        }),
        ..RunOptions::default()
    };
    let mut run = Run::of(&scenario, file).options(options.clone());
    if let Some(seed) = seed {
        run = run.seed(seed);
    }
    Some((run.report().unwrap_or_else(|e| panic!("{e}")), options))
}

#[test]
fn a_late_joiner_meets_the_stale_master_address_on_torchs_own_code() {
    let Some((report, _)) = run_on_torch("scenarios/late_joiner_next_round.toml", None) else {
        return;
    };
    println!("{}", serde_json::to_string_pretty(&report).unwrap());
}
