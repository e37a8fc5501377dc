//! Samplers bit-exact to torch and Bagua: torch's CPU RNG, `DistributedSampler`, and Bagua's
//! load-balancing samplers.

pub mod distributed;
pub mod load_balancing;
pub mod torch_rng;
