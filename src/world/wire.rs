//! The wire under `net`'s connections: what the network does to one message. A message is
//! one timer that hands it over at its arrival instant; its latency, and whether it is
//! lost, come from the run's own seeded stream; a cut link drops it.
//!
//! madsim's datagram endpoints cost a message three timers (a delay of at least 1 ms on
//! send, the latency, a delay of at least 1 ms on receive) and draw them from the stream
//! that also times every task poll. Here a message costs the one timer its latency needs,
//! arrives after exactly the scenario's latency, and its draws shift nothing else.
//!
//! A message the wire drops is reported to its sender at once (`Inbox::lose`), so a
//! connection arms a retransmission timer only for a message that was really lost: TCP's
//! retransmission is the same, the sender's timer just has nothing to do when the ACK
//! comes. Loss never reorders or duplicates what arrives.

use crate::sim_time::SimDuration;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::IpAddr;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll, Waker};

/// What a message carries: requests and replies of any type.
pub(super) type Payload = Box<dyn std::any::Any + Send + Sync>;

/// The CPU time, in nanoseconds, a client spends on a reply before it acts on it (torch's
/// rendezvous decoding the state it read): the reply is handed over that much after it
/// lands, which costs no timer of its own. The reply counts as received when it lands.
pub type ReplyCpu = Arc<dyn Fn(&(dyn std::any::Any + Send + Sync)) -> u64 + Send + Sync>;

/// How many bytes a request or reply puts on the wire, headers of its own protocol included:
/// what its hosts' links carry it at.
pub trait WireSize {
    fn wire_bytes(&self) -> u64;
}

/// The network's conditions now, which the scenario sets and faults change.
pub(super) struct Conditions {
    latency_ns_min: u64,
    /// Exclusive, as madsim's range was.
    latency_ns_max: u64,
    loss: f64,
    /// Directed links that drop everything: (from, to).
    cut: BTreeSet<(IpAddr, IpAddr)>,
    /// Where latencies and losses are drawn from: the run's `network` stream.
    stream: ChaCha8Rng,
}

impl Conditions {
    pub(super) fn new(seed: u64, latency: (SimDuration, SimDuration), loss: f64) -> Self {
        let mut conditions = Conditions {
            latency_ns_min: 0,
            latency_ns_max: 1,
            loss,
            cut: BTreeSet::new(),
            stream: super::rng::stream(seed, "network"),
        };
        conditions.set_latency(latency.0, latency.1);
        conditions
    }

    /// Latencies from `min` up to (not including) `max`; one value when they meet.
    pub(super) fn set_latency(&mut self, min: SimDuration, max: SimDuration) {
        let min_ns = min.as_ns();
        self.latency_ns_min = min_ns;
        self.latency_ns_max = max.as_ns().max(min_ns + 1);
    }

    pub(super) fn set_loss(&mut self, probability: f64) {
        assert!(
            (0.0..=1.0).contains(&probability),
            "a loss probability of {probability}"
        );
        self.loss = probability;
    }

    /// Cuts (or restores) the directed link `from -> to`.
    pub(super) fn set_cut(&mut self, from: IpAddr, to: IpAddr, cut: bool) {
        if cut {
            self.cut.insert((from, to));
        } else {
            self.cut.remove(&(from, to));
        }
    }

    /// Whether the directed link `from -> to` drops everything now.
    pub(super) fn is_cut(&self, from: IpAddr, to: IpAddr) -> bool {
        self.cut.contains(&(from, to))
    }

    /// The hosts `from`'s links to which drop everything now.
    pub(super) fn cut_from(&self, from: IpAddr) -> BTreeSet<IpAddr> {
        self.cut
            .iter()
            .filter(|(f, _)| *f == from)
            .map(|(_, to)| *to)
            .collect()
    }

