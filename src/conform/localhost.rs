//! What this machine's torchrun can run of a scenario, and the file it runs.
//!
//! [`refusals`] lists, per fault and per setting, what `conformance/driver.py` cannot make on
//! localhost, each with the sentence that says why; the driver refuses the same things with
//! the same sentences (a test holds them together), so a refusal never needs Python.
//! [`localhost_variant`] turns a file written for the simulator (a fuzz repro: instant
//! process starts, eight workers per node, a 13-minute limit) into the one both sides run
//! here; [`with_gloo`] switches its workers to gloo, which `conform::confirm` allows only
//! where the model's verdict does not depend on the backend.

use crate::scenario::model::{Backend, FaultKind, Scenario, StoreHost};
use crate::sim_time::{secs_to_ms, SimDuration};

/// The most worker processes per node the driver starts (`NPROC_CAP` in driver.py).
pub const NPROC_CAP: u32 = 2;
/// The longest real run the driver makes, whatever the file's `time_limit` (`HARD_CAP_S`).
pub const REAL_RUN_CAP: SimDuration = SimDuration::from_secs(300);
/// The most nodes the driver starts on one machine.
pub const NODES_MAX: u32 = 200;
/// From torchrun's launch to its first log line on this 2-core machine (the median of 118
/// real runs' means), with the spread between the agents of one run; the suite's files set
/// the same (docs/conformance.md).
pub const AGENT_START_TIME: SimDuration = SimDuration::from_ms(4_200);
pub const AGENT_START_JITTER: SimDuration = SimDuration::from_ms(600);
/// From a worker group's spawn until its workers call `init_process_group` here.
pub const WORKER_START_TIME: SimDuration = SimDuration::from_secs(4);
/// From a failed worker's error until its process exits: conformance/worker.py ends with
/// `os._exit` (0.04 to 0.09 s measured), not the interpreter's teardown.
pub const WORKER_EXIT_TIME: SimDuration = SimDuration::from_ms(60);

/// Why a partition cannot run here.
pub const PARTITION: &str = "a network partition is not yet made on localhost: every node is \
     a process on this one machine, and cutting the links between their loopback addresses \
     needs root (iptables)";
/// Why a clogged link cannot run here.
pub const CLOGGED_LINK: &str = "a clogged link is not yet made on localhost: dropping one \
     direction of the traffic between two loopback addresses needs root (iptables)";
/// Why a power-off cannot run here.
pub const POWER_OFF: &str = "a power-off is not yet made on localhost: a process killed on a \
     live kernel has its connections reset, where a host that vanishes leaves its peers in \
     silence";
/// Why network latency or loss cannot run here.
pub const LATENCY_LOSS: &str = "network latency and loss are not yet made on localhost: \
     changing them on the loopback interface needs root (tc netem)";
/// Why clock skew cannot run here.
pub const CLOCK_SKEW: &str = "clock skew is not yet made on localhost: every node reads this \
     machine's one wall clock";
/// Why GPU faults cannot run here.
pub const GPU: &str = "GPU faults cannot be made on localhost: the workers run on the CPU";

/// One thing the real machine cannot run: where it is in the file, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Refusal {
    /// `faults[2] (partition at 23.162 s)`, or a setting's field (`cluster.clock_skew`).
    pub what: String,
    pub why: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.what, self.why)
    }
}

/// The reason a fault kind cannot be made on localhost, if it cannot.
pub fn fault_refusal(kind: &FaultKind) -> Option<&'static str> {
    match kind {
        FaultKind::Partition { .. } | FaultKind::Heal => Some(PARTITION),
        FaultKind::ClogLink { .. } | FaultKind::UnclogLink { .. } => Some(CLOGGED_LINK),
        FaultKind::PowerOff { .. } => Some(POWER_OFF),
        FaultKind::Latency { .. } | FaultKind::Loss { .. } => Some(LATENCY_LOSS),
        FaultKind::ClockSkew { .. } => Some(CLOCK_SKEW),
        FaultKind::GpuSlow { .. } | FaultKind::GpuFail { .. } => Some(GPU),
        _ => None,
    }
}

