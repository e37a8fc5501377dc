//! Triage: a finding is re-run with each opt-in fix that names a known torch behaviour; when
//! one fix removes every counted violation, the finding is that known behaviour, else new.

use super::signature::{judge, Verdict};
use super::strategy::Case;
use crate::agent::policy::AgentFix;
use crate::fixes::Fix;
use crate::mutant::Mutant;
use crate::rendezvous::settings::RendezvousFix;
use serde::{Deserialize, Serialize};

/// A fix triage can switch on, by where it applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TriageFix {
    /// One of `rendezvous.fixes`.
    Rendezvous(RendezvousFix),
    /// One of `agent.fixes`.
    Agent(AgentFix),
}

impl TriageFix {
    /// The fix's name as a scenario file spells it.
    pub fn name(self) -> &'static str {
        match self {
            TriageFix::Rendezvous(fix) => fix.into(),
            TriageFix::Agent(fix) => fix.into(),
        }
    }

    /// The torch behaviour or issue the fix removes, as its [`crate::fixes::FixInfo`] names it.
    fn removes(self) -> &'static str {
        match self {
            TriageFix::Rendezvous(fix) => fix.info().upstream,
            TriageFix::Agent(fix) => fix.info().upstream,
        }
    }
}

/// Every fix triage tries, in this order: the rendezvous fixes, then the agent's, each in
/// declaration order.
pub fn triage_fixes() -> Vec<TriageFix> {
    use strum::VariantArray;
    let rendezvous = RendezvousFix::VARIANTS
        .iter()
        .map(|&f| TriageFix::Rendezvous(f));
    let agent = AgentFix::VARIANTS.iter().map(|&f| TriageFix::Agent(f));
    rendezvous.chain(agent).collect()
}

/// A finding's triage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Known {
    /// The fix that removes every counted violation (several joined by ` + ` when it takes
    /// more than one).
    pub fix: String,
    /// The torch behaviour or issue it names.
    pub issue: String,
    /// Whether the run with the fix ends as the fix promises: the job finishes, or trains
    /// on after the case's last fault until the time limit. A fix that only removes the
    /// violations leaves a job that still fails. Summaries written before this was judged
    /// read as restoring it.
    #[serde(default = "restores_by_default")]
    pub restores_the_job: bool,
}

fn restores_by_default() -> bool {
    true
}

impl Known {
    /// `known: pytorch#111646 (fix dead-participant-rejoin removes it)`; with two fixes,
    /// `known: A + B (fixes a + b remove it)`; when the job still fails with the fix,
    /// `known: pytorch#111646 (fix dead-participant-rejoin removes the violations only: the
    /// job still stops training)`.
    pub fn label(&self) -> String {
        let (fixes, verb) = if self.fix.contains(" + ") {
            ("fixes", "remove")
        } else {
            ("fix", "removes")
        };
        let what = if self.restores_the_job {
            "it"
        } else {
            "the violations only: the job still stops training"
        };
        format!("known: {} ({fixes} {} {verb} {what})", self.issue, self.fix)
    }
}

/// Whether `case` with every fix of `set` ends as a fix promises: no invariant that judges
/// the whole job is violated (`job.resumes_after_heal`, `agent.no_restart_loop`), and the job
/// finishes, or the time limit ends it while it trains on after the case's last fault.
fn fix_restores_the_job(
    case: &Case,
    all: &[TriageFix],
    set: &[usize],
    mutant: Option<Mutant>,
) -> bool {
    let c = with_fixes(case, all, set);
    let Ok(report) = crate::runner::Run::of(&c.scenario, super::signature::CASE_FILE)
        .seed(c.seed)
        .options(super::signature::case_options(&c.scenario, mutant))
        .report()
    else {
        return false;
    };
    // The report's own verdicts, rather than a second run of the case: triage never runs
    // with a mutant, so every violated invariant counts.
    let whole_job_failed = report.invariants.iter().any(|result| {
        result.status == crate::check::Status::Violated
            && result
                .name
                .parse::<crate::invariant::Invariant>()
                .is_ok_and(|invariant| invariant.judges_the_whole_job())
    });
    if whole_job_failed {
        return false;
    }
    let last_fault_us = c
        .scenario
        .faults
        .iter()
        .map(|f| f.at.as_us())
        .max()
        .unwrap_or(0);
    match report.outcome.as_str() {
        "succeeded" => true,
        "timed_out" => report.goodput.training_stopped_at_us > last_fault_us,
        _ => false,
    }
}

