//! Request/response messaging over the simulated network, with TCP's connection semantics.
//!
//! madsim delivers datagrams with the configured latency and loss and drops them on clogged
//! links. Real c10d traffic runs over TCP, and its verdicts on faults come from TCP:
//! - A client is a connection to one server *incarnation* (one bind of one process). It never
//!   reconnects: a restarted server at the same address never answers an old connection.
//! - A server process that dies on a live host resets its connections at once: every call
//!   on them fails within a round trip, even one blocked in a `get`.
//! - A host that goes down answers nothing: calls see silence until their own timeout. Once
//!   the host is back, a request still being retransmitted meets a reset; a request the dead
//!   server had already received (acknowledged, so nothing is retransmitted) waits out its
//!   timeout.
//! - Loss is hidden behind retransmission: an unacknowledged request is resent with TCP's
//!   doubling timeout (200 ms up to Linux's 120 s); once acknowledged, the client re-asks
//!   for a lost reply at most every 3.2 s. The server answers a resent request from a small
//!   cache instead of applying it twice.
//! - The first connect is retried every 100 ms while nothing listens, as TCPStore's client
//!   retries a refused connect until its timeout.

use futures::future::{select, Either, FutureExt, Shared};
use futures::StreamExt;
use madsim::net::Endpoint;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Fires when a server incarnation's connections are reset.
type ResetSignal = Shared<futures::channel::oneshot::Receiver<()>>;

/// One bind of a server socket by one process.
struct Incarnation {
    addr: SocketAddr,
    /// 1 for the first process to bind `addr` in the run, 2 for the next, and so on.
    generation: u64,
    alive: bool,
    /// Sending on it resets every connection; kept unsent while the incarnation is silent.
    reset_tx: Option<futures::channel::oneshot::Sender<()>>,
    reset: ResetSignal,
}

/// The run's view of which servers listen and which hosts are up, kept in the run's
/// context (`world::context`).
#[derive(Default)]
pub(super) struct Registry {
    /// The incarnation listening at each address now.
    listening: BTreeMap<SocketAddr, u64>,
    incarnations: BTreeMap<u64, Incarnation>,
    /// Hosts that are powered off: they answer nothing, not even a reset.
    hosts_down: BTreeSet<IpAddr>,
    incarnations_made: u64,
    /// Binds so far per address.
    binds: BTreeMap<SocketAddr, u64>,
    /// Clients made so far: each numbers its requests in a range of its own.
    pub(super) clients_made: u64,
}

/// `f` on the registry of the run on this thread.
fn with_registry<T>(f: impl FnOnce(&mut Registry) -> T) -> T {
    super::context::with_run(|context| f(&mut context.registry.borrow_mut()))
}

/// Marks a host powered off or back on. A host going down silences its servers' connections
/// (no resets); the processes on it die separately.
pub fn set_host_down(ip: IpAddr, down: bool) {
    with_registry(|r| {
        if down {
            r.hosts_down.insert(ip);
        } else {
            r.hosts_down.remove(&ip);
        }
    });
}

/// The incarnation listening at `addr` now, if any: what a new connection would reach.
pub fn listening_incarnation(addr: SocketAddr) -> Option<u64> {
    with_registry(|r| r.listening.get(&addr).copied())
}

/// What a client bound to an incarnation (or about to connect) meets when it sends now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path {
    /// The server is alive and its host up: the message goes out.
    Open,
    /// The host is up and nothing answers for this connection: a reset comes back.
    Reset,
    /// The host is down (or the server process is frozen): nothing comes back.
    Silent,
}

impl Registry {
    fn host_down(&self, ip: IpAddr) -> bool {
        self.hosts_down.contains(&ip)
    }

    /// The path of a connection to `incarnation`.
    fn path_of(&self, incarnation: u64) -> Path {
        let inc = &self.incarnations[&incarnation];
        match (self.host_down(inc.addr.ip()), inc.alive) {
            (true, _) => Path::Silent,
            (false, true) => Path::Open,
            (false, false) => Path::Reset,
        }
    }

