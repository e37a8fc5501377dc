//! The fault schedule of a validated scenario: the faults the file schedules, each aimed at
//! a node or a role, and the failure process that draws more of them from the seed.

use super::NodeRole;
use crate::sim_time::{SimDuration, SimInstant};

/// One scheduled fault.
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    pub at: SimInstant,
    pub kind: FaultKind,
    /// The role the fault's `node` names instead of a node (`node = "rank0"`), resolved when
    /// the fault fires. While it is set, the node in `kind` is [`ROLE_STANDIN_NODE`], which
    /// is no node: the world puts the node holding the role there before applying it.
    pub role: Option<NodeRole>,
}

impl Fault {
    /// A fault aimed at the node `kind` names.
    pub fn at(at: SimInstant, kind: FaultKind) -> Fault {
        Fault {
            at,
            kind,
            role: None,
        }
    }
}

/// The node index a fault aimed at a role holds until the role is resolved: above every
/// node's, so code that forgot to resolve it fails on the index instead of hitting node-0.
pub const ROLE_STANDIN_NODE: u32 = u32::MAX;

/// What a fault does. Nodes are indices (`node-3` is 3). [`FaultName`] names its kinds as the
/// scenario file and the trace spell them (`kill`, `power_off`, `clog_link`, ...).
#[derive(Debug, Clone, PartialEq, strum::EnumDiscriminants)]
#[strum_discriminants(
    name(FaultName),
    derive(
        serde::Serialize,
        strum::Display,
        strum::IntoStaticStr,
        strum::EnumString,
        strum::VariantArray
    ),
    serde(rename_all = "snake_case"),
    strum(serialize_all = "snake_case")
)]
pub enum FaultKind {
    Kill {
        node: u32,
    },
    /// The host vanishes: no resets, peers see silence until their timeouts.
    PowerOff {
        node: u32,
    },
    Stop {
        node: u32,
    },
    /// A user signal to the node's torchrun, as a scheduler sends before a preemption.
    Signal {
        node: u32,
        signal: super::Signal,
    },
    Restart {
        node: u32,
    },
    Start {
        node: u32,
    },
    Pause {
        node: u32,
    },
    Resume {
        node: u32,
    },
    Partition {
        groups: Vec<Vec<u32>>,
    },
    Heal,
    ClogLink {
        from: u32,
        to: u32,
    },
    UnclogLink {
        from: u32,
        to: u32,
    },
    Latency {
        latency_min: SimDuration,
        latency_max: SimDuration,
        duration: Option<SimDuration>,
    },
    Loss {
        probability: f64,
        duration: Option<SimDuration>,
    },
    /// `offset_us` is signed microseconds, as `Cluster::clock_skew_us` is.
    ClockSkew {
        node: u32,
        offset_us: i64,
    },
    GpuSlow {
        node: u32,
        gpu: u32,
        factor: f64,
        duration: SimDuration,
    },
    GpuFail {
        node: u32,
        gpu: u32,
    },
    WorkerCrash {
        node: u32,
        local_rank: u32,
        exit_code: i32,
    },
    StoreCrash,
}

impl FaultKind {
    /// The one node the fault names, for the kinds that name exactly one; `None` too while
    /// it is aimed at a role not yet resolved ([`ROLE_STANDIN_NODE`]).
    pub fn node(&self) -> Option<u32> {
        let node = match self {
            FaultKind::Kill { node }
            | FaultKind::PowerOff { node }
            | FaultKind::Stop { node }
            | FaultKind::Signal { node, .. }
            | FaultKind::Restart { node }
            | FaultKind::Start { node }
            | FaultKind::Pause { node }
            | FaultKind::Resume { node }
            | FaultKind::ClockSkew { node, .. }
            | FaultKind::GpuSlow { node, .. }
            | FaultKind::GpuFail { node, .. }
            | FaultKind::WorkerCrash { node, .. } => Some(*node),
            _ => None,
        };
        node.filter(|n| *n != ROLE_STANDIN_NODE)
    }

    /// The same fault on `to`, for the kinds that name one node (others are unchanged).
    pub fn on_node(&self, to: u32) -> FaultKind {
        let mut kind = self.clone();
        match &mut kind {
            FaultKind::Kill { node }
            | FaultKind::PowerOff { node }
            | FaultKind::Stop { node }
            | FaultKind::Signal { node, .. }
            | FaultKind::Restart { node }
            | FaultKind::Start { node }
            | FaultKind::Pause { node }
            | FaultKind::Resume { node }
            | FaultKind::ClockSkew { node, .. }
            | FaultKind::GpuSlow { node, .. }
            | FaultKind::GpuFail { node, .. }
            | FaultKind::WorkerCrash { node, .. } => *node = to,
            _ => {}
        }
        kind
    }

    /// The fault's `kind` string as the scenario file spells it.
    pub fn name(&self) -> &'static str {
        FaultName::from(self).into()
    }
}

/// `[failures]`: failures as a process. Each node fails at `rate_per_node_day`, its times
/// between failures drawn from a Weibull distribution of shape `weibull_shape` (1: the
/// exponential) with that mean, from the moment it starts (or comes back); each failure's
/// kind is drawn by the shares of `kinds`.
#[derive(Debug, Clone, PartialEq)]
pub struct FailureProcess {
    pub rate_per_node_day: f64,
    pub weibull_shape: f64,
    /// Each kind with its share; the shares add up to 1.
    pub kinds: Vec<(FailureKind, f64)>,
    /// What becomes of a node a failure took down.
    pub after: AfterFailure,
    pub repair_time: SimDuration,
    pub replace_delay: SimDuration,
    /// Spot preemption: from the SIGTERM until the host goes away.
    pub preemption_grace: SimDuration,
    /// Failures happen from `from` until `until` of the run.
    pub from: SimInstant,
    pub until: SimInstant,
}

/// What a drawn failure does, in the faults of the format.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    serde::Deserialize,
    schemars::JsonSchema,
    serde::Serialize,
    strum::Display,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum FailureKind {
    /// The host loses power (or its kernel panics): silence, then `after`.
    PowerOff,
    /// The agent and workers die on a live host (an OOM kill, a crashed agent): then `after`.
    Kill,
    /// A GPU fails (an Xid error): its worker dies; the node stays.
    GpuFail,
    /// One worker process exits non-zero; the node stays.
    WorkerCrash,
    /// The node hangs (stops running, keeps its state) until `repair_time` has passed.
    Hang,
    /// Spot preemption: SIGTERM, then the host goes away after `preemption_grace`; then
    /// `after`.
    Preempt,
}

/// What becomes of a node a failure took down (`power_off`, `kill`, `preempt`).
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    serde::Deserialize,
    schemars::JsonSchema,
    serde::Serialize,
    strum::Display,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum AfterFailure {
    /// It comes back after `repair_time` as a new agent process (a `restart`).
    Repair,
    /// A new node (the next spare: a new name and address) starts after `replace_delay`.
    Replace,
    /// It stays down.
    Nothing,
}
