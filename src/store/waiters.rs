//! The store server's blocked requests: each waits on the keys it still misses, and is woken
//! once the last of them appears.

use super::StoreState;
use futures::channel::oneshot;
use std::collections::{BTreeMap, BTreeSet};

/// Blocked requests, as TCPStore keeps them: each waits on the keys it still misses, and is
/// woken once the last of them appears (TCPStore's `keysAwaited_` count), never by a write
/// to a key it already has. Scanning every waiter's keys on every write, and waking a
/// request for any change to any of its keys, made the workers' bootstrap of N nodes (each
/// waiting for all N ranks' keys) cost O(N³).
#[derive(Default)]
pub(super) struct Waiters {
    next_id: u64,
    /// Each blocked request's wake-up and how many of its keys are still missing, by the
    /// order in which it blocked.
    by_id: BTreeMap<u64, (oneshot::Sender<()>, usize)>,
    /// The requests waiting for each missing key, in the order they blocked.
    by_key: BTreeMap<String, Vec<u64>>,
}

impl Waiters {
    pub(super) fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Blocks a request on the keys of `keys` that `state` lacks.
    pub(super) fn add(&mut self, keys: &[&str], state: &StoreState, wake: oneshot::Sender<()>) {
        let id = self.next_id;
        self.next_id = id.checked_add(1).expect("blocked request ids overflow u64");
        let mut missing = 0;
        for key in keys.iter().filter(|k| !state.contains(k)) {
            missing += 1;
            match self.by_key.get_mut(*key) {
                Some(ids) => ids.push(id),
                None => {
                    self.by_key.insert((*key).to_owned(), vec![id]);
                }
            }
        }
        if missing == 0 {
            // Nothing to wait for after all: let it look again.
            let _ = wake.send(());
            return;
        }
        let earlier = self.by_id.insert(id, (wake, missing));
        assert!(
            earlier.is_none(),
            "blocked request id {id} was handed out twice"
        );
    }

    /// A write touched `changed`: requests whose last missing key now holds a value are
    /// woken, oldest first.
    pub(super) fn wake(&mut self, changed: &[&str], state: &StoreState) {
        let mut woken = BTreeSet::new();
        for key in changed.iter().filter(|k| state.contains(k)) {
            for id in self.by_key.remove(*key).unwrap_or_default() {
                // A request leaves `by_id` only once its last missing key appeared, which
                // took it off every key's list: a listed id is always registered.
                let Some((_, missing)) = self.by_id.get_mut(&id) else {
                    panic!("blocked request {id} waits on '{key}' but is not registered");
                };
                // Registered once per missing key, so never below zero.
                *missing = missing.checked_sub(1).unwrap_or_else(|| {
                    panic!("blocked request {id} had no missing key left when '{key}' appeared")
                });
                if *missing == 0 {
                    woken.insert(id);
                }
            }
        }
        for id in woken {
            let (wake, _) = self
                .by_id
                .remove(&id)
                .expect("a woken request is registered until woken");
            // The request may have timed out meanwhile; its receiver is gone then.
            let _ = wake.send(());
        }
    }
}

#[cfg(test)]
#[path = "waiters_tests.rs"]
mod tests;
