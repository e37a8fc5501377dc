//! The server's blocked requests: woken once their last missing key appears.

use super::*;
use crate::store::StoreRequest;

#[test]
fn a_request_is_woken_once_its_last_missing_key_appears() {
    let mut state = StoreState::new();
    let mut waiters = Waiters::default();
    let (tx, mut rx) = oneshot::channel();
    waiters.add(&["a", "b"], &state, tx);
    state.apply(&StoreRequest::Set {
        key: "a".into(),
        value: b"1"[..].into(),
    });
    waiters.wake(&["a"], &state);
    assert_eq!(rx.try_recv(), Ok(None));
    state.apply(&StoreRequest::Set {
        key: "b".into(),
        value: b"2"[..].into(),
    });
    waiters.wake(&["b"], &state);
    assert_eq!(rx.try_recv(), Ok(Some(())));
    assert!(waiters.is_empty() && waiters.by_key.is_empty());
}

#[test]
#[should_panic(expected = "blocked request 7 waits on 'k' but is not registered")]
fn a_listed_request_that_is_not_registered_fires() {
    let mut state = StoreState::new();
    state.apply(&StoreRequest::Set {
        key: "k".into(),
        value: b"1"[..].into(),
    });
    let mut waiters = Waiters::default();
    waiters.by_key.insert("k".into(), vec![7]);
    waiters.wake(&["k"], &state);
}
