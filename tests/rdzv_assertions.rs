//! An assertion of the rendezvous handler that fires inside a run ends that run as a
//! harness failure naming the broken precondition, with the repro line last.

use trainsim::runner::Run;

#[test]
fn a_broken_rendezvous_precondition_is_a_harness_failure_with_the_repro_line() {
    let mut scenario = trainsim::scenario::default_scenario("assertion");
    // Settings the scenario check refuses (min_nodes 0), handed over past the check.
    scenario.rendezvous.min_nodes = 0;
    let failure = Run::of(&scenario, "assertion.toml")
        .report()
        .expect_err("the handler refuses settings the scenario check refuses");
    assert!(
        failure
            .message
            .contains("a rendezvous handler was given settings the scenario check refuses"),
        "{}",
        failure.message
    );
    let shown = failure.to_string();
    let last_line = shown.lines().last().expect("the failure has lines");
    assert_eq!(last_line, failure.repro);
    assert!(last_line.contains("assertion.toml"), "{last_line}");
    assert!(shown.starts_with("harness failure on seed"), "{shown}");
}
