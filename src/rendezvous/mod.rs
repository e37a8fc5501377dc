//! torch's dynamic rendezvous: a pure core (settings, state, ops, apply, sanitize) and the
//! async handler that runs it against the store.
//!
//! The pure core mirrors torch 2.15's `dynamic_rendezvous.py` (c10d backend); the parity
//! vectors in `tests/data/parity/rendezvous.jsonl` and `sanitize.jsonl` pin it. The handler
//! is the only part that awaits: it moves state between the core and the store.

pub mod apply;
pub mod backoff;
pub mod decoded_states;
pub mod edits;
mod encoded_len;
pub mod error;
pub mod handler;
mod json_int;
mod node_desc;
pub mod ops;
pub mod quiet_wait;
pub mod sanitize;
pub mod settings;
mod skipped_beats;
pub mod state;
pub mod story;
pub mod well_formed;

#[cfg(test)]
mod tests;
