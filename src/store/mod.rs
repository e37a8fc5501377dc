//! The c10d key-value store: TCPStore's semantics as a pure state machine, plus its server
//! and client over the simulated network (`store::service`).

mod client;
pub mod cost;
pub mod event_loop;
pub mod service;
pub mod signal_gate;
pub mod value;
mod waiters;

pub use value::{Deferred, Encode, Value};

use std::collections::BTreeMap;
use std::sync::Arc;

/// The keys of a request that names several. Shared: every node of a world waits for the
/// same list of its workers' keys, and a copy per node is nodes² strings.
pub type Keys = Arc<[String]>;

/// The most keys a store holds, and the largest value it keeps.
pub const KEYS_MAX: usize = 100_000;
pub const VALUE_BYTES_MAX: usize = PAYLOAD_BYTES_MAX;
/// The largest value a request may carry (torch 2.15's libuv TCPStore, `MAX_PAYLOAD_LEN`):
/// the server closes the connection of a request with a larger one, unanswered.
pub const PAYLOAD_BYTES_MAX: usize = 8 << 20;

/// One request, as TCPStore's client sends it.
#[derive(Debug, Clone, PartialEq)]
pub enum StoreRequest {
    Set {
        key: String,
        value: Value,
    },
    /// Blocks until the key exists.
    Get {
        key: String,
    },
    Add {
        key: String,
        delta: i64,
    },
    /// Absent key: sets only when `expected` is empty. Present key: sets iff equal.
    /// Returns the value now stored (or `expected` when absent and not set, as TCPStore does).
    CompareSet {
        key: String,
        expected: Value,
        desired: Value,
    },
    /// Blocks until every key exists.
    Wait {
        keys: Keys,
    },
    Check {
        keys: Keys,
    },
    DeleteKey {
        key: String,
    },
    /// Blocks until every key exists.
    MultiGet {
        keys: Keys,
    },
    MultiSet {
        entries: Vec<(String, Value)>,
    },
    NumKeys,
    /// TCPStore's `CANCEL_WAIT`: the client stopped waiting for its blocked request, which
    /// the server drops. Changes nothing stored; answered `Done`.
    CancelWait,
}

impl StoreRequest {
    /// Whether applying it can change the contents, so blocked requests must look again.
    pub fn may_change(&self) -> bool {
        matches!(
            self,
            StoreRequest::Set { .. }
                | StoreRequest::Add { .. }
                | StoreRequest::CompareSet { .. }
                | StoreRequest::DeleteKey { .. }
                | StoreRequest::MultiSet { .. }
        )
    }

    /// Whether TCPStore's client waits for it with its timeout (`doWait`): `get`, `wait`
    /// and `multi_get`. Every other request's reply is read with no timeout at all.
    pub fn waits_for_keys(&self) -> bool {
        matches!(
            self,
            StoreRequest::Get { .. } | StoreRequest::Wait { .. } | StoreRequest::MultiGet { .. }
        )
    }

    /// The size of the first value it carries over [`PAYLOAD_BYTES_MAX`], if any: TCPStore's
    /// server checks each as it parses it, and closes the connection.
    pub fn payload_over_bound(&self) -> Option<usize> {
        let over = |v: &Value| (v.len() > PAYLOAD_BYTES_MAX).then_some(v.len());
        match self {
            StoreRequest::Set { value, .. } => over(value),
            StoreRequest::CompareSet {
                expected, desired, ..
            } => over(expected).or_else(|| over(desired)),
            StoreRequest::MultiSet { entries } => entries.iter().find_map(|(_, v)| over(v)),
            _ => None,
        }
    }

    /// The keys it reads or writes (none for `NumKeys`). A blocked request can only be
    /// unblocked by a change to one of its keys.
    pub fn keys(&self) -> Vec<&str> {
        match self {
            StoreRequest::Set { key, .. }
            | StoreRequest::Get { key }
            | StoreRequest::Add { key, .. }
            | StoreRequest::CompareSet { key, .. }
            | StoreRequest::DeleteKey { key } => vec![key.as_str()],
            StoreRequest::Wait { keys }
            | StoreRequest::Check { keys }
            | StoreRequest::MultiGet { keys } => keys.iter().map(String::as_str).collect(),
            StoreRequest::MultiSet { entries } => entries.iter().map(|(k, _)| k.as_str()).collect(),
            StoreRequest::NumKeys | StoreRequest::CancelWait => Vec::new(),
        }
    }
}

