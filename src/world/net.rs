//! Request/response messaging over the simulated network, with TCP's connection semantics.
//!
//! The wire (`wire`) delivers each message after the network's latency, or drops it (loss,
//! a cut link). Real c10d traffic runs over TCP, and its verdicts on faults come from TCP:
//! - A client is a connection to one server *incarnation* (one bind of one process). It never
//!   reconnects: a restarted server at the same address never answers an old connection.
//! - A server process that dies on a live host closes its connections at once: every call
//!   on them fails within a round trip, even one blocked in a `get`. The close (a FIN, or a
//!   reset) crosses the link from the server's host to the client's, and a cut link drops
//!   it like any other packet. The dead server's kernel sends it again on TCP's doubling
//!   timer (`ORPHAN_RETRIES` times), so a link healed soon enough lets a later copy through;
//!   otherwise the client hears of the death only when a packet of its own crosses both
//!   directions: its next retransmission, or its next request, meets a reset.
//! - A host that goes down (or a link that is cut) answers nothing, and a connect across it
//!   hears nothing either. A request it never received is retransmitted with TCP's doubling timeout until Linux gives up after
//!   `tcp_retries2` retransmissions (15 by default: about 924.6 s), and the connection is
//!   dead from then on. Once the host is back, a request still being retransmitted meets a
//!   reset; a request the dead server had already received (acknowledged, so nothing is
//!   retransmitted) waits for a reply that never comes: only a call's own timeout ends it.
//! - Loss is hidden behind retransmission: a dropped request is resent when TCP's doubling
//!   timeout runs out (200 ms up to Linux's 120 s); a dropped reply is asked for again, at
//!   most 3.2 s later. The server answers a resent request from a small cache instead of
//!   applying it twice. Nothing is resent that was not dropped: TCP's timer would find
//!   nothing to do, so none is armed.
//! - A call waits for its reply as long as its caller says: up to a timeout, or without one
//!   (TCPStore's `compare_set` and `add` read their reply with no timeout). A timeout ends a
//!   call only once its request reached the server: before that, whatever the caller sends
//!   next is queued behind it in the same stream, so the call goes on until the request
//!   lands (and then times out) or TCP gives up.
//! - The first connect is retried while nothing listens, after TCPStore's backoff
//!   (`connect_backoff`), until a try fails past its connect timeout.
//! - A message's bytes cross its sender's and its receiver's links one message at a time
//!   (`nic`), and a server may hold a reply until it is done with its request
//!   (`Replier::reply`): a busy store host delays its clients, it never drops them.

use super::nic::Nics;
use super::time;
use super::wire::{Conditions, Envelope, Hosts, Mailbox};
pub use super::wire::{ReplyCpu, WireSize};
use crate::sim_time::{SimDuration, SimInstant};
use futures::future::{FutureExt, Shared};
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

/// Fires when a server incarnation's connections are reset.
pub(super) type ResetSignal = Shared<futures::channel::oneshot::Receiver<()>>;

/// One bind of a server socket by one process.
struct Incarnation {
    addr: SocketAddr,
    /// 1 for the first process to bind `addr` in the run, 2 for the next, and so on.
    generation: u64,
    alive: bool,
    /// Sending on it resets every connection; kept unsent while the incarnation is silent.
    reset_tx: Option<futures::channel::oneshot::Sender<()>>,
    reset: ResetSignal,
    /// The close its host sent its connections, once its process died on a live host.
    close: Option<Close>,
    /// Where requests to it arrive, while its server lives.
    mailbox: Weak<Mailbox>,
}

/// What a server's host sent its connections when the server process died.
struct Close {
    at: SimInstant,
    /// The hosts the link to which was cut then: the close never reached their clients at
    /// once, only its retransmissions may.
    missed: BTreeSet<IpAddr>,
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
    /// The run's seed, for streams the network's parts draw from.
    pub(super) seed: u64,
    /// Latency, loss and cut links; set when the run starts.
    conditions: Option<Conditions>,
    /// Linux's `net.ipv4.tcp_retries2` on every host: retransmissions of an unacknowledged
    /// request before TCP gives up on the connection.
    tcp_retries2: u32,
    /// Every host's link; set when the run starts.
    nics: Option<Nics>,
    hosts: Hosts,
    /// No fault is applied before this moment (nanoseconds; 0 until the fault schedule
    /// says otherwise).
    calm_until_ns: u64,
    /// Whether the wire may drop a message in this run (loss, a cut link): only then is a
    /// request ever sent twice, so only then do servers remember their replies.
    pub(super) drops_possible: bool,
}

