//! The messages between the simulator and the host.
