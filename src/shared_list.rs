//! Lists that many simulated processes hold equal copies of, kept once per run.
//!
//! In torch every process builds its own copy of a round's participant list or of the keys
//! its workers wait for; here the nodes of a run share one address space, and a copy per
//! node makes those lists cost nodes² strings: at 1 024 nodes, most of the heap. A
//! [`SharedList`] hands a node the list an earlier node built when the two are equal, so
//! sharing never changes what a node sees. Each run takes its own from `NodeEnv::shared`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// Distinct lists a [`SharedList`] keeps. Nodes build a few different lists at about the
/// same time (a round's address keys and its connected keys, two rounds' participants), so
/// a few entries keep them from evicting each other.
pub const SHARED_LISTS_MAX: usize = 4;

/// The latest distinct lists handed out, newest first.
pub struct SharedList<T> {
    latest: Mutex<VecDeque<Arc<[T]>>>,
}

impl<T> Default for SharedList<T> {
    fn default() -> Self {
        SharedList {
            latest: Mutex::new(VecDeque::with_capacity(SHARED_LISTS_MAX)),
        }
    }
}

impl<T: PartialEq> SharedList<T> {
    /// `list` as a shared list: one handed out before when it is equal.
    pub fn intern(&self, list: Vec<T>) -> Arc<[T]> {
        let mut latest = self.latest.lock().expect("shared list lock");
        if let Some(shared) = latest.iter().find(|shared| ***shared == *list) {
            return Arc::clone(shared);
        }
        let shared: Arc<[T]> = list.into();
        latest.push_front(Arc::clone(&shared));
        latest.truncate(SHARED_LISTS_MAX);
        shared
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn equal_lists_are_one_list() {
        let lists = SharedList::default();
        let first = lists.intern(list(&["node-0", "node-1"]));
        let second = lists.intern(list(&["node-0", "node-1"]));
        assert!(Arc::ptr_eq(&first, &second));
        let other = lists.intern(list(&["node-0"]));
        assert_eq!(*other, *list(&["node-0"]));
        assert!(!Arc::ptr_eq(&first, &other));
    }

    #[test]
    fn lists_built_in_turn_stay_shared() {
        let lists = SharedList::default();
        let addresses = lists.intern(list(&["/worker/rank_0", "/worker/rank_8"]));
        let connected = lists.intern(list(&["/worker/connected/rank_0"]));
        assert!(Arc::ptr_eq(
            &addresses,
            &lists.intern(list(&["/worker/rank_0", "/worker/rank_8"]))
        ));
        assert!(Arc::ptr_eq(
            &connected,
            &lists.intern(list(&["/worker/connected/rank_0"]))
        ));
    }

    #[test]
    fn only_the_latest_lists_are_kept() {
        let lists = SharedList::default();
        let oldest = lists.intern(list(&["0"]));
        for i in 1..=SHARED_LISTS_MAX {
            lists.intern(list(&[&i.to_string()]));
        }
        assert!(!Arc::ptr_eq(&oldest, &lists.intern(list(&["0"]))));
    }
}
