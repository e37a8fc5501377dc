//! The elastic agent: rank assignment (pure, and its exchange through the store), the
//! restart policy and worker-group states (pure), the agent process and the signals that end it (shell), the per-node run loop (shell), and which
//! node holds rank 0 for faults aimed at it.

pub mod policy;
pub mod process;
pub mod rank0;
pub mod rank_exchange;
pub mod ranks;
pub mod run;
