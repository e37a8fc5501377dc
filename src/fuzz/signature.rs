//! A finding's signature: the kinds of violation it shows (each an invariant and which way
//! it broke, `reader.exactly_once:delivered-twice`), the fault units the case still needs to
//! show them, and the roles of the nodes those faults hit (rank 0, store host, spare,
//! member). Two cases with the same signature are counted as one finding; two that break
//! one invariant in different ways are two.
//!
//! "Still needs" is found by a greedy pass over fault units (a kill with its restart, a
//! pause with its resume, a partition with its heal, a clog with its unclog are one unit):
//! a unit is dropped when the case without it shows the same kinds of violation. The pass costs
//! one run per unit, and it is a pure function of the case, so signatures do not depend on
//! the order cases ran in.

use crate::check::Status;
use crate::mutant::Mutant;
use crate::runner::{Run, RunOptions};
use crate::scenario::model::{Fault, FaultKind, Scenario, StoreHost};
use crate::sim_time::SimInstant;
use crate::trace::event::EventKind;
use crate::trace::Trace;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

use super::strategy::Case;

/// The file name scenarios are reported under while fuzzing.
pub(super) const CASE_FILE: &str = "fuzz-case.toml";

/// What one run of a case violated.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Verdict {
    /// Kinds of violation that count, as `invariant:kind`, sorted (with a mutant: only
    /// those the case without the mutant does not show). `harness` when the harness failed.
    pub counted: Vec<String>,
    /// Every violated invariant, sorted.
    pub all: Vec<String>,
}

impl Verdict {
    /// Whether the case is a finding.
    pub fn fails(&self) -> bool {
        !self.counted.is_empty()
    }

    /// The invariants of the counted kinds, sorted, each once.
    pub fn invariants(&self) -> Vec<String> {
        invariants_of(&self.counted)
    }

    /// The counted kinds of the invariants that judge one mechanism, not the whole job
    /// ([`crate::invariant::Invariant::judges_the_whole_job`]).
    pub fn mechanism_kinds(&self) -> impl Iterator<Item = &String> {
        self.counted.iter().filter(|key| !judges_the_whole_job(key))
    }
}

/// Whether a kind key names an invariant that judges the whole job.
fn judges_the_whole_job(key: &str) -> bool {
    invariant_of(key)
        .parse::<crate::invariant::Invariant>()
        .is_ok_and(|invariant| invariant.judges_the_whole_job())
}

/// The pseudo-invariant a harness failure is counted under.
pub const HARNESS: &str = "harness";

/// The invariant a kind key (`invariant:kind`, or `harness`) names.
pub fn invariant_of(key: &str) -> &str {
    key.split_once(':').map_or(key, |(invariant, _)| invariant)
}

/// The invariants of sorted kind keys, sorted, each once.
fn invariants_of(keys: &[String]) -> Vec<String> {
    let names: BTreeSet<&str> = keys.iter().map(|k| invariant_of(k)).collect();
    names.into_iter().map(str::to_owned).collect()
}

/// Runs `scenario` with `seed` (and `mutant` on) and returns the kinds of violation it
/// showed, as `invariant:kind`, sorted and each once, with the trace; `Err` holds a
/// harness failure's message.
/// How a case runs: with the campaign's mutant, on the torch its `[torch]` names (the
/// campaign's, in absolute paths: `Campaign::torch`).
pub(super) fn case_options(scenario: &Scenario, mutant: Option<Mutant>) -> RunOptions {
    let mut options = RunOptions::default();
    if let Some(mutant) = mutant {
        options.mutants.insert(mutant);
    }
    options.torch = scenario.torch.as_ref().map(|t| {
        let (python, elastic_src) = t.resolved(std::path::Path::new(""));
        crate::torch_plane::TorchPlane {
            python,
            elastic_src,
        }
    });
    options
}

pub fn run_case(
    scenario: &Scenario,
    seed: u64,
    mutant: Option<Mutant>,
) -> Result<(Vec<String>, Trace), String> {
    // The verdict reads only the invariants: no trace hash, no report.
    let (invariants, trace) = Run::of(scenario, CASE_FILE)
        .seed(seed)
        .options(case_options(scenario, mutant))
        .judged()
        .map_err(|e| e.message)?;
    let kinds: BTreeSet<String> = invariants
        .iter()
        .filter(|i| i.status == Status::Violated)
        .flat_map(|i| i.violations.iter().map(|v| v.kind.to_string()))
        .collect();
    Ok((kinds.into_iter().collect(), trace))
}

