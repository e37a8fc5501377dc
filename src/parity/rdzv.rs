//! Parity cases of the rendezvous core: `rdzv_op`, `rdzv_apply`, `rdzv_sanitize`.

use serde::de::{Deserializer, Error as _};
use serde::Deserialize;
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

/// `rdzv_op`: the action torch's op `op` decides for `node` in `state`, or
/// [`GRACEFUL_EXIT`].
#[derive(Debug, Clone, Deserialize)]
pub struct OpCase {
    op: String,
    settings: RendezvousSettings,
    node: NodeDesc,
    #[serde(deserialize_with = "state")]
    state: RendezvousState,
    now_utc_us: i64,
    now_mono_us: i64,
    deadline_mono_us: i64,
    expected: String,
}

/// `rdzv_apply`: the state after torch applies `action` for `node`.
#[derive(Debug, Clone, Deserialize)]
pub struct ApplyCase {
    action: String,
    settings: RendezvousSettings,
    node: NodeDesc,
    #[serde(deserialize_with = "state")]
    state: RendezvousState,
    now_utc_us: i64,
    #[serde(deserialize_with = "state")]
    expected_state: RendezvousState,
}

/// `rdzv_sanitize`: the state after torch's `_sanitize`.
#[derive(Debug, Clone, Deserialize)]
pub struct SanitizeCase {
    settings: RendezvousSettings,
    #[serde(deserialize_with = "state")]
    state: RendezvousState,
    now_utc_us: i64,
    #[serde(deserialize_with = "state")]
    expected_state: RendezvousState,
}

/// A state as torch's backend encodes it, decoded by the model's own decoder.
fn state<'de, D: Deserializer<'de>>(deserializer: D) -> Result<RendezvousState, D::Error> {
    let value = Value::deserialize(deserializer)?;
    RendezvousState::from_json(&value).map_err(|e| D::Error::custom(format!("bad state: {e}")))
}

impl OpCase {
    pub(super) fn check(&self) -> Result<Option<String>, String> {
        let op_name = &self.op;
        let op = OpKind::from_name(op_name).ok_or_else(|| format!("unknown op {op_name:?}"))?;
        let expected = self.expected.as_str();
        if expected != GRACEFUL_EXIT && Action::from_torch_name(expected).is_none() {
            return Err(format!("unknown expected action {expected:?}"));
        }
        let ctx = OpContext::new(&self.node, &self.state, &self.settings);
        let decided = decide(
            op,
            &ctx,
            self.now_utc_us,
            self.now_mono_us,
            self.deadline_mono_us,
        );
        let actual = match decided {
            Ok(action) => action.torch_name(),
            Err(_) => GRACEFUL_EXIT,
        };
        let node = &self.node;
        Ok((actual != expected)
            .then(|| format!("op {op_name} for {node}: expected {expected}, actual {actual}")))
    }
}

impl ApplyCase {
    pub(super) fn check(&self) -> Result<Option<String>, String> {
        let name = &self.action;
        let action =
            Action::from_torch_name(name).ok_or_else(|| format!("unknown action {name:?}"))?;
        let mut state = self.state.clone();
        apply(
            action,
            &mut state,
            &self.node,
            &self.settings,
            self.now_utc_us,
        );
        let node = &self.node;
        Ok(describe_state_diff(&self.expected_state, &state)
            .map(|d| format!("apply {name} for {node}: {d}")))
    }
}

impl SanitizeCase {
    pub(super) fn check(&self) -> Option<String> {
        let mut state = self.state.clone();
        sanitize(&mut state, &self.settings, self.now_utc_us);
        describe_state_diff(&self.expected_state, &state).map(|d| format!("sanitize: {d}"))
    }
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
    use crate::parity::Case;

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

    fn check(case: Value) -> Result<Option<String>, String> {
        let case: Case = serde_json::from_value(case).map_err(|e| e.to_string())?;
        assert_eq!(case.kind(), "rdzv_op");
        case.check()
    }

    #[test]
    fn reports_match_mismatch_and_malformed() {
        assert_eq!(check(op_case("MARK_RENDEZVOUS_CLOSED")), Ok(None));
        let diff = check(op_case("FINISH")).unwrap().unwrap();
        assert!(
            diff.contains("expected FINISH") && diff.contains("actual MARK_RENDEZVOUS_CLOSED"),
            "{diff}"
        );
        assert!(check(op_case("NOT_AN_ACTION")).is_err());
        let mut no_node = op_case("FINISH");
        no_node.as_object_mut().unwrap().remove("node");
        assert!(check(no_node).is_err());
        let mut bad_state = op_case("FINISH");
        bad_state["state"] = serde_json::json!({"round": "two"});
        let message = check(bad_state).unwrap_err();
        assert!(message.contains("bad state"), "{message}");
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
