//! Request/response messaging over the simulated network, with TCP's connection semantics.
//!
//! The wire (`wire`) delivers each message after the network's latency, or drops it (loss,
//! a cut link). Real c10d traffic runs over TCP, and its verdicts on faults come from TCP:
//! - A client is a connection to one server *incarnation* (one bind of one process). It never
//!   reconnects: a restarted server at the same address never answers an old connection.
//! - A server process that dies on a live host resets its connections at once: every call
//!   on them fails within a round trip, even one blocked in a `get`.
//! - A host that goes down answers nothing: calls see silence until their own timeout. Once
//!   the host is back, a request still being retransmitted meets a reset; a request the dead
//!   server had already received (acknowledged, so nothing is retransmitted) waits out its
//!   timeout.
//! - Loss is hidden behind retransmission: a dropped request is resent when TCP's doubling
//!   timeout runs out (200 ms up to Linux's 120 s); a dropped reply is asked for again, at
//!   most 3.2 s later. The server answers a resent request from a small cache instead of
//!   applying it twice. Nothing is resent that was not dropped: TCP's timer would find
//!   nothing to do, so none is armed.
//! - A call waits for its reply up to its timeout, however long the server takes.
//! - The first connect is retried every 100 ms while nothing listens, as TCPStore's client
//!   retries a refused connect until its timeout.

use super::time;
use super::wire::{Arrival, Conditions, Envelope, Hosts, Inbox, Mailbox, ReturnPath};
use futures::future::{select, Either, FutureExt, Shared};
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

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
    /// Where requests to it arrive, while its server lives.
    mailbox: Weak<Mailbox>,
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
    /// Latency, loss and cut links; set when the run starts.
    conditions: Option<Conditions>,
    hosts: Hosts,
}

/// `f` on the registry of the run on this thread.
fn with_registry<T>(f: impl FnOnce(&mut Registry) -> T) -> T {
    super::context::with_run(|context| f(&mut context.registry.borrow_mut()))
}

/// Sets the network's conditions at the start of a run: latencies and losses come from the
/// run's `network` stream.
pub(super) fn configure(seed: u64, latency_us: (u64, u64), loss: f64) {
    with_registry(|r| r.conditions = Some(Conditions::new(seed, latency_us, loss)));
}

/// Names the address of a simulated machine.
pub(super) fn register_host(node: madsim::task::NodeId, ip: IpAddr) {
    with_registry(|r| r.hosts.insert(node, ip));
}

/// The network's latency range from now on.
pub(super) fn set_latency_us(min_us: u64, max_us: u64) {
    with_registry(|r| r.conditions().set_latency_us(min_us, max_us));
}

/// The network's loss probability from now on.
pub(super) fn set_loss(probability: f64) {
    with_registry(|r| r.conditions().set_loss(probability));
}

