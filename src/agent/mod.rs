//! The elastic agent: rank assignment (pure) and the per-node run loop.

pub mod ranks;
