//! What the wire does to a message: cut links and loss drop it, latencies stay in range,
//! and a client hears only of its own request.

use super::*;
use futures::task::noop_waker;

fn us(us: u64) -> SimDuration {
    SimDuration::from_us(us)
}

fn ip(last: u8) -> IpAddr {
    IpAddr::from([10, 0, 0, last])
}

#[test]
fn latencies_stay_in_the_range_and_repeat_with_the_seed() {
    let draw = |seed| {
        let mut conditions = Conditions::new(seed, (us(100), us(300)), 0.0);
        (0..1_000)
            .map(|_| {
                conditions
                    .latency_ns(ip(1), ip(2))
                    .expect("a lossless wire")
            })
            .collect::<Vec<_>>()
    };
    let latencies = draw(7);
    assert!(latencies.iter().all(|l| (100_000..300_000).contains(l)));
    assert_eq!(latencies, draw(7));
    assert_ne!(latencies, draw(8));
}

#[test]
fn a_fixed_latency_is_that_latency() {
    let mut conditions = Conditions::new(1, (us(250), us(250)), 0.0);
    assert_eq!(conditions.latency_ns(ip(1), ip(2)), Some(250_000));
}

#[test]
fn a_cut_link_drops_one_direction_only_until_restored() {
    let mut conditions = Conditions::new(1, (us(100), us(200)), 0.0);
    conditions.set_cut(ip(1), ip(2), true);
    assert_eq!(conditions.latency_ns(ip(1), ip(2)), None);
    assert!(conditions.latency_ns(ip(2), ip(1)).is_some());
    conditions.set_cut(ip(1), ip(2), false);
    assert!(conditions.latency_ns(ip(1), ip(2)).is_some());
}

#[test]
fn loss_drops_about_its_share() {
    let mut conditions = Conditions::new(3, (us(100), us(200)), 0.0);
    conditions.set_loss(0.25);
    let dropped = (0..10_000)
        .filter(|_| conditions.latency_ns(ip(1), ip(2)).is_none())
        .count();
    assert!(
        (2_200..2_800).contains(&dropped),
        "{dropped} of 10 000 dropped"
    );
    conditions.set_loss(1.0);
    assert_eq!(conditions.latency_ns(ip(1), ip(2)), None);
}

#[test]
fn an_inbox_ignores_what_comes_for_an_earlier_request() {
    let inbox = Inbox::default();
    let waker = noop_waker();
    let mut cx = Context::from_waker(&waker);
    inbox.await_request(2);
    inbox.deliver(1, Box::new(1u32));
    inbox.lose(1);
    assert!(inbox.poll_arrival(&mut cx).is_pending());
    inbox.lose(2);
    assert!(matches!(
        inbox.poll_arrival(&mut cx),
        Poll::Ready(Arrival::Lost)
    ));
    inbox.deliver(2, Box::new(2u32));
    let Poll::Ready(Arrival::Reply(reply)) = inbox.poll_arrival(&mut cx) else {
        panic!("the reply to request 2 arrived");
    };
    assert_eq!(*reply.downcast::<u32>().unwrap(), 2);
}

#[test]
fn requests_still_queued_when_a_server_goes_are_reported_dropped() {
    let inbox = Arc::new(Inbox::default());
    inbox.await_request(9);
    let mailbox = Mailbox::default();
    mailbox.push(Envelope {
        id: 9,
        incarnation: 1,
        acked: Arc::default(),
        reply_to: ReturnPath {
            ip: ip(1),
            inbox: Arc::downgrade(&inbox),
        },
        request: Box::new(()),
        received_ns: 0,
    });
    drop(mailbox);
    let waker = noop_waker();
    let mut cx = Context::from_waker(&waker);
    assert!(matches!(
        inbox.poll_arrival(&mut cx),
        Poll::Ready(Arrival::Lost)
    ));
}