    /// The path of a new connection to `addr`, and the incarnation it would reach.
    fn connect_path(&self, addr: SocketAddr) -> (Path, Option<u64>) {
        if self.host_down(addr.ip()) {
            return (Path::Silent, None);
        }
        match self.listening.get(&addr) {
            Some(inc) => (Path::Open, Some(*inc)),
            None => (Path::Reset, None),
        }
    }

    fn bind(&mut self, addr: SocketAddr) -> u64 {
        self.incarnations_made += 1;
        let id = self.incarnations_made;
        let (tx, rx) = futures::channel::oneshot::channel();
        let generation = self.binds.entry(addr).or_insert(0);
        *generation += 1;
        let generation = *generation;
        let listening = self.listening.get(&addr);
        // A live server holds its port: a second bind of it would have failed.
        assert!(
            listening.is_none_or(|inc| !self.incarnations[inc].alive),
            "{addr} bound again (bind {generation}) while incarnation {listening:?} listens"
        );
        self.incarnations.insert(
            id,
            Incarnation {
                addr,
                generation,
                alive: true,
                reset_tx: Some(tx),
                reset: rx.shared(),
            },
        );
        self.listening.insert(addr, id);
        id
    }

    /// The server process of `incarnation` is gone: on a live host its connections reset
    /// at once; on a host that is down they stay silent.
    fn died(&mut self, incarnation: u64) {
        let Some(ip) = self.incarnations.get(&incarnation).map(|i| i.addr.ip()) else {
            // Every incarnation is registered at its bind, in the same run.
            panic!("incarnation {incarnation} died without having been bound");
        };
        let down = self.host_down(ip);
        let inc = self
            .incarnations
            .get_mut(&incarnation)
            .expect("looked up above");
        if !inc.alive {
            // Its host's processes were already declared dead; the task is dropped later.
            return;
        }
        inc.alive = false;
        if self.listening.get(&inc.addr) == Some(&incarnation) {
            self.listening.remove(&inc.addr);
        }
        if !down {
            if let Some(tx) = inc.reset_tx.take() {
                let _ = tx.send(());
            }
        }
    }
}

/// Unregisters a server incarnation when the last handle on its server goes away.
struct ListenGuard(u64);

impl Drop for ListenGuard {
    fn drop(&mut self) {
        // A server outlives its run only while the run's thread unwinds a panic; then there
        // is no registry left to tell.
        super::context::with(|context| context.registry.borrow_mut().died(self.0));
    }
}

/// The tag requests travel under; a reply to request `id` uses `REPLY_TAG_BASE | id`.
const REQUEST_TAG: u64 = 1;
const REPLY_TAG_BASE: u64 = 1 << 63;
/// The first retransmission timeout (Linux's minimum RTO), and its ceiling (`TCP_RTO_MAX`).
const RTO_US_MIN: u64 = 200_000;
const RTO_US_MAX: u64 = 120_000_000;
/// How often an acknowledged request asks again for a reply that may have been lost.
const REASK_US_MAX: u64 = 3_200_000;
/// Answered replies the server remembers for resent requests, across all clients. Requests
/// still being served are kept apart from this bound (there is one per request in flight):
/// forgetting one would serve its resend as a new request, applying it twice.
const REPLY_CACHE_MAX: usize = 4096;
/// How long a reset takes to come back from a live host.
const RESET_DELAY_US: u64 = 2_000;
/// How often a client retries a refused connect.
const CONNECT_RETRY_US: u64 = 100_000;

/// Why a call got no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetError {
    #[error("no reply from {0} within {1} us")]
    Timeout(SocketAddr, u64),
    #[error("cannot bind a socket: {0}")]
    Bind(String),
    #[error("connection to {0} refused: nothing listens there")]
    Refused(SocketAddr),
    #[error("connection to {0} reset by peer: the server process is gone")]
    Reset(SocketAddr),
}

/// A request on the wire: its id, the incarnation it is addressed to, and the client's
/// acknowledgement slot (the highest id the server received: TCP's ACK, without a message).
type Wire<Req> = (u64, u64, Arc<AtomicU64>, Req);

