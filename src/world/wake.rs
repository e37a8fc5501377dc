//! A level-triggered wake-up between simulated tasks: anyone may `notify`, one waiter at a
//! time `wait`s for it. The agent's monitor sleeps on one instead of ticking through
//! intervals in which nothing it looks at can change.

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};

/// A flag with at most one waiting task. `notify` sets it and wakes the waiter; the flag
/// stays set until `clear`, so a notify is never lost between two waits.
#[derive(Default)]
pub struct Wake {
    inner: Mutex<WakeInner>,
}

#[derive(Default)]
struct WakeInner {
    notified: bool,
    waiter: Option<Waker>,
}

impl Wake {
    /// Sets the flag and wakes the waiting task, if any.
    pub fn notify(&self) {
        let waiter = {
            let mut inner = self.inner.lock().expect("wake lock");
            inner.notified = true;
            inner.waiter.take()
        };
        if let Some(waker) = waiter {
            waker.wake();
        }
    }

    /// Forgets every notify so far.
    pub fn clear(&self) {
        self.inner.lock().expect("wake lock").notified = false;
    }

    /// Resolves once the flag is set (at once if it already is); leaves it set.
    pub fn notified(&self) -> Notified<'_> {
        Notified { wake: self }
    }
}

/// The future of [`Wake::notified`].
pub struct Notified<'a> {
    wake: &'a Wake,
}

impl Future for Notified<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut inner = self.wake.inner.lock().expect("wake lock");
        if inner.notified {
            inner.waiter = None;
            return Poll::Ready(());
        }
        inner.waiter = Some(cx.waker().clone());
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;

    #[test]
    fn a_notify_before_the_wait_is_kept_until_cleared() {
        let wake = Wake::default();
        assert!(wake.notified().now_or_never().is_none());
        wake.notify();
        assert!(wake.notified().now_or_never().is_some());
        assert!(wake.notified().now_or_never().is_some());
        wake.clear();
        assert!(wake.notified().now_or_never().is_none());
    }
}
