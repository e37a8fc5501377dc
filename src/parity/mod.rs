//! Runs parity vectors (cases made by the real torch and Bagua code) against the models.
//!
//! A vector file holds one JSON case per line, each with a `kind`; the kind picks the model
//! that recomputes it. See `tests/data/parity/` and the README that ships with the vectors.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

pub mod rdzv;
pub mod sampler;

/// One parity case, as a vector file's line spells it: `kind` names the variant, the other
/// fields are the variant's.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Case {
    Randperm(sampler::RandpermCase),
    RandpermDigest(sampler::RandpermDigestCase),
    Randint(sampler::RandintCase),
    DistributedSampler(sampler::DistributedCase),
    LoadBalancingSampler(sampler::LoadBalancingCase),
    LoadBalancingBatchSampler(sampler::LoadBalancingBatchCase),
    AssignRanks(sampler::AssignRanksCase),
    RdzvOp(rdzv::OpCase),
    RdzvApply(rdzv::ApplyCase),
    RdzvSanitize(rdzv::SanitizeCase),
}

impl Case {
    /// The case's `kind` as the file spells it.
    pub fn kind(&self) -> &'static str {
        match self {
            Case::Randperm(_) => "randperm",
            Case::RandpermDigest(_) => "randperm_digest",
            Case::Randint(_) => "randint",
            Case::DistributedSampler(_) => "distributed_sampler",
            Case::LoadBalancingSampler(_) => "load_balancing_sampler",
            Case::LoadBalancingBatchSampler(_) => "load_balancing_batch_sampler",
            Case::AssignRanks(_) => "assign_ranks",
            Case::RdzvOp(_) => "rdzv_op",
            Case::RdzvApply(_) => "rdzv_apply",
            Case::RdzvSanitize(_) => "rdzv_sanitize",
        }
    }

    /// Recomputes the case with the model its kind names: `Ok(None)` when it matches,
    /// `Ok(Some(description))` when it differs, `Err` when its parameters are impossible.
    pub fn check(&self) -> Result<Option<String>, String> {
        match self {
            Case::Randperm(c) => c.check(),
            Case::RandpermDigest(c) => c.check(),
            Case::Randint(c) => c.check(),
            Case::DistributedSampler(c) => c.check(),
            Case::LoadBalancingSampler(c) => c.check(),
            Case::LoadBalancingBatchSampler(c) => c.check(),
            Case::AssignRanks(c) => Ok(c.check()),
            Case::RdzvOp(c) => c.check(),
            Case::RdzvApply(c) => c.check(),
            Case::RdzvSanitize(c) => Ok(c.check()),
        }
    }
}

/// Longest rendering of one expected or actual value in a mismatch line, in characters.
const SHOWN_VALUE_MAX_CHARS: usize = 120;

/// A case whose model result differs from the expected one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// The case's kind.
    pub kind: String,
    /// The vector file.
    pub path: PathBuf,
    /// 1-based line number in the file.
    pub line: usize,
    /// Where the results first differ, and both values there.
    pub description: String,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (kind, path, line) = (&self.kind, self.path.display(), self.line);
        write!(f, "{kind} {path}:{line}: {}", self.description)
    }
}

/// Outcome of checking every case of some files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParityReport {
    /// Cases whose result matched.
    pub passed: usize,
    /// Cases whose result differed, in file and line order.
    pub mismatches: Vec<Mismatch>,
}

impl ParityReport {
    /// Number of cases that differed.
    pub fn failed(&self) -> usize {
        self.mismatches.len()
    }

    /// The closing line: `parity: N passed, M failed`.
    pub fn summary(&self) -> String {
        format!("parity: {} passed, {} failed", self.passed, self.failed())
    }
}

/// Why the vectors could not be checked at all (as opposed to a case that differs).
#[derive(Debug, thiserror::Error)]
pub enum ParityError {
    /// A file could not be read.
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A line is not a valid case (bad JSON, unknown kind, missing or bad field).
    #[error("{}:{line}: invalid case: {message}", path.display())]
    InvalidCase {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
}

/// Checks every case of every file, in order; blank lines are skipped. Stops at the first
/// file that cannot be read or line that is not a valid case.
pub fn run_files(paths: &[PathBuf]) -> Result<ParityReport, ParityError> {
    let mut report = ParityReport::default();
    for path in paths {
        let text = std::fs::read_to_string(path).map_err(|source| ParityError::Read {
            path: path.clone(),
            source,
        })?;
        run_text(path, &text, &mut report)?;
    }
    Ok(report)
}

/// Checks the cases of one file's contents into `report`.
pub fn run_text(path: &Path, text: &str, report: &mut ParityReport) -> Result<(), ParityError> {
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let invalid = |message: String| ParityError::InvalidCase {
            path: path.to_path_buf(),
            line: index + 1,
            message,
        };
        let case: Case = serde_json::from_str(line).map_err(|e| invalid(e.to_string()))?;
        match case.check().map_err(invalid)? {
            None => report.passed += 1,
            Some(description) => report.mismatches.push(Mismatch {
                kind: case.kind().to_owned(),
                path: path.to_path_buf(),
                line: index + 1,
                description,
            }),
        }
    }
    Ok(())
}

