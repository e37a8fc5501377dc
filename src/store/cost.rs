//! What the c10d store's requests cost in time and bytes: the server's one event loop, the
//! rendezvous clients' encoding of their state, and each request's size on the wire.
//!
//! The figures are torch 2.15's TCPStore (its default libuv server) measured on localhost
//! by `conformance/measure_store.py`: the server process's CPU time per request, with the
//! client in another process, for each request kind and value size. They are recorded in
//! docs/fidelity.md ("What the store costs"). `[cluster] store_cost_scale` multiplies them
//! all (0 makes the store free).

use super::{StoreRequest, StoreResponse, Value};
use crate::world::net::{ReplyCpu, WireSize};

/// A request that carries no value: `check`, `add`, `num_keys`, `delete_key`, a `wait`'s
/// registration, `CANCEL_WAIT`.
const SMALL_REQUEST_NS: u64 = 20_000;
/// `get` and `multi_get`'s read (after the `WAIT` each sends first, a small request): a
/// fixed part, and the reply's bytes. The calibration timed the two together (45 µs).
const GET_NS: u64 = 25_000;
const GET_PS_PER_REPLY_BYTE: u64 = 210;
/// `set` and `multi_set`: a fixed part, and the value's bytes.
const SET_NS: u64 = 10_000;
const SET_PS_PER_VALUE_BYTE: u64 = 620;
/// `compare_set`, by the size of the larger of its two values (the expected value is the
/// last state the client saw, the desired one its new state: about the same size). The
/// server's time grows faster than the bytes from about 100 kB on; between two measured
/// sizes it is interpolated, past the last one extended along the last segment.
const COMPARE_SET_NS_BY_BYTES: [(u64, u64); 8] = [
    (0, 22_000),
    (1_000, 23_000),
    (10_000, 41_000),
    (100_000, 255_000),
    (200_000, 780_000),
    (400_000, 3_700_000),
    (700_000, 13_000_000),
    (1_000_000, 19_000_000),
];
/// How much more the server's time per request is for every doubling of the sockets a
/// pass reads: its CPU per compare-and-set of 400 kB was 1.30, 1.33 and 1.38 times one
/// client's with 16, 64 and 256 clients sending them at once (`measure_store.py storm`).
const JUGGLING_PER_DOUBLING: f64 = 0.05;
/// A rendezvous client's pickling and base64 of its state before a compare-and-set, and
/// the reverse on every state it reads back, per byte of the encoded state (torch's own
/// `_RendezvousState` of 64 to 4,096 nodes, 6.7 kB to 435 kB).
const STATE_ENCODE_PS_PER_BYTE: u64 = 27_000;
const STATE_DECODE_PS_PER_BYTE: u64 = 23_000;
/// TCPStore's framing: a command byte, and a length before every key and value.
const COMMAND_BYTES: u64 = 1;
const LENGTH_BYTES: u64 = 8;

/// The store's costs in one run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StoreCosts {
    scale: f64,
}

impl StoreCosts {
    /// The calibrated costs times `scale` (`[cluster] store_cost_scale`).
    pub fn scaled(scale: f64) -> Self {
        assert!(
            scale.is_finite() && scale >= 0.0,
            "a store cost scale of {scale}"
        );
        StoreCosts { scale }
    }

    /// A store that costs no time: requests are answered the moment they are taken.
    pub fn free() -> Self {
        StoreCosts { scale: 0.0 }
    }

    fn scale_ns(&self, ns: u64) -> u64 {
        // Saturates: a cost past u64 nanoseconds is far past every time limit.
        (ns as f64 * self.scale).round() as u64
    }

    /// How long the server's event loop is busy with `request`; `reply_bytes` is the size of
    /// the values it will answer (for a `get`, the value it finds).
    pub fn service_ns(&self, request: &StoreRequest, reply_bytes: u64) -> u64 {
        let ns = match request {
            StoreRequest::Get { .. } | StoreRequest::MultiGet { .. } => {
                GET_NS + reply_bytes * GET_PS_PER_REPLY_BYTE / 1_000
            }
            StoreRequest::Set { value, .. } => {
                SET_NS + value.len() as u64 * SET_PS_PER_VALUE_BYTE / 1_000
            }
            StoreRequest::MultiSet { entries } => {
                let bytes: u64 = entries.iter().map(|(_, v)| v.len() as u64).sum();
                SET_NS + bytes * SET_PS_PER_VALUE_BYTE / 1_000
            }
            StoreRequest::CompareSet {
                expected, desired, ..
            } => compare_set_ns(expected.len().max(desired.len()) as u64),
            StoreRequest::Add { .. }
            | StoreRequest::Wait { .. }
            | StoreRequest::Check { .. }
            | StoreRequest::DeleteKey { .. }
            | StoreRequest::NumKeys
            | StoreRequest::CancelWait => SMALL_REQUEST_NS,
        };
        self.scale_ns(ns)
    }

    /// What a pass of the event loop over `sockets` sockets with data costs, as a factor of
    /// its requests' own costs: the server's time per request grows with the clients it
    /// serves at once (`measure_store.py storm`).
    pub fn juggling_factor(&self, sockets: usize) -> f64 {
        1.0 + JUGGLING_PER_DOUBLING * (sockets.max(1) as f64).log2()
    }

    /// A rendezvous client's time to pickle and encode a state of `bytes` (encoded).
    pub fn state_encode_ns(&self, bytes: usize) -> u64 {
        self.scale_ns(bytes as u64 * STATE_ENCODE_PS_PER_BYTE / 1_000)
    }