/// A client connection to one server. Each call carries a fresh id; calls on one client are
/// sequential. It binds to the server incarnation its first call reaches, and stays bound.
pub struct RpcClient {
    endpoint: Endpoint,
    server: SocketAddr,
    next_id: u64,
    /// The incarnation this connection reached, once it did.
    incarnation: Option<u64>,
    reset: Option<ResetSignal>,
    acked: Arc<AtomicU64>,
}

impl RpcClient {
    /// Binds an ephemeral port on the current node; the connection is made by the first call.
    pub async fn connect(server: SocketAddr) -> Result<Self, NetError> {
        let endpoint = Endpoint::bind("0.0.0.0:0")
            .await
            .map_err(|e| NetError::Bind(e.to_string()))?;
        let client = with_registry(|r| {
            r.clients_made += 1;
            r.clients_made
        });
        Ok(RpcClient {
            endpoint,
            server,
            next_id: (client << 32) | 1,
            incarnation: None,
            reset: None,
            acked: Arc::default(),
        })
    }

    /// Which bind of its address the server this connection reached is (1 for the first
    /// process to serve there), once a call reached one.
    pub fn incarnation(&self) -> Option<u64> {
        let id = self.incarnation?;
        with_registry(|r| r.incarnations.get(&id).map(|inc| inc.generation))
    }

    /// Where this connection's next message goes, connecting first if it is not yet bound.
    fn path(&mut self) -> Path {
        if let Some(incarnation) = self.incarnation {
            return with_registry(|r| r.path_of(incarnation));
        }
        let (path, reached) = with_registry(|r| {
            let (path, reached) = r.connect_path(self.server);
            let reset = reached.map(|inc| r.incarnations[&inc].reset.clone());
            (path, reached.zip(reset))
        });
        if let Some((incarnation, reset)) = reached {
            self.incarnation = Some(incarnation);
            self.reset = Some(reset);
        }
        path
    }

    fn acked(&self, id: u64) -> bool {
        self.acked.load(Ordering::Relaxed) >= id
    }

    /// Sends `request` and waits up to `timeout_us` for the reply (see the module docs for
    /// what resets, silence and loss do to it).
    pub async fn call<Req, Resp>(&mut self, request: Req, timeout_us: u64) -> Result<Resp, NetError>
    where
        Req: Clone + Send + Sync + 'static,
        Resp: Clone + Send + Sync + 'static,
    {
        let id = self.next_id;
        self.next_id += 1;
        // The server's reply cache names a request by its id alone.
        assert_eq!(
            id >> 32,
            self.next_id >> 32,
            "a client's request ids stay in its own range"
        );
        let deadline_us = super::time::elapsed_us()
            .checked_add(timeout_us)
            .unwrap_or_else(|| panic!("a call to {} with timeout {timeout_us} us", self.server));
        let mut rto_us = RTO_US_MIN;
        loop {
            let now_us = super::time::elapsed_us();
            if now_us >= deadline_us {
                return Err(NetError::Timeout(self.server, timeout_us));
            }
            let remaining_us = deadline_us - now_us;
            match self.path() {
                Path::Reset if self.incarnation.is_none() => {
                    // A refused connect, which TCPStore's client retries until its timeout.
                    super::time::sleep_us(RESET_DELAY_US).await;
                    if super::time::elapsed_us() + CONNECT_RETRY_US >= deadline_us {
                        return Err(NetError::Refused(self.server));
                    }
                    super::time::sleep_us(CONNECT_RETRY_US).await;
                }
                Path::Reset if self.acked(id) => {
                    // Nothing outstanding on the wire: nothing meets the reset.
                    super::time::sleep_us(remaining_us).await;
                }
                Path::Reset => {
                    super::time::sleep_us(RESET_DELAY_US).await;
                    return Err(NetError::Reset(self.server));
                }
                Path::Silent => {
                    super::time::sleep_us(rto_us.min(remaining_us)).await;
                    rto_us = (rto_us * 2).min(RTO_US_MAX);
                }
                Path::Open => {
                    let cap_us = if self.acked(id) {
                        REASK_US_MAX
                    } else {
                        RTO_US_MAX
                    };
                    let wait_us = rto_us.min(cap_us).min(remaining_us);
                    match self.exchange(id, &request, wait_us).await {
                        Exchange::Reply(resp) => return Ok(resp),
                        Exchange::Reset => {
                            super::time::sleep_us(RESET_DELAY_US).await;
                            return Err(NetError::Reset(self.server));
                        }
                        Exchange::Silence => rto_us = (rto_us * 2).min(cap_us),
                    }
                }
            }
        }
    }

