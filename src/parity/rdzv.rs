//! Parity cases of the rendezvous core: `rdzv_op`, `rdzv_apply`, `rdzv_sanitize`.

use serde_json::Value;

use crate::rendezvous::apply::apply;
use crate::rendezvous::ops::{decide, Action, OpContext, OpKind};
use crate::rendezvous::sanitize::sanitize;
use crate::rendezvous::settings::RendezvousSettings;
use crate::rendezvous::state::{NodeDesc, RendezvousState};

/// What the vectors write where torch raised `RendezvousGracefulExitError`.
pub const GRACEFUL_EXIT: &str = "GRACEFUL_EXIT";

/// Longest excerpt of a value shown in a mismatch description.
const SHOW_CHARS: usize = 160;

/// Checks one case of kind `rdzv_op`, `rdzv_apply` or `rdzv_sanitize`.
///
/// Ok(None): the model agrees with torch. Ok(Some(text)): it does not; `text` names what
/// differs, expected vs actual. Err(text): the case is malformed or of another kind.
pub fn check_case(kind: &str, case: &Value) -> Result<Option<String>, String> {
    match kind {
        "rdzv_op" => check_op(case),
        "rdzv_apply" => check_apply(case),
        "rdzv_sanitize" => check_sanitize(case),
        other => Err(format!("not a rendezvous case kind: {other:?}")),
    }
}

fn field<'a>(case: &'a Value, name: &str) -> Result<&'a Value, String> {
    case.get(name)
        .ok_or_else(|| format!("missing field {name:?}"))
}

fn int_field(case: &Value, name: &str) -> Result<i64, String> {
    field(case, name)?
        .as_i64()
        .ok_or_else(|| format!("field {name:?} is not an integer"))
}

fn str_field<'a>(case: &'a Value, name: &str) -> Result<&'a str, String> {
    field(case, name)?
        .as_str()
        .ok_or_else(|| format!("field {name:?} is not a string"))
}

fn settings_of(case: &Value) -> Result<RendezvousSettings, String> {
    serde_json::from_value(field(case, "settings")?.clone())
        .map_err(|e| format!("bad settings: {e}"))
}

fn node_of(case: &Value) -> Result<NodeDesc, String> {
    serde_json::from_value(field(case, "node")?.clone()).map_err(|e| format!("bad node: {e}"))
}

fn state_of(case: &Value, name: &str) -> Result<RendezvousState, String> {
    RendezvousState::from_json(field(case, name)?).map_err(|e| format!("bad {name}: {e}"))
}

fn check_op(case: &Value) -> Result<Option<String>, String> {
    let op_name = str_field(case, "op")?;
    let op = OpKind::from_name(op_name).ok_or_else(|| format!("unknown op {op_name:?}"))?;
    let expected = str_field(case, "expected")?;
    if expected != GRACEFUL_EXIT && Action::from_torch_name(expected).is_none() {
        return Err(format!("unknown expected action {expected:?}"));
    }
    let (settings, node, state) = (settings_of(case)?, node_of(case)?, state_of(case, "state")?);
    let ctx = OpContext {
        node: &node,
        state: &state,
        settings: &settings,
    };
    let now_utc_us = int_field(case, "now_utc_us")?;
    let now_mono_us = int_field(case, "now_mono_us")?;
    let deadline_mono_us = int_field(case, "deadline_mono_us")?;
    let actual = match decide(op, &ctx, now_utc_us, now_mono_us, deadline_mono_us) {
        Ok(action) => action.torch_name(),
        Err(_) => GRACEFUL_EXIT,
    };
    Ok((actual != expected)
        .then(|| format!("op {op_name} for {node}: expected {expected}, actual {actual}")))
}

fn check_apply(case: &Value) -> Result<Option<String>, String> {
    let name = str_field(case, "action")?;
    let action = Action::from_torch_name(name).ok_or_else(|| format!("unknown action {name:?}"))?;
    let (settings, node, mut state) =
        (settings_of(case)?, node_of(case)?, state_of(case, "state")?);
    let expected = state_of(case, "expected_state")?;
    apply(
        action,
        &mut state,
        &node,
        &settings,
        int_field(case, "now_utc_us")?,
    );
    Ok(describe_state_diff(&expected, &state).map(|d| format!("apply {name} for {node}: {d}")))
}

fn check_sanitize(case: &Value) -> Result<Option<String>, String> {
    let (settings, mut state) = (settings_of(case)?, state_of(case, "state")?);
    let expected = state_of(case, "expected_state")?;
    sanitize(&mut state, &settings, int_field(case, "now_utc_us")?);
    Ok(describe_state_diff(&expected, &state).map(|d| format!("sanitize: {d}")))
}

fn cut(text: String) -> String {
    if text.chars().count() <= SHOW_CHARS {
        return text;
    }
    let head: String = text.chars().take(SHOW_CHARS).collect();
    format!("{head}…")
}

/// Names each differing field of two states (compared in the sorted JSON form), expected vs
/// actual, or None when they are equal.
pub fn describe_state_diff(expected: &RendezvousState, actual: &RendezvousState) -> Option<String> {
    if expected == actual {
        return None;
    }
    let (want, got) = (expected.to_json(), actual.to_json());
    let (Value::Object(want), Value::Object(got)) = (want, got) else {
        unreachable!("states encode as JSON objects");
    };
    let parts: Vec<String> = want
        .iter()
        .filter(|(key, value)| got.get(*key) != Some(*value))
        .map(|(key, value)| {
            let other = got.get(key).cloned().unwrap_or(Value::Null);
            format!(
                "{key}: expected {}, actual {}",
                cut(value.to_string()),
                cut(other.to_string())
            )
        })
        .collect();
    assert!(!parts.is_empty(), "unequal states differ in some field");
    Some(parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op_case(expected: &str) -> Value {
        serde_json::json!({
            "kind": "rdzv_op", "op": "close",
            "settings": {"run_id": "run", "min_nodes": 1, "max_nodes": 1,
                "join_timeout_us": 1, "last_call_timeout_us": 1, "close_timeout_us": 1,
                "heartbeat_timeout_us": 1, "keep_alive_interval_us": 1, "keep_alive_max_attempt": 1},
            "node": {"addr": "a", "pid": 1, "local_id": 0},
            "state": RendezvousState::default().to_json(),
            "now_utc_us": 0, "now_mono_us": 0, "deadline_mono_us": 0,
            "expected": expected,
        })
    }

    #[test]
    fn reports_match_mismatch_and_malformed() {
        assert_eq!(
            check_case("rdzv_op", &op_case("MARK_RENDEZVOUS_CLOSED")),
            Ok(None)
        );
        let diff = check_case("rdzv_op", &op_case("FINISH")).unwrap().unwrap();
        assert!(
            diff.contains("expected FINISH") && diff.contains("actual MARK_RENDEZVOUS_CLOSED"),
            "{diff}"
        );
        assert!(check_case("rdzv_op", &op_case("NOT_AN_ACTION")).is_err());
        assert!(check_case("randperm", &op_case("FINISH")).is_err());
        let mut no_node = op_case("FINISH");
        no_node.as_object_mut().unwrap().remove("node");
        assert!(check_case("rdzv_op", &no_node).is_err());
    }

    #[test]
    fn state_diff_names_fields() {
        let a = RendezvousState::default();
        let b = RendezvousState {
            round: 2,
            closed: true,
            ..Default::default()
        };
        let d = describe_state_diff(&a, &b).unwrap();
        assert!(
            d.contains("round: expected 0, actual 2") && d.contains("closed"),
            "{d}"
        );
        assert_eq!(describe_state_diff(&a, &a), None);
    }
}
