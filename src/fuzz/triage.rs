//! Triage: a finding is re-run with each opt-in fix that names a known torch behaviour; when
//! one fix removes every counted violation, the finding is that known behaviour, else new.

use super::signature::{judge, Verdict};
use super::strategy::Case;
use crate::agent::policy::{
    FIX_COUNT_REJOINED_FAILURES, FIX_KEEP_OPEN_ON_FAILURE, FIX_SHARED_RESTART_COUNT,
};
use crate::rendezvous::settings::{
    FIX_DEAD_PARTICIPANT_REJOIN, FIX_MONOTONIC_HEARTBEATS, FIX_REFRESH_MASTER_ADDR,
    FIX_RESTARTED_NODE_REPLACES_ENTRY, FIX_WORLD_AT_COMPLETION,
};
use serde::{Deserialize, Serialize};

/// Where a fix applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FixScope {
    /// `rendezvous.fixes`.
    Rendezvous,
    /// `agent.fixes`.
    Agent,
}

/// Every fix triage tries, in this order, with the torch behaviour it removes (see each
/// constant's documentation).
pub const TRIAGE_FIXES: &[(&str, FixScope, &str)] = &[
    (
        FIX_DEAD_PARTICIPANT_REJOIN,
        FixScope::Rendezvous,
        "pytorch#111646",
    ),
    (
        FIX_RESTARTED_NODE_REPLACES_ENTRY,
        FixScope::Rendezvous,
        "torch: a restarted node's stale entry",
    ),
    (
        FIX_MONOTONIC_HEARTBEATS,
        FixScope::Rendezvous,
        "torch: wall-clock heartbeat expiry",
    ),
    (
        FIX_REFRESH_MASTER_ADDR,
        FixScope::Rendezvous,
        "torch 2.15: stale bootstrap address",
    ),
    (
        FIX_WORLD_AT_COMPLETION,
        FixScope::Rendezvous,
        "torch: world size read after sanitize",
    ),
    (
        FIX_SHARED_RESTART_COUNT,
        FixScope::Agent,
        "pytorch#135712/#108158",
    ),
    (
        FIX_COUNT_REJOINED_FAILURES,
        FixScope::Agent,
        "pytorch#147064",
    ),
    (
        FIX_KEEP_OPEN_ON_FAILURE,
        FixScope::Agent,
        "torch: one agent's failure closes the rendezvous",
    ),
];

/// A finding's triage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Known {
    /// The fix that removes every counted violation (several joined by ` + ` when it takes
    /// more than one).
    pub fix: String,
    /// The torch behaviour or issue it names.
    pub issue: String,
}

impl Known {
    /// `known: pytorch#111646 (fix dead-participant-rejoin removes it)`; with two fixes,
    /// `known: A + B (fixes a + b remove it)`.
    pub fn label(&self) -> String {
        if self.fix.contains(" + ") {
            format!("known: {} (fixes {} remove it)", self.issue, self.fix)
        } else {
            format!("known: {} (fix {} removes it)", self.issue, self.fix)
        }
    }
}

/// The case with `fix` switched on, or `None` when the case already has it.
pub fn with_fix(case: &Case, fix: &str, scope: FixScope) -> Option<Case> {
    let mut c = case.clone();
    let added = match scope {
        FixScope::Rendezvous => c.scenario.rendezvous.fixes.insert(fix.to_owned()),
        FixScope::Agent => {
            let fixes = &mut c.scenario.agent.fixes;
            let new = !fixes.iter().any(|f| f == fix);
            if new {
                fixes.push(fix.to_owned());
            }
            new
        }
    };
    added.then_some(c)
}