/// The server's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum StoreResponse {
    Done,
    Value(Value),
    Values(Vec<Value>),
    Int(i64),
    Bool(bool),
    /// The request was refused (a bound was exceeded or `add` found a non-integer).
    Error(String),
    /// No answer: the server closed the connection, for the reason given (a value over
    /// [`PAYLOAD_BYTES_MAX`]). The client sees its connection reset.
    Closed(String),
}

/// Where a run's store servers count what they serve: one per run, made by the runner and
/// read when the run is over.
pub type StoreStatsHandle = std::sync::Arc<std::sync::Mutex<StoreStats>>;

/// What a store served in one run: the protocol's own cost, which `trainsim bench` sets
/// against the simulator's. Not part of the trace's hash or the report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Requests answered.
    pub requests: u64,
    /// Compare-and-sets answered, and how many of them wrote.
    pub compare_sets: u64,
    pub compare_sets_landed: u64,
    /// Bytes of the values in the answers (a compare-and-set answers the value it finds).
    pub value_bytes_sent: u64,
    /// Bytes of the requests and answers on the wire (with TCPStore's framing).
    pub wire_bytes: u64,
    /// Time the server's event loop spent on the answered requests.
    pub busy_ns: u64,
    /// The simulated second (from the run's start) whose answered requests carried the most
    /// wire bytes, and those bytes.
    pub busiest_second: u64,
    pub busiest_second_wire_bytes: u64,
    /// The second being counted, and its bytes so far.
    second_now: u64,
    second_now_wire_bytes: u64,
}

/// What one answered request cost: when it was answered, and the event loop's time on it.
#[derive(Debug, Clone, Copy)]
pub struct Served {
    pub at_ns: u64,
    pub service_ns: u64,
}

impl StoreStats {
    /// Counts one answered request.
    pub fn count(&mut self, request: &StoreRequest, response: &StoreResponse, served: Served) {
        use crate::world::net::WireSize;
        self.requests += 1;
        self.busy_ns = self.busy_ns.saturating_add(served.service_ns);
        let wire_bytes = request.wire_bytes() + response.wire_bytes();
        self.wire_bytes = self.wire_bytes.saturating_add(wire_bytes);
        // Answers are counted in time order, so one open second at a time suffices.
        let second = crate::sim_time::SimInstant::from_ns(served.at_ns)
            .since_start()
            .as_secs();
        if second != self.second_now {
            self.second_now = second;
            self.second_now_wire_bytes = 0;
        }
        self.second_now_wire_bytes += wire_bytes;
        if self.second_now_wire_bytes > self.busiest_second_wire_bytes {
            self.busiest_second = second;
            self.busiest_second_wire_bytes = self.second_now_wire_bytes;
        }
        if let StoreRequest::CompareSet { desired, .. } = request {
            self.compare_sets += 1;
            if matches!(response, StoreResponse::Value(v) if Value::same(v, desired)) {
                self.compare_sets_landed += 1;
            }
        }
        self.value_bytes_sent += match response {
            StoreResponse::Value(v) => v.len() as u64,
            StoreResponse::Values(vs) => vs.iter().map(|v| v.len() as u64).sum(),
            _ => 0,
        };
    }
}

/// The store's contents.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StoreState {
    data: BTreeMap<String, Value>,
}

impl StoreState {
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of keys held.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Applies a request. `None` means it must wait for keys that do not exist yet; the
    /// server retries it after every change.
    pub fn apply(&mut self, request: &StoreRequest) -> Option<StoreResponse> {
        let reply = self.apply_unchecked(request);
        assert!(
            self.data.len() <= KEYS_MAX,
            "the store holds {} keys after {:?}, over its bound of {KEYS_MAX}",
            self.data.len(),
            request.keys().first()
        );
        reply
    }

    fn apply_unchecked(&mut self, request: &StoreRequest) -> Option<StoreResponse> {
        match request {
            StoreRequest::Set { key, value } => Some(self.set(key, value.clone())),
            StoreRequest::Get { key } => {
                self.data.get(key).map(|v| StoreResponse::Value(v.clone()))
            }
            StoreRequest::Add { key, delta } => Some(self.add(key, *delta)),
            StoreRequest::CompareSet {
                key,
                expected,
                desired,
            } => Some(self.compare_set(key, expected, desired)),
            StoreRequest::Wait { keys } => self.all_present(keys).then_some(StoreResponse::Done),
            StoreRequest::Check { keys } => Some(StoreResponse::Bool(self.all_present(keys))),
            StoreRequest::DeleteKey { key } => {
                Some(StoreResponse::Bool(self.data.remove(key).is_some()))
            }
            StoreRequest::MultiGet { keys } => self.all_present(keys).then(|| {
                StoreResponse::Values(keys.iter().map(|k| self.data[k].clone()).collect())
            }),
            StoreRequest::MultiSet { entries } => {
                for (key, value) in entries {
                    if let StoreResponse::Error(e) = self.set(key, value.clone()) {
                        return Some(StoreResponse::Error(e));
                    }
                }
                Some(StoreResponse::Done)
            }
            StoreRequest::NumKeys => Some(StoreResponse::Int(self.data.len() as i64)),
            StoreRequest::CancelWait => Some(StoreResponse::Done),
        }
    }