/// The network a run starts with.
#[derive(Debug, Clone, Copy)]
pub(super) struct NetConfig {
    pub(super) seed: u64,
    pub(super) latency: (SimDuration, SimDuration),
    pub(super) loss: f64,
    /// Whether any message may be dropped during the run: loss at the start, or a fault that
    /// sets loss or cuts a link.
    pub(super) drops_possible: bool,
    /// Every host's retransmission limit.
    pub(super) tcp_retries2: u32,
    /// Every host's link speed, and the store host's own.
    pub(super) bandwidth_bits_per_sec: u64,
    pub(super) store_host: (IpAddr, u64),
}

/// `f` on the registry of the run on this thread.
pub(super) fn with_registry<T>(f: impl FnOnce(&mut Registry) -> T) -> T {
    super::context::with_run(|context| f(&mut context.registry.borrow_mut()))
}

/// Sets the network's conditions at the start of a run: latencies and losses come from the
/// run's `network` stream.
pub(super) fn configure(config: NetConfig) {
    with_registry(|r| {
        r.conditions = Some(Conditions::new(config.seed, config.latency, config.loss));
        r.tcp_retries2 = config.tcp_retries2;
        r.seed = config.seed;
        r.drops_possible = config.drops_possible;
        let mut nics = Nics::new(config.bandwidth_bits_per_sec);
        nics.set_bandwidth(config.store_host.0, config.store_host.1);
        r.nics = Some(nics);
    });
}

/// Names the address of a simulated machine.
pub(super) fn register_host(node: madsim::task::NodeId, ip: IpAddr) {
    with_registry(|r| r.hosts.insert(node, ip));
}

/// The network's latency range from now on.
pub(super) fn set_latency(min: SimDuration, max: SimDuration) {
    with_registry(|r| r.conditions().set_latency(min, max));
}

/// The network's loss probability from now on.
pub(super) fn set_loss(probability: f64) {
    with_registry(|r| {
        r.assert_drops_possible(probability > 0.0, "loss");
        r.conditions().set_loss(probability);
    });
}

/// Cuts (or restores) the directed link between two hosts.
pub(super) fn set_link_cut(from: IpAddr, to: IpAddr, cut: bool) {
    with_registry(|r| {
        r.assert_drops_possible(cut, "a cut link");
        r.conditions().set_cut(from, to, cut);
    });
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
pub(super) enum Path {
    /// The server is alive and its host up: the message goes out.
    Open,
    /// The host is up and nothing answers for this connection: a reset comes back.
    Reset,
    /// The host is down (or the server process is frozen): nothing comes back.
    Silent,
}

impl Registry {
    /// Servers forget their replies in a run whose wire drops nothing: a message may start
    /// being dropped only in a run that said it could.
    fn assert_drops_possible(&self, drops: bool, what: &str) {
        assert!(
            !drops || self.drops_possible,
            "{what} in a run whose servers keep no replies for resent requests"
        );
    }

    fn conditions(&mut self) -> &mut Conditions {
        self.conditions
            .as_mut()
            .expect("the network is configured when the run starts")
    }

    fn nics(&mut self) -> &mut Nics {
        self.nics
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

    /// Whether either direction between hosts `a` and `b` is cut: a packet sent one way and
    /// answered the other gets no answer.
    fn cut_between(&self, a: IpAddr, b: IpAddr) -> bool {
        self.conditions
            .as_ref()
            .is_some_and(|c| c.is_cut(a, b) || c.is_cut(b, a))
    }

    /// The path of a connection from host `client` to `incarnation`. A dead server's
    /// connection resets once the close reached the client, or when the client's next
    /// packet crosses both directions (a reset comes back); until then it is silent.
    fn path_of(&self, incarnation: u64, client: IpAddr) -> Path {
        let inc = &self.incarnations[&incarnation];
        let server = inc.addr.ip();
        if self.host_down(server) {
            return Path::Silent;
        }
        if inc.alive {
            return Path::Open;
        }
        let heard = inc
            .close
            .as_ref()
            .is_some_and(|close| !close.missed.contains(&client));
        if heard || !self.cut_between(client, server) {
            Path::Reset
        } else {
            Path::Silent
        }
    }

    /// The path of a new connection from host `client` to `addr`, and the incarnation it
    /// would reach: a SYN or its answer on a cut link is lost like any packet.
    fn connect_path(&self, addr: SocketAddr, client: IpAddr) -> (Path, Option<u64>) {
        if self.host_down(addr.ip()) || self.cut_between(client, addr.ip()) {
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
                close: None,
                mailbox,
            },
        );
        self.listening.insert(addr, id);
        id
    }

    /// The server process of `incarnation` is gone: on a live host its connections reset
    /// at once, except across a cut link; on a host that is down they stay silent.
    fn died(&mut self, incarnation: u64) {
        let Some(ip) = self.incarnations.get(&incarnation).map(|i| i.addr.ip()) else {
            // Every incarnation is registered at its bind, in the same run.
            panic!("incarnation {incarnation} died without having been bound");
        };
        let down = self.host_down(ip);
        let missed = self
            .conditions
            .as_ref()
            .map(|c| c.cut_from(ip))
            .unwrap_or_default();
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
            // A server dropped while a panicking run unwinds has no clock left to read.
            let now_ns = time::elapsed_ns_in_run().unwrap_or(0);
            inc.close = Some(Close {
                at: SimInstant::from_ns(now_ns).cut_to_whole_us(),
                missed,
            });
            if let Some(tx) = inc.reset_tx.take() {
                let _ = tx.send(());
            }
        }
    }

    /// When and from which host `incarnation`'s close was sent, if it missed `client`;
    /// `None` if it reached it.
    fn missed_close(&self, incarnation: u64, client: IpAddr) -> Option<(SimInstant, IpAddr)> {
        let inc = &self.incarnations[&incarnation];
        let close = inc
            .close
            .as_ref()
            .expect("a connection's reset fires only once its server's close was sent");
        close
            .missed
            .contains(&client)
            .then_some((close.at, inc.addr.ip()))
    }
}

