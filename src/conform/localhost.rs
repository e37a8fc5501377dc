//! What this machine's torchrun can run of a scenario, and the file it runs.
//!
//! [`refusals`] lists, per fault and per setting, what `conformance/driver.py` cannot make on
//! this machine, each with the sentence that says why (network faults are made in network
//! namespaces when [`Netns::here`] finds them); the driver refuses the same things with
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

/// Why a partition, a clogged link or a power-off cannot run here: the driver makes them
/// in network namespaces (`conformance/netns.py`), which need root and `ip netns`, and which
/// `TRAINSIM_NETNS=off` turns off (the same sentences as netns.py's).
pub const NETNS_ROOT: &str = "a partition, a clogged link or a power-off is made here with \
     network namespaces, which need root";
pub const NETNS_IP: &str = "a partition, a clogged link or a power-off is made here with \
     network namespaces, and `ip netns` (iproute2) is not available";
pub const NETNS_OFF: &str = "a partition, a clogged link or a power-off is made here with \
     network namespaces, which TRAINSIM_NETNS=off turns off";
/// Why network latency or loss cannot run here.
pub const LATENCY_LOSS: &str = "network latency and loss are not yet made on localhost: \
     changing them on the loopback interface needs root (tc netem)";
/// Why clock skew cannot run here.
pub const CLOCK_SKEW: &str = "clock skew is not yet made on localhost: every node reads this \
     machine's one wall clock";
/// Why GPU faults cannot run here.
pub const GPU: &str = "GPU faults cannot be made on localhost: the workers run on the CPU";
/// Why a script that checkpoints on a signal cannot run here.
pub const SIGNAL_CHECKPOINT: &str =
    "the driver's training script has no signal handler: it never checkpoints on one";

/// Whether this machine can make network faults (partitions, clogged links, power-offs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Netns {
    Available,
    /// Not here, for this reason (one of the `NETNS_*` sentences).
    Refused(&'static str),
}

impl Netns {
    /// What this machine offers, probed as the driver probes it: `TRAINSIM_NETNS=off`, then
    /// the effective user (root), then whether `ip netns list` runs.
    pub fn here() -> Netns {
        if std::env::var("TRAINSIM_NETNS").is_ok_and(|v| v == "off") {
            return Netns::Refused(NETNS_OFF);
        }
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let euid = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().nth(1))
            .and_then(|id| id.parse::<u32>().ok());
        if euid != Some(0) {
            return Netns::Refused(NETNS_ROOT);
        }
        let ip = std::process::Command::new("ip")
            .args(["netns", "list"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
        match ip {
            Ok(status) if status.success() => Netns::Available,
            _ => Netns::Refused(NETNS_IP),
        }
    }
}

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

/// The reason a fault kind cannot be made on this machine, if it cannot.
pub fn fault_refusal(kind: &FaultKind, netns: Netns) -> Option<&'static str> {
    match kind {
        FaultKind::Partition { .. }
        | FaultKind::Heal
        | FaultKind::ClogLink { .. }
        | FaultKind::UnclogLink { .. }
        | FaultKind::PowerOff { .. } => match netns {
            Netns::Available => None,
            Netns::Refused(why) => Some(why),
        },
        FaultKind::Latency { .. } | FaultKind::Loss { .. } => Some(LATENCY_LOSS),
        FaultKind::ClockSkew { .. } => Some(CLOCK_SKEW),
        FaultKind::GpuSlow { .. } | FaultKind::GpuFail { .. } => Some(GPU),
        _ => None,
    }
}

/// Everything in `s` the real machine cannot run, in file order: settings first, then each
/// fault. Empty when the driver can run it (with gloo workers: the backend is decided
/// apart, by measurement). `netns` says whether network faults can be made here.
pub fn refusals(s: &Scenario, netns: Netns) -> Vec<Refusal> {
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
            kind => match fault_refusal(kind, netns) {
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
    if s.job.checkpoint_on_signal.is_some() {
        refuse("job.checkpoint_on_signal", SIGNAL_CHECKPOINT.to_owned());
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
        let off = Netns::Refused(NETNS_ROOT);
        let shown: Vec<String> = refusals(&s, off).iter().map(Refusal::to_string).collect();
        assert_eq!(
            shown,
            vec![
                format!("faults[1] (partition at 10.5 s): {NETNS_ROOT}"),
                format!("faults[2] (heal at 11 s): {NETNS_ROOT}"),
                format!("faults[3] (power_off at 11.5 s): {NETNS_ROOT}"),
                format!("faults[4] (clock_skew at 12 s): {CLOCK_SKEW}"),
            ]
        );
        // With namespaces, only the clock skew is left.
        let shown: Vec<String> = refusals(&s, Netns::Available)
            .iter()
            .map(Refusal::to_string)
            .collect();
        assert_eq!(
            shown,
            vec![format!("faults[4] (clock_skew at 12 s): {CLOCK_SKEW}")]
        );
        let kill = with_faults(vec![FaultKind::Kill { node: 1 }]);
        assert!(refusals(&kill, off).is_empty());
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
