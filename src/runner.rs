//! runner: one run end to end.
