//! The scenarios `trainsim bench` runs: the reference job, the fuzz workload's shape, and
//! one rendezvous round of N nodes.

use crate::scenario::{self, Scenario};

/// The name the reference scenario is reported under.
pub const REFERENCE_FILE: &str = "bench-reference.toml";

/// The reference job: 64 nodes × 8 GPUs, one simulated hour at one step per
/// second, a kill and a restart, a late join and a straggler.
///
/// The straggler is a `gpu_slow` fault on one GPU. The fix `refresh-master-addr` is on: with
/// torch 2.15's cached bootstrap address the restarted and the late node would each wait
/// for a `MASTER_ADDR` nobody publishes and end the job after about 26 minutes, and the
/// workload measures an hour of training.
pub const REFERENCE_TOML: &str = r#"
name = "bench reference: 64 nodes x 8 GPUs, one hour"
seed = 1
time_limit = "2h"

[cluster]
nodes = 64
spare_nodes = 1
gpus_per_node = 8

[rendezvous]
min_nodes = 32
max_nodes = 65
fixes = ["refresh-master-addr"]

[agent]
max_restarts = 3

[job]
steps = 3600
step_time = "1s"
checkpoint_every = 100

[[faults]]
at = "10m"
kind = "kill"
node = "node-7"

[[faults]]
at = "12m"
kind = "restart"
node = "node-7"

[[faults]]
at = "20m"
kind = "gpu_slow"
node = "node-21"
gpu = 3
factor = 2.0
duration = "5m"

[[faults]]
at = "25m"
kind = "start"
node = "node-64"
"#;

/// The fuzz workload's shape: 8 nodes (6 started, 2 spares) and 3000 steps of 200 ms, about
/// ten simulated minutes per case.
pub const FUZZ_NODES: u32 = 6;
pub const FUZZ_SPARES: u32 = 2;
pub const FUZZ_STEPS: u64 = 3_000;

/// The reference scenario.
pub fn reference() -> Scenario {
    scenario::parse(REFERENCE_TOML, REFERENCE_FILE).expect("the reference scenario is valid")
}

/// One rendezvous round of `nodes` nodes: all start at once, the round completes when the
/// last joins (min = max = nodes), the group takes one step and the job ends.
///
/// torch starts heartbeats only after a join finishes, so with the default 15 s expiry the
/// first joiners of a storm that lasts longer are swept out before the last one arrives and
/// the round never forms (at 1024 nodes it does not). The expiry is raised to 1000 s, so the
/// figure is the cost of forming the round, not of that livelock.
pub fn scale(nodes: u32, cas_backoff_max: Option<&str>) -> Scenario {
    let backoff = cas_backoff_max
        .map(|max| format!("cas_backoff_max = \"{max}\"\n"))
        .unwrap_or_default();
    let text = format!(
        "name = \"bench: one round of {nodes} nodes\"\nseed = 1\ntime_limit = \"1h\"\n\
         [cluster]\nnodes = {nodes}\nstore = \"dedicated\"\n\
         [rendezvous]\nmin_nodes = {nodes}\nmax_nodes = {nodes}\nkeep_alive_max_attempt = 200\n\
         {backoff}[job]\nsteps = 1\nstep_time = \"200ms\"\n"
    );
    scenario::parse(&text, "bench-scale.toml").expect("the scale scenario is valid")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workload_scenarios_parse() {
        let r = reference();
        assert_eq!((r.cluster.nodes, r.cluster.gpus_per_node), (64, 8));
        assert_eq!(r.faults.len(), 4);
        for n in crate::bench::SCALE_NODES {
            assert_eq!(scale(n, None).rendezvous.max_nodes, n);
            assert_eq!(
                scale(n, Some("1s")).rendezvous.cas_backoff_max,
                crate::sim_time::SimDuration::from_secs(1)
            );
        }
    }
}
