//! A step's gradient all-reduce: its cost (a ring, modelled with the α-β cost), and how
//! each backend fails it when a peer is gone.
//!
//! Inside a node the GPUs reduce over NVLink (the profile's device-to-device bandwidth);
//! across nodes a ring of N nodes moves 2(N−1)/N of the bytes over each node's link in
//! 2(N−1) latency-bound steps. The two phases add up (hierarchical all-reduce).
//!
//! A peer whose processes died on a live host closed its connections. gloo raises at once
//! (measured on torch 2.15.0: 47–64 ms after a SIGKILL inside a ring, "Read error ...
//! Connection reset by peer"; "Connection closed by peer" when it died between
//! collectives). NCCL reports it as a remote error that torch's watchdog turns into an
//! abort, after `nccl_peer_exit_detection` (pytorch#150916: 1.4 s after the peer's SIGTERM);
//! `None` waits for the watchdog's timeout instead. A silent peer (a host powered off,
//! paused or cut off) costs the process-group timeout: gloo counts it per receive, from when
//! the ring stalled; NCCL's watchdog counts it from the collective's start.

/// How long an all-reduce of `bytes` over `nodes` nodes of `gpus` GPUs each takes, to the
/// microsecond (its terms add up in fractional microseconds and round once).
pub fn ring_all_reduce(
    bytes: u64,
    nodes: u64,
    gpus: u64,
    latency: SimDuration,
    bandwidth_bits_per_sec: u64,
    d2d_bits_per_sec: u64,
) -> SimDuration {
    let bits = bytes as f64 * 8.0;
    let intra_us = if gpus > 1 && d2d_bits_per_sec > 0 {
        secs_f64_as_us_f64(2.0 * (gpus - 1) as f64 / gpus as f64 * bits / d2d_bits_per_sec as f64)
    } else {
        0.0
    };
    let inter_us = if nodes > 1 && bandwidth_bits_per_sec > 0 {
        let steps = 2.0 * (nodes - 1) as f64;
        steps * latency.as_us() as f64
            + secs_f64_as_us_f64(steps / nodes as f64 * bits / bandwidth_bits_per_sec as f64)
    } else {
        0.0
    };
    SimDuration::from_us_f64_rounded(intra_us + inter_us)
}

/// A worker killed by NCCL's watchdog (a timeout, or an error it found) ends on SIGABRT.
pub const NCCL_ABORT_EXIT_CODE: i32 = -6;
/// A gloo error is a Python `RuntimeError` the training script does not catch.
pub const GLOO_ERROR_EXIT_CODE: i32 = 1;

use crate::sim_time::{secs_f64_as_us_f64, SimDuration, SimInstant};
/// Why the world says a collective did not finish (see `world::collectives`).
pub use crate::world::collectives::CollectiveError;

/// What a worker's process group does with a collective that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backend {
    pub kind: crate::scenario::model::Backend,
    /// The process-group timeout.
    pub timeout: SimDuration,
    /// NCCL: how long after a peer's connections closed the watchdog aborts the worker
    /// (`None`: never, the watchdog waits for the timeout).
    pub peer_exit_detection: Option<SimDuration>,
}

/// A collective's failure as the worker meets it: when, how it exits, and in which words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub at: SimInstant,
    pub exit_code: i32,
    pub reason: String,
}

/// When and how the all-reduce of `step`, which this worker entered at `arrival`, fails
/// on `error`, seen at `now`; `peer` names a node.
pub fn failure(
    backend: &Backend,
    error: CollectiveError,
    step: u64,
    arrival: SimInstant,
    now: SimInstant,
    peer: impl Fn(u32) -> String,
) -> Failure {
    use crate::scenario::model::Backend::{Gloo, Nccl};
    let deadline = arrival.after(backend.timeout).max(now);
    let timed_out = |at: SimInstant| timed_out(backend, step, at);
    match (error, backend.kind) {
        (CollectiveError::Timeout, _) => timed_out(now),
        (CollectiveError::PeerClosed { member, at_ns }, Gloo) => Failure {
            at: now,
            exit_code: GLOO_ERROR_EXIT_CODE,
            reason: if SimInstant::from_ns(at_ns) >= arrival {
                format!(
                    "gloo: the all-reduce of step {step} failed: read error from {}: \
                     connection reset by peer",
                    peer(member)
                )
            } else {
                format!(
                    "gloo: the all-reduce of step {step} failed: connection closed by peer {}",
                    peer(member)
                )
            },
        },
        (CollectiveError::PeerClosed { member, at_ns }, Nccl) => {
            match backend.peer_exit_detection {
                Some(detection) => {
                    let closed = SimInstant::from_ns(at_ns);
                    let seen = closed.after(detection).max(now);
                    if seen > deadline {
                        return timed_out(deadline);
                    }
                    Failure {
                        at: seen,
                        exit_code: NCCL_ABORT_EXIT_CODE,
                        reason: format!(
                            "NCCL watchdog: the all-reduce of step {step} failed with \
                             ncclRemoteError, remote process exited or there was a network \
                             error: connection closed by {}",
                            peer(member)
                        ),
                    }
                }
                None => timed_out(deadline),
            }
        }
        // gloo's receive times out a timeout after the ring stopped moving.
        (CollectiveError::Stalled { at_ns, .. }, Gloo) => {
            timed_out(SimInstant::from_ns(at_ns).after(backend.timeout).max(now))
        }
        (CollectiveError::Stalled { .. }, Nccl) => timed_out(deadline),
    }
}

