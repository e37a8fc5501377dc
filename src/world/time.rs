//! Simulated time for the shells: sleeps, timeouts and the run's elapsed time.
//!
//! Only `world/` touches madsim; the rendezvous handler, the agent and the store service call
//! these instead.

use std::future::Future;
use std::time::Duration;

/// Simulated microseconds since the run began.
pub fn elapsed_us() -> u64 {
    madsim::time::TimeHandle::current().elapsed().as_micros() as u64
}

/// Sleeps for `duration_us` of simulated time (madsim rounds short sleeps up to 1 ms).
pub async fn sleep_us(duration_us: u64) {
    madsim::time::sleep(Duration::from_micros(duration_us)).await;
}

/// Runs `future` for at most `duration_us`; `None` when time ran out.
pub async fn timeout_us<F: Future>(duration_us: u64, future: F) -> Option<F::Output> {
    madsim::time::timeout(Duration::from_micros(duration_us), future)
        .await
        .ok()
}
