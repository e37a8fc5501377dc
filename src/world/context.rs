//! The run context: the state of one run that code without a handle on the world reaches
//! (the network's listeners and hosts, the clock, the count of simulator events), owned by
//! the run and installed on its thread for exactly its lifetime.
//!
//! The store server, the RPC client and every sleep are called from deep inside the
//! simulated processes with no `World` in hand, the way tokio code reaches its runtime; so
//! this state has to be ambient. It is scoped, as turmoil scopes its world: [`install`]
//! puts a fresh context on the thread and returns a guard, and dropping the guard (when the
//! run ends, or while a panic unwinds) takes it off again. Nothing survives a run, so a
//! thread that runs one run after another can never see an earlier run's state, and there
//! is no list of things to reset by hand.
//!
//! What a run measured ([`RunStats`]) is read off the guard and handed back by the run as a
//! value beside its trace.
//!
//! Caches of pure results shared by the processes of a run (decoded rendezvous states, epoch
//! plans) are not ambient: the processes get them as explicit handles from
//! `NodeEnv::shared`, which the world keeps per run as well.

use super::net::Registry;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::task::Waker;

/// What one run measured, outside its trace: not part of the trace hash or the report
/// (`trainsim bench` reads it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Simulator events the run cost: timers armed and messages sent.
    pub sim_events: u64,
}

/// The ambient state of the run on this thread.
pub(super) struct RunContext {
    /// Which servers listen and which hosts are up (see `net`).
    pub(super) registry: RefCell<Registry>,
    /// The runtime's time handle while the run is inside its runtime: madsim's
    /// `TimeHandle::current()` clones two `Arc`s on every call, and the shells read the clock
    /// and arm sleeps millions of times a run. `None` again once the run has left it, so
    /// tasks dropped with the runtime know the run is over (`time::elapsed_ns_in_run`).
    pub(super) time: RefCell<Option<madsim::time::TimeHandle>>,
    /// One madsim sleep, moved to each message's arrival and polled to arm its timer
    /// (`time::run_after_ns`): every poll adds a timer of its own, so one sleep serves every
    /// message without a sleep (and two clones of the time handle) made per message. Kept
    /// and forgotten with `time`.
    pub(super) delivery_timer: RefCell<Option<madsim::time::Sleep>>,
    sim_events: Cell<u64>,
    sim_events_max: u64,
    /// Whether the run passed its bound on simulator events.
    over_bound: Cell<bool>,
    /// The supervisor to wake when it does.
    supervisor: RefCell<Option<Waker>>,
}

thread_local! {
    static CURRENT: RefCell<Option<Rc<RunContext>>> = const { RefCell::new(None) };
}

/// Installs a fresh run context on this thread until the returned guard is dropped.
///
/// A thread runs one run at a time: installing over an installed context is a bug.
pub(super) fn install(sim_events_max: u64) -> Installed {
    let context = Rc::new(RunContext {
        registry: RefCell::default(),
        time: RefCell::new(None),
        delivery_timer: RefCell::new(None),
        sim_events: Cell::new(0),
        sim_events_max,
        over_bound: Cell::new(false),
        supervisor: RefCell::new(None),
    });
    CURRENT.with(|current| {
        let mut current = current.borrow_mut();
        assert!(
            current.is_none(),
            "a run context is already installed on this thread"
        );
        *current = Some(Rc::clone(&context));
    });
    Installed { context }
}

/// The installed run context; dropping it takes the context off the thread.
pub(super) struct Installed {
    context: Rc<RunContext>,
}

impl Installed {
    /// What the run measured so far.
    pub(super) fn stats(&self) -> RunStats {
        RunStats {
            sim_events: self.context.sim_events.get(),
        }
    }

    /// Whether the run passed its bound on simulator events.
    pub(super) fn over_bound(&self) -> bool {
        self.context.over_bound.get()
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        // Taken out first and dropped after the borrow ends: dropping the registry drops
        // reset signals, which must not find the slot borrowed.
        let taken = CURRENT.with(|current| current.borrow_mut().take());
        drop(taken);
    }
}

