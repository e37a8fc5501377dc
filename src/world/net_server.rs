//! The server side of `net`'s connections: a listening socket that takes requests in arrival
//! order, answers resent ones from a cache of replies, and sends replies over the wire.

use super::{transmit, with_registry, ListenGuard, Message, REPLY_CACHE_MAX};
use crate::world::wire::{Mailbox, Payload, ReturnPath, WireSize};
use std::collections::{BTreeMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Puts a reply of `bytes` on the wire once the server is done with what it holds it for;
/// its client is told at once if the wire drops it.
fn send_reply(from: IpAddr, to: &ReturnPath, id: u64, reply: (Payload, u64), hold_until_ns: u64) {
    let (reply, bytes) = reply;
    let inbox = to.inbox.clone();
    let message = Message {
        from,
        to: to.ip,
        bytes,
        hold_until_ns,
    };
    // What the client spends on the reply before it acts: handed over that much later.
    let cpu_ns = to.reply_cpu.as_ref().map_or(0, |cpu| cpu(&*reply));
    let sent = transmit(message, cpu_ns, move || {
        if let Some(inbox) = inbox.upgrade() {
            inbox.deliver(id, reply);
        }
    });
    match (sent, to.inbox.upgrade()) {
        (Some(lands_ns), Some(inbox)) => inbox.reply_lands_at(id, lands_ns),
        (Some(_), None) => {}
        (None, _) => to.lose(id),
    }
}

/// A server socket: receives requests in arrival order and sends replies, deduplicating
/// resent requests.
pub struct RpcServer {
    ip: IpAddr,
    mailbox: Arc<Mailbox>,
    _listening: Arc<ListenGuard>,
    incarnation: u64,
    replies: Arc<std::sync::Mutex<ReplyCache>>,
}

/// What the server knows of each request id. Request ids are unique in a run (each client
/// numbers its requests in a range of its own), so the id alone names a request.
#[derive(Default)]
pub(super) struct ReplyCache {
    /// Whether the run's wire may drop anything (`Registry::drops_possible`): only then can a
    /// request arrive twice. Without it nothing is remembered, which saves every request
    /// two look-ups in the cache and a copy of its reply.
    pub(super) keeping: bool,
    /// Every request being served (`None`) or answered and remembered.
    pub(super) entries: BTreeMap<u64, Option<Box<dyn CloneAny>>>,
    /// The answered ones, oldest first: the first to forget.
    pub(super) answered: VecDeque<u64>,
}

/// A reply that can be sent again.
pub(super) trait CloneAny: Send + Sync {
    /// A copy to send, and its size on the wire.
    fn clone_payload(&self) -> (Payload, u64);
}

impl<T: WireSize + Clone + Send + Sync + 'static> CloneAny for T {
    fn clone_payload(&self) -> (Payload, u64) {
        (Box::new(self.clone()), self.wire_bytes())
    }
}

/// One request as the server sees it.
pub struct Incoming<Req> {
    /// Where its reply goes.
    pub from: ReturnPath,
    pub id: u64,
    pub request: Req,
    /// When the server's host had taken in all of it: the server cannot start on it before.
    pub received_ns: u64,
}

impl<Req> Incoming<Req> {
    /// The connection it came on: a client numbers its requests in a range of its own.
    pub fn connection(&self) -> u64 {
        self.id >> 32
    }
}

impl RpcServer {
    /// Listens at `addr`, an address of the current machine.
    pub fn bind(addr: SocketAddr) -> Self {
        let mailbox = Arc::new(Mailbox::default());
        let (incarnation, ip, keeping) = with_registry(|r| {
            let incarnation = r.bind(addr, Arc::downgrade(&mailbox));
            (incarnation, r.hosts.current(), r.drops_possible)
        });
        assert_eq!(
            ip,
            addr.ip(),
            "a server listens on its own machine's address"
        );
        RpcServer {
            ip,
            mailbox,
            _listening: Arc::new(ListenGuard(incarnation)),
            incarnation,
            replies: Arc::new(std::sync::Mutex::new(ReplyCache {
                keeping,
                ..ReplyCache::default()
            })),
        }
    }

