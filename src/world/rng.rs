//! The run's seeded random streams live on the ground floor ([`crate::rng`]): the scenario
//! draws its failure processes from them before the world exists.

pub use crate::rng::stream;
