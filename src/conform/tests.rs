//! Unit tests of the agreement rule and of the report-to-signature mapping.

use super::compare::{differences, judge, Distribution};
use super::signature::{
    collapse_repeats, exit_code_of, round_compact, NodeSig, RoundSig, Signature,
};
use std::collections::BTreeMap;

fn sig(rounds: &[(u32, &[&str])], nodes: &[(&str, &str, u32)], finished: bool) -> Signature {
    Signature {
        rounds: rounds
            .iter()
            .map(|(w, m)| RoundSig {
                world_size: *w,
                members: m.iter().map(|s| s.to_string()).collect(),
                repeated: false,
            })
            .collect(),
        nodes: nodes
            .iter()
            .map(|(n, state, restarts)| {
                let node = NodeSig {
                    final_state: state.to_string(),
                    exit_code: exit_code_of(state, ""),
                    restarts: *restarts,
                };
                (n.to_string(), node)
            })
            .collect::<BTreeMap<_, _>>(),
        finished,
    }
}

fn ok() -> Signature {
    sig(
        &[(2, &["node-0", "node-1"])],
        &[("node-0", "SUCCEEDED", 0), ("node-1", "SUCCEEDED", 0)],
        true,
    )
}

fn failed() -> Signature {
    sig(
        &[(2, &["node-0", "node-1"])],
        &[("node-0", "FAILED", 1), ("node-1", "FAILED", 1)],
        false,
    )
}

#[test]
fn identical_distributions_agree() {
    let v = judge(
        &Distribution::of([ok(), ok(), ok()]),
        &Distribution::of(vec![ok(); 20]),
    );
    assert!(v.agree);
    assert!(v.differences.is_empty());
}

#[test]
fn agreement_needs_both_modes_in_the_other_side() {
    // The real mode (ok) is among the simulator's runs, but the simulator's mode (failed)
    // never happened on real torch.
    let real = Distribution::of([ok(), ok(), ok()]);
    let mut sim_runs = vec![failed(); 15];
    sim_runs.extend(vec![ok(); 5]);
    let v = judge(&real, &Distribution::of(sim_runs));
    assert!(!v.agree);
    assert!(v
        .differences
        .contains(&"nodes.node-0.final_state: real SUCCEEDED, sim FAILED".to_owned()));
    assert!(v
        .differences
        .contains(&"nodes.node-1.restarts: real 0, sim 1".to_owned()));
    assert!(v
        .differences
        .contains(&"finished: real true, sim false".to_owned()));
}

#[test]
fn minority_signatures_do_not_break_agreement() {
    let real = Distribution::of([ok(), ok(), failed()]);
    let mut sim_runs = vec![ok(); 18];
    sim_runs.extend(vec![failed(); 2]);
    assert!(judge(&real, &Distribution::of(sim_runs)).agree);
}

#[test]
fn a_tie_for_most_common_is_satisfied_by_any_tied_signature() {
    let other = sig(&[(1, &["node-0"])], &[("node-0", "SUCCEEDED", 0)], true);
    let real = Distribution::of([ok(), failed(), other]);
    assert_eq!(real.modes().len(), 3);
    assert!(judge(&real, &Distribution::of(vec![failed(); 4])).agree);
}

#[test]
fn an_empty_side_disagrees() {
    let v = judge(&Distribution::default(), &Distribution::of([ok()]));
    assert!(!v.agree);
    assert_eq!(v.differences, vec!["one side has no run".to_owned()]);
}

#[test]
fn distributions_list_the_most_common_first() {
    let d = Distribution::of([failed(), ok(), ok()]);
    assert_eq!(d.runs(), 3);
    assert_eq!(d.entries[0].count, 2);
    assert_eq!(d.entries[0].signature, ok());
}

#[test]
fn round_differences_show_both_sequences() {
    let two_rounds = sig(
        &[
            (3, &["node-0", "node-1", "node-2"]),
            (2, &["node-0", "node-1"]),
        ],
        &[("node-0", "SUCCEEDED", 0), ("node-1", "SUCCEEDED", 0)],
        true,
    );
    let d = differences(&two_rounds, &ok());
    assert_eq!(
        d,
        vec!["rounds: real [3{0,1,2} > 2{0,1}], sim [2{0,1}]".to_owned()]
    );
}

#[test]
fn a_node_missing_on_one_side_is_named() {
    let mut with_spare = ok();
    with_spare.nodes.insert(
        "node-2".into(),
        NodeSig {
            final_state: "STOPPED".into(),
            exit_code: Some(1),
            restarts: 0,
        },
    );
    let d = differences(&with_spare, &ok());
    assert_eq!(
        d,
        vec!["nodes.node-2: real STOPPED(1) r0, sim absent".to_owned()]
    );
}