/// Whether a run context is installed on this thread.
pub fn is_installed() -> bool {
    CURRENT.with(|current| current.borrow().is_some())
}

/// `f` on the run context of this thread; `None` outside a run.
pub(super) fn with<T>(f: impl FnOnce(&RunContext) -> T) -> Option<T> {
    CURRENT.with(|current| current.borrow().as_deref().map(f))
}

/// `f` on the time handle the run on this thread kept (`None` outside a run, or before it
/// entered its runtime).
pub(super) fn with_time<T>(f: impl FnOnce(Option<&madsim::time::TimeHandle>) -> T) -> T {
    CURRENT.with(|current| match current.borrow().as_deref() {
        Some(context) => f(context.time.borrow().as_ref()),
        None => f(None),
    })
}

/// `f` on the run context of this thread, which code that only runs inside a run requires.
pub(super) fn with_run<T>(f: impl FnOnce(&RunContext) -> T) -> T {
    with(f).expect("this runs inside a run, with its run context installed")
}

impl RunContext {
    /// Counts one simulator event; past the bound, marks the run over and wakes the
    /// supervisor.
    pub(super) fn count_sim_event(&self) {
        let count = self
            .sim_events
            .get()
            .checked_add(1)
            .expect("simulator events overflow u64");
        self.sim_events.set(count);
        if count > self.sim_events_max {
            self.over_bound.set(true);
            if let Some(supervisor) = self.supervisor.borrow_mut().take() {
                supervisor.wake();
            }
        }
    }

    /// Whether the run passed its bound; if not, `waker` is woken when it does.
    pub(super) fn over_bound_or_wake(&self, waker: &Waker) -> bool {
        if self.over_bound.get() {
            return true;
        }
        *self.supervisor.borrow_mut() = Some(waker.clone());
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[should_panic(expected = "simulator events overflow u64")]
    fn a_count_past_u64_stops_the_run() {
        let installed = install(u64::MAX);
        installed.context.sim_events.set(u64::MAX);
        installed.context.count_sim_event();
    }

    #[test]
    fn dropping_the_guard_leaves_the_thread_clean() {
        assert!(!is_installed());
        let installed = install(10);
        with_run(|c| {
            c.count_sim_event();
            c.registry.borrow_mut().clients_made = 7;
        });
        assert_eq!(installed.stats().sim_events, 1);
        drop(installed);
        assert!(!is_installed());
        assert_eq!(with(|_| ()), None);
        let next = install(10);
        assert_eq!(next.stats(), RunStats::default());
        assert_eq!(with_run(|c| c.registry.borrow().clients_made), 0);
    }

    #[test]
    fn a_panic_inside_a_run_leaves_the_thread_clean() {
        let caught = std::panic::catch_unwind(|| {
            let _installed = install(1);
            with_run(|c| c.count_sim_event());
            panic!("the run broke");
        });
        assert!(caught.is_err());
        assert!(!is_installed());
        let next = install(1);
        assert_eq!(next.stats().sim_events, 0);
        assert!(!next.over_bound());
    }

    #[test]
    fn passing_the_bound_marks_the_run_and_wakes_the_supervisor() {
        let installed = install(1);
        let woken = std::sync::Arc::new(Woken::default());
        let waker = Waker::from(std::sync::Arc::clone(&woken));
        with_run(|c| {
            assert!(!c.over_bound_or_wake(&waker));
            c.count_sim_event();
            assert!(!installed.over_bound());
            c.count_sim_event();
        });
        assert!(installed.over_bound());
        assert_eq!(woken.0.load(std::sync::atomic::Ordering::Relaxed), 1);
        assert!(with_run(|c| c.over_bound_or_wake(&waker)));
    }

    /// Counts its wake-ups.
    #[derive(Default)]
    struct Woken(std::sync::atomic::AtomicU32);

    impl std::task::Wake for Woken {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    #[test]
    #[should_panic(expected = "already installed")]
    fn one_run_at_a_time_per_thread() {
        let _first = install(1);
        let _second = install(1);
    }
}
