//! `trainsim bench` prints well-formed figure lines (no timing is asserted: speed targets
//! live in the benchmark, not in tests).

mod common;
use common::trainsim_command;

#[test]
fn the_cheapest_workload_prints_one_well_formed_json_line() {
    let out = trainsim_command()
        .args(["bench", "--workload", "randperm-10m", "--format", "json"])
        .output()
        .expect("trainsim runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert!(
        lines[0].starts_with(r#"{"workload":"randperm-10m","#),
        "{text}"
    );
    let value: serde_json::Value = serde_json::from_str(lines[0]).expect("one JSON object");
    assert_eq!(value["items"], 10_000_000);
    assert!(value["wall_us"].as_u64().is_some_and(|w| w > 0), "{text}");
}

#[test]
fn an_unknown_workload_is_a_usage_error() {
    let out = trainsim_command()
        .args(["bench", "--workload", "nope"])
        .output()
        .expect("trainsim runs");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("`nope` is not a workload") && err.contains("randperm-10m"),
        "{err}"
    );
}
