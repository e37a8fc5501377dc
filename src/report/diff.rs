//! What changed between two runs, read from their JSON reports (and, when both runs were
//! simulated here, their traces): the outcome, steps, goodput and fate, each round, each
//! agent's restarts, final state and exit reason, each invariant's verdict, and the first
//! event at which the traces part. Pure: it compares values and writes lines.

use serde_json::Value;
use std::collections::BTreeMap;

/// The lines that say what differs, `A` for the first run and `B` for the second; empty when
/// the reports agree on everything compared.
pub fn report_lines(a: &Value, b: &Value) -> Vec<String> {
    let mut lines = Vec::new();
    for (label, pointer) in [
        ("outcome", "/outcome"),
        ("steps done", "/job/steps_done"),
        ("ETTR", "/goodput/ettr"),
        ("fate", "/goodput/fate"),
    ] {
        scalar(&mut lines, label, a.pointer(pointer), b.pointer(pointer));
    }
    rounds(&mut lines, a, b);
    agents(&mut lines, a, b);
    invariants(&mut lines, a, b);
    lines
}

fn shown(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => "—".to_owned(),
        Some(Value::String(s)) if s.is_empty() => "\"\"".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

fn scalar(lines: &mut Vec<String>, label: &str, a: Option<&Value>, b: Option<&Value>) {
    if a != b {
        lines.push(format!("{label}: A {} | B {}", shown(a), shown(b)));
    }
}

fn list<'a>(report: &'a Value, key: &str) -> &'a [Value] {
    report
        .get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// Rounds by (store incarnation, round): world size and participants, or missing on a side.
fn rounds(lines: &mut Vec<String>, a: &Value, b: &Value) {
    let keyed = |report: &Value| -> BTreeMap<(u64, u64), String> {
        list(report, "rounds")
            .iter()
            .map(|r| {
                let key = (
                    r["store_incarnation"].as_u64().unwrap_or(0),
                    r["round"].as_u64().unwrap_or(0),
                );
                let participants: Vec<String> = r["participants"]
                    .as_array()
                    .map(|p| p.iter().map(|n| shown(Some(n))).collect())
                    .unwrap_or_default();
                (
                    key,
                    format!("world {} {}", r["world_size"], participants.join(" ")),
                )
            })
            .collect()
    };
    let (ra, rb) = (keyed(a), keyed(b));
    if ra.len() != rb.len() {
        lines.push(format!("rounds completed: A {} | B {}", ra.len(), rb.len()));
    }
    let keys: std::collections::BTreeSet<_> = ra.keys().chain(rb.keys()).collect();
    for key in keys {
        let (x, y) = (ra.get(key), rb.get(key));
        if x != y {
            let side = |s: Option<&String>| s.cloned().unwrap_or_else(|| "not completed".into());
            lines.push(format!(
                "round {} (store {}): A {} | B {}",
                key.1,
                key.0,
                side(x),
                side(y)
            ));
        }
    }
}

/// Each node's agent: counted restarts, final state and exit reason.
fn agents(lines: &mut Vec<String>, a: &Value, b: &Value) {
    let (aa, ab) = (agents_by_node(a), agents_by_node(b));
    let keys: std::collections::BTreeSet<_> = aa.keys().chain(ab.keys()).collect();
    for key in keys {
        let node = &key.1;
        match (aa.get(key), ab.get(key)) {
            (Some(x), Some(y)) => {
                for field in ["restarts", "final_state", "exit_reason"] {
                    scalar(
                        lines,
                        &format!("{node} {field}"),
                        x.get(field),
                        y.get(field),
                    );
                }
            }
            (x, _) => {
                let ran = if x.is_some() { "A only" } else { "B only" };
                lines.push(format!("{node}: an agent ran in {ran}"));
            }
        }
    }
}

/// A report's agents by node, in numeric order (node-2 before node-10).
fn agents_by_node(report: &Value) -> BTreeMap<(u64, String), &Value> {
    list(report, "agents")
        .iter()
        .map(|agent| {
            let node = shown(agent.get("node"));
            let number = node
                .strip_prefix("node-")
                .and_then(|n| n.parse().ok())
                .unwrap_or(u64::MAX);
            ((number, node), agent)
        })
        .collect()
}

/// Each invariant's status and violation count.
fn invariants(lines: &mut Vec<String>, a: &Value, b: &Value) {
    let keyed = |report: &Value| -> BTreeMap<String, String> {
        list(report, "invariants")
            .iter()
            .map(|i| {
                let violations = i["violations"].as_array().map_or(0, Vec::len);
                let status = shown(i.get("status"));
                let verdict = if violations > 0 {
                    format!("{status} ({violations})")
                } else {
                    status
                };
                (shown(i.get("name")), verdict)
            })
            .collect()
    };
    let (ia, ib) = (keyed(a), keyed(b));
    for (name, x) in &ia {
        let y = ib.get(name);
        if Some(x) != y {
            lines.push(format!(
                "{name}: A {x} | B {}",
                y.map_or("—", String::as_str)
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn report(restarts: u64, world: u64, status: &str) -> Value {
        json!({
            "outcome": "succeeded",
            "job": {"steps_done": 10},
            "rounds": [{"round": 0, "store_incarnation": 1, "world_size": world,
                        "participants": ["node-0", "node-1"]}],
            "agents": [{"node": "node-10", "restarts": 0, "final_state": "SUCCEEDED",
                        "exit_reason": ""},
                       {"node": "node-2", "restarts": restarts, "final_state": "SUCCEEDED",
                        "exit_reason": ""}],
            "invariants": [{"name": "agent.ranks", "status": status, "violations": []}],
        })
    }

    #[test]
    fn equal_reports_have_no_lines() {
        assert!(report_lines(&report(1, 2, "held"), &report(1, 2, "held")).is_empty());
    }

    #[test]
    fn each_difference_is_one_line_with_both_sides() {
        let lines = report_lines(&report(1, 2, "held"), &report(2, 3, "violated"));
        assert_eq!(
            lines,
            vec![
                "round 0 (store 1): A world 2 node-0 node-1 | B world 3 node-0 node-1",
                "node-2 restarts: A 1 | B 2",
                "agent.ranks: A held | B violated",
            ]
        );
    }

    #[test]
    fn agents_are_compared_in_numeric_node_order() {
        let mut b = report(1, 2, "held");
        b["agents"][0]["restarts"] = json!(5);
        b["agents"][1]["restarts"] = json!(4);
        let lines = report_lines(&report(1, 2, "held"), &b);
        assert_eq!(lines[0], "node-2 restarts: A 1 | B 4");
        assert_eq!(lines[1], "node-10 restarts: A 0 | B 5");
    }
}
