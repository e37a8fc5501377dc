//! Decoded rendezvous states shared between the nodes of one run, so the simulator does not
//! pay per node what torch pays per process.
//!
//! In torch every process decodes the state it reads; here every node of a run reads the same
//! few latest byte strings, so each distinct state is decoded once per run and handed out as
//! an `Arc`. A written value carries the state it encodes (decoding canonical bytes gives
//! that state back), so its readers never parse it at all.
//! The cache memoizes a pure function, so it cannot change a run.
//!
//! The cache is an explicit value, [`DecodedStates`], not ambient state: the rendezvous
//! handler of each node takes the run's one instance from `NodeEnv::shared`, which the world
//! keeps per run and drops with it. This module stays pure (no world, no thread-locals), a
//! cache never outlives its run, and a test or benchmark makes its own.

use super::settings::RendezvousSettings;
use super::state::{DecodeError, RendezvousState};
use crate::store::Value;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// Distinct states the cache keeps. Reads answered before a write can arrive after it, so
/// the two or three latest states are in use at once; a few more entries stop them evicting
/// each other.
pub const DECODED_CACHE_MAX: usize = 4;

/// A decoded state, shared, with its oldest heartbeat (for the sanitize shortcut).
#[derive(Clone, Debug)]
pub struct SharedState {
    pub state: Arc<RendezvousState>,
    /// The smallest value in `last_heartbeats`, `None` when there is none.
    pub oldest_heartbeat_us: Option<i64>,
    /// The state with the skipped keep-alives of the quiet windows closed so far applied
    /// (`skipped_beats::apply`), by the world's count of those windows: every node that
    /// reads this state after the same window raises the same stamps, so the first does it
    /// for all (shared by the clones of this value).
    raised: Arc<Mutex<Option<RaisedUnder>>>,
}

/// A board generation and the state raised under it.
type RaisedUnder = (u64, Arc<RendezvousState>);

impl SharedState {
    /// Wraps a state, computing its oldest heartbeat.
    pub fn new(state: Arc<RendezvousState>) -> Self {
        let oldest_heartbeat_us = state.last_heartbeats.values().min().copied();
        SharedState {
            state,
            oldest_heartbeat_us,
            raised: Arc::default(),
        }
    }

    /// The state raised to the skipped keep-alives of board generation `generation`, if a
    /// reader already raised it.
    pub fn raised_under(&self, generation: u64) -> Option<Arc<RendezvousState>> {
        let raised = self.raised.lock().expect("raised state lock");
        raised
            .as_ref()
            .filter(|(kept, _)| *kept == generation)
            .map(|(_, state)| Arc::clone(state))
    }

    /// Keeps `state` as this state raised under board generation `generation`.
    pub fn keep_raised(&self, generation: u64, state: &Arc<RendezvousState>) {
        *self.raised.lock().expect("raised state lock") = Some((generation, Arc::clone(state)));
    }

    /// Whether `sanitize` could drop a node at `now_utc_us`: it drops exactly the nodes whose
    /// heartbeat is strictly older than `now − heartbeat expiry`, so when even the oldest
    /// heartbeat is not, the sanitized state is this one and the copy can be skipped.
    pub fn may_expire(&self, settings: &RendezvousSettings, now_utc_us: i64) -> bool {
        let expire_us = crate::sim_time::reading_before(now_utc_us, settings.heartbeat_expiry());
        self.oldest_heartbeat_us
            .is_some_and(|oldest_us| oldest_us < expire_us)
    }
}

/// The latest distinct states decoded or written in one run, newest first.
#[derive(Default)]
pub struct DecodedStates {
    // Processes of a run are tasks on the run's one thread, but a `NodeEnv::shared` value
    // must be `Sync`: the lock is never contended.
    latest: Mutex<VecDeque<(Value, SharedState)>>,
}

impl DecodedStates {
    /// `RendezvousState::decode`, memoized for the latest few values. A value made from a
    /// state (a write) gives that state back without parsing: decoding canonical bytes would
    /// too.
    pub fn decode(&self, bytes: &Value) -> Result<SharedState, DecodeError> {
        if let Some(hit) = self.lookup(bytes) {
            return Ok(hit);
        }
        let state = match bytes.source::<RendezvousState>() {
            Some(state) => state,
            None => Arc::new(RendezvousState::decode(bytes)?),
        };
        let shared = SharedState::new(state);
        self.insert(bytes, shared.clone());
        Ok(shared)
    }

    fn lookup(&self, bytes: &Value) -> Option<SharedState> {
        let mut latest = self.latest.lock().expect("decoded states lock");
        // Values read from the store are shared, so a hit is an identity check. A value made
        // from a state is not compared by content (two states that differ in one heartbeat
        // are walked, a deferred one is made): a miss takes its state as cheaply.
        let at = latest
            .iter()
            .position(|(b, _)| Value::same(b, bytes))
            .or_else(|| {
                let parsed = !bytes.is_made_from::<RendezvousState>();
                parsed.then(|| latest.iter().position(|(b, _)| b == bytes))?
            })?;
        let entry = latest.remove(at).expect("position found the entry");
        let shared = entry.1.clone();
        latest.push_front(entry);
        Some(shared)
    }

