//! The process's prefetch thread: computes memo entries a run will soon ask for (the next
//! epochs' deals, with the batch digests and counts the run will read of them) on a core
//! the run does not use, so that the run finds them kept.
//!
//! Only pure results go through it, into the process-wide memos: whether a prefetch ran,
//! ran late, ran on another thread or was dropped changes how long a run takes, never what
//! it computes. A run that asks for an entry the thread is still computing waits for it
//! (`Memo::get_or_compute`) rather than computing it twice, and while it waits it takes the
//! next queued task itself ([`run_one_queued`]): once the job trains faster than one thread
//! deals its epochs, a waiting run would otherwise leave its core idle.

use std::cell::Cell;
use std::collections::VecDeque;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, PoisonError};

/// Work waiting for the thread at most. A request past it is dropped: the run computes the
/// entry itself when it needs it, as it would without the thread.
pub const QUEUED_MAX: usize = 256;

/// The name of the thread, as panics and profilers show it.
pub const THREAD_NAME: &str = "trainsim-prefetch";

type Task = Box<dyn FnOnce() + Send>;

/// Tasks waiting, oldest first, for the thread or for a thread that waits on a memo.
struct Queue {
    tasks: Mutex<VecDeque<Task>>,
    queued: Condvar,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, VecDeque<Task>> {
        // Tasks run outside the lock: nothing under it can panic but the queue's own moves.
        self.tasks.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

static QUEUE: Queue = Queue {
    tasks: Mutex::new(VecDeque::new()),
    queued: Condvar::new(),
};

/// Whether the thread runs: tasks are queued only then.
static STARTED: OnceLock<bool> = OnceLock::new();

thread_local! {
    /// Whether this thread runs a task it took while waiting: such a task that waits in its
    /// turn waits plainly, so the tasks a thread takes never nest.
    static TAKING: Cell<bool> = const { Cell::new(false) };
}

/// Starts the prefetch thread unless it runs. Called outside any simulation: madsim
/// forbids starting a system thread inside one.
pub fn start_thread() {
    STARTED.get_or_init(|| {
        std::thread::Builder::new()
            .name(THREAD_NAME.to_owned())
            .spawn(serve)
            .is_ok()
    });
}

/// Queues `task` for the prefetch thread; false when it was dropped (the queue is full, or
/// the thread was not started).
pub fn submit(task: impl FnOnce() + Send + 'static) -> bool {
    if STARTED.get() != Some(&true) {
        return false;
    }
    let mut tasks = QUEUE.lock();
    if tasks.len() >= QUEUED_MAX {
        return false;
    }
    tasks.push_back(Box::new(task));
    drop(tasks);
    QUEUE.queued.notify_one();
    true
}

/// Runs the oldest queued task on this thread, for a thread that would otherwise wait for
/// one the prefetch thread is computing; false when there was none to take (or this thread
/// is running one it took already).
pub fn run_one_queued() -> bool {
    if TAKING.get() {
        return false;
    }
    let Some(task) = QUEUE.lock().pop_front() else {
        return false;
    };
    TAKING.set(true);
    run(task);
    TAKING.set(false);
    true
}

/// A task that panics loses only its own entry (its memo lets the key go): whoever ran it
/// goes on.
fn run(task: Task) {
    let _ = panic::catch_unwind(AssertUnwindSafe(task));
}

/// The thread's loop: the oldest task, as soon as there is one.
fn serve() {
    loop {
        let mut tasks = QUEUE
            .queued
            .wait_while(QUEUE.lock(), |tasks| tasks.is_empty())
            .unwrap_or_else(PoisonError::into_inner);
        let task = tasks.pop_front().expect("the wait ends on a queued task");
        drop(tasks);
        run(task);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memo::Memo;
    use std::sync::{mpsc, Arc};
    use std::time::Duration;

    #[test]
    fn a_prefetched_entry_is_found_kept_and_computed_once() {
        start_thread();
        static MEMO: Memo<u64, u64> = Memo::new(100);
        let computed = Arc::new(Mutex::new(0u32));
        let count = Arc::clone(&computed);
        let compute = move || -> Result<u64, ()> {
            *count.lock().unwrap() += 1;
            std::thread::sleep(std::time::Duration::from_millis(20));
            Ok(42)
        };
        let ahead = compute.clone();
        assert!(submit(move || {
            let _ = MEMO.get_or_compute(&7, 1, ahead);
        }));
        // Asked for while the thread may still compute it: waits, or finds it kept, or
        // (if the thread has not started it yet) computes it, and the thread then hits.
        assert_eq!(*MEMO.get_or_compute(&7, 1, compute).unwrap(), 42);
        while !MEMO.has(&7) {
            std::thread::yield_now();
        }
        let (done_tx, done_rx) = mpsc::channel();
        assert!(submit(move || done_tx.send(()).unwrap()));
        done_rx.recv().unwrap();
        assert_eq!(
            *computed.lock().unwrap(),
            1,
            "computed once, whoever computed it"
        );
    }

    #[test]
    fn a_panicking_task_does_not_stop_the_thread() {
        start_thread();
        assert!(submit(|| panic!("a prefetch breaks")));
        let (done_tx, done_rx) = mpsc::channel();
        assert!(submit(move || done_tx.send(()).unwrap()));
        done_rx.recv().expect("the next task runs");
    }

    /// The prefetch thread is held inside a computation until a task queued behind it has
    /// run: only a thread waiting for that computation can run it, so the wait ends only if
    /// the waiter takes the queued work.
    #[test]
    fn a_thread_waiting_on_the_prefetch_thread_runs_the_work_queued_behind() {
        start_thread();
        static MEMO: Memo<u64, u64> = Memo::new(100);
        let (queued_ran, held_until) = mpsc::channel();
        assert!(submit(move || {
            let _ = MEMO.get_or_compute(&1, 1, || {
                let ran = held_until.recv_timeout(Duration::from_secs(30));
                Ok::<_, ()>(if ran.is_ok() { 1 } else { 0 })
            });
        }));
        for _ in 0..30_000 {
            if MEMO.has(&1) {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(MEMO.has(&1), "the prefetch thread took the first task");
        let ran_on = Arc::new(Mutex::new(None));
        let record = Arc::clone(&ran_on);
        assert!(submit(move || {
            *record.lock().unwrap() = std::thread::current().name().map(str::to_owned);
            queued_ran.send(()).unwrap();
        }));
        let got = MEMO.get_or_compute(&1, 1, || Ok::<_, ()>(2)).unwrap();
        assert_eq!(
            *got, 1,
            "the held computation ended once the queued task ran"
        );
        let ran_on = ran_on.lock().unwrap().clone();
        assert_ne!(
            ran_on.as_deref(),
            Some(THREAD_NAME),
            "run by a waiting thread"
        );
    }
}
