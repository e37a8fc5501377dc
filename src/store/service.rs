//! The store served over the simulated network: TCPStore's server loop; its client is in
//! `client`.
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
use super::event_loop::EventLoop;
use super::waiters::Waiters;
use super::PAYLOAD_BYTES_MAX;
use super::{Served, StoreRequest, StoreResponse, StoreState, StoreStatsHandle};
use crate::sim_time::SimDuration;
use crate::world::net::{Incoming, NetError, RpcServer, WireSize};
use crate::world::time;
use futures::channel::oneshot;
use futures::future::{select, Either};
use futures::stream::{FuturesUnordered, StreamExt};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::sync::{Arc, Mutex};

pub use super::client::StoreClient;
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
    /// When the turn of the last write ends: the replies of the blocked requests it woke
    /// leave with its own.
    last_write_end_ns: u64,
    /// Where this server counts its answers.
    stats: StoreStatsHandle,
}

/// Serves a fresh, empty store at `addr` (on the current node) until the task is dropped.
///
/// TCPStore's server is one libuv event loop: in passes over the sockets with data it reads
/// each a few kilobytes at a time, and is busy with each request for its cost
/// (`StoreCosts`), spread over its reads (`event_loop`). Here each request is applied when
/// the pass that reads its last bytes starts, and its reply leaves when that read ends: one
/// timer a pass, not one a request. A blocked `get` waits without holding up the loop;
/// when a write wakes it, its reply leaves with the write's.
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
    let mut event_loop = EventLoop::default();
    let mut in_progress = FuturesUnordered::new();
    // The timer of the pass in progress, kept across arrivals: madsim's timers cannot be
    // cancelled, so one made per arrival would pile up.
    let mut pass_timer: Option<(u64, Pin<Box<time::Sleep>>)> = None;
    loop {
        let now_ns = time::elapsed_ns();
        if event_loop.next_pass_ns().is_some_and(|at| at <= now_ns) {
            let passed = event_loop.start_pass(now_ns, |sockets| costs.juggling_factor(sockets));
            for done in passed {
                let turn = Turn {
                    service_ns: done.charged_ns,
                    end_ns: done.end_ns,
                };
                let incoming = done.what;
                if let Some(answer) = serve_one(&shared, &server, incoming, turn) {
                    in_progress.push(answer);
                }
            }
            continue;
        }
        let due_ns = event_loop.next_pass_ns();
        if pass_timer.as_ref().map(|(at, _)| Some(*at)) != Some(due_ns) {
            pass_timer = due_ns.map(|at| (at, Box::pin(time::sleep_until_exact_ns(at))));
        }
        let timer = pass_timer.as_mut().map(|(_, sleep)| sleep.as_mut());
        if let Some(incoming) = next_arrival(&server, &mut in_progress, timer).await {
            let reply_bytes = match &incoming.request {
                StoreRequest::Get { .. } | StoreRequest::MultiGet { .. } => {
                    let guard = shared.lock().expect("store lock");
                    guard.state.value_bytes(incoming.request.keys())
                }
                _ => 0,
            };
            let service_ns = costs.service_ns(&incoming.request, reply_bytes);
            let wire = (incoming.request.wire_bytes(), incoming.received_ns);
            event_loop.arrive(incoming.connection(), incoming, wire, service_ns);
        }
    }
}

/// A request the server is answering, waiting for its keys.
type Answering = Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// Waits for the next request, driving the answers in progress meanwhile; `None` when
/// `timer` (the end of the pass in progress) fires first.
async fn next_arrival(
    server: &RpcServer,
    in_progress: &mut FuturesUnordered<Answering>,
    timer: Option<Pin<&mut time::Sleep>>,
) -> Option<Incoming<StoreRequest>> {
    let mut receive = pin!(server.recv::<StoreRequest>());
    let mut timer = pin!(async move {
        match timer {
            Some(sleep) => sleep.await,
            None => std::future::pending().await,
        }
    });
    loop {
        let answers = async {
            match in_progress.is_empty() {
                true => std::future::pending().await,
                false => in_progress.next().await.map_or((), |_| ()),
            }
        };
        match select(receive.as_mut(), select(timer.as_mut(), pin!(answers))).await {
            Either::Left((incoming, _)) => return Some(incoming),
            Either::Right((Either::Left(_), _)) => return None,
            Either::Right((Either::Right(_), _)) => {}
        }
    }
}

/// Answers one request the event loop is done reading: at once, or as a future that waits
/// for its keys. A request with a value over TCPStore's bound closes its connection instead.
fn serve_one(
    shared: &Arc<Mutex<Shared>>,
    server: &RpcServer,
    incoming: Incoming<StoreRequest>,
    turn: Turn,
) -> Option<Answering> {
    let replier = server.replier();
    if let Some(bytes) = incoming.request.payload_over_bound() {
        let reply = StoreResponse::Closed(format!(
            "a value of {bytes} bytes is over TCPStore's bound of {PAYLOAD_BYTES_MAX}"
        ));
        replier.reply(&incoming.from, incoming.id, reply, turn.end_ns);
        return None;
    }
    if let Some((reply, leaves_ns)) = answer_at_once(shared, &incoming.request, turn) {
        replier.reply(&incoming.from, incoming.id, reply, leaves_ns);
        return None;
    }
    let shared = shared.clone();
    let connection = incoming.connection();
    Some(Box::pin(async move {
        let answered = answer(&shared, &incoming.request, connection, turn).await;
        if let Some((reply, leaves_ns)) = answered {
            replier.reply(&incoming.from, incoming.id, reply, leaves_ns);
        }
    }))
}

/// A request's turn on the event loop: how long it takes, and when it ends.
#[derive(Debug, Clone, Copy)]
struct Turn {
    service_ns: u64,
    end_ns: u64,
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