/// Cuts (or restores) the directed link between two hosts.
pub(super) fn set_link_cut(from: IpAddr, to: IpAddr, cut: bool) {
    with_registry(|r| r.conditions().set_cut(from, to, cut));
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
    fn conditions(&mut self) -> &mut Conditions {
        self.conditions
            .as_mut()
            .expect("the network is configured when the run starts")
    }

    /// The mailbox a request to `incarnation` lands in now, if its server lives and its
    /// host is up.
    fn arrival(&self, incarnation: u64) -> Option<Arc<Mailbox>> {
        let inc = self.incarnations.get(&incarnation)?;
        if !inc.alive || self.host_down(inc.addr.ip()) {
            return None;
        }
        inc.mailbox.upgrade()
    }

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

    fn bind(&mut self, addr: SocketAddr, mailbox: Weak<Mailbox>) -> u64 {
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
                mailbox,
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

/// The first retransmission timeout (Linux's minimum RTO), and its ceiling (`TCP_RTO_MAX`).
const RTO_US_MIN: u64 = 200_000;
const RTO_US_MAX: u64 = 120_000_000;
/// The longest a client waits before asking again for a reply that was dropped.
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
    #[error("connection to {0} refused: nothing listens there")]
    Refused(SocketAddr),
    #[error("connection to {0} reset by peer: the server process is gone")]
    Reset(SocketAddr),
}

/// A client connection to one server. Each call carries a fresh id; calls on one client are
/// sequential. It binds to the server incarnation its first call reaches, and stays bound.
pub struct RpcClient {
    /// The client's host.
    ip: IpAddr,
    server: SocketAddr,
    next_id: u64,
    /// The incarnation this connection reached, once it did.
    incarnation: Option<u64>,
    reset: Option<ResetSignal>,
    acked: Arc<AtomicU64>,
    inbox: Arc<Inbox>,
    /// The timer that ends calls that wait too long, and the moment it fires. It is kept
    /// from call to call and moved on only when it fires before the call it serves ends:
    /// most calls are answered long before their timeout, and a timer per call would cost
    /// one more simulator event each.
    deadline: Option<(u64, Pin<Box<time::Sleep>>)>,
}

impl RpcClient {
    /// A connection from the current machine to `server`, made by the first call.
    pub fn connect(server: SocketAddr) -> Self {
        let (ip, client) = with_registry(|r| {
            r.clients_made += 1;
            (r.hosts.current(), r.clients_made)
        });
        RpcClient {
            ip,
            server,
            next_id: (client << 32) | 1,
            incarnation: None,
            reset: None,
            acked: Arc::default(),
            inbox: Arc::default(),
            deadline: None,
        }
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
        Resp: Send + Sync + 'static,
    {
        let id = self.next_id;
        self.next_id += 1;
        // The server's reply cache names a request by its id alone.
        assert_eq!(
            id >> 32,
            self.next_id >> 32,
            "a client's request ids stay in its own range"
        );
        let deadline_us = time::elapsed_us()
            .checked_add(timeout_us)
            .unwrap_or_else(|| panic!("a call to {} with timeout {timeout_us} us", self.server));
        let mut rto_us = RTO_US_MIN;
        loop {
            let now_us = time::elapsed_us();
            if now_us >= deadline_us {
                return Err(NetError::Timeout(self.server, timeout_us));
            }
            let remaining_us = deadline_us - now_us;
            match self.path() {
                Path::Reset if self.incarnation.is_none() => {
                    // A refused connect, which TCPStore's client retries until its timeout.
                    time::sleep_us(RESET_DELAY_US).await;
                    if time::elapsed_us() + CONNECT_RETRY_US >= deadline_us {
                        return Err(NetError::Refused(self.server));
                    }
                    time::sleep_us(CONNECT_RETRY_US).await;
                }
                Path::Reset if self.acked(id) => {
                    // Nothing outstanding on the wire: nothing meets the reset.
                    time::sleep_us(remaining_us).await;
                }
                Path::Reset => return Err(self.reset_arrives().await),
                Path::Silent => {
                    time::sleep_us(rto_us.min(remaining_us)).await;
                    rto_us = (rto_us * 2).min(RTO_US_MAX);
                }
                Path::Open => {
                    let cap_us = if self.acked(id) {
                        REASK_US_MAX
                    } else {
                        RTO_US_MAX
                    };
                    let resend_at_us = now_us + rto_us.min(cap_us).min(remaining_us);
                    match self.exchange(id, &request, deadline_us).await {
                        Exchange::Reply(resp) => return Ok(resp),
                        Exchange::Reset => return Err(self.reset_arrives().await),
                        Exchange::TimedOut => {
                            return Err(NetError::Timeout(self.server, timeout_us))
                        }
                        Exchange::Dropped => {
                            // TCP's retransmission timer runs out before anything is sent
                            // again, unless the connection resets first.
                            if self.reset_before(resend_at_us).await {
                                return Err(self.reset_arrives().await);
                            }
                            rto_us = (rto_us * 2).min(cap_us);
                        }
                    }
                }
            }
        }
    }

    /// Sends the request once and waits for its reply, a reset, word that the wire dropped
    /// it or its reply, or the call's deadline.
    async fn exchange<Req, Resp>(
        &mut self,
        id: u64,
        request: &Req,
        deadline_us: u64,
    ) -> Exchange<Resp>
    where
        Req: Clone + Send + Sync + 'static,
        Resp: Send + Sync + 'static,
    {
        let incarnation = self.incarnation.expect("an open path is bound");
        self.inbox.await_request(id);
        let envelope = Envelope {
            id,
            incarnation,
            acked: Arc::clone(&self.acked),
            reply_to: ReturnPath {
                ip: self.ip,
                inbox: Arc::downgrade(&self.inbox),
            },
            request: Box::new(request.clone()),
        };
        if !send_request(self.ip, self.server.ip(), envelope) {
            return Exchange::Dropped;
        }
        let reset = self.reset_signal();
        let inbox = Arc::clone(&self.inbox);
        let arrival = pin!(std::future::poll_fn(|cx| inbox.poll_arrival(cx)));
        let mut answered = pin!(select(arrival, reset));
        loop {
            let deadline = self.deadline_timer(deadline_us);
            match select(answered.as_mut(), deadline).await {
                Either::Left((Either::Left((Arrival::Reply(payload), _)), _)) => {
                    let resp = payload
                        .downcast::<Resp>()
                        .expect("a reply always has the type its request asked for");
                    return Exchange::Reply(*resp);
                }
                Either::Left((Either::Left((Arrival::Lost, _)), _)) => return Exchange::Dropped,
                Either::Left((Either::Right(_), _)) => return Exchange::Reset,
                // The kept timer fired for an earlier, shorter deadline: move it on.
                Either::Right(_) if time::elapsed_us() < deadline_us => self.deadline = None,
                Either::Right(_) => return Exchange::TimedOut,
            }
        }
    }

    /// The kept deadline timer, moved to `deadline_us` unless it fires before then (and is
    /// moved on when it does).
    fn deadline_timer(&mut self, deadline_us: u64) -> Pin<&mut time::Sleep> {
        let now_us = time::elapsed_us();
        let keep =
            matches!(self.deadline, Some((at_us, _)) if at_us <= deadline_us && at_us > now_us);
        if !keep {
            let timer = Box::pin(time::sleep_us(deadline_us.saturating_sub(now_us)));
            self.deadline = Some((deadline_us, timer));
        }
        self.deadline
            .as_mut()
            .map(|(_, timer)| timer.as_mut())
            .expect("set above")
    }

    /// Waits until `at_us`; true if the connection reset first.
    async fn reset_before(&self, at_us: u64) -> bool {
        let wait = pin!(time::sleep_until_us(at_us));
        matches!(select(wait, self.reset_signal()).await, Either::Right(_))
    }

    /// What fires when this bound connection's server incarnation resets it.
    fn reset_signal(&self) -> ResetSignal {
        self.reset
            .clone()
            .expect("a bound connection has its reset signal")
    }

    /// The reset, once it has come back from the live host.
    async fn reset_arrives(&self) -> NetError {
        time::sleep_us(RESET_DELAY_US).await;
        NetError::Reset(self.server)
    }
}

/// How one send of a request ended.
enum Exchange<Resp> {
    Reply(Resp),
    Reset,
    /// The wire dropped the request or its reply.
    Dropped,
    TimedOut,
}

/// Puts a message from `from` to `to` on the wire: `arrive` runs when it arrives, after the
/// network's latency. False if the wire dropped it at once (loss, a cut link); then nothing
/// runs.
fn transmit(from: IpAddr, to: IpAddr, arrive: impl FnOnce() + Send + 'static) -> bool {
    let Some(latency_ns) = with_registry(|r| r.conditions().latency_ns(from, to)) else {
        return false;
    };
    time::run_after_ns(latency_ns, arrive);
    true
}

/// Puts a request on the wire; false if the wire dropped it at once. One that arrives to
/// find its server gone or its host down is dropped then, and its client told.
fn send_request(from: IpAddr, to: IpAddr, envelope: Envelope) -> bool {
    transmit(from, to, move || {
        match with_registry(|r| r.arrival(envelope.incarnation)) {
            Some(mailbox) => mailbox.push(envelope),
            None => envelope.reply_to.lose(envelope.id),
        }
    })
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

#[path = "net_server.rs"]
mod server;
#[cfg(test)]
use server::ReplyCache;
pub use server::{Incoming, Replier, RpcServer};

#[cfg(test)]
#[path = "net_tests.rs"]
mod tests;
