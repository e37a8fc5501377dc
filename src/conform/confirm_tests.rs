//! Unit tests of the confirmation: labels, the backend rule, what a real run must show.

use super::*;
use crate::conform::signature::NodeSig;
use crate::scenario::model::{Fault, FaultKind};
use crate::sim_time::{SimDuration, SimInstant};

fn coarse(states: &[(&str, &str)], finished: bool) -> Signature {
    Signature {
        rounds: Vec::new(),
        nodes: states
            .iter()
            .map(|(node, state)| {
                let sig = NodeSig {
                    final_state: (*state).to_owned(),
                    exit_code: None,
                    restarts: 0,
                };
                ((*node).to_owned(), sig)
            })
            .collect(),
        finished,
    }
}

fn outcome(states: &[(&str, &str)], violated: &[&str]) -> Outcome {
    Outcome {
        coarse: coarse(states, false),
        violated: violated.iter().map(|v| (*v).to_owned()).collect(),
        kinds: Vec::new(),
    }
}

#[test]
fn labels_read_as_the_summary_and_the_campaign_print_them() {
    assert_eq!(
        label_of("2.15.0+cu132", 2, 3).to_string(),
        "confirmed on torch 2.15.0 (2 of 3 runs)"
    );
    assert_eq!(
        label_of("2.8.0", 0, 3).to_string(),
        "not reproduced (3 runs)"
    );
    let refusal = |what: &str, why: &str| Refusal {
        what: what.into(),
        why: why.into(),
    };
    let cannot = Label::CannotRun {
        reason: CannotRun::Refused(vec![
            refusal("faults[0] (partition at 23.162 s)", localhost::NETNS_ROOT),
            refusal("faults[1] (power_off at 30 s)", localhost::GPU),
            refusal("faults[2] (heal at 68.174 s)", localhost::NETNS_ROOT),
        ])
        .reason(),
    };
    assert_eq!(
        cannot.to_string(),
        format!(
            "cannot run on torch: faults[0] (partition at 23.162 s), faults[2] (heal at \
             68.174 s): {}; faults[1] (power_off at 30 s): {}",
            localhost::NETNS_ROOT,
            localhost::GPU
        )
    );
}

#[test]
fn the_backend_rule_needs_the_same_verdict_on_every_seed() {
    let failed = outcome(&[("node-0", "FAILED"), ("node-1", "KILLED")], &[]);
    let stuck = outcome(
        &[("node-0", "RUNNING"), ("node-1", "KILLED")],
        &["rendezvous.liveness"],
    );
    let same: Vec<(u64, Outcome)> = (0..3).map(|s| (s, failed.clone())).collect();
    assert_eq!(backend_differs(&same, &same), None);
    let mut other = same.clone();
    other[1].1 = stuck.clone();
    let (seed, n, g) = backend_differs(&same, &other).expect("seed 1 differs");
    assert_eq!((seed, &n, &g), (1, &failed, &stuck));
    assert_eq!(
        backend_refusal(seed, &n, &g),
        "the workers here run gloo, and the model's verdict differs between the backends \
         (seed 1: with nccl node-0 FAILED, node-1 KILLED | not finished | violates nothing; \
         with gloo node-0 RUNNING, node-1 KILLED | not finished | violates rendezvous.liveness)"
    );
    // The same outcome with another violated invariant is another verdict.
    let mut violating = same.clone();
    violating[2].1.violated = vec!["rendezvous.agreement".into()];
    assert_eq!(backend_differs(&same, &violating).map(|d| d.0), Some(2));
}

#[test]
fn a_real_run_shows_a_finding_by_its_outcome_and_what_its_logs_can_show() {
    let ended = coarse(&[("node-0", "FAILED"), ("node-1", "KILLED")], false);
    let liveness = Target::new(ended.clone(), &["rendezvous.liveness".to_owned()]);
    assert!(
        liveness.observable.is_empty(),
        "the logs cannot show liveness"
    );
    let mut real = ended.clone();
    real.nodes.get_mut("node-0").expect("node-0").exit_code = Some(1);
    real.nodes.get_mut("node-0").expect("node-0").restarts = 2;
    assert!(
        liveness.shown_by(&real, &[]),
        "exit codes and restarts do not count"
    );
    real.finished = true;
    assert!(!liveness.shown_by(&real, &[]));
    let split = Target::new(
        ended.clone(),
        &[
            "rendezvous.agreement".to_owned(),
            "rendezvous.exclusive".to_owned(),
        ],
    );
    assert_eq!(split.observable, vec!["rendezvous.agreement"]);
    assert!(
        !split.shown_by(&ended, &[]),
        "the split must show in the join lines"
    );
    assert!(split.shown_by(&ended, &["rendezvous.agreement".to_owned()]));
}

/// Three nodes train; node-1 is killed mid-training (`kill_at_s`), no restarts.
fn killed_in_training(kill_at_s: u64) -> Scenario {
    let mut s = crate::scenario::default_scenario("confirm");
    s.cluster.nodes = 3;
    s.rendezvous.min_nodes = 3;
    s.rendezvous.max_nodes = 3;
    s.job.steps = 100;
    s.time_limit = SimDuration::from_secs(780);
    s.faults = vec![Fault::at(
        SimInstant::from_us(kill_at_s * 1_000_000),
        FaultKind::Kill { node: 1 },
    )];
    s
}

#[test]
fn a_case_whose_verdict_does_not_depend_on_the_backend_runs_with_gloo() {
    let s = killed_in_training(15);
    let prepared = prepare(&s, "t.toml", &[0, 1, 2])
        .expect("runs")
        .expect("the same verdict on both backends");
    assert!(prepared.ran_with_gloo);
    assert_eq!(prepared.scenario.job.backend, Backend::Gloo);
    assert_eq!(prepared.notes[0], RAN_WITH_GLOO);
}

#[test]
fn a_case_whose_verdict_depends_on_the_backend_is_refused_with_the_seed_that_shows_it() {
    // NCCL that never notices the dead peer waits out its 10-minute timeout past the real
    // run's 300 s; gloo's survivors fail at once.
    let mut s = killed_in_training(15);
    s.job.nccl_peer_exit_detection = None;
    let cannot = prepare(&s, "t.toml", &[0, 1])
        .expect("runs")
        .expect_err("the backend decides");
    let reason = cannot.reason();
    assert!(
        reason.starts_with("the workers here run gloo, and the model's verdict differs between the backends (seed 0: with nccl "),
        "{reason}"
    );
}

#[test]
fn a_finding_the_file_run_here_no_longer_shows_cannot_run() {
    let f = Finding {
        scenario: killed_in_training(15),
        seed: 4,
        kinds: vec!["rendezvous.agreement:views-differ".into()],
    };
    let cannot = plan(&f, "t.toml", &[0])
        .expect("runs")
        .expect_err("not shown");
    assert!(
        cannot
            .reason()
            .contains("no longer shows the finding in the model at seed 4"),
        "{}",
        cannot.reason()
    );
}

#[test]
fn faults_localhost_cannot_make_are_refused_before_the_model_runs() {
    let mut s = killed_in_training(15);
    s.faults.push(Fault::at(
        SimInstant::from_us(20_000_000),
        FaultKind::GpuFail { node: 2, gpu: 0 },
    ));
    match prepare(&s, "t.toml", &[0]).expect("runs") {
        Err(CannotRun::Refused(r)) => {
            assert_eq!(r.len(), 1);
            assert_eq!(r[0].why, localhost::GPU);
        }
        other => panic!("{other:?}"),
    }
}
