//! sampler distributed