/// Describes where `actual` first differs from `expected` (`None` when equal): the path of
/// the first differing element, then both values there, each cut to a readable length.
pub fn first_difference(expected: &Value, actual: &Value) -> Option<String> {
    let mut path = String::new();
    let (expected_at, actual_at, note) = locate(expected, actual, &mut path)?;
    let at = if path.is_empty() {
        "top level"
    } else {
        path.as_str()
    };
    Some(format!(
        "first difference at {at}{note}: expected {}, actual {}",
        shorten(expected_at),
        shorten(actual_at)
    ))
}

/// Walks both values in step; returns the first pair that differs, appending its path.
fn locate<'a>(
    expected: &'a Value,
    actual: &'a Value,
    path: &mut String,
) -> Option<(&'a Value, &'a Value, String)> {
    match (expected, actual) {
        (Value::Array(e), Value::Array(a)) => {
            for (i, (ev, av)) in e.iter().zip(a).enumerate() {
                let mark = path.len();
                path.push_str(&format!("[{i}]"));
                if let Some(found) = locate(ev, av, path) {
                    return Some(found);
                }
                path.truncate(mark);
            }
            (e.len() != a.len()).then(|| {
                let note = format!(" (length {} expected, {} actual)", e.len(), a.len());
                (expected, actual, note)
            })
        }
        (Value::Object(e), Value::Object(a)) => {
            // serde_json's default map is ordered by key, so this walk is deterministic.
            for (key, ev) in e {
                let mark = path.len();
                path.push_str(&format!(".{key}"));
                match a.get(key) {
                    None => return Some((ev, &Value::Null, " (missing)".into())),
                    Some(av) => {
                        if let Some(found) = locate(ev, av, path) {
                            return Some(found);
                        }
                    }
                }
                path.truncate(mark);
            }
            let extra = a.keys().find(|k| !e.contains_key(*k))?;
            path.push_str(&format!(".{extra}"));
            Some((&Value::Null, &a[extra], " (unexpected)".into()))
        }
        _ => (expected != actual).then(|| (expected, actual, String::new())),
    }
}

/// Compact JSON cut to [`SHOWN_VALUE_MAX_CHARS`] characters.
pub fn shorten(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= SHOWN_VALUE_MAX_CHARS {
        return text;
    }
    let cut: String = text.chars().take(SHOWN_VALUE_MAX_CHARS).collect();
    format!("{cut}... ({} chars)", text.chars().count())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn difference_names_the_first_differing_position() {
        let d = first_difference(&json!([[1, 2], [3, 4]]), &json!([[1, 2], [3, 5]])).unwrap();
        assert_eq!(d, "first difference at [1][1]: expected 4, actual 5");
        let d = first_difference(&json!([1, 2]), &json!([1])).unwrap();
        assert!(d.contains("length 2 expected, 1 actual"), "{d}");
        assert_eq!(
            first_difference(&json!({"a": [1]}), &json!({"a": [1]})),
            None
        );
    }

    #[test]
    fn unknown_kinds_and_bad_lines_are_invalid() {
        let mut report = ParityReport::default();
        let bad = run_text(Path::new("v.jsonl"), "{\"kind\":\"nope\"}\n", &mut report);
        assert!(matches!(bad, Err(ParityError::InvalidCase { line: 1, .. })));
        let bad = run_text(Path::new("v.jsonl"), "\n{not json\n", &mut report);
        assert!(matches!(bad, Err(ParityError::InvalidCase { line: 2, .. })));
    }

    #[test]
    fn counts_passes_and_mismatches() {
        let text = concat!(
            "{\"kind\":\"randperm\",\"n\":1,\"seed\":0,\"expected\":[5]}\n",
            "{\"kind\":\"randint\",\"high\":1,\"size\":2,\"seed\":0,\"expected\":[0,0]}\n",
        );
        let mut report = ParityReport::default();
        run_text(Path::new("v.jsonl"), text, &mut report).unwrap();
        assert_eq!(report.passed + report.failed(), 2);
        assert_eq!(report.passed, 1, "{:?}", report.mismatches);
        assert!(report.mismatches[0]
            .to_string()
            .starts_with("randperm v.jsonl:1: "));
    }
}