    /// Caches a value that [`DecodedStates::lookup`] just missed; a value already cached
    /// would be served twice from one slot and push a live state out.
    fn insert(&self, bytes: &Value, shared: SharedState) {
        let mut latest = self.latest.lock().expect("decoded states lock");
        if let Some(at) = latest.iter().position(|(b, _)| Value::same(b, bytes)) {
            panic!(
                "a decoded state is cached twice (at {at} of {})",
                latest.len()
            );
        }
        latest.push_front((bytes.clone(), shared));
        latest.truncate(DECODED_CACHE_MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rendezvous::sanitize::sanitize;
    use crate::rendezvous::state::NodeDesc;

    fn state(heartbeats: &[(&str, i64)]) -> RendezvousState {
        let mut s = RendezvousState::default();
        for (i, (addr, at_us)) in heartbeats.iter().enumerate() {
            let node = NodeDesc::new(*addr, 1, 0);
            s.participants.insert(node.clone(), i as u32);
            s.last_heartbeats.insert(node, *at_us);
        }
        s.complete = true;
        s
    }

    #[test]
    fn a_raised_state_is_shared_by_the_values_clones_under_its_generation_only() {
        let shared = SharedState::new(Arc::new(state(&[("a", 5)])));
        let clone = shared.clone();
        assert!(clone.raised_under(1).is_none());
        let raised = Arc::new(state(&[("a", 9)]));
        shared.keep_raised(1, &raised);
        let got = clone.raised_under(1).expect("kept for every clone");
        assert!(Arc::ptr_eq(&got, &raised));
        assert!(
            clone.raised_under(2).is_none(),
            "another generation raises anew"
        );
        assert!(
            SharedState::new(Arc::clone(&shared.state))
                .raised_under(1)
                .is_none(),
            "a new wrapping of the state keeps its own"
        );
    }

    #[test]
    fn decode_is_memoized_and_equal_to_a_fresh_decode() {
        let cache = DecodedStates::default();
        let decode = |bytes: &Value| cache.decode(bytes);
        let s = state(&[("a", 5), ("b", 7)]);
        let bytes = Value::from(s.encode());
        let first = decode(&bytes).expect("decodes");
        let second = decode(&bytes).expect("decodes");
        assert!(Arc::ptr_eq(&first.state, &second.state));
        assert_eq!(*first.state, s);
        assert_eq!(first.oldest_heartbeat_us, Some(5));
        assert!(decode(&Value::from(&b"nope"[..])).is_err());
        // Equal bytes in another allocation hit the cache too.
        let copy = Value::from(s.encode());
        assert!(Arc::ptr_eq(
            &decode(&copy).expect("decodes").state,
            &first.state
        ));
    }

    #[test]
    fn a_written_state_is_what_readers_get() {
        let cache = DecodedStates::default();
        let decode = |bytes: &Value| cache.decode(bytes);
        let s = Arc::new(state(&[("a", 1)]));
        let bytes = Value::lazy(Arc::clone(&s));
        let read = decode(&bytes).expect("decodes");
        assert!(Arc::ptr_eq(&s, &read.state));
        assert_eq!(RendezvousState::decode(&bytes).expect("decodes"), *s);
        for i in 0..DECODED_CACHE_MAX as i64 {
            decode(&Value::from(state(&[("b", i)]).encode())).expect("decodes");
        }
        let copy = Value::from(bytes.to_vec());
        let evicted = decode(&copy).expect("decodes");
        assert!(!Arc::ptr_eq(&s, &evicted.state));
        assert_eq!(*evicted.state, *s);
    }

    #[test]
    #[should_panic(expected = "a decoded state is cached twice (at 0 of 1)")]
    fn caching_a_value_twice_fires() {
        let cache = DecodedStates::default();
        let bytes = Value::from(state(&[("a", 1)]).encode());
        let shared = cache.decode(&bytes).expect("decodes");
        cache.insert(&bytes, shared);
    }

    /// The shortcut never skips a sanitize that would change the state.
    #[test]
    fn may_expire_is_false_only_when_sanitize_changes_nothing() {
        let settings = RendezvousSettings::new("r", 1, 3);
        let expiry_us = crate::sim_time::clock_span(settings.heartbeat_expiry());
        let now_us = 1_000_000_000;
        for oldest_us in [now_us - expiry_us - 1, now_us - expiry_us, now_us] {
            let s = state(&[("a", oldest_us), ("b", now_us)]);
            let shared = SharedState::new(Arc::new(s.clone()));
            let mut sanitized = s.clone();
            sanitize(&mut sanitized, &settings, now_us);
            assert_eq!(shared.may_expire(&settings, now_us), sanitized != s);
        }
        let empty = SharedState::new(Arc::new(RendezvousState::default()));
        assert!(!empty.may_expire(&settings, now_us));
    }
}
