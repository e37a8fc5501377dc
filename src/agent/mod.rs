//! The elastic agent: rank assignment (pure, and its exchange through the store), the
//! restart policy and worker-group states (pure), and the per-node run loop (shell).

pub mod policy;
pub mod rank_exchange;
pub mod ranks;
pub mod run;
