//! The worker processes torch's agent starts, as the simulated job.
