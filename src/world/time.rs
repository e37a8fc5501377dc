//! Simulated time for the shells: sleeps, timeouts and the run's elapsed time.
//!
//! Only `world/` touches madsim; the rendezvous handler, the agent and the store service call
//! these instead.
//!
//! madsim's timers cannot be cancelled, and its `Sleep` arms a new timer each time it is
//! polled. A timeout that is won by its future (every RPC answered in time, every all-reduce
//! that completes) would leave a timer that later wakes its task for nothing, and that
//! spurious poll arms yet another timer. [`Sleep`] here arms one timer per sleep and
//! disarms its wake-up when dropped, so a task is only woken for sleeps it still waits on.

use crate::sim_time::{SimDuration, SimInstant};
use futures::future::{select, Either};
use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

/// Counts one simulator event (a timer armed or a message sent) in the run's context. Past
/// the run's bound it wakes the supervisor, which ends the run: the only way to stop a run
/// whose simulated time barely moves, such as a join storm, that the time limit cannot stop.
/// Outside a run there is nothing to count for.
pub(super) fn count_sim_event() {
    super::context::with(|context| context.count_sim_event());
}

/// Completes when the run passes its bound on simulator events.
pub(super) fn sim_events_bound_reached() -> impl Future<Output = ()> {
    std::future::poll_fn(|cx| {
        if super::context::with_run(|context| context.over_bound_or_wake(cx.waker())) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
}

/// Keeps the current runtime's time handle in the run's context. Called first thing inside
/// the run's runtime; the handle is the one `TimeHandle::current()` would give until
/// [`LeaveRunOnDrop`] forgets it.
pub(super) fn enter_run() {
    let handle = madsim::time::TimeHandle::current();
    super::context::with_run(|context| {
        *context.delivery_timer.borrow_mut() = Some(handle.sleep(Duration::ZERO));
        *context.time.borrow_mut() = Some(handle);
    });
}

/// Forgets the run's time handle when dropped: declared after the runtime, it is dropped
/// before it, on a panic too, so the tasks the runtime drops see the run is over.
pub(super) struct LeaveRunOnDrop;

impl Drop for LeaveRunOnDrop {
    fn drop(&mut self) {
        super::context::with(|context| {
            context.delivery_timer.borrow_mut().take();
            context.time.borrow_mut().take()
        });
    }
}

/// `f` on the current runtime's time handle: the run's kept one, else madsim's.
fn with_handle<T>(f: impl FnOnce(&madsim::time::TimeHandle) -> T) -> T {
    super::context::with_time(|kept| match kept {
        Some(handle) => f(handle),
        None => f(&madsim::time::TimeHandle::current()),
    })
}

/// Simulated microseconds since the run began.
pub fn elapsed_us() -> u64 {
    with_handle(|h| h.elapsed().as_micros() as u64)
}

/// Simulated nanoseconds since the run began: message latencies are drawn in nanoseconds, so
/// a moment computed ahead from now keeps them.
pub fn elapsed_ns() -> u64 {
    with_handle(|h| h.elapsed().as_nanos() as u64)
}

/// The run's current moment cut to the whole microsecond: the clock as the trace and every
/// microsecond-grained schedule read it.
pub fn now_whole_us() -> SimInstant {
    SimInstant::from_us(elapsed_us())
}

/// The run's current moment.
pub fn now() -> SimInstant {
    SimInstant::from_ns(elapsed_ns())
}

/// Sleeps until the moment `at` (at least 1 ms, as every madsim sleep).
pub fn sleep_until(at: SimInstant) -> Sleep {
    sleep_until_ns(at.as_ns())
}

/// Like [`elapsed_ns`], but `None` outside a run (a task dropped while its runtime goes away).
pub fn elapsed_ns_in_run() -> Option<u64> {
    super::context::with_time(|kept| kept.map(|h| h.elapsed().as_nanos() as u64))
}

/// Sleeps until `at_ns` simulated nanoseconds since the run began (at least 1 ms, as every
/// madsim sleep).
pub fn sleep_until_ns(at_ns: u64) -> Sleep {
    let duration_ns = at_ns.saturating_sub(elapsed_ns());
    Sleep {
        inner: with_handle(|h| h.sleep(Duration::from_nanos(duration_ns))),
        armed: None,
    }
}

/// Sleeps for exactly `duration_ns` of simulated time (at least 1 ns), without madsim's
/// 1 ms minimum: for CPU work of a few microseconds, such as a client encoding a message.
pub fn sleep_exact_ns(duration_ns: u64) -> Sleep {
    let inner = with_handle(|h| {
        let mut sleep = h.sleep(Duration::ZERO);
        Pin::new(&mut sleep).reset(h.now_instant() + Duration::from_nanos(duration_ns.max(1)));
        sleep
    });
    Sleep { inner, armed: None }
}

/// Sleeps until exactly `at_ns` simulated nanoseconds since the run began (at least 1 ns from
/// now), without madsim's 1 ms minimum: the end of a pass of the store's event loop.
pub fn sleep_until_exact_ns(at_ns: u64) -> Sleep {
    sleep_exact_ns(at_ns.saturating_sub(elapsed_ns()))
}

/// Spends `ns` of a process's CPU time, exactly; nothing (and no timer) for 0.
pub async fn spend_cpu_ns(ns: u64) {
    if ns > 0 {
        sleep_exact_ns(ns).await;
    }
}

/// Sleeps for `span` of simulated time (madsim rounds short sleeps up to 1 ms).
pub fn sleep(span: SimDuration) -> Sleep {
    Sleep {
        inner: with_handle(|h| h.sleep(Duration::from_nanos(span.as_ns()))),
        armed: None,
    }
}

/// Runs `future` for at most `span`; `None` when time ran out. The future is polled first,
/// so one that is ready when time runs out still wins (as with madsim's `timeout`).
pub async fn timeout<F: Future>(span: SimDuration, future: F) -> Option<F::Output> {
    let deadline = sleep(span);
    match select(pin!(future), deadline).await {
        Either::Left((output, _)) => Some(output),
        Either::Right(((), _)) => None,
    }
}

/// Sleeps for `duration_us` of simulated time (madsim rounds short sleeps up to 1 ms).
pub fn sleep_us(duration_us: u64) -> Sleep {
    Sleep {
        inner: with_handle(|h| h.sleep(Duration::from_micros(duration_us))),
        armed: None,
    }
}

/// Sleeps until the moment `at`, read on the whole-microsecond clock: returns at once when
/// [`now_whole_us`] has reached it, else sleeps the whole microseconds between them (so a
/// moment less than 1 ms away is reached 1 ms from now, madsim's shortest sleep). Grids of
/// whole microseconds (keep-alive ticks, polls) resume this way.
pub async fn sleep_until_whole_us(at: SimInstant) {
    let now = now_whole_us();
    if at > now {
        sleep(at.since(now)).await;
    }
}

/// Runs `deliver` `delay_ns` simulated nanoseconds from now (at least 1), exactly, with no
/// 1 ms minimum: one timer, counted, that wakes no task of its own. The network's messages
/// travel this way (`net::transmit`). madsim runs the timer's callback between task polls
/// while it holds its timer heap, so `deliver` must not arm a timer; it may wake tasks.
pub(super) fn run_after_ns(delay_ns: u64, deliver: impl FnOnce() + Send + 'static) {
    let delay_ns = delay_ns.max(1);
    let waker = Waker::from(Arc::new(Callback(Mutex::new(Some(deliver)))));
    let arm = |handle: &madsim::time::TimeHandle, timer: &mut madsim::time::Sleep| {
        Pin::new(&mut *timer).reset(handle.now_instant() + Duration::from_nanos(delay_ns));
        let armed = Pin::new(timer).poll(&mut Context::from_waker(&waker));
        assert!(
            armed.is_pending(),
            "a delivery timer {delay_ns} ns ahead fired at once"
        );
    };
    let kept = super::context::with(|context| {
        let (handle, mut timer) = (context.time.borrow(), context.delivery_timer.borrow_mut());
        let (Some(handle), Some(timer)) = (handle.as_ref(), timer.as_mut()) else {
            return false;
        };
        arm(handle, timer);
        context.count_sim_event();
        true
    });
    // Outside the run's kept handle (before it enters its runtime): a sleep of its own.
    if kept != Some(true) {
        let handle = madsim::time::TimeHandle::current();
        arm(&handle, &mut handle.sleep(Duration::ZERO));
        count_sim_event();
    }
}

/// A timer callback: runs once, when the timer wakes it. Generic rather than boxed: one
/// allocation less for each message.
struct Callback<F>(Mutex<Option<F>>);

impl<F: FnOnce() + Send + 'static> Wake for Callback<F> {
    fn wake(self: Arc<Self>) {
        let callback = self.0.lock().expect("timer callback lock").take();
        if let Some(callback) = callback {
            callback();
        }
    }
}

/// A simulated sleep with one timer whose wake-up is disarmed when the sleep is dropped.
pub struct Sleep {
    inner: madsim::time::Sleep,
    armed: Option<Arc<ArmedWake>>,
}

/// The wake-up a sleep's timer delivers: to the task that last polled the sleep, while the
/// sleep lives.
struct ArmedWake {
    task: Mutex<Option<Waker>>,
}

impl Wake for ArmedWake {
    fn wake(self: Arc<Self>) {
        let task = self.task.lock().expect("sleep waker lock").take();
        if let Some(task) = task {
            task.wake();
        }
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.inner.is_elapsed() {
            return Poll::Ready(());
        }
        if let Some(armed) = &self.armed {
            // The timer is armed: only keep the task it must wake current.
            *armed.task.lock().expect("sleep waker lock") = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let armed = Arc::new(ArmedWake {
            task: Mutex::new(Some(cx.waker().clone())),
        });
        let timer_waker = Waker::from(Arc::clone(&armed));
        let mut timer_cx = Context::from_waker(&timer_waker);
        let poll = Pin::new(&mut self.inner).poll(&mut timer_cx);
        if poll.is_pending() {
            count_sim_event();
        }
        self.armed = Some(armed);
        poll
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some(armed) = &self.armed {
            armed.task.lock().expect("sleep waker lock").take();
        }
    }
}