/// The process-group timeout's failure, in the backend's words, at `at`.
fn timed_out(backend: &Backend, step: u64, at: SimInstant) -> Failure {
    use crate::scenario::model::Backend::{Gloo, Nccl};
    match backend.kind {
        Nccl => Failure {
            at,
            exit_code: NCCL_ABORT_EXIT_CODE,
            reason: format!(
                "NCCL watchdog: the all-reduce of step {step} timed out after {} us",
                backend.timeout.as_us()
            ),
        },
        Gloo => Failure {
            at,
            exit_code: GLOO_ERROR_EXIT_CODE,
            reason: format!(
                "gloo: the all-reduce of step {step} timed out waiting {} ms for a recv \
                 operation to complete",
                backend.timeout.as_ms()
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::model::Backend::{Gloo, Nccl};

    fn backend(kind: crate::scenario::model::Backend, detection_us: Option<u64>) -> Backend {
        Backend {
            kind,
            timeout: SimDuration::from_us(600_000_000),
            peer_exit_detection: detection_us.map(SimDuration::from_us),
        }
    }

    fn name(node: u32) -> String {
        format!("node-{node}")
    }

    const CLOSED_IN_RING: CollectiveError = CollectiveError::PeerClosed {
        member: 2,
        at_ns: 5_000_000_000,
    };

    #[test]
    fn gloo_fails_at_once_on_a_closed_peer() {
        let f = failure(
            &backend(Gloo, None),
            CLOSED_IN_RING,
            7,
            SimInstant::from_ns(4_000_000_000),
            SimInstant::from_ns(5_000_000_000),
            name,
        );
        assert_eq!((f.at.as_ns(), f.exit_code), (5_000_000_000, 1));
        assert!(
            f.reason.contains("connection reset by peer"),
            "{}",
            f.reason
        );
        let before = failure(
            &backend(Gloo, None),
            CLOSED_IN_RING,
            7,
            SimInstant::from_ns(6_000_000_000),
            SimInstant::from_ns(6_000_000_000),
            name,
        );
        assert!(
            before.reason.contains("connection closed by peer node-2"),
            "{}",
            before.reason
        );
    }

    #[test]
    fn nccl_notices_a_closed_peer_after_its_detection_time() {
        let f = failure(
            &backend(Nccl, Some(1_400_000)),
            CLOSED_IN_RING,
            7,
            SimInstant::from_ns(4_000_000_000),
            SimInstant::from_ns(5_000_000_000),
            name,
        );
        assert_eq!((f.at.as_ns(), f.exit_code), (6_400_000_000, -6));
        assert!(f.reason.contains("ncclRemoteError"), "{}", f.reason);
        // A step entered long after the peer died fails when it is entered.
        let late = failure(
            &backend(Nccl, Some(1_400_000)),
            CLOSED_IN_RING,
            7,
            SimInstant::from_ns(9_000_000_000),
            SimInstant::from_ns(9_000_000_000),
            name,
        );
        assert_eq!(late.at.as_ns(), 9_000_000_000);
    }

    #[test]
    fn nccl_without_detection_waits_for_the_watchdog() {
        let f = failure(
            &backend(Nccl, None),
            CLOSED_IN_RING,
            7,
            SimInstant::from_ns(4_000_000_000),
            SimInstant::from_ns(5_000_000_000),
            name,
        );
        assert_eq!(f.at.as_ns(), 604_000_000_000);
        assert!(
            f.reason.contains("timed out after 600000000 us"),
            "{}",
            f.reason
        );
    }

    #[test]
    fn a_stalled_ring_times_out_per_backend() {
        let stalled = CollectiveError::Stalled {
            member: 2,
            at_ns: 5_000_000_000,
        };
        let gloo = failure(
            &backend(Gloo, None),
            stalled,
            7,
            SimInstant::from_ns(4_000_000_000),
            SimInstant::from_ns(5_000_000_000),
            name,
        );
        assert_eq!(gloo.at.as_ns(), 605_000_000_000);
        assert!(
            gloo.reason.contains("600000 ms for a recv"),
            "{}",
            gloo.reason
        );
        let nccl = failure(
            &backend(Nccl, Some(1)),
            stalled,
            7,
            SimInstant::from_ns(4_000_000_000),
            SimInstant::from_ns(5_000_000_000),
            name,
        );
        assert_eq!(nccl.at.as_ns(), 604_000_000_000);
    }

    #[test]
    fn one_gpu_alone_costs_nothing() {
        let latency = SimDuration::from_ms(1);
        assert_eq!(
            ring_all_reduce(1 << 30, 1, 1, latency, 1, 1),
            SimDuration::ZERO
        );
    }

    #[test]
    fn ring_cost_follows_alpha_beta() {
        let us = SimDuration::from_us;
        // 2 nodes, 1 GPU each, 1 GB at 8 Gbps: 2·1/2·8e9/8e9 s = 1 s, plus 2 latencies.
        assert_eq!(
            ring_all_reduce(1_000_000_000, 2, 1, us(500), 8_000_000_000, 1),
            us(1_001_000)
        );
        // Bandwidth term tends to 2·M/B as the ring grows.
        let big = ring_all_reduce(1_000_000_000, 1000, 1, us(0), 8_000_000_000, 1).as_us();
        assert!((1_990_000..2_000_000).contains(&big), "{big}");
        // NVLink phase for 8 GPUs: 2·7/8 · 8e9 bits / 8e12 = 1750 us.
        assert_eq!(
            ring_all_reduce(1_000_000_000, 1, 8, us(0), 1, 8_000_000_000_000),
            us(1750)
        );
    }
}