    /// What happens to a message sent now from `from` to `to`: its latency, or `None` when
    /// the wire drops it. Draws nothing for a cut link, and no loss draw on a lossless
    /// network.
    pub(super) fn latency_ns(&mut self, from: IpAddr, to: IpAddr) -> Option<u64> {
        if self.cut.contains(&(from, to)) {
            return None;
        }
        if self.loss > 0.0 && self.stream.gen_bool(self.loss) {
            return None;
        }
        Some(
            self.stream
                .gen_range(self.latency_ns_min..self.latency_ns_max),
        )
    }
}

/// Which host each simulated machine is: madsim names a task's machine by its node id.
#[derive(Default)]
pub(super) struct Hosts {
    ips: BTreeMap<madsim::task::NodeId, IpAddr>,
}

impl Hosts {
    pub(super) fn insert(&mut self, node: madsim::task::NodeId, ip: IpAddr) {
        let earlier = self.ips.insert(node, ip);
        assert!(
            earlier.is_none(),
            "machine {node} was given a second address"
        );
    }

    /// The address of the machine the current task runs on.
    pub(super) fn current(&self) -> IpAddr {
        let node = madsim::plugin::node();
        *self
            .ips
            .get(&node)
            .unwrap_or_else(|| panic!("machine {node} has no address"))
    }
}

/// Where a client waits for the reply to its one request in flight.
#[derive(Default)]
pub(super) struct Inbox {
    inner: Mutex<InboxInner>,
}

#[derive(Default)]
struct InboxInner {
    /// The request the client waits on; anything for an earlier one is dropped.
    awaiting: u64,
    reply: Option<Payload>,
    lost: bool,
    /// Whether the client wants to hear when the server takes the request (a call past its
    /// deadline waits only for that), and whether it has.
    ack_wanted: bool,
    ack_seen: bool,
    /// When the reply reaches the client's host, once the server sent it: with
    /// [`ReplyCpu`], it is handed over later, but a reset or a deadline after this moment
    /// no longer stops the call.
    lands_ns: Option<u64>,
    waker: Option<Waker>,
}

/// What came back for the awaited request.
pub(super) enum Arrival {
    Reply(Payload),
    /// The wire dropped the request or its reply.
    Lost,
    /// The server took the request, and the client asked to hear of it.
    Acknowledged,
}

impl Inbox {
    /// Starts waiting on request `id`, forgetting anything that came before.
    pub(super) fn await_request(&self, id: u64) {
        let mut inner = self.inner.lock().expect("inbox lock");
        inner.awaiting = id;
        inner.reply = None;
        inner.lost = false;
        inner.ack_wanted = false;
        inner.ack_seen = false;
        inner.lands_ns = None;
    }

    /// The reply to request `id` is on its way and reaches this host at `at_ns`.
    pub(super) fn reply_lands_at(&self, id: u64, at_ns: u64) {
        let mut inner = self.inner.lock().expect("inbox lock");
        if inner.awaiting == id {
            inner.lands_ns = Some(inner.lands_ns.map_or(at_ns, |earlier| earlier.min(at_ns)));
        }
    }

    /// When the awaited request's reply reached this host, if it has by `now_ns`.
    pub(super) fn landed_by(&self, now_ns: u64) -> Option<u64> {
        let inner = self.inner.lock().expect("inbox lock");
        inner.lands_ns.filter(|at| *at <= now_ns)
    }

    /// From now on, the server taking the awaited request ends the wait
    /// (`Arrival::Acknowledged`).
    pub(super) fn want_ack(&self) {
        self.inner.lock().expect("inbox lock").ack_wanted = true;
    }

    /// The server took request `id`. Only a client that asked to hear of it is woken: every
    /// request is taken, and waking each client for it would poll its task once more per
    /// call for nothing.
    pub(super) fn acknowledge(&self, id: u64) {
        self.update(id, |inner| {
            inner.ack_seen = inner.ack_wanted;
            inner.ack_seen
        });
    }

    /// Hands over the reply to request `id`.
    pub(super) fn deliver(&self, id: u64, reply: Payload) {
        self.update(id, |inner| {
            inner.reply = Some(reply);
            true
        });
    }

    /// Says that request `id` or its reply was dropped.
    pub(super) fn lose(&self, id: u64) {
        self.update(id, |inner| {
            inner.lost = true;
            true
        });
    }