/// Fires when a connection from host `client` hears that `incarnation`'s server died: at
/// once when its close went out on an open link, or at the first retransmission of it that
/// finds the link from the server's host open again, within Linux's `ORPHAN_RETRIES`
/// (`tcp_orphan_retries` 0 means 8); never when its host was down or the link stayed cut.
pub(super) async fn close_heard(signal: ResetSignal, incarnation: u64, client: IpAddr) {
    if signal.await.is_err() {
        // Dropped unsent: the run is being torn down, and nothing closes any more.
        return std::future::pending().await;
    }
    let Some((died, server)) = with_registry(|r| r.missed_close(incarnation, client)) else {
        return;
    };
    let mut rto = RTO_MIN;
    let mut at = died;
    for _ in 0..ORPHAN_RETRIES {
        at = at.after(rto);
        rto = rto.saturating_mul(2).min(RTO_MAX);
        if at < time::now_whole_us() {
            continue;
        }
        time::sleep_until_whole_us(at).await;
        let cut = with_registry(|r| {
            r.conditions
                .as_ref()
                .is_some_and(|c| c.is_cut(server, client))
        });
        if !cut {
            return;
        }
    }
    std::future::pending().await
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
pub(super) const RTO_MIN: SimDuration = SimDuration::from_ms(200);
pub(super) const RTO_MAX: SimDuration = SimDuration::from_secs(120);
/// The longest a client waits before asking again for a reply that was dropped.
pub(super) const REASK_MAX: SimDuration = SimDuration::from_ms(3_200);
/// Answered replies the server remembers for resent requests, across all clients. Requests
/// still being served are kept apart from this bound (there is one per request in flight):
/// forgetting one would serve its resend as a new request, applying it twice.
const REPLY_CACHE_MAX: usize = 4096;
/// How many times a live host sends a dead process's close again (Linux's
/// `tcp_orphan_retries`, whose default 0 means 8) before it forgets the connection.
pub(super) const ORPHAN_RETRIES: u32 = 8;
/// How long a reset takes to come back from a live host.
pub(super) const RESET_DELAY: SimDuration = SimDuration::from_ms(2);
/// How long a connect's SYN takes to reach a live host: half the reset's round trip. The
/// host answers for the listener it has when the SYN arrives, so a server bound at the
/// instant its peers' processes start (the store host's agent and the rest of a job starting
/// together) takes their connects, as it does on a real cluster.
pub(super) const SYN_FLIGHT: SimDuration = SimDuration::from_ms(1);

/// When TCP gives up on a request that is never acknowledged: the retransmission timeout
/// doubles from `RTO_MIN` up to `RTO_MAX`, and at the expiry after the
/// `tcp_retries2`-th retransmission the connection fails (Linux's `retransmits_timed_out`,
/// whose limit is exactly that sum when the RTO starts at its minimum). For the default 15:
/// 0.2 + 0.4 + … + 102.4 s, then six times 120 s, 924.6 s in all.
pub fn tcp_give_up(tcp_retries2: u32) -> SimDuration {
    let mut rto = RTO_MIN;
    let mut total = SimDuration::ZERO;
    for _ in 0..=tcp_retries2 {
        total = total.saturating_add(rto);
        rto = rto.saturating_mul(2).min(RTO_MAX);
    }
    total
}

/// When the first retransmission at or after `now` fires for data first lost at `since`: the
/// RTO doubles from `RTO_MIN` up to `RTO_MAX`, as for a store request.
pub fn next_retransmission(since: SimInstant, now: SimInstant) -> SimInstant {
    let mut rto = RTO_MIN;
    let mut at = since.after(rto);
    while at < now {
        rto = rto.saturating_mul(2).min(RTO_MAX);
        at = at.after(rto);
    }
    at
}

/// Why a call got no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetError {
    #[error("no reply from {0} within {waited_us} us", waited_us = .1.as_us())]
    Timeout(SocketAddr, SimDuration),
    #[error("connection to {0} refused: nothing listens there")]
    Refused(SocketAddr),
    #[error("connection to {0} reset by peer: the server process is gone")]
    Reset(SocketAddr),
    /// TCP gave up retransmitting a request nobody acknowledged (ETIMEDOUT).
    #[error("connection to {0} timed out: no acknowledgement after {1} retransmissions over {waited_us} us (tcp_retries2)", waited_us = .2.as_us())]
    GaveUp(SocketAddr, u32, SimDuration),
}

