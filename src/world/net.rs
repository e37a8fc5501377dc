//! Request/response messaging over the simulated network, with TCP-like retransmission.
//!
//! madsim delivers datagrams with the configured latency and loss and drops them on clogged
//! links. Real c10d traffic runs over TCP, which hides loss behind retransmission, so a
//! client here resends its request (with a doubling timeout, as TCP's RTO does) until a reply
//! arrives or its own deadline passes; the server answers a resent request from a small cache
//! instead of applying it twice.

use futures::StreamExt;
use madsim::net::Endpoint;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

thread_local! {
    /// Server ports listening now. Each run has its own thread, so this is per run.
    static LISTENING: RefCell<BTreeSet<SocketAddr>> = const { RefCell::new(BTreeSet::new()) };
    /// Hosts that are powered off: they answer nothing, not even a reset.
    static HOSTS_DOWN: RefCell<BTreeSet<IpAddr>> = const { RefCell::new(BTreeSet::new()) };
    /// Clients made so far in this run: each numbers its requests in a range of its own, so a
    /// restarted process that binds its dead predecessor's port is a new connection to the
    /// server's reply cache (as a new TCP connection is), not a replay of the old one's ids.
    static CLIENTS_MADE: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Marks a host powered off (killed) or back on.
pub fn set_host_down(ip: IpAddr, down: bool) {
    HOSTS_DOWN.with(|h| {
        let mut h = h.borrow_mut();
        if down {
            h.insert(ip);
        } else {
            h.remove(&ip);
        }
    });
}

/// Forgets every listener and host state (a new run on a reused thread starts clean).
pub fn reset_registry() {
    LISTENING.with(|l| l.borrow_mut().clear());
    HOSTS_DOWN.with(|h| h.borrow_mut().clear());
    CLIENTS_MADE.with(|c| c.set(0));
}

/// Whether a live host would answer a connection to `addr` with a reset: its kernel is up
/// but no process listens on the port (the process died, the host did not).
fn refused(addr: SocketAddr) -> bool {
    let listening = LISTENING.with(|l| l.borrow().contains(&addr));
    let host_down = HOSTS_DOWN.with(|h| h.borrow().contains(&addr.ip()));
    !listening && !host_down
}

/// Unregisters a listening port when the last handle on its server goes away.
struct ListenGuard(SocketAddr);

impl Drop for ListenGuard {
    fn drop(&mut self) {
        LISTENING.with(|l| l.borrow_mut().remove(&self.0));
    }
}

/// The tag requests travel under; a reply to request `id` uses `REPLY_TAG_BASE | id`.
const REQUEST_TAG: u64 = 1;
const REPLY_TAG_BASE: u64 = 1 << 63;
/// The first retransmission timeout (Linux's minimum RTO) and its ceiling.
const RTO_US_MIN: u64 = 200_000;
const RTO_US_MAX: u64 = 3_200_000;
/// Replies the server remembers for resent requests, across all clients.
const REPLY_CACHE_MAX: usize = 4096;
/// How long a reset takes to come back from a host whose process died.
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
}

/// A client of one server. Each call carries a fresh id; calls on one client are sequential.
pub struct RpcClient {
    endpoint: Endpoint,
    server: SocketAddr,
    next_id: u64,
    /// Whether a reply ever came back (the connection is established).
    connected: bool,
}

impl RpcClient {
    /// Binds an ephemeral port on the current node.
    pub async fn connect(server: SocketAddr) -> Result<Self, NetError> {
        let endpoint = Endpoint::bind("0.0.0.0:0")
            .await
            .map_err(|e| NetError::Bind(e.to_string()))?;
        let client = CLIENTS_MADE.with(|c| {
            let n = c.get() + 1;
            c.set(n);
            n
        });
        Ok(RpcClient {
            endpoint,
            server,
            next_id: (client << 32) | 1,
            connected: false,
        })
    }