/// Judges a case: with a mutant, only kinds of violation the case without it does not
/// show count, so a planted bug that breaks an invariant torch already breaks in the same
/// case, in another way, still counts. Returns the verdict and, when the run finished,
/// its trace.
pub fn judge(scenario: &Scenario, seed: u64, mutant: Option<Mutant>) -> (Verdict, Option<Trace>) {
    let harness = || Verdict {
        counted: vec![HARNESS.to_owned()],
        all: vec![HARNESS.to_owned()],
    };
    let (kinds, trace) = match run_case(scenario, seed, mutant) {
        Ok(x) => x,
        // With a mutant, a harness failure counts only when the case without it runs.
        Err(_) if mutant.is_some() && run_case(scenario, seed, None).is_err() => {
            let all = vec![HARNESS.to_owned()];
            return (
                Verdict {
                    counted: Vec::new(),
                    all,
                },
                None,
            );
        }
        Err(_) => return (harness(), None),
    };
    let all = invariants_of(&kinds);
    if mutant.is_none() || kinds.is_empty() {
        let counted = kinds;
        return (Verdict { counted, all }, Some(trace));
    }
    let baseline: BTreeSet<String> = match run_case(scenario, seed, None) {
        Ok((kinds, _)) => kinds.into_iter().collect(),
        Err(_) => return (harness(), Some(trace)),
    };
    let counted = kinds
        .into_iter()
        .filter(|k| !baseline.contains(k))
        .collect();
    (Verdict { counted, all }, Some(trace))
}

/// A signature: what a finding violates, which ways, and what it needs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Signature {
    /// The invariants of the counted kinds, sorted.
    pub invariants: Vec<String>,
    /// The fault units still needed, as `kind@role`, sorted and deduplicated.
    pub faults: Vec<String>,
    /// The counted kinds of violation, as `invariant:kind`, sorted.
    pub kinds: Vec<String>,
}

impl Signature {
    /// The one-line key: each invariant with its kinds, then the faults:
    /// `inv1:kind1+kind2,inv2:kind3 [fault@role, ...]`.
    pub fn key(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        let mut last: Option<&str> = None;
        for key in &self.kinds {
            match (key.split_once(':'), parts.last_mut()) {
                (Some((invariant, kind)), Some(part)) if last == Some(invariant) => {
                    part.push('+');
                    part.push_str(kind);
                }
                (split, _) => {
                    last = split.map(|(invariant, _)| invariant);
                    parts.push(key.clone());
                }
            }
        }
        format!("{} [{}]", parts.join(","), self.faults.join(", "))
    }
}

/// One fault unit: indices into `scenario.faults` that are added or dropped together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    /// The unit's name: the opening fault's kind, or `restart` for a kill with its restart.
    pub kind: &'static str,
    /// The node the unit hits, when one does.
    pub node: Option<u32>,
    pub faults: Vec<usize>,
}

/// The fault units of a plan: each closing fault (restart, resume, heal, unclog) joins the
/// latest open fault it closes; every other fault is a unit of its own.
pub fn units(faults: &[Fault]) -> Vec<Unit> {
    let mut out: Vec<Unit> = Vec::new();
    for (i, f) in faults.iter().enumerate() {
        let opener = |u: &Unit| {
            let first = &faults[u.faults[0]].kind;
            u.faults.len() == 1
                && match (&f.kind, first) {
                    (FaultKind::Restart { node }, FaultKind::Kill { node: n })
                    | (FaultKind::Restart { node }, FaultKind::PowerOff { node: n })
                    | (FaultKind::Resume { node }, FaultKind::Pause { node: n }) => node == n,
                    (FaultKind::Heal, FaultKind::Partition { .. }) => true,
                    (
                        FaultKind::UnclogLink { from, to },
                        FaultKind::ClogLink { from: a, to: b },
                    ) => from == a && to == b,
                    _ => false,
                }
        };
        let closes = matches!(
            f.kind,
            FaultKind::Restart { .. }
                | FaultKind::Resume { .. }
                | FaultKind::Heal
                | FaultKind::UnclogLink { .. }
        );
        match out.iter_mut().rev().find(|u| closes && opener(u)) {
            Some(unit) => {
                unit.faults.push(i);
                if matches!(f.kind, FaultKind::Restart { .. }) {
                    unit.kind = "restart";
                }
            }
            None => out.push(Unit {
                kind: f.kind.name(),
                node: fault_node(&f.kind),
                faults: vec![i],
            }),
        }
    }
    out
}

