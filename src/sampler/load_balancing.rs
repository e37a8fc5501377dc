//! sampler load_balancing
