//! The thread each run's fresh runtime runs on: one long-lived thread per calling thread,
//! reused from run to run.
//!
//! A run needs a thread of its own (its run context and madsim's runtime are thread-local,
//! and the caller must survive a panicking run), but not a new one each time: a fuzz case is
//! a short run, and starting a thread for each one costs it a fresh stack and a cold
//! allocator heap whose pages the kernel zeroes again on first touch. Nothing of a run
//! outlives it on the thread (see `context`), so the next run starts from scratch all the
//! same; a thread whose run panicked is retired anyway, and the next run gets a new one.

use std::any::Any;
use std::cell::RefCell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::mpsc;

/// The name of every run thread: `trainsim fuzz` keeps panics on these threads quiet, since
/// the runner reports each one as a harness failure.
pub const RUN_THREAD_NAME: &str = "trainsim-run";

/// A run handed to the run thread; it says whether it panicked, which retires the thread.
type Job = Box<dyn FnOnce() -> bool + Send>;

/// The caller's side of its run thread: the thread ends when this is dropped.
struct RunThread {
    jobs: mpsc::Sender<Job>,
}

thread_local! {
    static RUN_THREAD: RefCell<Option<RunThread>> = const { RefCell::new(None) };
}

/// Runs `work` on this thread's run thread and waits for it; `Err` holds the payload of its
/// panic, or says why the thread could not run it.
pub fn run<T, F>(work: F) -> Result<T, Box<dyn Any + Send>>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    // Runs hand work ahead to the prefetch thread; it must start outside any simulation.
    crate::memo::prefetch::start_thread();
    let (result_tx, result_rx) = mpsc::sync_channel(1);
    let job: Job = Box::new(move || {
        let result = panic::catch_unwind(AssertUnwindSafe(work));
        let panicked = result.is_err();
        // The caller waits for this; it is gone only if the caller itself unwound.
        let _ = result_tx.send(result);
        panicked
    });
    RUN_THREAD.with(|slot| -> Result<(), Box<dyn Any + Send>> {
        let mut slot = slot.borrow_mut();
        let job = match slot.as_ref() {
            Some(thread) => match thread.jobs.send(job) {
                Ok(()) => return Ok(()),
                // The thread is gone (it cannot be, short of an abort): start another.
                Err(mpsc::SendError(job)) => job,
            },
            None => job,
        };
        let thread = spawn()?;
        thread
            .jobs
            .send(job)
            .map_err(|_| boxed("the run's thread ended before the run started"))?;
        *slot = Some(thread);
        Ok(())
    })?;
    let result = result_rx
        .recv()
        .map_err(|_| boxed("the run's thread ended without an answer"))?;
    if result.is_err() {
        // The thread is retiring: forget it now, so the next run cannot be queued to it.
        RUN_THREAD.with(|slot| slot.borrow_mut().take());
    }
    result
}

/// A new run thread, serving jobs until its caller's side drops or a job panics.
fn spawn() -> Result<RunThread, Box<dyn Any + Send>> {
    let (jobs, inbox) = mpsc::channel::<Job>();
    std::thread::Builder::new()
        .name(RUN_THREAD_NAME.to_owned())
        .spawn(move || {
            while let Ok(job) = inbox.recv() {
                if job() {
                    break;
                }
            }
        })
        .map_err(|e| boxed(&format!("cannot start the run's thread: {e}")))?;
    Ok(RunThread { jobs })
}

fn boxed(message: &str) -> Box<dyn Any + Send> {
    Box::new(message.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread_id() -> std::thread::ThreadId {
        std::thread::current().id()
    }

    #[test]
    fn runs_share_a_thread_until_one_panics() {
        let first = run(thread_id).expect("runs");
        assert_ne!(first, thread_id(), "a run leaves the calling thread");
        assert_eq!(run(thread_id).expect("runs"), first, "the thread is reused");
        let payload = run(|| -> u8 { panic!("a run breaks") }).expect_err("the panic");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"a run breaks"));
        let after = run(thread_id).expect("a later run runs");
        assert_ne!(after, first, "a thread whose run panicked is retired");
        assert_eq!(
            std::thread::scope(|s| s.spawn(|| run(thread_id)).join())
                .expect("joins")
                .map(|id| id == after)
                .ok(),
            Some(false),
            "each calling thread has its own run thread"
        );
    }
}