/// One message: between which hosts, its size, and when it is ready to leave (its sender
/// may hold it: a server busy with the request it answers).
struct Message {
    from: IpAddr,
    to: IpAddr,
    bytes: u64,
    hold_until_ns: u64,
}

/// Puts a message on the wire: `arrive` runs when it has arrived, after its time on its
/// sender's link and the network's latency, and `after_ns` more (CPU its receiver spends on
/// it first). Returns when it reaches its receiver's host, or `None` if the wire dropped it
/// at once (loss, a cut link); then nothing runs.
fn transmit(
    message: Message,
    after_ns: u64,
    arrive: impl FnOnce() + Send + 'static,
) -> Option<u64> {
    let now_ns = time::elapsed_ns();
    let arrival_ns = with_registry(|r| {
        let latency_ns = r.conditions().latency_ns(message.from, message.to)?;
        let ready_ns = message.hold_until_ns.max(now_ns);
        let sent_ns = r
            .nics()
            .sent_ns(message.from, message.to, message.bytes, ready_ns);
        Some(sent_ns.saturating_add(latency_ns))
    });
    let arrival_ns = arrival_ns?;
    time::run_after_ns(arrival_ns.saturating_add(after_ns) - now_ns, arrive);
    Some(arrival_ns)
}

/// Puts a request on the wire; false if the wire dropped it at once. One that arrives to
/// find its server gone or its host down is dropped then, and its client told.
///
/// A request that leaves later than now (`envelope.departs_ns`: its client spends CPU on it
/// first) takes its link now and arrives that much later; if its client goes away before
/// it leaves, it never left. Clients fold that CPU only while no fault is due
/// (`calm_until_ns`), so nothing else can happen to the path meanwhile.
pub(super) fn send_request(from: IpAddr, to: IpAddr, bytes: u64, envelope: Envelope) -> bool {
    let message = Message {
        from,
        to,
        bytes,
        hold_until_ns: 0,
    };
    let cpu_ns = envelope.departs_ns.saturating_sub(time::elapsed_ns());
    let sent = transmit(message, cpu_ns, move || {
        let mut envelope = envelope;
        if envelope.client_gone_ns.load(Ordering::Relaxed) < envelope.departs_ns {
            return;
        }
        let arrived = with_registry(|r| {
            let mailbox = r.arrival(envelope.incarnation)?;
            // The server's host takes requests in as they arrive, one at a time on its link.
            envelope.received_ns = r.nics().received_ns(from, to, bytes, time::elapsed_ns());
            Some(mailbox)
        });
        match arrived {
            Some(mailbox) => mailbox.push(envelope),
            None => envelope.reply_to.lose(envelope.id),
        }
    });
    sent.is_some()
}

/// No fault is applied before `at_ns`: until then a client may fold the CPU it spends on a
/// request into the request's trip (`RpcClient::call_costing`).
pub(super) fn set_calm_until_ns(at_ns: u64) {
    with_registry(|r| r.calm_until_ns = at_ns);
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

#[path = "net_client.rs"]
mod client;
pub use client::{CallCpu, ReplyWait, RpcClient};

#[path = "net_server.rs"]
mod server;
#[cfg(test)]
use server::ReplyCache;
pub use server::{Incoming, Replier, RpcServer};

#[cfg(test)]
#[path = "net_tests.rs"]
mod tests;
