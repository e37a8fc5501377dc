//! Parity cases of the samplers, torch RNG and rank assignment.