    /// Whether `key` holds a value.
    pub fn contains(&self, key: &str) -> bool {
        self.data.contains_key(key)
    }

    /// The bytes of the values a read of `keys` would answer now (absent keys: none).
    pub fn value_bytes<'a>(&self, keys: impl IntoIterator<Item = &'a str>) -> u64 {
        keys.into_iter()
            .filter_map(|k| self.data.get(k))
            .map(|v| v.len() as u64)
            .sum()
    }

    fn all_present(&self, keys: &[String]) -> bool {
        keys.iter().all(|k| self.data.contains_key(k))
    }

    fn set(&mut self, key: &str, value: Value) -> StoreResponse {
        assert!(
            self.data.len() <= KEYS_MAX,
            "a set of '{key}' found {} keys, over the store's bound of {KEYS_MAX}",
            self.data.len()
        );
        if value.len() > VALUE_BYTES_MAX {
            return StoreResponse::Error(format!(
                "value of {} bytes is over the store's bound of {VALUE_BYTES_MAX}",
                value.len()
            ));
        }
        if !self.data.contains_key(key) && self.data.len() >= KEYS_MAX {
            return StoreResponse::Error(format!("the store is full ({KEYS_MAX} keys)"));
        }
        self.data.insert(key.to_owned(), value.clone());
        self.assert_holds(key, &value, "set");
        StoreResponse::Done
    }

    /// After a write: `key` holds this very value (shared, so no bytes are compared).
    fn assert_holds(&self, key: &str, value: &Value, what: &str) {
        assert!(
            self.data
                .get(key)
                .is_some_and(|held| Value::same(held, value)),
            "after a {what} of '{key}' the store holds {:?} bytes there, not the value written",
            self.data.get(key).map(|held| held.len())
        );
    }

    /// TCPStore keeps counters as decimal text, so `get` of a counter reads its digits.
    fn add(&mut self, key: &str, delta: i64) -> StoreResponse {
        let current = match self.data.get(key) {
            None => 0,
            Some(bytes) => match std::str::from_utf8(bytes)
                .ok()
                .and_then(|s| s.parse::<i64>().ok())
            {
                Some(v) => v,
                None => return StoreResponse::Error(format!("add on non-integer key '{key}'")),
            },
        };
        let next = current.wrapping_add(delta);
        match self.set(key, Value::from(next.to_string().into_bytes())) {
            StoreResponse::Done => StoreResponse::Int(next),
            error => error,
        }
    }

    fn compare_set(&mut self, key: &str, expected: &Value, desired: &Value) -> StoreResponse {
        match self.data.get(key) {
            None if expected.is_empty() => match self.set(key, desired.clone()) {
                StoreResponse::Done => StoreResponse::Value(desired.clone()),
                error => error,
            },
            // TCPStore answers an absent key with the expected value it was given.
            None => StoreResponse::Value(expected.clone()),
            // Through `set`, so a swap is held to the same value bound as a first write.
            Some(current) if current == expected => match self.set(key, desired.clone()) {
                StoreResponse::Done => StoreResponse::Value(desired.clone()),
                error => error,
            },
            Some(current) => StoreResponse::Value(current.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cas(s: &mut StoreState, k: &str, e: &str, d: &str) -> Option<StoreResponse> {
        s.apply(&StoreRequest::CompareSet {
            key: k.into(),
            expected: e.as_bytes().into(),
            desired: d.as_bytes().into(),
        })
    }

    #[test]
    fn a_swap_over_the_value_bound_is_refused_and_leaves_the_value() {
        let mut s = StoreState::new();
        assert_eq!(
            cas(&mut s, "k", "", "a"),
            Some(StoreResponse::Value(b"a"[..].into()))
        );
        let huge = Value::from(vec![b'x'; VALUE_BYTES_MAX + 1]);
        let swap = StoreRequest::CompareSet {
            key: "k".into(),
            expected: b"a"[..].into(),
            desired: huge,
        };
        assert!(matches!(s.apply(&swap), Some(StoreResponse::Error(e)) if e.contains("bound")));
        assert_eq!(
            cas(&mut s, "k", "a", "b"),
            Some(StoreResponse::Value(b"b"[..].into()))
        );
    }

    #[test]
    fn compare_set_follows_tcpstore() {
        let mut s = StoreState::new();
        assert_eq!(
            cas(&mut s, "k", "x", "y"),
            Some(StoreResponse::Value(b"x"[..].into()))
        );
        assert_eq!(
            s.len(),
            0,
            "absent key with non-empty expected sets nothing"
        );
        assert_eq!(
            cas(&mut s, "k", "", "a"),
            Some(StoreResponse::Value(b"a"[..].into()))
        );
        assert_eq!(
            cas(&mut s, "k", "zz", "b"),
            Some(StoreResponse::Value(b"a"[..].into()))
        );
        assert_eq!(
            cas(&mut s, "k", "a", "b"),
            Some(StoreResponse::Value(b"b"[..].into()))
        );
    }

    #[test]
    fn get_and_wait_block_until_set() {
        let mut s = StoreState::new();
        assert_eq!(s.apply(&StoreRequest::Get { key: "k".into() }), None);
        assert_eq!(
            s.apply(&StoreRequest::Wait {
                keys: vec!["k".into()].into()
            }),
            None
        );
        s.apply(&StoreRequest::Set {
            key: "k".into(),
            value: b"v"[..].into(),
        });
        assert_eq!(
            s.apply(&StoreRequest::Get { key: "k".into() }),
            Some(StoreResponse::Value(b"v"[..].into()))
        );
        assert_eq!(
            s.apply(&StoreRequest::Wait {
                keys: vec!["k".into()].into()
            }),
            Some(StoreResponse::Done)
        );
    }

    #[test]
    fn add_counts_in_decimal_text() {
        let mut s = StoreState::new();
        assert_eq!(
            s.apply(&StoreRequest::Add {
                key: "c".into(),
                delta: 2
            }),
            Some(StoreResponse::Int(2))
        );
        assert_eq!(
            s.apply(&StoreRequest::Add {
                key: "c".into(),
                delta: 3
            }),
            Some(StoreResponse::Int(5))
        );
        assert_eq!(
            s.apply(&StoreRequest::Get { key: "c".into() }),
            Some(StoreResponse::Value(b"5"[..].into()))
        );
        s.apply(&StoreRequest::Set {
            key: "t".into(),
            value: b"x"[..].into(),
        });
        assert!(matches!(
            s.apply(&StoreRequest::Add {
                key: "t".into(),
                delta: 1
            }),
            Some(StoreResponse::Error(_))
        ));
    }

    #[test]
    #[should_panic(expected = "a set of 'k' found 100001 keys, over the store's bound of 100000")]
    fn a_store_over_its_key_bound_fires() {
        let mut s = StoreState::new();
        for i in 0..=KEYS_MAX {
            s.data.insert(i.to_string(), Value::from(&b"v"[..]));
        }
        s.apply(&StoreRequest::Set {
            key: "k".into(),
            value: b"v"[..].into(),
        });
    }

    #[test]
    fn multi_ops_check_and_delete() {
        let mut s = StoreState::new();
        let entries = vec![
            ("a".to_string(), b"1"[..].into()),
            ("b".to_string(), b"2"[..].into()),
        ];
        s.apply(&StoreRequest::MultiSet { entries });
        let keys: Keys = vec!["a".to_string(), "b".to_string()].into();
        assert_eq!(
            s.apply(&StoreRequest::MultiGet { keys: keys.clone() }),
            Some(StoreResponse::Values(vec![
                b"1"[..].into(),
                b"2"[..].into()
            ]))
        );
        assert_eq!(
            s.apply(&StoreRequest::Check { keys: keys.clone() }),
            Some(StoreResponse::Bool(true))
        );
        assert_eq!(
            s.apply(&StoreRequest::DeleteKey { key: "a".into() }),
            Some(StoreResponse::Bool(true))
        );
        assert_eq!(
            s.apply(&StoreRequest::Check { keys }),
            Some(StoreResponse::Bool(false))
        );
        assert_eq!(s.apply(&StoreRequest::NumKeys), Some(StoreResponse::Int(1)));
    }
}
