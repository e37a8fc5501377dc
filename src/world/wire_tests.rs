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
            reply_cpu: None,
        },
        request: Box::new(()),
        received_ns: 0,
        departs_ns: 0,
        client_gone_ns: Arc::new(u64::MAX.into()),
    });
    drop(mailbox);
    let waker = noop_waker();
    let mut cx = Context::from_waker(&waker);
    assert!(matches!(
        inbox.poll_arrival(&mut cx),
        Poll::Ready(Arrival::Lost)
    ));
}

#[test]
fn a_reply_counts_as_landed_only_for_the_request_awaited_and_from_its_moment() {
    let inbox = Inbox::default();
    inbox.await_request(3);
    inbox.reply_lands_at(2, 100);
    assert_eq!(
        inbox.landed_by(u64::MAX),
        None,
        "an earlier request's reply"
    );
    inbox.reply_lands_at(3, 500);
    inbox.reply_lands_at(3, 400);
    assert_eq!(inbox.landed_by(399), None, "not yet");
    assert_eq!(inbox.landed_by(400), Some(400), "the first copy to land");
    inbox.await_request(4);
    assert_eq!(
        inbox.landed_by(u64::MAX),
        None,
        "forgotten with its request"
    );
}
