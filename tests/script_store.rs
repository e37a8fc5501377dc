//! `job.init_method` and `job.script_master_port`: a training script that picks its own
//! port for its process group, under torchrun's shared store (torch 2.15's
//! `_create_c10d_store`, which trusts `TORCHELASTIC_USE_AGENT_STORE` at the worker's
//! `MASTER_ADDR:MASTER_PORT` only).

use trainsim::runner::Run;
use trainsim::scenario::{self, Scenario};

/// Two nodes, a 20 s process-group timeout and no restart, the script on port 12355.
fn script(job: &str, agent: &str) -> Scenario {
    let text = format!(
        "name = \"own port\"\ntime_limit = \"10m\"\n[cluster]\nnodes = 2\n[agent]\nmax_restarts = 0\n{agent}\n[job]\nsteps = 50\nstep_time = \"200ms\"\nbackend = \"gloo\"\ncollective_timeout = \"20s\"\nscript_master_port = 12355\n{job}\n"
    );
    scenario::parse(&text, "own_port.toml").unwrap_or_else(|e| panic!("{e}"))
}

/// The run's outcome and when it ended, in seconds.
fn outcome(s: &Scenario) -> (String, f64) {
    let report = Run::of(s, "own_port.toml")
        .report()
        .unwrap_or_else(|e| panic!("{e}"));
    (report.outcome, report.sim_time_us as f64 / 1e6)
}

#[test]
fn env_with_its_own_master_port_waits_past_the_timeout_for_a_store_nobody_serves() {
    let (outcome, ended_s) = outcome(&script("init_method = \"env\"", ""));
    assert_eq!(outcome, "failed");
    // c10d's connect retries end with the first try refused past the 20 s timeout; torch
    // 2.15.0's first rank failed after 30 to 46 s.
    assert!((20.0..60.0).contains(&ended_s), "ended at {ended_s} s");
}

#[test]
fn tcp_with_its_own_port_gets_a_store_its_rank_0_hosts() {
    let (outcome, _) = outcome(&script("init_method = \"tcp\"", ""));
    assert_eq!(outcome, "succeeded");
}

#[test]
fn without_the_shared_store_or_with_the_fix_env_gets_its_own_store() {
    let unshared = script("init_method = \"env\"", "share_store = false");
    assert_eq!(outcome(&unshared).0, "succeeded");
    let fixed = script("", "fixes = [\"agent-store-address-exported\"]");
    assert_eq!(outcome(&fixed).0, "succeeded");
}