/// The node a fault hits: its `node`, a clog's sender, a partition's smallest group.
pub fn fault_node(kind: &FaultKind) -> Option<u32> {
    match kind {
        FaultKind::ClogLink { from, .. } | FaultKind::UnclogLink { from, .. } => Some(*from),
        FaultKind::Partition { groups } => groups
            .iter()
            .min_by_key(|g| g.len())
            .and_then(|g| (g.len() == 1).then(|| g[0])),
        other => other.node(),
    }
}

/// The scenario without the faults of `dropped` units.
pub fn without_units(s: &Scenario, all: &[Unit], dropped: &BTreeSet<usize>) -> Scenario {
    let gone: BTreeSet<usize> = dropped
        .iter()
        .flat_map(|&u| all[u].faults.iter().copied())
        .collect();
    let mut out = s.clone();
    out.faults = s
        .faults
        .iter()
        .enumerate()
        .filter(|(i, _)| !gone.contains(i))
        .map(|(_, f)| f.clone())
        .collect();
    out
}

/// The case reduced to the fault units it needs to keep `verdict`'s counted violations,
/// with that run's trace (`None` when the harness failed). `case_trace` is the case's own
/// run's trace where the caller has it: a case that needs every fault is that run, which
/// replays the same, so it is not run again.
pub fn needed_faults(
    case: &Case,
    verdict: &Verdict,
    mutant: Option<Mutant>,
    case_trace: Option<Trace>,
) -> (Case, Option<Trace>) {
    let all = units(&case.scenario.faults);
    let mut dropped = BTreeSet::new();
    let mut trace = None;
    for u in 0..all.len() {
        dropped.insert(u);
        let candidate = without_units(&case.scenario, &all, &dropped);
        let (v, t) = judge(&candidate, case.seed, mutant);
        if v.counted == verdict.counted {
            trace = t;
        } else {
            dropped.remove(&u);
        }
    }
    let reduced = Case {
        scenario: without_units(&case.scenario, &all, &dropped),
        seed: case.seed,
    };
    if dropped.is_empty() && case_trace.is_some() {
        trace = case_trace;
    } else if trace.is_none() {
        trace = judge(&reduced.scenario, reduced.seed, mutant).1;
    }
    (reduced, trace)
}

/// The signature of a reduced case: its verdict's kinds of violation and their invariants,
/// and each remaining unit as `kind@role`, the role read from the trace at the unit's
/// first fault.
pub fn signature(reduced: &Case, verdict: &Verdict, trace: Option<&Trace>) -> Signature {
    let s = &reduced.scenario;
    let mut faults: BTreeSet<String> = BTreeSet::new();
    for unit in units(&s.faults) {
        let at = s.faults[unit.faults[0]].at;
        let role = match unit.node {
            Some(node) => role_of(s, trace, node, at),
            None => "cluster".to_owned(),
        };
        faults.insert(format!("{}@{role}", unit.kind));
    }
    Signature {
        invariants: verdict.invariants(),
        faults: faults.into_iter().collect(),
        kinds: verdict.counted.clone(),
    }
}

