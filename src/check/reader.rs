//! The `reader.*` invariants: placeholders until the HugeCTR-style reader pipeline records
//! its buffers and deliveries.

use super::InvariantResult;

/// `reader.exactly_once`: not checked yet (the reader pipeline comes later).
pub(super) fn exactly_once() -> InvariantResult {
    InvariantResult::not_applicable("reader.exactly_once")
}

/// `reader.buffer_protocol`: not checked yet (the reader pipeline comes later).
pub(super) fn buffer_protocol() -> InvariantResult {
    InvariantResult::not_applicable("reader.buffer_protocol")
}

/// `reader.terminates`: not checked yet (the reader pipeline comes later).
pub(super) fn terminates() -> InvariantResult {
    InvariantResult::not_applicable("reader.terminates")
}
