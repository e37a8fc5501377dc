//! The store served over the simulated network: TCPStore's server loop and its client.
//!
//! The server answers requests concurrently in its one task (so a blocking `get` never
//! holds up other clients) and retries blocked requests after a change to their keys.
//! Every answer is counted in the stats handle the server was started with, which the
//! runner reads when the run is over.
//!
//! The client keeps TCPStore's timeouts, which differ by operation (torch 2.15's
//! `TCPStore.cpp`, and measured on the real TCPStore with a stopped or cut-off server):
//! - `get`, `wait` and `multi_get` wait for their keys up to the client's timeout (60 s by
//!   default); then the client sends `CANCEL_WAIT` and reads the server's answer with no
//!   timeout before it raises `wait timeout after …ms`. A server that is stopped or cut off
//!   therefore delays the error until it answers again, or until TCP gives up;
//! - `compare_set`, `add`, `check`, `delete_key` and `num_keys` read their reply with no
//!   timeout at all: a stopped server's client waits for it, and succeeds once it resumes;
//! - `set` and `multi_set` read no reply: the caller goes on at once, and a failure shows
//!   on its next call.

use super::cost::StoreCosts;
use super::{Keys, Served, StoreRequest, StoreResponse, StoreState, StoreStatsHandle, Value};
use crate::sim_time::SimDuration;
use crate::world::net::{CallCpu, Incoming, NetError, ReplyWait, RpcClient, RpcServer};
use crate::world::{spawn, time};
use futures::channel::oneshot;
use futures::future::{select, Either};
use futures::stream::{FuturesUnordered, StreamExt};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::{Arc, Mutex};

pub use crate::world::STORE_PORT;
/// TCPStore's default timeout: how long `get`, `wait` and `multi_get` wait for their keys,
/// and how long the first connect is retried.
pub const READ_TIMEOUT: SimDuration = crate::scenario::limits::READ_TIMEOUT_DEFAULT;
/// How long the server keeps a blocked request before giving up on its client.
const BLOCKED_REQUEST_MAX: SimDuration = SimDuration::from_secs(3_600);

/// A store error as the c10d backend sees it: every failure is a connection error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("the connection to the c10d store has failed: {0}")]
    Connection(String),
    #[error("the c10d store refused the request: {0}")]
    Refused(String),
    /// TCPStore's `DistStoreError` when a `get`, `wait` or `multi_get` ran out of time.
    #[error("wait timeout after {timeout_ms}ms, keys: {keys}")]
    WaitTimeout { timeout_ms: u64, keys: String },
}

/// Shared server state: the data, the requests waiting for keys, and how to cancel each
/// connection's blocked request.
#[derive(Default)]
struct Shared {
    state: StoreState,
    waiters: Waiters,
    /// The blocked request of each connection (a client's calls are sequential, so it has
    /// at most one), by connection: `CANCEL_WAIT` fires it.
    cancels: BTreeMap<u64, oneshot::Sender<()>>,
    /// When the event loop is done with every request that has arrived.
    loop_free_ns: u64,
    /// When the turn of the last write ends: the replies of the blocked requests it woke
    /// leave with its own.
    last_write_end_ns: u64,
    /// Where this server counts its answers.
    stats: StoreStatsHandle,
}

/// Blocked requests, as TCPStore keeps them: each waits on the keys it still misses, and is
/// woken once the last of them appears (TCPStore's `keysAwaited_` count), never by a write
/// to a key it already has. Scanning every waiter's keys on every write, and waking a
/// request for any change to any of its keys, made the workers' bootstrap of N nodes (each
/// waiting for all N ranks' keys) cost O(N³).
#[derive(Default)]
struct Waiters {
    next_id: u64,
    /// Each blocked request's wake-up and how many of its keys are still missing, by the
    /// order in which it blocked.
    by_id: BTreeMap<u64, (oneshot::Sender<()>, usize)>,
    /// The requests waiting for each missing key, in the order they blocked.
    by_key: BTreeMap<String, Vec<u64>>,
}

impl Waiters {
    fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Blocks a request on the keys of `keys` that `state` lacks.
    fn add(&mut self, keys: &[&str], state: &StoreState, wake: oneshot::Sender<()>) {
        let id = self.next_id;
        self.next_id = id.checked_add(1).expect("blocked request ids overflow u64");
        let mut missing = 0;
        for key in keys.iter().filter(|k| !state.contains(k)) {
            missing += 1;
            match self.by_key.get_mut(*key) {
                Some(ids) => ids.push(id),
                None => {
                    self.by_key.insert((*key).to_owned(), vec![id]);
                }
            }
        }
        if missing == 0 {
            // Nothing to wait for after all: let it look again.
            let _ = wake.send(());
            return;
        }
        let earlier = self.by_id.insert(id, (wake, missing));
        assert!(
            earlier.is_none(),
            "blocked request id {id} was handed out twice"
        );
    }