    /// Changes the awaited request's slot with `f`, waking the client when `f` says there
    /// is something for it.
    fn update(&self, id: u64, f: impl FnOnce(&mut InboxInner) -> bool) {
        let waker = {
            let mut inner = self.inner.lock().expect("inbox lock");
            if inner.awaiting != id || !f(&mut inner) {
                return;
            }
            inner.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Ready once the reply came or the wire dropped something of this request.
    pub(super) fn poll_arrival(&self, cx: &mut Context<'_>) -> Poll<Arrival> {
        let mut inner = self.inner.lock().expect("inbox lock");
        if let Some(reply) = inner.reply.take() {
            return Poll::Ready(Arrival::Reply(reply));
        }
        if inner.lost {
            inner.lost = false;
            return Poll::Ready(Arrival::Lost);
        }
        if inner.ack_seen {
            inner.ack_seen = false;
            return Poll::Ready(Arrival::Acknowledged);
        }
        inner.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// Where a reply goes: the client's host and its inbox, and what the client spends on it
/// before acting.
#[derive(Clone)]
pub struct ReturnPath {
    pub(super) ip: IpAddr,
    pub(super) inbox: Weak<Inbox>,
    pub(super) reply_cpu: Option<ReplyCpu>,
}

impl ReturnPath {
    /// Tells the client its request `id` was dropped, if it still waits.
    pub(super) fn lose(&self, id: u64) {
        if let Some(inbox) = self.inbox.upgrade() {
            inbox.lose(id);
        }
    }

    /// Tells the client the server took its request `id` (TCP's ACK), if it asked to hear.
    pub(super) fn acknowledge(&self, id: u64) {
        if let Some(inbox) = self.inbox.upgrade() {
            inbox.acknowledge(id);
        }
    }
}

/// A request as it travels: its id, the server incarnation it is addressed to, the client's
/// acknowledgement slot (the highest id the server received: TCP's ACK, without a message),
/// where the reply goes, the request itself, and when it was all in.
pub(super) struct Envelope {
    pub(super) id: u64,
    pub(super) incarnation: u64,
    pub(super) acked: Arc<AtomicU64>,
    pub(super) reply_to: ReturnPath,
    pub(super) request: Payload,
    /// When the server's host has taken it all in (set when it arrives): its link may still
    /// be taking in requests that came before it.
    pub(super) received_ns: u64,
    /// When it leaves its client: later than it was handed to the wire when the client
    /// first spends CPU on it (torch's rendezvous encoding its state).
    pub(super) departs_ns: u64,
    /// When the client went away (`u64::MAX` while it lives): a request whose client died
    /// before it left never leaves.
    pub(super) client_gone_ns: Arc<AtomicU64>,
}

/// A server's queue of arrived requests, served in arrival order as TCPStore reads its
/// connections. Requests still queued when the server goes away never reached it: each
/// sender is told its request was dropped.
#[derive(Default)]
pub(super) struct Mailbox {
    inner: Mutex<MailboxInner>,
}

#[derive(Default)]
struct MailboxInner {
    queue: VecDeque<Envelope>,
    waker: Option<Waker>,
}

impl Mailbox {
    pub(super) fn push(&self, envelope: Envelope) {
        let waker = {
            let mut inner = self.inner.lock().expect("mailbox lock");
            inner.queue.push_back(envelope);
            inner.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    pub(super) fn poll_next(&self, cx: &mut Context<'_>) -> Poll<Envelope> {
        let mut inner = self.inner.lock().expect("mailbox lock");
        match inner.queue.pop_front() {
            Some(envelope) => Poll::Ready(envelope),
            None => {
                inner.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

impl Drop for Mailbox {
    fn drop(&mut self) {
        let queue = match self.inner.get_mut() {
            Ok(inner) => std::mem::take(&mut inner.queue),
            Err(poisoned) => std::mem::take(&mut poisoned.into_inner().queue),
        };
        for envelope in queue {
            envelope.reply_to.lose(envelope.id);
        }
    }
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
