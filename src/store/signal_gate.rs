//! SIGTERM as a torchrun agent's main thread meets it around its TCPStore calls.
//!
//! CPython runs a signal handler in the main thread between bytecodes, never inside a C++
//! call: a TCPStore call in progress retries on `EINTR` and returns first (measured on torch
//! 2.15.0: `compare_set` against a paused server raised `SignalException` only when the
//! server resumed). So the handler's `SignalException` is raised when the main thread's call
//! returns, before it does anything else. Calls from other threads (the keep-alive timer's)
//! do not hold it back. Before torchrun installs its handler (`PContext.start`, when the
//! first workers start), SIGTERM takes its default action and the process dies at once.
//!
//! The main thread is the agent's run future: [`MainThread`] marks its polls, and a store
//! call made during one counts (its first poll sends the request). The world is one thread
//! per run, so the mark is a thread-local, set and cleared around each poll. The signal also
//! restarts the timeout of the call it waits for (`world::interrupts`).

use crate::sim_time::SimInstant;
use crate::world::interrupts::{InterruptibleThread, Interrupts};
use futures::channel::oneshot;
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

/// One process's signal state, shared by its main thread's store calls and its signal
/// delivery.
#[derive(Default)]
pub struct SignalGate {
    state: Mutex<GateState>,
    /// What the signal does to the main thread's call in progress: restarts its timeout.
    interrupts: Arc<Interrupts>,
}

#[derive(Default)]
struct GateState {
    /// Main-thread store calls in progress (0 or 1 in torch; counted to be safe).
    calls: u32,
    /// A SIGTERM arrived and its handler has not run yet.
    pending: bool,
    /// torchrun installed its SIGTERM handler (the first `PContext.start`).
    installed: bool,
    /// Who waits for the calls in progress to return.
    idle: Vec<oneshot::Sender<()>>,
}

impl SignalGate {
    fn lock(&self) -> std::sync::MutexGuard<'_, GateState> {
        self.state.lock().expect("signal gate lock")
    }

    /// torchrun installs its SIGTERM handler: from now on the signal raises
    /// `SignalException` instead of killing the process.
    pub fn install_handler(&self) {
        self.lock().installed = true;
    }

    pub fn handler_installed(&self) -> bool {
        self.lock().installed
    }

    /// A SIGTERM arrived at `now`: returns once the handler can run, when no main-thread
    /// store call is in progress.
    pub async fn deliver(&self, now: SimInstant) {
        self.interrupts.interrupt(now);
        let rx = {
            let mut st = self.lock();
            st.pending = true;
            if st.calls == 0 {
                return;
            }
            let (tx, rx) = oneshot::channel();
            st.idle.push(tx);
            rx
        };
        let _ = rx.await;
    }

    /// A main-thread call begins: a handler already due has raised, so it never does.
    async fn enter(self: &Arc<Self>) -> CallGuard {
        if self.lock().pending {
            std::future::pending::<()>().await;
        }
        self.lock().calls += 1;
        CallGuard {
            gate: Arc::clone(self),
        }
    }
}

/// A main-thread store call in progress; dropped when it returns or is abandoned.
struct CallGuard {
    gate: Arc<SignalGate>,
}

impl CallGuard {
    /// The call returned: a signal that came meanwhile raises now, so the caller never
    /// sees the result.
    async fn returned(self) {
        let pending = self.gate.lock().pending;
        drop(self);
        if pending {
            std::future::pending::<()>().await;
        }
    }
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        let mut st = self.gate.lock();
        st.calls = st.calls.saturating_sub(1);
        if st.calls == 0 {
            for waiter in st.idle.drain(..) {
                let _ = waiter.send(());
            }
        }
    }
}

thread_local! {
    /// The gate of the main thread being polled now, if any.
    static POLLING: RefCell<Option<Arc<SignalGate>>> = const { RefCell::new(None) };
}

/// Runs `call` as a store call: gated when made from a main thread, as is otherwise.
pub async fn gated<T>(call: impl Future<Output = T>) -> T {
    let Some(gate) = POLLING.with(|p| p.borrow().clone()) else {
        return call.await;
    };
    let guard = gate.enter().await;
    let out = call.await;
    guard.returned().await;
    out
}

/// A process's main thread: the future whose store calls hold a signal back.
pub struct MainThread<F> {
    gate: Arc<SignalGate>,
    inner: Pin<Box<InterruptibleThread<F>>>,
}

impl<F: Future> MainThread<F> {
    pub fn new(gate: Arc<SignalGate>, inner: F) -> Self {
        let interrupts = Arc::clone(&gate.interrupts);
        MainThread {
            gate,
            inner: Box::pin(InterruptibleThread::new(interrupts, inner)),
        }
    }
}

impl<F: Future> Future for MainThread<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let gate = Arc::clone(&self.gate);
        let outer = POLLING.with(|p| p.replace(Some(gate)));
        let out = self.inner.as_mut().poll(cx);
        POLLING.with(|p| *p.borrow_mut() = outer);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;

    #[test]
    fn a_signal_waits_for_the_main_threads_call_and_the_call_never_returns() {
        let gate = Arc::new(SignalGate::default());
        let (reply_tx, reply_rx) = oneshot::channel::<u32>();
        let mut main = MainThread::new(Arc::clone(&gate), gated(reply_rx));
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(
            Pin::new(&mut main).poll(&mut cx).is_pending(),
            "in the call"
        );
        let mut delivered = Box::pin(gate.deliver(SimInstant::START));
        assert!(
            delivered.as_mut().poll(&mut cx).is_pending(),
            "held by the call"
        );
        reply_tx.send(7).expect("open");
        assert!(
            Pin::new(&mut main).poll(&mut cx).is_pending(),
            "the signal raises as the call returns"
        );
        assert!(delivered.as_mut().poll(&mut cx).is_ready());
    }

    #[test]
    fn calls_outside_a_main_thread_are_not_gated() {
        let gate = Arc::new(SignalGate::default());
        let mut delivered = Box::pin(gate.deliver(SimInstant::START));
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(
            delivered.as_mut().poll(&mut cx).is_ready(),
            "no call in progress"
        );
        assert_eq!(gated(async { 3 }).now_or_never(), Some(3));
    }
}