/// Everything in `s` the real machine cannot run, in file order: settings first, then each
/// fault. Empty when the driver can run it (with gloo workers: the backend is decided
/// apart, by measurement).
pub fn refusals(s: &Scenario) -> Vec<Refusal> {
    let mut out = setting_refusals(s);
    let nproc = s.agent.nproc_per_node.min(NPROC_CAP);
    for (i, fault) in s.faults.iter().enumerate() {
        let what = format!(
            "faults[{i}] ({} at {})",
            fault.kind.name(),
            secs_to_ms(fault.at.as_us())
        );
        let why = match &fault.kind {
            FaultKind::WorkerCrash { local_rank, .. } if *local_rank >= nproc => {
                format!("the driver runs {nproc} workers per node")
            }
            FaultKind::StoreCrash if s.cluster.store != StoreHost::Dedicated => {
                "store_crash needs cluster.store = \"dedicated\"".to_owned()
            }
            kind => match fault_refusal(kind) {
                Some(why) => why.to_owned(),
                None => continue,
            },
        };
        out.push(Refusal { what, why });
    }
    out
}

fn setting_refusals(s: &Scenario) -> Vec<Refusal> {
    let mut out = Vec::new();
    let mut refuse = |what: &str, why: String| {
        out.push(Refusal {
            what: what.to_owned(),
            why,
        })
    };
    if !s.cluster.clock_skew_us.is_empty() {
        refuse("cluster.clock_skew", CLOCK_SKEW.to_owned());
    }
    if s.network.loss > 0.0 {
        refuse("network.loss", LATENCY_LOSS.to_owned());
    }
    if s.reader.is_some() {
        refuse("[reader]", "the driver runs no HugeCTR reader".to_owned());
    }
    if s.cluster.total_nodes() > NODES_MAX {
        refuse(
            "cluster",
            format!("more than {NODES_MAX} nodes on one machine"),
        );
    }
    let r = &s.rendezvous;
    let timeouts = [
        ("rendezvous.join_timeout", r.join_timeout),
        ("rendezvous.last_call_timeout", r.last_call_timeout),
        ("rendezvous.close_timeout", r.close_timeout),
        ("rendezvous.heartbeat_timeout", r.heartbeat_timeout),
        ("rendezvous.keep_alive_interval", r.keep_alive_interval),
    ];
    for (field, span) in timeouts {
        if span.as_us() % 1_000_000 != 0 || span < SimDuration::from_secs(1) {
            refuse(
                field,
                format!(
                    "torch reads it as whole seconds; {} is not",
                    secs_to_ms(span.as_us())
                ),
            );
        }
    }
    out
}

/// The file both sides run here, and a sentence for each change made to `s`: at most
/// [`NPROC_CAP`] workers per node; a file that sets no process start times (one written
/// for the simulator's instant starts) gets this machine's, with every fault moved later by
/// the agents' start time so it lands where the file puts it in the job; a time limit of at
/// most [`REAL_RUN_CAP`]. The backend is left as it is.
pub fn localhost_variant(s: &Scenario) -> (Scenario, Vec<String>) {
    let mut v = s.clone();
    let mut notes = Vec::new();
    if v.agent.nproc_per_node > NPROC_CAP {
        notes.push(format!(
            "{NPROC_CAP} workers per node (the file asks {}): every node runs on this one machine",
            v.agent.nproc_per_node
        ));
        v.agent.nproc_per_node = NPROC_CAP;
    }
    if v.agent.start_time == SimDuration::ZERO && v.job.worker_start_time == SimDuration::ZERO {
        v.agent.start_time = AGENT_START_TIME;
        v.agent.start_time_jitter = AGENT_START_JITTER;
        v.job.worker_start_time = WORKER_START_TIME;
        v.job.worker_exit_time = WORKER_EXIT_TIME;
        for fault in &mut v.faults {
            fault.at = fault.at.after(AGENT_START_TIME);
        }
        notes.push(format!(
            "this machine's process start times (agents {}, workers {}) and every fault {} later",
            secs_to_ms(AGENT_START_TIME.as_us()),
            secs_to_ms(WORKER_START_TIME.as_us()),
            secs_to_ms(AGENT_START_TIME.as_us())
        ));
    }
    if v.time_limit > REAL_RUN_CAP {
        notes.push(format!(
            "a time limit of {} (the file asks {}): the driver ends every real run by then",
            secs_to_ms(REAL_RUN_CAP.as_us()),
            secs_to_ms(v.time_limit.as_us())
        ));
        v.time_limit = REAL_RUN_CAP;
    }
    (v, notes)
}

