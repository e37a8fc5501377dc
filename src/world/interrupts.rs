//! A handled signal as a process's main thread meets it inside a blocking store call: the
//! call's reply timeout starts again from the signal.
//!
//! torch's TCPStore client waits for a reply in a blocking `recv` with `SO_RCVTIMEO`, or in
//! `poll` with the call's timeout, and retries either on `EINTR` with the full timeout
//! again, not with what was left of it (measured on torch 2.15.0: a 6 s `wait` interrupted
//! at 1 s raised its timeout at 7.0 s). A signal interrupts only the thread the kernel
//! delivers it to, the main thread, which never blocks it; the rendezvous keep-alive
//! thread's calls keep their deadlines.
//!
//! The main thread is a future: [`InterruptibleThread`] marks its polls, so a call that
//! begins during one (its first poll sends the request) takes that thread's [`Interrupts`]
//! with it. The world is one thread per run, so the mark is a thread-local.

use crate::sim_time::{SimDuration, SimInstant};
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

/// When a process's main thread last took a signal through a handler.
#[derive(Default)]
pub struct Interrupts {
    last: Mutex<Option<SimInstant>>,
}

impl Interrupts {
    /// A handled signal reaches the main thread at `at` (now).
    pub fn interrupt(&self, at: SimInstant) {
        *self.last.lock().expect("interrupts lock") = Some(at);
    }

    /// When a call that began at `started` and would have stopped waiting at `deadline`
    /// stops: `timeout` after the last signal that came while it waited, if one did.
    pub fn deadline(
        &self,
        started: SimInstant,
        deadline: SimInstant,
        timeout: SimDuration,
    ) -> SimInstant {
        match *self.last.lock().expect("interrupts lock") {
            Some(at) if at >= started && at < deadline => deadline.max(at.after(timeout)),
            _ => deadline,
        }
    }
}

thread_local! {
    /// The interrupts of the main thread being polled now, if any.
    static POLLING: RefCell<Option<Arc<Interrupts>>> = const { RefCell::new(None) };
}

/// The interrupts of the main thread polling now: `None` for any other task.
pub fn current() -> Option<Arc<Interrupts>> {
    POLLING.with(|p| p.borrow().clone())
}

/// A process's main thread: its store calls restart their timeouts on a handled signal.
pub struct InterruptibleThread<F> {
    interrupts: Arc<Interrupts>,
    inner: Pin<Box<F>>,
}

impl<F: Future> InterruptibleThread<F> {
    pub fn new(interrupts: Arc<Interrupts>, inner: F) -> Self {
        InterruptibleThread {
            interrupts,
            inner: Box::pin(inner),
        }
    }
}

impl<F: Future> Future for InterruptibleThread<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let interrupts = Arc::clone(&self.interrupts);
        let outer = POLLING.with(|p| p.replace(Some(interrupts)));
        let out = self.inner.as_mut().poll(cx);
        POLLING.with(|p| *p.borrow_mut() = outer);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at_s(s: u64) -> SimInstant {
        SimInstant::START.after(SimDuration::from_secs(s))
    }

    #[test]
    fn a_signal_while_waiting_restarts_the_full_timeout() {
        let interrupts = Interrupts::default();
        interrupts.interrupt(at_s(1));
        let six = SimDuration::from_secs(6);
        assert_eq!(interrupts.deadline(at_s(0), at_s(6), six), at_s(7));
    }

    #[test]
    fn a_signal_before_the_call_or_after_its_deadline_changes_nothing() {
        let interrupts = Interrupts::default();
        let six = SimDuration::from_secs(6);
        assert_eq!(interrupts.deadline(at_s(2), at_s(8), six), at_s(8));
        interrupts.interrupt(at_s(1));
        assert_eq!(interrupts.deadline(at_s(2), at_s(8), six), at_s(8));
        interrupts.interrupt(at_s(8));
        assert_eq!(interrupts.deadline(at_s(2), at_s(8), six), at_s(8));
    }

    #[test]
    fn only_polls_of_the_thread_carry_its_interrupts() {
        use futures::FutureExt;
        let interrupts = Arc::new(Interrupts::default());
        let seen = InterruptibleThread::new(Arc::clone(&interrupts), async { current() })
            .now_or_never()
            .expect("ready");
        assert!(seen.is_some_and(|s| Arc::ptr_eq(&s, &interrupts)));
        assert!(current().is_none(), "cleared after the poll");
    }
}
