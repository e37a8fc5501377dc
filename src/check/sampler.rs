//! The `sampler.*` invariants: placeholders until the job records which samples each rank
//! drew.

use super::InvariantResult;

/// `sampler.coverage`: not checked yet (needs per-rank sample indices in the trace).
pub(super) fn coverage() -> InvariantResult {
    InvariantResult::not_applicable("sampler.coverage")
}