#[test]
fn exit_codes_follow_torchrun() {
    assert_eq!(exit_code_of("SUCCEEDED", ""), Some(0));
    assert_eq!(exit_code_of("FAILED", "x"), Some(1));
    assert_eq!(exit_code_of("KILLED", ""), Some(-9));
    assert_eq!(
        exit_code_of("STOPPED", "SIGTERM: the agent shut down its workers"),
        Some(1)
    );
    assert_eq!(exit_code_of("RUNNING", ""), None);
}

#[test]
fn a_signals_default_action_exits_minus_its_number() {
    use crate::scenario::model::Signal;
    use crate::trace::ExitReason;
    for (signal, code) in [
        (Signal::Term, -15),
        (Signal::Usr1, -10),
        (Signal::Usr2, -12),
    ] {
        let reason = ExitReason::SignalDefaultAction { signal }.to_string();
        assert_eq!(exit_code_of("FAILED", &reason), Some(code), "{reason}");
    }
    // The SIGTERM sentence is the one reports have always carried.
    assert_eq!(
        ExitReason::SignalDefaultAction {
            signal: Signal::Term
        }
        .to_string(),
        "SIGTERM before the first workers started: the default action ended torchrun"
    );
}

#[test]
fn a_graceful_exit_is_stopped_as_the_real_log_reads_it() {
    use super::signature::signature_state;
    let reason = "graceful exit (the rendezvous 'x' is closed, terminating pending \
                  rendezvous); launch_agent then fails on the missing run result";
    let state = signature_state("FAILED", reason);
    assert_eq!(state, "STOPPED");
    assert_eq!(exit_code_of(state, reason), Some(1));
    assert_eq!(
        signature_state("FAILED", "the rendezvous 'x' timed out"),
        "FAILED"
    );
    // torch's own code on the [torch] plane reports the same exit by launch_agent's error.
    let torch = "AttributeError: 'NoneType' object has no attribute 'is_failed'";
    assert_eq!(signature_state("FAILED", torch), "STOPPED");
    assert_eq!(exit_code_of("STOPPED", torch), Some(1));
}

#[test]
fn compact_form_is_one_line() {
    assert_eq!(
        ok().compact(),
        "rounds 2{0,1} | node-0 SUCCEEDED(0) r0, node-1 SUCCEEDED(0) r0 | finished"
    );
}

#[test]
fn fixed_files_name_their_unfixed_twin() {
    use std::path::Path;
    assert_eq!(
        super::unfixed_twin(Path::new("c/s/budget_fixed.toml")),
        Some(Path::new("c/s/budget.toml").to_path_buf())
    );
    assert_eq!(super::unfixed_twin(Path::new("c/s/budget.toml")), None);
}

fn rounds(sizes: &[u32]) -> Vec<RoundSig> {
    sizes
        .iter()
        .map(|&w| RoundSig {
            world_size: w,
            members: (0..w).map(|i| format!("node-{i}")).collect(),
            repeated: false,
        })
        .collect()
}

/// Two restart loops of different lengths are one signature; a round that came once is not
/// a loop; a loop broken by another round is two entries.
#[test]
fn consecutive_repeats_of_one_round_collapse_and_loops_of_any_length_compare_equal() {
    let short = collapse_repeats(rounds(&[3, 2, 2, 2]));
    let long = collapse_repeats(rounds(&[3, 2, 2, 2, 2, 2, 2, 2]));
    assert_eq!(short, long);
    let shown: Vec<String> = short.iter().map(round_compact).collect();
    assert_eq!(shown, vec!["3{0,1,2}", "2{0,1}×2+"]);
    let once = collapse_repeats(rounds(&[3, 2]));
    assert_ne!(once, short, "a round that came once differs from a loop");
    let broken = collapse_repeats(rounds(&[2, 2, 3, 2, 2]));
    let shown: Vec<String> = broken.iter().map(round_compact).collect();
    assert_eq!(shown, vec!["2{0,1}×2+", "3{0,1,2}", "2{0,1}×2+"]);
    // Idempotent: a signature read back (already collapsed) stays as it is.
    assert_eq!(collapse_repeats(broken.clone()), broken);
    // The same world size with other members is another round.
    let mut other = rounds(&[2, 2]);
    other[1].members = vec!["node-0".into(), "node-2".into()];
    assert_eq!(collapse_repeats(other.clone()), other);
}