    /// A write touched `changed`: requests whose last missing key now holds a value are
    /// woken, oldest first.
    fn wake(&mut self, changed: &[&str], state: &StoreState) {
        let mut woken = BTreeSet::new();
        for key in changed.iter().filter(|k| state.contains(k)) {
            for id in self.by_key.remove(*key).unwrap_or_default() {
                // A request leaves `by_id` only once its last missing key appeared, which
                // took it off every key's list: a listed id is always registered.
                let Some((_, missing)) = self.by_id.get_mut(&id) else {
                    panic!("blocked request {id} waits on '{key}' but is not registered");
                };
                // Registered once per missing key, so never below zero.
                *missing = missing.checked_sub(1).unwrap_or_else(|| {
                    panic!("blocked request {id} had no missing key left when '{key}' appeared")
                });
                if *missing == 0 {
                    woken.insert(id);
                }
            }
        }
        for id in woken {
            let (wake, _) = self
                .by_id
                .remove(&id)
                .expect("a woken request is registered until woken");
            // The request may have timed out meanwhile; its receiver is gone then.
            let _ = wake.send(());
        }
    }
}

/// Serves a fresh, empty store at `addr` (on the current node) until the task is dropped.
///
/// TCPStore's server is one event loop: it takes requests in arrival order and is busy with
/// each for its cost (`StoreCosts`). Here each request is applied the moment it arrives,
/// and its reply leaves when the loop would be done with it: the end of its own turn,
/// which starts when it arrived or when the turn before it ended. The replies are the
/// same as applying each at its turn (the order is the same, and nobody sees a result
/// before its reply), without a timer per request. A blocked `get` waits without holding
/// up the loop; when a write wakes it, its reply leaves with the write's.
///
/// Everything runs inside this one task. A task per request did the same, but madsim
/// remembers every task a node ever spawned until the node is killed, so a store leaked
/// about 140 bytes a request (141 MB for one 1 024-node join storm). Dropping this task
/// drops every request in progress: a crashed store answers nothing more, and its port
/// stops listening at once even while a blocking `get` was pending.
pub async fn serve(
    addr: SocketAddr,
    costs: StoreCosts,
    stats: StoreStatsHandle,
) -> Result<(), NetError> {
    let server = RpcServer::bind(addr);
    let shared = Arc::new(Mutex::new(Shared {
        stats,
        ..Shared::default()
    }));
    let mut in_progress = FuturesUnordered::new();
    loop {
        let incoming = {
            let mut receive = pin!(server.recv::<StoreRequest>());
            loop {
                if in_progress.is_empty() {
                    break receive.await;
                }
                // Answers progress while the next request is awaited; the receive is kept.
                match select(receive.as_mut(), in_progress.next()).await {
                    Either::Left((incoming, _)) => break incoming,
                    Either::Right(_) => {}
                }
            }
        };
        let turn = take_turn(&shared, &costs, &incoming);
        let replier = server.replier();
        if let Some((reply, leaves_ns)) = answer_at_once(&shared, &incoming.request, turn) {
            replier.reply(&incoming.from, incoming.id, reply, leaves_ns);
            continue;
        }
        let shared = shared.clone();
        let connection = incoming.connection();
        in_progress.push(async move {
            let answered = answer(&shared, &incoming.request, connection, turn).await;
            if let Some((reply, leaves_ns)) = answered {
                replier.reply(&incoming.from, incoming.id, reply, leaves_ns);
            }
        });
    }
}

/// A request's turn on the event loop: how long it takes, and when it ends.
#[derive(Debug, Clone, Copy)]
struct Turn {
    service_ns: u64,
    end_ns: u64,
}

/// Books the turn on the event loop of a request that arrived now.
fn take_turn(
    shared: &Arc<Mutex<Shared>>,
    costs: &StoreCosts,
    incoming: &Incoming<StoreRequest>,
) -> Turn {
    let request = &incoming.request;
    let mut guard = shared.lock().expect("store lock");
    let reply_bytes = match request {
        StoreRequest::Get { .. } | StoreRequest::MultiGet { .. } => {
            guard.state.value_bytes(request.keys())
        }
        _ => 0,
    };
    let starts_ns = incoming.received_ns.max(guard.loop_free_ns);
    let service_ns = costs.service_ns(request, reply_bytes);
    guard.loop_free_ns = starts_ns.saturating_add(service_ns);
    Turn {
        service_ns,
        end_ns: guard.loop_free_ns,
    }
}

