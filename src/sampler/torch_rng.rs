//! sampler torch_rng