    /// Sends the request once and waits up to `wait_us` for its reply or a reset.
    async fn exchange<Req, Resp>(&self, id: u64, request: &Req, wait_us: u64) -> Exchange<Resp>
    where
        Req: Clone + Send + Sync + 'static,
        Resp: Clone + Send + Sync + 'static,
    {
        let incarnation = self.incarnation.expect("an open path is bound");
        let wire: Wire<Req> = (id, incarnation, Arc::clone(&self.acked), request.clone());
        send(&self.endpoint, self.server, REQUEST_TAG, Box::new(wire)).await;
        let reply =
            super::time::timeout_us(wait_us, self.endpoint.recv_from_raw(REPLY_TAG_BASE | id));
        let reset = self
            .reset
            .clone()
            .expect("a bound connection has its reset signal");
        match select(pin!(reply), reset).await {
            Either::Left((Some(Ok((payload, _from))), _)) => {
                let resp = payload
                    .downcast::<Resp>()
                    .expect("a reply always has the type its request asked for");
                Exchange::Reply(*resp)
            }
            Either::Left(_) => Exchange::Silence,
            Either::Right(_) => Exchange::Reset,
        }
    }
}

/// How one send of a request ended.
enum Exchange<Resp> {
    Reply(Resp),
    Reset,
    Silence,
}

/// Sends one message, counted as a simulator event. A send error means the destination is
/// unknown; the sender sees silence, as a SYN to a dead host would.
async fn send(endpoint: &Endpoint, to: SocketAddr, tag: u64, payload: madsim::net::Payload) {
    super::time::count_sim_event();
    let _ = endpoint.send_to_raw(to, tag, payload).await;
}

/// Every server process on the host `ip` died with its host still up (a killed pod): their
/// connections reset at once. With the host marked down first, they go silent instead.
pub fn processes_died_on(ip: IpAddr) {
    with_registry(|r| {
        let dying: Vec<u64> = r
            .incarnations
            .iter()
            .filter(|(_, inc)| inc.alive && inc.addr.ip() == ip)
            .map(|(id, _)| *id)
            .collect();
        for incarnation in dying {
            r.died(incarnation);
        }
    });
}

/// Receives a server keeps waiting at once, at least. madsim charges every receive a random
/// delay that its `sleep` rounds up to 1 ms, so one receive at a time caps a server at 1 000
/// messages per simulated second: a 1 024-node join storm queued requests for over 60 s
/// (TCPStore's timeout) behind that cap, an artefact no real TCPStore has. A server with
/// more clients keeps one receive per client, as TCPStore reads every connection: a message
/// that finds no receive waits in madsim's mailbox, which serves the newest first
/// (`swap_remove`), and under a 4 096-node storm the oldest requests starved past 60 s.
const RECEIVES_IN_FLIGHT_MIN: usize = 32;
/// Clients a server tells apart for its receive count; past it, one receive per client.
const CLIENTS_COUNTED_MAX: usize = 65_536;

/// One pending receive of a request message.
type Receive =
    futures::future::BoxFuture<'static, std::io::Result<(madsim::net::Payload, SocketAddr)>>;

/// A server socket: receives requests and sends replies, deduplicating resent requests.
pub struct RpcServer {
    endpoint: Endpoint,
    _listening: Arc<ListenGuard>,
    incarnation: u64,
    replies: std::sync::Arc<std::sync::Mutex<ReplyCache>>,
    receiving: futures::stream::FuturesUnordered<Receive>,
    /// The clients that sent to this server (each is one connection).
    clients: BTreeSet<SocketAddr>,
}

/// What the server knows of each request id. Request ids are unique in a run (each client
/// numbers its requests in a range of its own), so the id alone names a request: keying by
/// sender and id made this cache's lookups a visible share of every message's cost.
#[derive(Default)]
struct ReplyCache {
    /// Every request being served (`None`) or answered and remembered.
    entries: BTreeMap<u64, Option<Box<dyn CloneAny>>>,
    /// The answered ones, oldest first: the first to forget.
    answered: VecDeque<u64>,
}

