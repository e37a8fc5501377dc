//! torch's rendezvous defaults (`RendezvousSettings`, `RendezvousTimeout` and the c10d
//! backend's keep-alive), written once: the scenario format takes them for absent keys and
//! the rendezvous's own settings start from them.

/// torch's default join timeout (600 s).
pub const DEFAULT_JOIN_TIMEOUT_US: u64 = 600_000_000;
/// torch's default last-call timeout (30 s).
pub const DEFAULT_LAST_CALL_TIMEOUT_US: u64 = 30_000_000;
/// torch's default close timeout (30 s).
pub const DEFAULT_CLOSE_TIMEOUT_US: u64 = 30_000_000;
/// torch's default keep-alive op timeout (5 s).
pub const DEFAULT_HEARTBEAT_TIMEOUT_US: u64 = 5_000_000;
/// torch's default interval between heartbeats (5 s).
pub const DEFAULT_KEEP_ALIVE_INTERVAL_US: u64 = 5_000_000;
/// torch's default number of missed heartbeats before a node counts as dead.
pub const DEFAULT_KEEP_ALIVE_MAX_ATTEMPT: u32 = 3;