    /// Waits for the next request that is not a resend of one in progress. A resend of an
    /// answered request is answered again from the cache here.
    pub async fn recv<Req: Send + Sync + 'static>(&self) -> Incoming<Req> {
        loop {
            let envelope = std::future::poll_fn(|cx| self.mailbox.poll_next(cx)).await;
            assert_eq!(
                envelope.incarnation, self.incarnation,
                "a request for incarnation {} landed in incarnation {}'s mailbox",
                envelope.incarnation, self.incarnation
            );
            let id = envelope.id;
            envelope.acked.fetch_max(id, Ordering::Relaxed);
            envelope.reply_to.acknowledge(id);
            let cached = self.replies.lock().expect("reply cache lock").take_in(id);
            match cached {
                Some(Some(reply)) => send_reply(self.ip, &envelope.reply_to, id, reply, 0),
                Some(None) => {}
                None => {
                    let request = envelope
                        .request
                        .downcast::<Req>()
                        .expect("requests on a server socket all have its request type");
                    return Incoming {
                        from: envelope.reply_to,
                        id,
                        request: *request,
                        received_ns: envelope.received_ns,
                    };
                }
            }
        }
    }

    /// This bind's incarnation number: new for every process that binds the address.
    pub fn incarnation(&self) -> u64 {
        self.incarnation
    }

    /// A handle that can answer requests but does not keep the port listening: request
    /// tasks hold this, so the port closes when the server itself goes away.
    pub fn replier(&self) -> Replier {
        Replier {
            ip: self.ip,
            replies: self.replies.clone(),
        }
    }
}

/// Sends replies on behalf of an `RpcServer`.
#[derive(Clone)]
pub struct Replier {
    ip: IpAddr,
    replies: Arc<std::sync::Mutex<ReplyCache>>,
}

impl Replier {
    /// Sends the reply to a request and remembers it for resends. It leaves at
    /// `hold_until_ns` of simulated time, or now if that has passed: a server busy with a
    /// request replies when it is done.
    pub fn reply<Resp: WireSize + Clone + Send + Sync + 'static>(
        &self,
        to: &ReturnPath,
        id: u64,
        reply: Resp,
        hold_until_ns: u64,
    ) {
        let bytes = reply.wire_bytes();
        let mut cache = self.replies.lock().expect("reply cache lock");
        if cache.keeping {
            cache.answer(id, Box::new(reply.clone()));
        }
        drop(cache);
        send_reply(self.ip, to, id, (Box::new(reply), bytes), hold_until_ns);
    }
}

impl ReplyCache {
    /// What request `id` meets as it arrives: `None` when it is new (and now being served),
    /// `Some(None)` when a copy of it is being served, `Some(reply)` when it was answered.
    /// A cache that keeps nothing takes every request as new.
    fn take_in(&mut self, id: u64) -> Option<Option<(Payload, u64)>> {
        if !self.keeping {
            return None;
        }
        match self.entries.get(&id) {
            Some(Some(reply)) => Some(Some(reply.as_ref().clone_payload())),
            Some(None) => Some(None),
            None => {
                self.insert_pending(id);
                None
            }
        }
    }

    pub(super) fn insert_pending(&mut self, id: u64) {
        let earlier = self.entries.insert(id, None);
        assert!(
            earlier.is_none(),
            "request {id} entered the reply cache twice"
        );
    }

    /// Remembers the reply to request `id`, forgetting the oldest answered replies past the
    /// bound. A request is answered once: it is never forgotten while it is being served.
    pub(super) fn answer(&mut self, id: u64, reply: Box<dyn CloneAny>) {
        let Some(slot) = self.entries.get_mut(&id) else {
            // The request came to an earlier process on this port; nothing to remember.
            return;
        };
        assert!(slot.is_none(), "request {id} was answered twice");
        *slot = Some(reply);
        self.answered.push_back(id);
        while self.answered.len() > REPLY_CACHE_MAX {
            if let Some(old) = self.answered.pop_front() {
                self.entries.remove(&old);
            }
        }
        // Every answered id is listed once in `answered` and once in `entries`.
        assert!(
            self.entries.len() >= self.answered.len(),
            "the reply cache lists {} answered requests but holds {} entries",
            self.answered.len(),
            self.entries.len()
        );
    }
}