/// A reply that can be sent again.
trait CloneAny: Send + Sync {
    fn clone_payload(&self) -> madsim::net::Payload;
}

impl<T: Clone + Send + Sync + 'static> CloneAny for T {
    fn clone_payload(&self) -> madsim::net::Payload {
        Box::new(self.clone())
    }
}

/// One request as the server sees it.
pub struct Incoming<Req> {
    pub from: SocketAddr,
    pub id: u64,
    pub request: Req,
}

impl RpcServer {
    /// Binds `addr`, an address of the current node.
    pub async fn bind(addr: SocketAddr) -> Result<Self, NetError> {
        let endpoint = Endpoint::bind(addr)
            .await
            .map_err(|e| NetError::Bind(e.to_string()))?;
        let incarnation = with_registry(|r| r.bind(addr));
        Ok(RpcServer {
            endpoint,
            _listening: Arc::new(ListenGuard(incarnation)),
            incarnation,
            replies: Default::default(),
            receiving: futures::stream::FuturesUnordered::new(),
            clients: BTreeSet::new(),
        })
    }

    /// Waits for the next request that is not a resend of one in progress. A resend of an
    /// answered request is answered again from the cache here.
    pub async fn recv<Req: Send + Sync + 'static>(&mut self) -> Incoming<Req> {
        loop {
            let receives = RECEIVES_IN_FLIGHT_MIN.max(self.clients.len());
            while self.receiving.len() < receives {
                let endpoint = self.endpoint.clone();
                self.receiving.push(Box::pin(async move {
                    endpoint.recv_from_raw(REQUEST_TAG).await
                }));
            }
            let Some(Ok((payload, from))) = self.receiving.next().await else {
                continue;
            };
            if self.clients.len() < CLIENTS_COUNTED_MAX {
                self.clients.insert(from);
            }
            let (id, incarnation, acked, request) = *payload
                .downcast::<Wire<Req>>()
                .expect("requests on a server socket all have its request type");
            if incarnation != self.incarnation {
                // Meant for an earlier process on this port: its connection is gone.
                continue;
            }
            acked.fetch_max(id, Ordering::Relaxed);
            let cached = {
                let mut cache = self.replies.lock().expect("reply cache lock");
                match cache.entries.get(&id) {
                    Some(Some(reply)) => Some(Some(reply.as_ref().clone_payload())),
                    Some(None) => Some(None),
                    None => {
                        cache.insert_pending(id);
                        None
                    }
                }
            };
            match cached {
                Some(Some(reply)) => {
                    send(&self.endpoint, from, REPLY_TAG_BASE | id, reply).await;
                }
                Some(None) => {}
                None => return Incoming { from, id, request },
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
            endpoint: self.endpoint.clone(),
            replies: self.replies.clone(),
        }
    }
}

/// Sends replies on behalf of an `RpcServer`.
pub struct Replier {
    endpoint: Endpoint,
    replies: std::sync::Arc<std::sync::Mutex<ReplyCache>>,
}

impl Replier {
    /// Sends the reply to a request and remembers it for resends.
    pub async fn reply<Resp: Clone + Send + Sync + 'static>(
        &self,
        to: SocketAddr,
        id: u64,
        reply: Resp,
    ) {
        self.replies
            .lock()
            .expect("reply cache lock")
            .answer(id, Box::new(reply.clone()));
        send(&self.endpoint, to, REPLY_TAG_BASE | id, Box::new(reply)).await;
    }
}

impl ReplyCache {
    fn insert_pending(&mut self, id: u64) {
        let earlier = self.entries.insert(id, None);
        assert!(
            earlier.is_none(),
            "request {id} entered the reply cache twice"
        );
    }

    /// Remembers the reply to request `id`, forgetting the oldest answered replies past the
    /// bound. A request is answered once: it is never forgotten while it is being served.
    fn answer(&mut self, id: u64, reply: Box<dyn CloneAny>) {
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

#[cfg(test)]
#[path = "net_tests.rs"]
mod tests;
