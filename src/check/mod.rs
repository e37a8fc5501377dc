//! Named invariants over a run's trace, one family per file.

use crate::scenario::model::Scenario;
use crate::trace::{RunEnd, Trace};

/// The verdict of one invariant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Held,
    Violated,
    NotApplicable,
}

/// One place an invariant failed.
#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    pub at_us: u64,
    pub node: Option<String>,
    pub message: String,
}

/// One invariant's result.
#[derive(Debug, Clone, PartialEq)]
pub struct InvariantResult {
    pub name: String,
    pub status: Status,
    pub violations: Vec<Violation>,
}

/// Runs every invariant family over the trace, in a fixed order.
pub fn check_all(_scenario: &Scenario, _trace: &Trace, _end: &RunEnd) -> Vec<InvariantResult> {
    Vec::new()
}
