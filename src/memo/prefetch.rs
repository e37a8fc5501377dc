//! The process's prefetch thread: computes memo entries a run will soon ask for (the next
//! epochs' deals, with the batch digests and counts the run will read of them) on a core
//! the run does not use, so that the run finds them kept.
//!
//! Only pure results go through it, into the process-wide memos: whether a prefetch ran,
//! ran late or was dropped changes how long a run takes, never what it computes. A run that
//! asks for an entry the thread is still computing waits for it (`Memo::get_or_compute`)
//! rather than computing it twice.

use std::panic::{self, AssertUnwindSafe};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::{Mutex, OnceLock, PoisonError};

/// Work waiting for the thread at most. A request past it is dropped: the run computes the
/// entry itself when it needs it, as it would without the thread.
pub const QUEUED_MAX: usize = 256;

/// The name of the thread, as panics and profilers show it.
pub const THREAD_NAME: &str = "trainsim-prefetch";

type Task = Box<dyn FnOnce() + Send>;

/// The queue to the thread, started on first use; `None` when the thread could not start.
static QUEUE: OnceLock<Option<Mutex<SyncSender<Task>>>> = OnceLock::new();

/// Starts the prefetch thread unless it runs. Called outside any simulation: madsim
/// forbids starting a system thread inside one.
pub fn start_thread() {
    QUEUE.get_or_init(start);
}

/// Queues `task` for the prefetch thread; false when it was dropped (the queue is full, or
/// the thread was not started).
pub fn submit(task: impl FnOnce() + Send + 'static) -> bool {
    let Some(Some(queue)) = QUEUE.get() else {
        return false;
    };
    let sent = queue
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .try_send(Box::new(task));
    match sent {
        Ok(()) => true,
        Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => false,
    }
}

fn start() -> Option<Mutex<SyncSender<Task>>> {
    let (queue, tasks) = mpsc::sync_channel::<Task>(QUEUED_MAX);
    std::thread::Builder::new()
        .name(THREAD_NAME.to_owned())
        .spawn(move || {
            while let Ok(task) = tasks.recv() {
                // A task that panics loses only its own entry (its memo lets the key go):
                // the thread serves the next one.
                let _ = panic::catch_unwind(AssertUnwindSafe(task));
            }
        })
        .ok()?;
    Some(Mutex::new(queue))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memo::Memo;
    use std::sync::Arc;

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
}