/// A node's role when a fault hits it: `rank0` (rank 0 of the last round any node saw
/// complete before then), `store-host`, `spare`, or `member`; a node with two roles gets
/// both, joined by `+`.
pub fn role_of(s: &Scenario, trace: Option<&Trace>, node: u32, at: SimInstant) -> String {
    let rank0 = trace
        .and_then(|t| {
            t.events
                .iter()
                .take_while(|e| e.at <= at)
                .filter_map(|e| match &e.kind {
                    EventKind::RendezvousCompleted { participants, .. } => participants.first(),
                    _ => None,
                })
                .last()
        })
        .is_some_and(|p| p.0 == node);
    let mut roles = Vec::new();
    if rank0 {
        roles.push("rank0");
    }
    if s.cluster.store == StoreHost::Node(node) {
        roles.push("store-host");
    }
    if node >= s.cluster.nodes {
        roles.push("spare");
    }
    if roles.is_empty() {
        roles.push("member");
    }
    roles.join("+")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim_time::SimDuration;

    fn fault(at_s: u64, kind: FaultKind) -> Fault {
        Fault {
            at: SimInstant::from_start(SimDuration::from_secs(at_s)),
            kind,
            role: None,
        }
    }

    #[test]
    fn closing_faults_join_their_openers() {
        let faults = vec![
            fault(1, FaultKind::Kill { node: 1 }),
            fault(2, FaultKind::Pause { node: 2 }),
            fault(3, FaultKind::Kill { node: 0 }),
            fault(4, FaultKind::Restart { node: 1 }),
            fault(5, FaultKind::Resume { node: 2 }),
        ];
        let u = units(&faults);
        assert_eq!(u.len(), 3);
        assert_eq!((u[0].kind, u[0].faults.clone()), ("restart", vec![0, 3]));
        assert_eq!((u[1].kind, u[1].faults.clone()), ("pause", vec![1, 4]));
        assert_eq!((u[2].kind, u[2].faults.clone()), ("kill", vec![2]));
    }

    #[test]
    fn roles_name_rank0_store_host_spare_and_member() {
        let mut s = crate::scenario::default_scenario("roles");
        s.cluster.nodes = 3;
        s.cluster.spare_nodes = 1;
        s.cluster.store = StoreHost::Node(0);
        assert_eq!(role_of(&s, None, 0, SimInstant::START), "store-host");
        assert_eq!(role_of(&s, None, 1, SimInstant::START), "member");
        assert_eq!(role_of(&s, None, 3, SimInstant::START), "spare");
        let sig = Signature {
            invariants: vec!["rendezvous.liveness".into()],
            faults: vec!["kill@rank0".into()],
            kinds: vec!["rendezvous.liveness:survivor-stuck".into()],
        };
        assert_eq!(sig.key(), "rendezvous.liveness:survivor-stuck [kill@rank0]");
    }

    #[test]
    fn keys_group_kinds_by_invariant() {
        let sig = Signature {
            invariants: vec!["reader.exactly_once".into(), "reader.terminates".into()],
            faults: vec![],
            kinds: vec![
                "reader.exactly_once:delivered-twice".into(),
                "reader.exactly_once:dropped-with-incomplete-batch".into(),
                "reader.terminates:hang".into(),
            ],
        };
        assert_eq!(
            sig.key(),
            "reader.exactly_once:delivered-twice+dropped-with-incomplete-batch,reader.terminates:hang []"
        );
        let harness = Signature {
            invariants: vec![HARNESS.into()],
            faults: vec!["kill@member".into()],
            kinds: vec![HARNESS.into()],
        };
        assert_eq!(harness.key(), "harness [kill@member]");
        assert_eq!(invariant_of("reader.terminates:hang"), "reader.terminates");
        assert_eq!(invariant_of(HARNESS), HARNESS);
    }

    #[test]
    fn faults_the_finding_does_not_need_leave_its_signature() {
        let mut s = crate::scenario::default_scenario("sig");
        s.cluster.nodes = 5;
        s.rendezvous.min_nodes = 1;
        s.rendezvous.max_nodes = 5;
        s.job.steps = 50;
        s.time_limit = SimDuration::from_secs(3_600);
        s.faults = vec![
            fault(
                0,
                FaultKind::ClockSkew {
                    node: 2,
                    offset_us: 1_000,
                },
            ),
            Fault {
                at: SimInstant::from_us(2_190_000),
                kind: FaultKind::Kill { node: 1 },
                role: None,
            },
        ];
        let case = Case {
            scenario: s,
            seed: 1_776_612_806_655_204_715,
        };
        let (verdict, _) = judge(&case.scenario, case.seed, None);
        assert!(verdict.fails());
        let (reduced, trace) = needed_faults(&case, &verdict, None, None);
        assert_eq!(reduced.scenario.faults.len(), 1);
        let sig = signature(&reduced, &verdict, trace.as_ref());
        assert_eq!(
            sig.key(),
            "job.resumes_after_heal:no-step-after-heal,rendezvous.liveness:survivor-stuck [kill@member]"
        );
    }
}