/// The answer to a request that needs no waiting, and when it leaves; `None` for one
/// that blocks (its keys are missing) or cancels a wait, which [`answer`] serves. Nearly
/// every request is answered here, in the loop's own turn, without a future of its own.
fn answer_at_once(
    shared: &Arc<Mutex<Shared>>,
    request: &StoreRequest,
    turn: Turn,
) -> Option<(StoreResponse, u64)> {
    if matches!(request, StoreRequest::CancelWait) {
        return None;
    }
    let mut guard = shared.lock().expect("store lock");
    let reply = guard.state.apply(request)?;
    let leaves_ns = record_reply(&mut guard, request, &reply, turn, false);
    Some((reply, leaves_ns))
}

/// Applies one request from `connection`, waiting for keys when it must: its answer, and
/// when that leaves (the end of its turn on the event loop, or of the write that woke
/// it); `None` when the wait ended without an answer (cancelled by its client, or past the
/// server's bound).
async fn answer(
    shared: &Arc<Mutex<Shared>>,
    request: &StoreRequest,
    connection: u64,
    turn: Turn,
) -> Option<(StoreResponse, u64)> {
    if matches!(request, StoreRequest::CancelWait) {
        let cancel = shared
            .lock()
            .expect("store lock")
            .cancels
            .remove(&connection);
        if let Some(cancel) = cancel {
            // The blocked request may have been answered meanwhile; then nothing listens.
            let _ = cancel.send(());
        }
    }
    // One deadline for the whole wait: a blocked request can be woken more than once (a key
    // it had was deleted meanwhile), and a timer armed per wake-up would pile up in madsim's timer heap (timers there
    // cannot be cancelled), which made long blocked gets cost more than the rest of a run.
    let mut deadline = std::pin::pin!(time::sleep(BLOCKED_REQUEST_MAX));
    let mut cancelled: Option<oneshot::Receiver<()>> = None;
    let answered = loop {
        let wake = {
            let mut guard = shared.lock().expect("store lock");
            if let Some(reply) = guard.state.apply(request) {
                // Blocked before (`cancelled` is set once it blocks): a write woke it.
                let leaves_ns =
                    record_reply(&mut guard, request, &reply, turn, cancelled.is_some());
                break Some((reply, leaves_ns));
            }
            if cancelled.is_none() {
                let (cancel, on_cancel) = oneshot::channel();
                guard.cancels.insert(connection, cancel);
                cancelled = Some(on_cancel);
            }
            let (tx, rx) = oneshot::channel();
            let Shared { state, waiters, .. } = &mut *guard;
            waiters.add(&request.keys(), state, tx);
            rx
        };
        let on_cancel = cancelled.as_mut().expect("registered above");
        let ended = select(deadline.as_mut(), on_cancel);
        if let Either::Right((_, _)) = select(wake, ended).await {
            break None;
        }
    };
    if let Some(on_cancel) = cancelled {
        forget_spent_cancel(shared, connection, on_cancel);
    }
    answered
}

/// Counts a reply the store just gave and, for a write, wakes the requests it unblocks.
/// Returns when the reply leaves: a request that had blocked was woken by a write, so its
/// reply leaves no earlier than that write's turn ends.
fn record_reply(
    guard: &mut Shared,
    request: &StoreRequest,
    reply: &StoreResponse,
    turn: Turn,
    had_blocked: bool,
) -> u64 {
    let served = Served {
        at_ns: time::elapsed_ns(),
        service_ns: turn.service_ns,
    };
    guard
        .stats
        .lock()
        .expect("store stats lock")
        .count(request, reply, served);
    let leaves_ns = match had_blocked {
        true => turn.end_ns.max(guard.last_write_end_ns),
        false => turn.end_ns,
    };
    if request.may_change() {
        guard.last_write_end_ns = turn.end_ns;
        if !guard.waiters.is_empty() {
            let Shared { state, waiters, .. } = guard;
            waiters.wake(&request.keys(), state);
        }
    }
    leaves_ns
}

/// Drops the cancel a blocked request registered once it is done with it, so that a later
/// request on the same connection finds none behind.
fn forget_spent_cancel(
    shared: &Arc<Mutex<Shared>>,
    connection: u64,
    on_cancel: oneshot::Receiver<()>,
) {
    // A request that blocked and was answered leaves no cancel behind for a later one:
    // with its receiver gone, the entry still there is its own.
    drop(on_cancel);
    let mut guard = shared.lock().expect("store lock");
    if guard
        .cancels
        .get(&connection)
        .is_some_and(|c| c.is_canceled())
    {
        guard.cancels.remove(&connection);
    }
}

