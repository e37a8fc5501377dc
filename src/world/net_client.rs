//! The client side of `net`'s connections: one TCP connection to one server incarnation,
//! with TCP's retransmission and give-up, and each call's own way of waiting for its reply.

use super::{
    close_heard, send_request, with_registry, NetError, Path, ResetSignal, REASK_MAX, RESET_DELAY,
    RTO_MAX, RTO_MIN, SYN_FLIGHT,
};
use crate::sim_time::{SimDuration, SimInstant};
use crate::world::connect_backoff::{AfterRefusal, ConnectBackoff};
use crate::world::interrupts;
use crate::world::rng;
use crate::world::time;
use crate::world::wire::{Arrival, Envelope, Inbox, ReplyCpu, ReturnPath, WireSize};
use call::{Call, Exchange, Resend, Until};
use futures::future::{select, BoxFuture, Either};
use std::net::{IpAddr, SocketAddr};
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

#[path = "net_call.rs"]
mod call;

/// How long a call waits for its reply once its request has reached the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyWait {
    /// Up to this long from the call's start (TCPStore's `wait` and `get`).
    Within(SimDuration),
    /// As long as it takes (TCPStore's `compare_set`, `add`, `check`, …): only a reset or
    /// TCP giving up ends it.
    Unbounded,
}

/// The CPU time a caller spends around one call: on its request before it leaves (torch's
/// rendezvous encoding its state), and on its reply before acting on it (decoding the
/// state it read). Each would cost a timer of its own; folded into the messages' trips,
/// they cost none, with the same moments (see `RpcClient::call_costing`).
#[derive(Clone, Default)]
pub struct CallCpu {
    pub before_ns: u64,
    pub after: Option<ReplyCpu>,
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
    /// How long the first connect is retried while nothing listens (TCPStore connects with
    /// its timeout of the moment it is made).
    connect_timeout: SimDuration,
    /// Why the connection died for good (TCP gave up): every later call fails with it.
    broken: Option<NetError>,
    /// Linux's retransmission limit on this host (`tcp_retries2`).
    tcp_retries2: u32,
    /// The timer that ends calls that wait too long, and the moment it fires. It is kept
    /// from call to call and moved on only when it fires before the call it serves ends:
    /// most calls are answered long before their timeout, and a timer per call would cost
    /// one more simulator event each.
    deadline: Option<(SimInstant, Pin<Box<time::Sleep>>)>,
    /// When this client went away (`u64::MAX` while it lives): a request it was still
    /// spending CPU on then never leaves.
    gone_ns: Arc<AtomicU64>,
}

impl Drop for RpcClient {
    fn drop(&mut self) {
        // madsim drops a killed node's tasks at the moment it kills it.
        let now_ns = time::elapsed_ns_in_run().unwrap_or(0);
        self.gone_ns.store(now_ns, Ordering::Relaxed);
    }
}

