//! The elastic agent: rank assignment (pure) and the per-node run loop (shell).

pub mod ranks;
pub mod run;
