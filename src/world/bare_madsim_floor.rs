//! The floor the harness is measured against: bare madsim running a loop of timers, with
//! nothing of trainsim in it. `trainsim bench` times it next to the reference run to say how
//! close the harness's events per second come to the simulator's own.
//!
//! Every simulator event of a trainsim run is a madsim timer: a sleep that wakes the task
//! that armed it, or a message's arrival, a timer that hands the message to another task
//! (`wire`). The floor makes the same two kinds, half each.

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// Simulated time between two sends (one sleep each).
const FLOOR_TICK_US: u64 = 1_000;
/// How long a message travels (one timer each).
const FLOOR_LATENCY_US: u64 = 100;

/// Runs `events` simulator events on a fresh runtime on its own thread: half of them sleeps
/// (a sender sleeping between sends), half messages (each a timer that wakes a receiver on
/// a second node). Returns how many messages arrived, so the work cannot be optimised away.
pub fn timers_and_messages(events: u64, seed: u64) -> u64 {
    let thread = std::thread::Builder::new()
        .name("trainsim-floor".to_owned())
        .spawn(move || {
            let runtime =
                madsim::runtime::Runtime::with_seed_and_config(seed, madsim::Config::default());
            runtime.block_on(floor_loop(events / 2))
        })
        .expect("the floor's thread starts");
    thread.join().expect("the floor loop does not panic")
}

/// Messages that arrived, and the receiver to wake for each.
#[derive(Default)]
struct Arrivals {
    count: AtomicU64,
    receiver: Mutex<Option<Waker>>,
}

impl std::task::Wake for Arrivals {
    fn wake(self: Arc<Self>) {
        self.count.fetch_add(1, Ordering::Relaxed);
        if let Some(receiver) = self.receiver.lock().expect("floor lock").take() {
            receiver.wake();
        }
    }
}

async fn floor_loop(messages: u64) -> u64 {
    let handle = madsim::runtime::Handle::current();
    let node = |name: &str, last: u8| {
        handle
            .create_node()
            .name(name)
            .ip(IpAddr::V4(Ipv4Addr::new(10, 1, 0, last)))
            .build()
    };
    let (receiver, sender) = (node("floor-receiver", 2), node("floor-sender", 1));
    let arrivals = Arc::new(Arrivals::default());
    let seen = arrivals.clone();
    let received = receiver.spawn(std::future::poll_fn(move |cx| {
        let count = seen.count.load(Ordering::Relaxed);
        if count >= messages {
            return Poll::Ready(count);
        }
        *seen.receiver.lock().expect("floor lock") = Some(cx.waker().clone());
        Poll::Pending
    }));
    sender
        .spawn(async move {
            let time = madsim::time::TimeHandle::current();
            let arrival = Waker::from(arrivals);
            for _ in 0..messages {
                madsim::time::sleep(Duration::from_micros(FLOOR_TICK_US)).await;
                // A message: one timer, whose firing wakes the receiver.
                let mut timer = time.sleep(Duration::ZERO);
                Pin::new(&mut timer)
                    .reset(time.now_instant() + Duration::from_micros(FLOOR_LATENCY_US));
                let _ = Pin::new(&mut timer).poll(&mut Context::from_waker(&arrival));
            }
        })
        .await
        .expect("the sender finishes");
    received.await.expect("the receiver finishes")
}
