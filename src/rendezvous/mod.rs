//! torch's dynamic rendezvous: a pure core (settings, state, ops, apply, sanitize) and the
//! async handler that runs it against the store.

pub mod apply;
pub mod ops;
pub mod sanitize;
pub mod settings;
pub mod state;
pub mod handler;

#[cfg(test)]
mod tests;
