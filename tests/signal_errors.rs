//! Bad values of the signal keys (`agent.signals_to_handle`, `job.checkpoint_on_signal`, a
//! `signal` fault's `signal`) are refused with the file, line, column and field.

use trainsim::scenario::{parse, ScenarioError};

const FILE: &str = "scenarios/bad.toml";

fn error(text: &str) -> ScenarioError {
    let e = parse(text, FILE).expect_err("the scenario should be refused");
    assert!(e.to_string().starts_with(FILE), "{e}");
    e
}

fn assert_at(e: &ScenarioError, line: usize, column: usize, field: &str, words: &str) {
    assert_eq!(
        (e.line, e.column, e.field.as_str()),
        (line, column, field),
        "{e}"
    );
    assert!(e.message.contains(words), "{e}");
}

const FAULT: &str = "name = \"x\"\n[[faults]]\nat = \"5s\"\nkind = \"signal\"\nnode = \"node-0\"\n";

#[test]
fn a_fault_signal_must_be_a_user_signal() {
    let e = error(&format!("{FAULT}signal = \"SIGTERM\"\n"));
    assert_at(&e, 6, 10, "faults[0].signal", "not a user signal");
    let e = error(&format!("{FAULT}signal = \"SIGUSR3\"\n"));
    assert_at(&e, 6, 10, "faults[0].signal", "SIGUSR1 or SIGUSR2");
    let e = error(FAULT);
    assert_at(&e, 2, 1, "faults[0]", "needs `signal`");
}

#[test]
fn signals_to_handle_takes_known_signals_once_with_sigterm() {
    let e = error("name = \"x\"\n[agent]\nsignals_to_handle = [\"SIGTERM\", \"SIGFOO\"]\n");
    assert_at(
        &e,
        3,
        33,
        "agent.signals_to_handle[1]",
        "`SIGFOO` is not a signal",
    );
    let e = error("name = \"x\"\n[agent]\nsignals_to_handle = [\"SIGTERM\", \"SIGTERM\"]\n");
    assert_at(&e, 3, 33, "agent.signals_to_handle[1]", "listed twice");
    let e = error("name = \"x\"\n[agent]\nsignals_to_handle = [\"SIGUSR1\"]\n");
    assert_at(
        &e,
        3,
        21,
        "agent.signals_to_handle",
        "SIGTERM must be handled",
    );
}

#[test]
fn checkpoint_on_signal_is_a_known_signal() {
    let e = error("name = \"x\"\n[job]\ncheckpoint_on_signal = \"USR1\"\n");
    assert_eq!(
        (e.line, e.field.as_str()),
        (3, "job.checkpoint_on_signal"),
        "{e}"
    );
}

#[test]
fn the_keys_read_back_as_written() {
    let text = format!(
        "name = \"x\"\n[agent]\nsignals_to_handle = [\"SIGUSR2\", \"SIGTERM\"]\n[job]\n\
         checkpoint_on_signal = \"SIGUSR2\"\n{}signal = \"SIGUSR2\"\n",
        &FAULT["name = \"x\"\n".len()..]
    );
    let s = parse(&text, FILE).expect("valid");
    let back = trainsim::scenario::to_toml(&s);
    assert_eq!(parse(&back, FILE).expect("written back"), s, "{back}");
    assert!(back.contains("SIGUSR2"), "{back}");
}