/// The first fix (in [`TRIAGE_FIXES`] order) under which `case` violates nothing that
/// counts. When no single fix does, every fix together is tried, then fixes are dropped
/// one by one while the case stays clean: a finding that needs two known fixes is two
/// known behaviours at once, labelled with both. `None` means the finding is new. A
/// harness failure is never known.
pub fn triage(case: &Case, verdict: &Verdict, mutant: Option<&str>) -> Option<Known> {
    if verdict
        .counted
        .iter()
        .any(|n| n == super::signature::HARNESS)
    {
        return None;
    }
    let clean = |fixes: &[usize]| {
        let mut c = case.clone();
        for &i in fixes {
            let (fix, scope, _) = TRIAGE_FIXES[i];
            c = with_fix(&c, fix, scope).unwrap_or(c);
        }
        !judge(&c.scenario, c.seed, mutant).0.fails()
    };
    let single = (0..TRIAGE_FIXES.len()).find(|&i| clean(&[i]));
    let set: Vec<usize> = match single {
        Some(i) => vec![i],
        None => {
            let mut set: Vec<usize> = (0..TRIAGE_FIXES.len()).collect();
            if !clean(&set) {
                return None;
            }
            for i in (0..TRIAGE_FIXES.len()).rev() {
                let fewer: Vec<usize> = set.iter().copied().filter(|&j| j != i).collect();
                if clean(&fewer) {
                    set = fewer;
                }
            }
            set
        }
    };
    Some(Known {
        fix: set
            .iter()
            .map(|&i| TRIAGE_FIXES[i].0)
            .collect::<Vec<_>>()
            .join(" + "),
        issue: set
            .iter()
            .map(|&i| TRIAGE_FIXES[i].2)
            .collect::<Vec<_>>()
            .join(" + "),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_known_fix_is_tried_once() {
        let mut names: Vec<&str> = TRIAGE_FIXES.iter().map(|f| f.0).collect();
        names.sort_unstable();
        let mut known: Vec<&str> = crate::rendezvous::settings::KNOWN_FIXES
            .iter()
            .chain(crate::agent::policy::KNOWN_AGENT_FIXES.iter())
            .copied()
            .collect();
        known.sort_unstable();
        assert_eq!(names, known);
    }

    #[test]
    fn a_fix_is_added_once_and_labels_read_as_the_summary_prints_them() {
        let case = Case {
            scenario: crate::scenario::default_scenario("t"),
            seed: 1,
        };
        let fixed =
            with_fix(&case, FIX_DEAD_PARTICIPANT_REJOIN, FixScope::Rendezvous).expect("not yet on");
        assert!(with_fix(&fixed, FIX_DEAD_PARTICIPANT_REJOIN, FixScope::Rendezvous).is_none());
        let k = Known {
            fix: FIX_DEAD_PARTICIPANT_REJOIN.into(),
            issue: "pytorch#111646".into(),
        };
        assert_eq!(
            k.label(),
            "known: pytorch#111646 (fix dead-participant-rejoin removes it)"
        );
    }

    /// A rendezvous case of `nodes` (+ `spares`) with min 1 and `max_nodes`, 50 steps, an hour,
    /// and node-1 killed at `kill_at_us`.
    fn kill_case(nodes: u32, spares: u32, max_nodes: u32, kill_at_us: u64, seed: u64) -> Case {
        use crate::scenario::model::{Fault, FaultKind};
        let mut s = crate::scenario::default_scenario("triage");
        s.cluster.nodes = nodes;
        s.cluster.spare_nodes = spares;
        s.rendezvous.min_nodes = 1;
        s.rendezvous.max_nodes = max_nodes;
        s.job.steps = 50;
        s.time_limit_us = 3_600_000_000;
        s.faults = vec![Fault {
            at_us: kill_at_us,
            kind: FaultKind::Kill { node: 1 },
        }];
        Case { scenario: s, seed }
    }

    #[test]
    fn a_killed_participant_is_triaged_as_pytorch_111646() {
        let case = kill_case(5, 0, 5, 2_305_000, 1_776_612_806_655_204_715);
        let (verdict, _) = judge(&case.scenario, case.seed, None);
        assert_eq!(verdict.counted, vec!["rendezvous.liveness".to_owned()]);
        let known = triage(&case, &verdict, None).expect("a known torch behaviour");
        assert_eq!(known.fix, FIX_DEAD_PARTICIPANT_REJOIN);
        assert_eq!(known.issue, "pytorch#111646");
    }

    #[test]
    fn the_world_size_race_is_triaged_as_world_read_after_sanitize() {
        // Seed 1 case 2812 of the rendezvous campaign, shrunk: node-1 dies 15 s before the
        // last call ends, so its heartbeat expires while the others finish their joins.
        let case = kill_case(5, 2, 6, 15_403_000, 5_478_004_712_951_172_402);
        let (verdict, _) = judge(&case.scenario, case.seed, None);
        assert_eq!(
            verdict.counted,
            vec!["rendezvous.agreement", "rendezvous.exclusive"],
            "reproduce with: trainsim fuzz --target rendezvous --cases 2812..2813 --seed 1"
        );
        let known = triage(&case, &verdict, None).expect("a known torch behaviour");
        assert_eq!(known.fix, FIX_WORLD_AT_COMPLETION);
        assert_eq!(known.issue, "torch: world size read after sanitize");
    }
}
