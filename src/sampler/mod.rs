//! sampler
