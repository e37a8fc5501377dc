//! Runs parity vectors (cases made by the real torch and Bagua code) against the models.

pub mod rdzv;
pub mod sampler;