/// `s` with gloo workers: the collective timeout stays the one `s` runs with (written out,
/// so gloo's own default does not replace it) and NCCL's peer-exit detection goes.
pub fn with_gloo(s: &Scenario) -> Scenario {
    let mut g = s.clone();
    g.job.backend = Backend::Gloo;
    g.job.nccl_peer_exit_detection = None;
    g
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::model::Fault;
    use crate::sim_time::SimInstant;

    fn with_faults(kinds: Vec<FaultKind>) -> Scenario {
        let mut s = crate::scenario::default_scenario("t");
        s.cluster.nodes = 3;
        s.faults = kinds
            .into_iter()
            .enumerate()
            .map(|(i, k)| Fault::at(SimInstant::from_us(10_000_000 + i as u64 * 500_000), k))
            .collect();
        s
    }

    #[test]
    fn each_fault_localhost_cannot_make_is_named_with_its_reason() {
        let s = with_faults(vec![
            FaultKind::Kill { node: 1 },
            FaultKind::Partition {
                groups: vec![vec![0, 1], vec![2]],
            },
            FaultKind::Heal,
            FaultKind::PowerOff { node: 2 },
            FaultKind::ClockSkew {
                node: 0,
                offset_us: 3_000_000,
            },
        ]);
        let shown: Vec<String> = refusals(&s).iter().map(Refusal::to_string).collect();
        assert_eq!(
            shown,
            vec![
                format!("faults[1] (partition at 10.5 s): {PARTITION}"),
                format!("faults[2] (heal at 11 s): {PARTITION}"),
                format!("faults[3] (power_off at 11.5 s): {POWER_OFF}"),
                format!("faults[4] (clock_skew at 12 s): {CLOCK_SKEW}"),
            ]
        );
        assert!(refusals(&with_faults(vec![FaultKind::Kill { node: 1 }])).is_empty());
    }

    #[test]
    fn a_file_for_instant_starts_gets_this_machines_start_times_and_later_faults() {
        let s = with_faults(vec![FaultKind::Kill { node: 1 }]);
        let (v, notes) = localhost_variant(&s);
        assert_eq!(v.agent.nproc_per_node, NPROC_CAP);
        assert_eq!(v.agent.start_time, AGENT_START_TIME);
        assert_eq!(v.faults[0].at, SimInstant::from_us(14_200_000));
        assert_eq!(v.time_limit, REAL_RUN_CAP);
        assert_eq!(notes.len(), 3, "{notes:?}");
        // A file that already says how its processes start (the suite's) keeps its faults.
        let (again, notes) = localhost_variant(&v);
        assert_eq!(again, v);
        assert!(notes.is_empty(), "{notes:?}");
        let g = with_gloo(&v);
        assert_eq!(g.job.backend, Backend::Gloo);
        assert_eq!(g.job.collective_timeout, v.job.collective_timeout);
        assert_eq!(g.job.nccl_peer_exit_detection, None);
    }
}
