//! The floor the harness is measured against: bare madsim running a loop of timers and
//! messages, with nothing of trainsim in it. `trainsim bench` times it next to the reference
//! run to say how close the harness's events per second come to the simulator's own.

use madsim::net::Endpoint;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

/// The tag the floor's messages travel under.
const FLOOR_TAG: u64 = 7;
/// Simulated time between two sends (one timer each).
const FLOOR_TICK_US: u64 = 1_000;

/// Runs `events` simulator events on a fresh runtime on its own thread: half of them timers
/// (a sender sleeping between sends), half messages (each received by a second node).
/// Returns how many messages arrived, so the work cannot be optimised away.
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

async fn floor_loop(messages: u64) -> u64 {
    let handle = madsim::runtime::Handle::current();
    let receiver_ip = IpAddr::V4(Ipv4Addr::new(10, 1, 0, 2));
    let receiver_addr = SocketAddr::new(receiver_ip, 9000);
    let receiver = handle
        .create_node()
        .name("floor-receiver")
        .ip(receiver_ip)
        .build();
    let sender = handle
        .create_node()
        .name("floor-sender")
        .ip(IpAddr::V4(Ipv4Addr::new(10, 1, 0, 1)))
        .build();
    let (bound_tx, bound_rx) = futures::channel::oneshot::channel::<()>();
    let received = receiver.spawn(async move {
        let endpoint = Endpoint::bind(receiver_addr).await.expect("binds");
        let _ = bound_tx.send(());
        let mut count = 0u64;
        while count < messages {
            if endpoint.recv_from_raw(FLOOR_TAG).await.is_ok() {
                count += 1;
            }
        }
        count
    });
    let _ = bound_rx.await;
    sender
        .spawn(async move {
            let endpoint = Endpoint::bind("0.0.0.0:0").await.expect("binds");
            for i in 0..messages {
                madsim::time::sleep(Duration::from_micros(FLOOR_TICK_US)).await;
                let _ = endpoint
                    .send_to_raw(receiver_addr, FLOOR_TAG, Box::new(i))
                    .await;
            }
        })
        .await
        .expect("the sender finishes");
    received.await.expect("the receiver finishes")
}