    /// A rendezvous client's time to decode and unpickle a state of `bytes` (encoded).
    pub fn state_decode_ns(&self, bytes: usize) -> u64 {
        self.scale_ns(bytes as u64 * STATE_DECODE_PS_PER_BYTE / 1_000)
    }

    /// The CPU torch spends decoding the state a store reply carries, before it acts on it:
    /// what a rendezvous client's reads and compare-and-sets of the state cost after the
    /// reply (`CallCpu::after`).
    pub fn state_decoding(self) -> ReplyCpu {
        std::sync::Arc::new(move |reply: &(dyn std::any::Any + Send + Sync)| {
            match reply.downcast_ref::<StoreResponse>() {
                Some(StoreResponse::Value(stored)) => self.state_decode_ns(stored.len()),
                _ => 0,
            }
        })
    }
}

/// The server's time for a compare-and-set whose larger value has `bytes`.
fn compare_set_ns(bytes: u64) -> u64 {
    let table = &COMPARE_SET_NS_BY_BYTES;
    let segment = table
        .windows(2)
        .find(|w| bytes <= w[1].0)
        .unwrap_or(&table[table.len() - 2..]);
    let ((b0, ns0), (b1, ns1)) = (segment[0], segment[1]);
    // Within the segment, or past the last one along its slope (ns1 > ns0, b1 > b0).
    let slope_num = ns1 - ns0;
    let span = b1 - b0;
    let beyond = bytes.saturating_sub(b0);
    ns0.saturating_add(
        u64::try_from(u128::from(beyond) * u128::from(slope_num) / u128::from(span))
            .unwrap_or(u64::MAX),
    )
}

fn value_bytes(value: &Value) -> u64 {
    LENGTH_BYTES + value.len() as u64
}

fn keys_bytes<'a>(keys: impl Iterator<Item = &'a String>) -> u64 {
    keys.map(|k| LENGTH_BYTES + k.len() as u64).sum::<u64>() + LENGTH_BYTES
}

impl WireSize for StoreRequest {
    fn wire_bytes(&self) -> u64 {
        let body = match self {
            StoreRequest::Set { key, value } => {
                LENGTH_BYTES + key.len() as u64 + value_bytes(value)
            }
            StoreRequest::Get { key } | StoreRequest::DeleteKey { key } => {
                LENGTH_BYTES + key.len() as u64
            }
            StoreRequest::Add { key, .. } => LENGTH_BYTES + key.len() as u64 + 8,
            StoreRequest::CompareSet {
                key,
                expected,
                desired,
            } => LENGTH_BYTES + key.len() as u64 + value_bytes(expected) + value_bytes(desired),
            StoreRequest::Wait { keys }
            | StoreRequest::Check { keys }
            | StoreRequest::MultiGet { keys } => keys_bytes(keys.iter()),
            StoreRequest::MultiSet { entries } => {
                keys_bytes(entries.iter().map(|(k, _)| k))
                    + entries.iter().map(|(_, v)| value_bytes(v)).sum::<u64>()
            }
            StoreRequest::NumKeys | StoreRequest::CancelWait => 0,
        };
        COMMAND_BYTES + body
    }
}

impl WireSize for StoreResponse {
    fn wire_bytes(&self) -> u64 {
        match self {
            StoreResponse::Done | StoreResponse::Bool(_) => 1,
            StoreResponse::Int(_) => 8,
            StoreResponse::Value(v) => value_bytes(v),
            StoreResponse::Values(vs) => vs.iter().map(value_bytes).sum(),
            StoreResponse::Error(message) => LENGTH_BYTES + message.len() as u64,
            // Nothing is sent: the connection closes.
            StoreResponse::Closed(_) => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cas(bytes: usize) -> StoreRequest {
        StoreRequest::CompareSet {
            key: "k".into(),
            expected: Value::from(vec![b'a'; bytes]),
            desired: Value::from(vec![b'b'; bytes]),
        }
    }

    #[test]
    fn a_compare_set_costs_the_measured_time_of_its_size() {
        let costs = StoreCosts::scaled(1.0);
        assert_eq!(costs.service_ns(&cas(400_000), 0), 3_700_000);
        // Halfway between 100 kB and 200 kB.
        assert_eq!(costs.service_ns(&cas(150_000), 0), (255_000 + 780_000) / 2);
        // Past the last measured size along the last segment's slope: 2 ms more per 100 kB.
        assert_eq!(costs.service_ns(&cas(1_300_000), 0), 19_000_000 + 6_000_000);
    }

    #[test]
    fn a_get_costs_its_reply_bytes_and_the_scale_multiplies_everything() {
        let get = StoreRequest::Get { key: "k".into() };
        assert_eq!(StoreCosts::scaled(1.0).service_ns(&get, 1_000_000), 235_000);
        assert_eq!(StoreCosts::scaled(2.0).service_ns(&get, 1_000_000), 470_000);
        assert_eq!(StoreCosts::free().service_ns(&cas(1_000_000), 0), 0);
        assert_eq!(StoreCosts::scaled(0.5).state_encode_ns(100_000), 1_350_000);
    }

    #[test]
    fn a_compare_set_carries_both_values_on_the_wire() {
        assert_eq!(cas(1_000).wire_bytes(), 1 + 8 + 1 + 2 * (8 + 1_000));
        let reply = StoreResponse::Value(Value::from(vec![0; 500]));
        assert_eq!(reply.wire_bytes(), 508);
    }
}