impl RpcClient {
    /// A connection from the current machine to `server`, made by the first call, which
    /// retries a refused connect for up to `connect_timeout`.
    pub fn connect(server: SocketAddr, connect_timeout: SimDuration) -> Self {
        let (ip, client, tcp_retries2) = with_registry(|r| {
            r.clients_made += 1;
            (r.hosts.current(), r.clients_made, r.tcp_retries2)
        });
        RpcClient {
            ip,
            server,
            next_id: (client << 32) | 1,
            incarnation: None,
            reset: None,
            acked: Arc::default(),
            inbox: Arc::default(),
            connect_timeout,
            broken: None,
            tcp_retries2,
            deadline: None,
            gone_ns: Arc::new(AtomicU64::new(u64::MAX)),
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
            return with_registry(|r| r.path_of(incarnation, self.ip));
        }
        let (path, reached) = with_registry(|r| {
            let (path, reached) = r.connect_path(self.server, self.ip);
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

    /// Sends `request` and waits for the reply as `wait` says (see the module docs for what
    /// resets, silence and loss do to it).
    pub async fn call<Req, Resp>(&mut self, request: Req, wait: ReplyWait) -> Result<Resp, NetError>
    where
        Req: WireSize + Clone + Send + Sync + 'static,
        Resp: Send + Sync + 'static,
    {
        self.call_costing(request, wait, CallCpu::default()).await
    }

    /// [`Self::call`], the caller spending `cpu.before_ns` on the request first and
    /// `cpu.after` on the reply before it returns. The request leaves after its CPU time,
    /// taking its link then; the reply is handed over after the caller's time on it, but
    /// counts as received when it lands (a reset or a deadline later than that does not
    /// undo it). The CPU before is folded into the request's trip only on an open, bound
    /// connection while no fault is due before the request leaves; otherwise it is spent
    /// first. Either way the connection stays the caller's meanwhile.
    pub async fn call_costing<Req, Resp>(
        &mut self,
        request: Req,
        wait: ReplyWait,
        cpu: CallCpu,
    ) -> Result<Resp, NetError>
    where
        Req: WireSize + Clone + Send + Sync + 'static,
        Resp: Send + Sync + 'static,
    {
        if let Some(broken) = &self.broken {
            return Err(broken.clone());
        }
        let departs_ns = if self.may_fold_cpu(cpu.before_ns) {
            time::elapsed_ns() + cpu.before_ns
        } else {
            time::spend_cpu_ns(cpu.before_ns).await;
            time::elapsed_ns()
        };
        let id = self.next_id;
        self.next_id += 1;
        // The server's reply cache names a request by its id alone.
        assert_eq!(
            id >> 32,
            self.next_id >> 32,
            "a client's request ids stay in its own range"
        );
        let started = SimInstant::from_ns(departs_ns).cut_to_whole_us();
        let call = Call {
            id,
            departs_ns,
            reply_cpu: cpu.after,
            started,
            timeout: match wait {
                ReplyWait::Within(timeout) => Some(timeout),
                ReplyWait::Unbounded => None,
            },
            interrupts: interrupts::current(),
            connect_deadline: started.after(self.connect_timeout),
        };
        // Errors but TCP giving up say nothing of the next call: a reset is met again, and a
        // refused or timed-out connect is tried again.
        let result = self.call_until_done(&call, &request).await;
        if let Err(e @ NetError::GaveUp(..)) = &result {
            self.broken = Some(e.clone());
        }
        result
    }

    /// Whether `cpu_ns` spent before a request may ride in its trip: the connection is
    /// bound and open, and no fault is due before the request leaves, so nothing can
    /// happen to the path meanwhile (the client itself going away is met on arrival).
    fn may_fold_cpu(&mut self, cpu_ns: u64) -> bool {
        cpu_ns > 0
            && self.incarnation.is_some()
            && matches!(self.path(), Path::Open)
            && with_registry(|r| time::elapsed_ns() + cpu_ns < r.calm_until_ns)
    }

    /// The body of `call`: sends, resends and waits until the reply, an error, or the
    /// deadline of a request that reached the server.
    async fn call_until_done<Req, Resp>(
        &mut self,
        call: &Call,
        request: &Req,
    ) -> Result<Resp, NetError>
    where
        Req: WireSize + Clone + Send + Sync + 'static,
        Resp: Send + Sync + 'static,
    {
        self.connect_until(call.connect_deadline).await?;
        let mut resend = Resend::new();
        loop {
            // A request that leaves later than now is sent as of then.
            let now = time::now_whole_us().max(call.started);
            if call.overdue(now) && self.acked(call.id) {
                return Err(self.timed_out(call));
            }
            match self.path() {
                // Nothing outstanding on the wire: nothing meets the reset or the silence, and
                // only the caller's deadline, or the server's close, ends the wait.
                Path::Reset | Path::Silent if self.acked(call.id) => {
                    if self.wait_out(call).await {
                        return Err(self.reset_arrives().await);
                    }
                }
                Path::Reset => return Err(self.reset_arrives().await),
                Path::Silent => {
                    if self.closed_during(time::sleep(resend.rto)).await {
                        return Err(self.reset_arrives().await);
                    }
                    resend.expired(self.tcp_retries2, || self.gave_up(call))?;
                }
                Path::Open => {
                    if let Some(resp) = self.send_once(call, request, &mut resend, now).await? {
                        return Ok(resp);
                    }
                }
            }
        }
    }

    /// One send of the request on an open path, at `now`: the reply, an error that ends
    /// the call, or `None` when the wire dropped the request or its reply and it is to be
    /// asked again (TCP's retransmission, or the server's TCP resending the reply).
    async fn send_once<Req, Resp>(
        &mut self,
        call: &Call,
        request: &Req,
        resend: &mut Resend,
        now: SimInstant,
    ) -> Result<Option<Resp>, NetError>
    where
        Req: WireSize + Clone + Send + Sync + 'static,
        Resp: Send + Sync + 'static,
    {
        let acked_before = self.acked(call.id);
        let cap = if acked_before { REASK_MAX } else { RTO_MAX };
        let resend_cap = match call.deadline() {
            Some(deadline) if acked_before => cap.min(deadline.since(now)),
            _ => cap,
        };
        let resend_at = now.after(resend.rto.min(resend_cap));
        let wait = match call.deadline().filter(|at| *at > now) {
            Some(at) => Until::Deadline(at),
            None if call.overdue(now) => Until::Taken,
            None => Until::Reply,
        };
        match self.exchange(call, request, wait).await {
            // The caller stopped waiting at its deadline; what it reads now answers the
            // request it sends next (TCPStore's cancel).
            Exchange::Reply(_, landed) if call.overdue(landed) => Err(self.timed_out(call)),
            Exchange::Reply(resp, _) => Ok(Some(resp)),
            Exchange::Reset => Err(self.reset_arrives().await),
            Exchange::TimedOut => Err(self.timed_out(call)),
            Exchange::Dropped => {
                // TCP's retransmission timer runs out before anything is sent again, unless
                // the connection resets first.
                if self
                    .closed_during(time::sleep_until_whole_us(resend_at))
                    .await
                {
                    return Err(self.reset_arrives().await);
                }
                if self.acked(call.id) {
                    // The reply was lost: the server's TCP sends it again.
                    resend.rto = resend.rto.saturating_mul(2).min(cap);
                } else {
                    resend.expired(self.tcp_retries2, || self.gave_up(call))?;
                }
                Ok(None)
            }
        }
    }

    /// Connects now if this client has not yet: TCPStore's constructor does, so a refused
    /// connect fails before the first request is sent (or, for a `set`, before it returns).
    pub async fn connect_now(&mut self) -> Result<(), NetError> {
        let deadline = time::now_whole_us().after(self.connect_timeout);
        self.connect_until(deadline).await
    }

    /// Binds to the server listening now, retrying a refused connect as TCPStore's
    /// constructor does (`connect_backoff`: the socket's connects, each with its own
    /// timeout, until the constructor's `deadline` has passed), and sending SYNs into a
    /// silent host until `deadline`.
    async fn connect_until(&mut self, deadline: SimInstant) -> Result<(), NetError> {
        let mut rto = RTO_MIN;
        let mut backoff = None;
        let mut connect_deadline = deadline;
        while self.incarnation.is_none() {
            match self.path() {
                Path::Open => {}
                Path::Reset => {
                    time::sleep(SYN_FLIGHT).await;
                    if self.path() == Path::Open {
                        continue;
                    }
                    time::sleep(RESET_DELAY.saturating_sub(SYN_FLIGHT)).await;
                    // A stream per client (its number is the high half of its request ids),
                    // made at its first refusal.
                    let backoff = backoff.get_or_insert_with(|| {
                        let label = format!("connect-backoff/{}", self.next_id >> 32);
                        ConnectBackoff::new(rng::stream(with_registry(|r| r.seed), &label))
                    });
                    let now = time::now_whole_us();
                    match backoff.after_refusal(now, connect_deadline, deadline) {
                        AfterRefusal::Retry(delay) => time::sleep(delay).await,
                        AfterRefusal::NewConnect(delay) => {
                            time::sleep(delay).await;
                            connect_deadline = time::now_whole_us().after(self.connect_timeout);
                        }
                        AfterRefusal::GiveUp => return Err(NetError::Refused(self.server)),
                    }
                }
                Path::Silent => {
                    let now = time::now_whole_us();
                    if now >= deadline {
                        return Err(NetError::Timeout(self.server, self.connect_timeout));
                    }
                    time::sleep(rto.min(deadline.since(now))).await;
                    rto = rto.saturating_mul(2).min(RTO_MAX);
                }
            }
        }
        Ok(())
    }

    /// Waits until the call's deadline, or for ever when it has none: a request the server
    /// received, on a connection that will never answer it. True if the server's close
    /// reached the connection first.
    async fn wait_out(&self, call: &Call) -> bool {
        self.closed_during(async move {
            // A signal meanwhile moves the deadline on: it is read again when reached.
            while let Some(deadline) = call.deadline() {
                if time::now_whole_us() >= deadline {
                    return;
                }
                time::sleep_until_whole_us(deadline).await;
            }
            std::future::pending::<()>().await
        })
        .await
    }

    fn timed_out(&self, call: &Call) -> NetError {
        NetError::Timeout(self.server, call.timeout.unwrap_or(SimDuration::ZERO))
    }

    fn gave_up(&self, call: &Call) -> NetError {
        NetError::GaveUp(
            self.server,
            self.tcp_retries2,
            time::now_whole_us().since(call.started),
        )
    }

    /// Sends the request once and waits for its reply, a reset, word that the wire dropped
    /// it or its reply, or as `until` says. A deadline that comes before the server took
    /// the request is not the end: the call then waits until the server takes it. Nor is
    /// a reset or a deadline after the reply landed: the caller only spends its CPU on it.
    async fn exchange<Req, Resp>(
        &mut self,
        call: &Call,
        request: &Req,
        until: Until,
    ) -> Exchange<Resp>
    where
        Req: WireSize + Clone + Send + Sync + 'static,
        Resp: Send + Sync + 'static,
    {
        let id = call.id;
        self.inbox.await_request(id);
        let mut deadline = match until {
            Until::Deadline(at) => Some(at),
            Until::Taken => {
                self.inbox.want_ack();
                None
            }
            Until::Reply => None,
        };
        if !self.send(call, request) {
            return Exchange::Dropped;
        }
        let reset = self.close_watch();
        let inbox = Arc::clone(&self.inbox);
        let arrival = pin!(std::future::poll_fn(|cx| inbox.poll_arrival(cx)));
        let mut answered = pin!(select(arrival, reset));
        loop {
            let timer = match deadline {
                Some(at) => Either::Left(self.deadline_timer(at)),
                None => Either::Right(std::future::pending::<()>()),
            };
            match select(answered.as_mut(), timer).await {
                Either::Left((Either::Left((arrival, _)), _)) => return self.arrived(arrival),
                Either::Left((Either::Right(_), _)) => {
                    if self.inbox.landed_by(time::elapsed_ns()).is_none() {
                        return Exchange::Reset;
                    }
                    let inbox = Arc::clone(&self.inbox);
                    let arrival = std::future::poll_fn(|cx| inbox.poll_arrival(cx)).await;
                    return self.arrived(arrival);
                }
                Either::Right(_) => match deadline {
                    // The kept timer fired for an earlier, shorter deadline: move it on.
                    Some(at) if time::now_whole_us() < at => self.deadline = None,
                    // A signal came while the call waited: its timeout starts again.
                    Some(at) if call.deadline().is_some_and(|moved| moved > at) => {
                        deadline = call.deadline();
                    }
                    // The reply is in: the caller spends its CPU on it, then has it.
                    _ if self.inbox.landed_by(time::elapsed_ns()).is_some() => deadline = None,
                    _ if self.acked(id) => return Exchange::TimedOut,
                    // Not yet received: whatever the caller sends next waits behind it, so
                    // the wait goes on until the server takes it.
                    _ => {
                        deadline = None;
                        self.inbox.want_ack();
                    }
                },
            }
        }
    }

    /// Puts one copy of the call's request on the wire (leaving when the call says, for
    /// its first copy); false if the wire dropped it at once.
    fn send<Req>(&self, call: &Call, request: &Req) -> bool
    where
        Req: WireSize + Clone + Send + Sync + 'static,
    {
        let envelope = Envelope {
            id: call.id,
            incarnation: self.incarnation.expect("an open path is bound"),
            acked: Arc::clone(&self.acked),
            reply_to: ReturnPath {
                ip: self.ip,
                inbox: Arc::downgrade(&self.inbox),
                reply_cpu: call.reply_cpu.clone(),
            },
            request: Box::new(request.clone()),
            received_ns: 0,
            departs_ns: call.departs_ns.max(time::elapsed_ns()),
            client_gone_ns: Arc::clone(&self.gone_ns),
        };
        send_request(self.ip, self.server.ip(), request.wire_bytes(), envelope)
    }

    /// What came back, as the call's outcome; a reply with the moment it landed.
    fn arrived<Resp: Send + Sync + 'static>(&self, arrival: Arrival) -> Exchange<Resp> {
        match arrival {
            Arrival::Reply(payload) => {
                let resp = payload
                    .downcast::<Resp>()
                    .expect("a reply always has the type its request asked for");
                let now_ns = time::elapsed_ns();
                let landed_ns = self.inbox.landed_by(now_ns).unwrap_or(now_ns);
                Exchange::Reply(*resp, SimInstant::from_ns(landed_ns).cut_to_whole_us())
            }
            Arrival::Lost => Exchange::Dropped,
            // Taken by the server after the deadline: the caller's wait is over.
            Arrival::Acknowledged => Exchange::TimedOut,
        }
    }

    /// The kept deadline timer, moved to `deadline` unless it fires before then (and is
    /// moved on when it does).
    fn deadline_timer(&mut self, deadline: SimInstant) -> Pin<&mut time::Sleep> {
        let now = time::now_whole_us();
        let keep = matches!(self.deadline, Some((at, _)) if at <= deadline && at > now);
        if !keep {
            let timer = Box::pin(time::sleep(deadline.since(now)));
            self.deadline = Some((deadline, timer));
        }
        self.deadline
            .as_mut()
            .map(|(_, timer)| timer.as_mut())
            .expect("set above")
    }

    /// Waits for `wait`; true if the server's close reached the connection first.
    async fn closed_during(&self, wait: impl std::future::Future<Output = ()>) -> bool {
        let wait = pin!(wait);
        matches!(select(wait, self.close_watch()).await, Either::Right(_))
    }

    /// What fires when this bound connection hears that its server incarnation died
    /// (`net::close_heard`).
    fn close_watch(&self) -> BoxFuture<'static, ()> {
        let signal = self
            .reset
            .clone()
            .expect("a bound connection has its reset signal");
        let incarnation = self.incarnation.expect("bound");
        Box::pin(close_heard(signal, incarnation, self.ip))
    }

    /// The reset, once it has come back from the live host.
    async fn reset_arrives(&self) -> NetError {
        time::sleep(RESET_DELAY).await;
        NetError::Reset(self.server)
    }
}