/// A TCPStore client on the current node: one connection to one server incarnation.
///
/// Clones share the connection, as every user in a torch agent process shares the one
/// client `create_backend` made (the rendezvous handler, its keep-alive timer and the
/// agent). TCPStore holds the client's lock through a whole call, a blocking `get` or `wait`
/// included, so while one user waits for a key every other user's call waits behind it.
#[derive(Clone)]
pub struct StoreClient {
    conn: Arc<futures::lock::Mutex<RpcClient>>,
    /// TCPStore's timeout for each call (`set_timeout` changes it for every user), in
    /// nanoseconds: a span shared through an atomic.
    timeout_ns: Arc<std::sync::atomic::AtomicU64>,
}

impl StoreClient {
    /// Opens a client of the store at `server`; `timeout` is its timeout for waits and for
    /// the connect itself.
    pub async fn connect(server: SocketAddr, timeout: SimDuration) -> Result<Self, StoreError> {
        let rpc = RpcClient::connect(server, timeout);
        Ok(StoreClient {
            conn: Arc::new(futures::lock::Mutex::new(rpc)),
            timeout_ns: Arc::new(timeout.as_ns().into()),
        })
    }

    /// The timeout every call on this client uses now.
    pub fn timeout(&self) -> SimDuration {
        SimDuration::from_ns(self.timeout_ns.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// TCPStore's `set_timeout`: the timeout of every later call, by every user.
    pub fn set_timeout(&self, timeout: SimDuration) {
        self.timeout_ns
            .store(timeout.as_ns(), std::sync::atomic::Ordering::Relaxed);
    }

    /// Which incarnation of its address's server this client reached (1 for the first
    /// process to serve there), once a call reached one.
    pub async fn incarnation(&self) -> Option<u64> {
        self.conn.lock().await.incarnation()
    }

    /// One request and its reply, with TCPStore's timeout for its kind (see the module docs).
    async fn call(&self, request: StoreRequest) -> Result<StoreResponse, StoreError> {
        self.call_costing(request, CallCpu::default()).await
    }

    /// [`Self::call`], the caller spending `cpu` on the request before it leaves and on the
    /// reply before it acts (`RpcClient::call_costing`). A signal to the calling process's
    /// main thread waits for it (`signal_gate`).
    async fn call_costing(
        &self,
        request: StoreRequest,
        cpu: CallCpu,
    ) -> Result<StoreResponse, StoreError> {
        super::signal_gate::gated(async move {
            let timeout = self.timeout();
            let mut conn = self.conn.lock().await;
            if !request.waits_for_keys() {
                return settle(conn.call_costing(request, ReplyWait::Unbounded, cpu).await);
            }
            // Kept to name the keys if the wait times out: a clone shares a request's key list,
            // where spelling the list out for every wait held nodes² bytes at scale.
            let waited = request.clone();
            match conn
                .call_costing(request, ReplyWait::Within(timeout), cpu)
                .await
            {
                Err(NetError::Timeout(..)) if conn.incarnation().is_some() => {
                    // TCPStore's doWait: cancel, read the server's answer with no timeout, then
                    // raise the timeout whatever that answer was.
                    settle(
                        conn.call(StoreRequest::CancelWait, ReplyWait::Unbounded)
                            .await,
                    )?;
                    Err(StoreError::WaitTimeout {
                        timeout_ms: timeout.as_ms(),
                        keys: waited.keys().join(", "),
                    })
                }
                reply => settle(reply),
            }
        })
        .await
    }

    /// A request TCPStore sends without reading a reply: the caller goes on at once, and the
    /// connection carries it before anything the caller sends next. Its failure shows on
    /// that next call (the connection reset, or TCP gave up); only a connect that fails (as
    /// TCPStore's constructor would) fails the caller.
    async fn send(&self, request: StoreRequest) -> Result<(), StoreError> {
        let mut conn = Arc::clone(&self.conn).lock_owned().await;
        conn.connect_now()
            .await
            .map_err(|e| StoreError::Connection(e.to_string()))?;
        let mut in_flight = Box::pin(async move {
            let _ = conn
                .call::<_, StoreResponse>(request, ReplyWait::Unbounded)
                .await;
        });
        // Polled once here, the request is on the wire before the caller goes on, as
        // TCPStore's bytes are in the socket when `set` returns: a process that exits right
        // after still delivers it. The rest (the acknowledgement, resends) runs on its own.
        if futures::poll!(in_flight.as_mut()).is_pending() {
            spawn(in_flight);
        }
        Ok(())
    }

    /// Sends the value and goes on: TCPStore's `set` reads no reply.
    pub async fn set(&self, key: &str, value: impl Into<Value>) -> Result<(), StoreError> {
        self.send(StoreRequest::Set {
            key: key.into(),
            value: value.into(),
        })
        .await
    }

    /// Blocks until the key exists, up to the client's timeout.
    pub async fn get(&self, key: &str) -> Result<Value, StoreError> {
        self.get_costing(key, CallCpu::default()).await
    }

    /// [`Self::get`], the caller spending `cpu` around it (`RpcClient::call_costing`).
    pub async fn get_costing(&self, key: &str, cpu: CallCpu) -> Result<Value, StoreError> {
        let request = StoreRequest::Get { key: key.into() };
        match self.call_costing(request, cpu).await? {
            StoreResponse::Value(v) => Ok(v),
            other => Err(unexpected(other)),
        }
    }

    pub async fn add(&self, key: &str, delta: i64) -> Result<i64, StoreError> {
        match self
            .call(StoreRequest::Add {
                key: key.into(),
                delta,
            })
            .await?
        {
            StoreResponse::Int(v) => Ok(v),
            other => Err(unexpected(other)),
        }
    }

    /// Returns the value stored after the operation (see `StoreRequest::CompareSet`).
    pub async fn compare_set(
        &self,
        key: &str,
        expected: impl Into<Value>,
        desired: impl Into<Value>,
    ) -> Result<Value, StoreError> {
        self.compare_set_costing(key, (expected.into(), desired.into()), CallCpu::default())
            .await
    }

    /// [`Self::compare_set`] of `(expected, desired)`, the caller spending `cpu` around it
    /// (`RpcClient::call_costing`).
    pub async fn compare_set_costing(
        &self,
        key: &str,
        (expected, desired): (Value, Value),
        cpu: CallCpu,
    ) -> Result<Value, StoreError> {
        let request = StoreRequest::CompareSet {
            key: key.into(),
            expected,
            desired,
        };
        match self.call_costing(request, cpu).await? {
            StoreResponse::Value(v) => Ok(v),
            other => Err(unexpected(other)),
        }
    }

    pub async fn wait(&self, keys: impl Into<Keys>) -> Result<(), StoreError> {
        self.call(StoreRequest::Wait { keys: keys.into() })
            .await
            .map(|_| ())
    }

    pub async fn check(&self, keys: impl Into<Keys>) -> Result<bool, StoreError> {
        match self.call(StoreRequest::Check { keys: keys.into() }).await? {
            StoreResponse::Bool(b) => Ok(b),
            other => Err(unexpected(other)),
        }
    }

    pub async fn delete_key(&self, key: &str) -> Result<bool, StoreError> {
        match self
            .call(StoreRequest::DeleteKey { key: key.into() })
            .await?
        {
            StoreResponse::Bool(b) => Ok(b),
            other => Err(unexpected(other)),
        }
    }

    pub async fn multi_get(&self, keys: impl Into<Keys>) -> Result<Vec<Value>, StoreError> {
        match self
            .call(StoreRequest::MultiGet { keys: keys.into() })
            .await?
        {
            StoreResponse::Values(v) => Ok(v),
            other => Err(unexpected(other)),
        }
    }

    /// How many keys the store holds.
    pub async fn num_keys(&self) -> Result<i64, StoreError> {
        match self.call(StoreRequest::NumKeys).await? {
            StoreResponse::Int(n) => Ok(n),
            other => Err(unexpected(other)),
        }
    }

    pub async fn multi_set(&self, entries: Vec<(String, Vec<u8>)>) -> Result<(), StoreError> {
        let entries = entries
            .into_iter()
            .map(|(key, value)| (key, Value::from(value)))
            .collect();
        self.send(StoreRequest::MultiSet { entries }).await
    }
}

/// A reply as the c10d backend sees it: refusals and connection errors apart.
fn settle(reply: Result<StoreResponse, NetError>) -> Result<StoreResponse, StoreError> {
    match reply {
        Ok(StoreResponse::Error(e)) => Err(StoreError::Refused(e)),
        Ok(reply) => Ok(reply),
        Err(e) => Err(StoreError::Connection(e.to_string())),
    }
}

fn unexpected(reply: StoreResponse) -> StoreError {
    StoreError::Refused(format!("unexpected reply {reply:?}"))
}

#[cfg(test)]
#[path = "service_tests.rs"]
mod tests;