    /// Sends `request` and waits up to `timeout_us` for the reply, resending on silence.
    pub async fn call<Req, Resp>(&mut self, request: Req, timeout_us: u64) -> Result<Resp, NetError>
    where
        Req: Clone + Send + Sync + 'static,
        Resp: Clone + Send + Sync + 'static,
    {
        let id = self.next_id;
        self.next_id += 1;
        let deadline_us = super::time::elapsed_us() + timeout_us;
        let mut rto_us = RTO_US_MIN;
        loop {
            if refused(self.server) {
                // The reset comes back after a round trip. Before the first reply this is a
                // connect, which TCPStore's client retries until its timeout; on an
                // established connection the reset is an error at once.
                super::time::sleep_us(RESET_DELAY_US).await;
                if self.connected || super::time::elapsed_us() + CONNECT_RETRY_US >= deadline_us {
                    return Err(NetError::Refused(self.server));
                }
                super::time::sleep_us(CONNECT_RETRY_US).await;
                continue;
            }
            send(
                &self.endpoint,
                self.server,
                REQUEST_TAG,
                Box::new((id, request.clone())),
            )
            .await;
            let now_us = super::time::elapsed_us();
            if now_us >= deadline_us {
                return Err(NetError::Timeout(self.server, timeout_us));
            }
            let wait_us = rto_us.min(deadline_us - now_us);
            let reply =
                super::time::timeout_us(wait_us, self.endpoint.recv_from_raw(REPLY_TAG_BASE | id));
            if let Some(Ok((payload, _from))) = reply.await {
                self.connected = true;
                let resp = payload
                    .downcast::<Resp>()
                    .expect("a reply always has the type its request asked for");
                return Ok(*resp);
            }
            rto_us = (rto_us * 2).min(RTO_US_MAX);
        }
    }
}

/// Sends one message, counted as a simulator event. A send error means the destination is
/// unknown; the sender sees silence, as a SYN to a dead host would.
async fn send(endpoint: &Endpoint, to: SocketAddr, tag: u64, payload: madsim::net::Payload) {
    super::time::count_sim_event();
    let _ = endpoint.send_to_raw(to, tag, payload).await;
}

/// Receives a server keeps waiting at once. madsim charges every receive a random delay
/// that its `sleep` rounds up to 1 ms, so one receive at a time caps a server at 1 000
/// messages per simulated second: a 1 024-node join storm queued requests for over 60 s
/// (TCPStore's timeout) behind that cap, an artefact no real TCPStore has. 32 raise the cap
/// to 32 000 a second; 256 made small runs about twice as slow.
const RECEIVES_IN_FLIGHT: usize = 32;

/// One pending receive of a request message.
type Receive =
    futures::future::BoxFuture<'static, std::io::Result<(madsim::net::Payload, SocketAddr)>>;

/// A server socket: receives requests and sends replies, deduplicating resent requests.
pub struct RpcServer {
    endpoint: Endpoint,
    _listening: Arc<ListenGuard>,
    replies: std::sync::Arc<std::sync::Mutex<ReplyCache>>,
    receiving: futures::stream::FuturesUnordered<Receive>,
}

/// What the server knows of a request id from one client.
#[derive(Default)]
struct ReplyCache {
    entries: BTreeMap<(SocketAddr, u64), Option<Box<dyn CloneAny>>>,
    order: VecDeque<(SocketAddr, u64)>,
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
        LISTENING.with(|l| l.borrow_mut().insert(addr));
        Ok(RpcServer {
            endpoint,
            _listening: Arc::new(ListenGuard(addr)),
            replies: Default::default(),
            receiving: futures::stream::FuturesUnordered::new(),
        })
    }

    /// Waits for the next request that is not a resend of one in progress. A resend of an
    /// answered request is answered again from the cache here.
    pub async fn recv<Req: Send + Sync + 'static>(&mut self) -> Incoming<Req> {
        loop {
            while self.receiving.len() < RECEIVES_IN_FLIGHT {
                let endpoint = self.endpoint.clone();
                self.receiving.push(Box::pin(async move {
                    endpoint.recv_from_raw(REQUEST_TAG).await
                }));
            }
            let Some(Ok((payload, from))) = self.receiving.next().await else {
                continue;
            };
            let (id, request) = *payload
                .downcast::<(u64, Req)>()
                .expect("requests on a server socket all have its request type");
            let cached = {
                let mut cache = self.replies.lock().expect("reply cache lock");
                match cache.entries.get(&(from, id)) {
                    Some(Some(reply)) => Some(Some(reply.as_ref().clone_payload())),
                    Some(None) => Some(None),
                    None => {
                        cache.insert_pending(from, id);
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
        {
            let mut cache = self.replies.lock().expect("reply cache lock");
            if let Some(slot) = cache.entries.get_mut(&(to, id)) {
                *slot = Some(Box::new(reply.clone()));
            }
        }
        send(&self.endpoint, to, REPLY_TAG_BASE | id, Box::new(reply)).await;
    }
}

impl ReplyCache {
    fn insert_pending(&mut self, from: SocketAddr, id: u64) {
        self.entries.insert((from, id), None);
        self.order.push_back((from, id));
        while self.order.len() > REPLY_CACHE_MAX {
            if let Some(old) = self.order.pop_front() {
                self.entries.remove(&old);
            }
        }
    }
}