/// A finding of torch's own code, which no named fix can change: known when the model shows
/// the same violations on the same case and one of its fixes removes them (labelled as the
/// model's), new when the model does not show it (a finding only torch's code makes).
fn triage_on_the_model(case: &Case, verdict: &Verdict, mutant: Option<Mutant>) -> Option<Known> {
    let mut model = case.clone();
    model.scenario.torch = None;
    let (on_model, _) = judge(&model.scenario, model.seed, mutant);
    if on_model.counted != verdict.counted {
        return None;
    }
    triage(&model, &on_model, mutant).map(|known| Known {
        issue: format!("{}, as the model shows it", known.issue),
        ..known
    })
}

/// The case with `fix` switched on, or `None` when the case already has it.
pub fn with_fix(case: &Case, fix: TriageFix) -> Option<Case> {
    let mut c = case.clone();
    let added = match fix {
        TriageFix::Rendezvous(fix) => c.scenario.rendezvous.fixes.insert(fix),
        TriageFix::Agent(fix) => {
            let fixes = &mut c.scenario.agent.fixes;
            let new = !fixes.contains(&fix);
            if new {
                fixes.push(fix);
            }
            new
        }
    };
    added.then_some(c)
}

/// The case with every fix of `set` (indices into `all`) switched on.
fn with_fixes(case: &Case, all: &[TriageFix], set: &[usize]) -> Case {
    set.iter()
        .fold(case.clone(), |c, &i| with_fix(&c, all[i]).unwrap_or(c))
}

