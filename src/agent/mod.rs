//! The elastic agent: rank assignment (pure, and its exchange through the store) and the
//! per-node run loop (shell).

pub mod rank_exchange;
pub mod ranks;
pub mod run;
