//! What a scenario's snapshot holds: its report as JSON, except that the trace's hash is
//! taken over the events with their prose left out (the sentences in `reason`, `detail`
//! and `message` fields), and the distinct prose texts of the run are listed, sorted. A change to one sentence's wording
//! then shows as a readable line in the snapshots of the runs that print it, instead of a
//! new hash in every snapshot; a change to what happened still moves the hash. The
//! report's own `trace_hash` (the contract's) is not in the snapshot.

use sha2::{Digest, Sha256};
use std::collections::BTreeSet;
use trainsim::report::Report;
use trainsim::trace::Trace;

/// The event fields that hold sentences for people. A one-word value in them (a code such
/// as `membership_change`) is a fact, and stays in the hash.
const PROSE_FIELDS: &[&str] = &["reason", "detail", "message"];
/// Most prose texts a snapshot lists; past it, the rest are counted and hashed.
pub const PROSE_TEXTS_MAX: usize = 200;

/// A trace split into its facts' hash and its prose.
#[derive(Debug, PartialEq)]
pub struct Split {
    /// SHA-256 over the canonical events, every prose field emptied, hex.
    pub hash_without_prose: String,
    /// Every distinct prose text, sorted.
    pub texts: BTreeSet<String>,
}

/// Splits `trace` into the hash of its facts and its distinct prose texts.
pub fn split_prose(trace: &Trace) -> Split {
    let mut hasher = Sha256::new();
    let mut texts = BTreeSet::new();
    for event in &trace.events {
        let mut value = serde_json::to_value(event).expect("events always serialize");
        take_prose(&mut value, &mut texts);
        hasher.update(value.to_string().as_bytes());
        hasher.update(b"\n");
    }
    Split {
        hash_without_prose: hex(hasher.finalize().as_slice()),
        texts,
    }
}

/// Moves every prose string of `value` into `texts`, leaving an empty string in its place.
fn take_prose(value: &mut serde_json::Value, texts: &mut BTreeSet<String>) {
    match value {
        serde_json::Value::Object(fields) => {
            for (key, field) in fields.iter_mut() {
                match field {
                    serde_json::Value::String(text)
                        if PROSE_FIELDS.contains(&key.as_str()) && text.contains(' ') =>
                    {
                        texts.insert(std::mem::take(text));
                    }
                    other => take_prose(other, texts),
                }
            }
        }
        serde_json::Value::Array(items) => {
            for item in items {
                take_prose(item, texts);
            }
        }
        _ => {}
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The snapshot of a run: the pretty report JSON with its `trace_hash` line replaced by
/// `trace_hash_without_prose` and `trace_prose` (at most [`PROSE_TEXTS_MAX`] texts; past
/// it, a last line counts the others and hashes them all).
pub fn snapshot_of(report: &Report, trace: &Trace) -> String {
    let pretty = serde_json::to_string_pretty(report).expect("reports serialize");
    let hash_line = format!("  \"trace_hash\": {},\n", json(&report.trace_hash));
    assert!(
        pretty.contains(&hash_line),
        "the report's JSON has its trace_hash line"
    );
    let split = split_prose(trace);
    let mut listed: Vec<String> = split
        .texts
        .iter()
        .take(PROSE_TEXTS_MAX)
        .map(|t| json(t))
        .collect();
    if split.texts.len() > PROSE_TEXTS_MAX {
        let mut all = Sha256::new();
        for text in &split.texts {
            all.update(text.as_bytes());
            all.update(b"\n");
        }
        listed.push(json(&format!(
            "... and {} more distinct texts; sha256 of all of them: {}",
            split.texts.len() - PROSE_TEXTS_MAX,
            hex(all.finalize().as_slice())
        )));
    }
    let prose = if listed.is_empty() {
        "[]".to_owned()
    } else {
        format!("[\n    {}\n  ]", listed.join(",\n    "))
    };
    let replacement = format!(
        "  \"trace_hash_without_prose\": {},\n  \"trace_prose\": {prose},\n",
        json(&split.hash_without_prose)
    );
    pretty.replacen(&hash_line, &replacement, 1)
}

fn json(text: &str) -> String {
    serde_json::to_string(text).expect("strings serialize")
}

/// Checks the split on a hand-made trace: prose leaves the hash and is listed; facts stay
/// in the hash. Run as one of the scenario tests' trials.
pub fn self_test() -> Result<(), String> {
    use trainsim::trace::{AgentState, Event, EventKind};
    let exited = |reason: &str, pid| Event {
        at: trainsim::sim_time::SimInstant::from_us(5),
        node: Some(trainsim::trace::TraceNode::node(0)),
        kind: EventKind::AgentExited {
            pid,
            state: AgentState::Failed,
            reason: reason.into(),
        },
    };
    let trace_of = |events| Trace {
        events,
        ..Trace::default()
    };
    let coded = split_prose(&trace_of(vec![exited("failure", 1)]));
    let recoded = split_prose(&trace_of(vec![exited("membership_change", 1)]));
    if coded.hash_without_prose == recoded.hash_without_prose || !coded.texts.is_empty() {
        return Err("a one-word code was taken for prose".into());
    }
    let said = split_prose(&trace_of(vec![exited("worker 0 failed", 1)]));
    let reworded = split_prose(&trace_of(vec![exited("local rank 0 failed", 1)]));
    let other_pid = split_prose(&trace_of(vec![exited("worker 0 failed", 2)]));
    if said.hash_without_prose != reworded.hash_without_prose {
        return Err("rewording a reason moved the hash without prose".into());
    }
    if said.hash_without_prose == other_pid.hash_without_prose {
        return Err("a changed fact left the hash without prose alone".into());
    }
    let expected: BTreeSet<String> = ["worker 0 failed".to_owned()].into();
    if said.texts != expected {
        return Err(format!("prose listed as {:?}", said.texts));
    }
    Ok(())
}