/// The first fix (in [`triage_fixes`] order) under which `case` violates none of the
/// counted mechanism invariants (those that judge the whole job only when nothing else is
/// counted: a fix that removes a mechanism's violations while the job still stops training
/// is the known behaviour, labelled as removing the violations only). When no single fix
/// does, every fix together is tried, then fixes are dropped one by one while the case stays
/// clean: a finding that needs two known fixes is two known behaviours at once, labelled
/// with both. `None` means the finding is new. A harness failure is never known.
pub fn triage(case: &Case, verdict: &Verdict, mutant: Option<Mutant>) -> Option<Known> {
    if verdict
        .counted
        .iter()
        .any(|n| n == super::signature::HARNESS)
    {
        return None;
    }
    if case.scenario.torch.is_some() {
        return triage_on_the_model(case, verdict, mutant);
    }
    let all = triage_fixes();
    let whole_job_only = verdict.mechanism_kinds().next().is_none();
    let clean = |fixes: &[usize]| {
        let c = with_fixes(case, &all, fixes);
        let (fixed, _) = judge(&c.scenario, c.seed, mutant);
        if whole_job_only {
            !fixed.fails()
        } else {
            fixed.mechanism_kinds().next().is_none()
        }
    };
    let single = (0..all.len()).find(|&i| clean(&[i]));
    let set: Vec<usize> = match single {
        Some(i) => vec![i],
        None => {
            let mut set: Vec<usize> = (0..all.len()).collect();
            if !clean(&set) {
                return None;
            }
            for i in (0..all.len()).rev() {
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
            .map(|&i| all[i].name())
            .collect::<Vec<_>>()
            .join(" + "),
        issue: set
            .iter()
            .map(|&i| all[i].removes())
            .collect::<Vec<_>>()
            .join(" + "),
        restores_the_job: fix_restores_the_job(case, &all, &set, mutant),
    })
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    #[test]
    fn every_known_fix_is_tried_once_in_declaration_order() {
        use strum::VariantArray;
        let names: Vec<&str> = triage_fixes().into_iter().map(TriageFix::name).collect();
        let rendezvous = RendezvousFix::VARIANTS.iter().map(|&f| f.into());
        let agent = AgentFix::VARIANTS.iter().map(|&f| f.into());
        let declared: Vec<&str> = rendezvous.chain(agent).collect();
        assert_eq!(names, declared);
        let distinct: std::collections::BTreeSet<&str> = names.iter().copied().collect();
        assert_eq!(distinct.len(), names.len());
    }

    #[test]
    fn a_fix_is_added_once_and_labels_read_as_the_summary_prints_them() {
        let case = Case {
            scenario: crate::scenario::default_scenario("t"),
            seed: 1,
        };
        let rejoin = TriageFix::Rendezvous(RendezvousFix::DeadParticipantRejoin);
        let fixed = with_fix(&case, rejoin).expect("not yet on");
        assert!(with_fix(&fixed, rejoin).is_none());
        let k = Known {
            fix: rejoin.name().into(),
            issue: "pytorch#111646".into(),
            restores_the_job: true,
        };
        assert_eq!(
            k.label(),
            "known: pytorch#111646 (fix dead-participant-rejoin removes it)"
        );
        let only = Known {
            restores_the_job: false,
            ..k
        };
        assert_eq!(
            only.label(),
            "known: pytorch#111646 (fix dead-participant-rejoin removes the violations only: \
             the job still stops training)"
        );
    }

    /// A rendezvous case of `nodes` (+ `spares`) with min 1 and `max_nodes`, 50 steps, an hour,
    /// and node-1 killed at `kill_at_us`.
    pub(in crate::fuzz) fn kill_case(
        nodes: u32,
        spares: u32,
        max_nodes: u32,
        kill_at_us: u64,
        seed: u64,
    ) -> Case {
        use crate::scenario::model::{Fault, FaultKind};
        let mut s = crate::scenario::default_scenario("triage");
        s.cluster.nodes = nodes;
        s.cluster.spare_nodes = spares;
        s.rendezvous.min_nodes = 1;
        s.rendezvous.max_nodes = max_nodes;
        s.job.steps = 50;
        s.time_limit = crate::sim_time::SimDuration::from_secs(3_600);
        s.faults = vec![Fault {
            at: crate::sim_time::SimInstant::from_us(kill_at_us),
            kind: FaultKind::Kill { node: 1 },
            role: None,
        }];
        Case { scenario: s, seed }
    }

    #[test]
    fn a_killed_participant_is_triaged_as_pytorch_111646() {
        // node-1 dies 75 ms after round 0 completed, before the rank exchange is done.
        let case = kill_case(5, 0, 5, 2_190_000, 1_776_612_806_655_204_715);
        let (verdict, _) = judge(&case.scenario, case.seed, None);
        // The survivors wait out the collective timeout, so training does not resume in time.
        assert_eq!(
            verdict.counted,
            vec![
                "job.resumes_after_heal:no-step-after-heal".to_owned(),
                "rendezvous.liveness:survivor-stuck".to_owned()
            ]
        );
        let known = triage(&case, &verdict, None).expect("a known torch behaviour");
        assert_eq!(known.fix, "dead-participant-rejoin");
        assert_eq!(known.issue, "pytorch#111646");
        assert!(
            known.restores_the_job,
            "with the fix the four survivors train on"
        );
    }

    #[test]
    fn the_world_size_race_is_triaged_as_world_read_after_sanitize() {
        // Seed 1 case 2812 of the rendezvous campaign, shrunk: node-1 dies 15 s before the
        // last call ends, so its heartbeat expires while the others finish their joins
        // (16.1 s, as in scenarios/world_size_race.toml).
        let case = kill_case(5, 2, 6, 16_100_000, 5_478_004_712_951_172_402);
        let (verdict, _) = judge(&case.scenario, case.seed, None);
        assert_eq!(
            verdict.invariants(),
            vec![
                "job.resumes_after_heal",
                "rendezvous.agreement",
                "rendezvous.exclusive"
            ],
            "reproduce with: cargo test --release --lib the_world_size_race_is_triaged"
        );
        // The fix removes the disagreement, not the failure: the rank exchange still waits
        // for the dead node until the store's timeout (as in world_size_race_fixed.toml).
        let known = triage(&case, &verdict, None).expect("a known torch behaviour");
        assert_eq!(known.fix, "world-at-completion");
        assert_eq!(known.issue, "torch: world size read after sanitize");
        assert!(!known.restores_the_job);
    }
}
