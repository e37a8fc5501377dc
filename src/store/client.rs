//! TCPStore's client over the simulated network: one connection to one server incarnation,
//! with TCPStore's timeouts for each operation (see `service`).

use super::service::StoreError;
use super::signal_gate::gated;
use super::{Keys, StoreRequest, StoreResponse, Value};
use crate::sim_time::SimDuration;
use crate::world::net::{CallCpu, NetError, ReplyWait, RpcClient};
use crate::world::spawn;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

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
    /// Why the server closed this connection, once it did: every later call fails.
    closed: Arc<Mutex<Option<String>>>,
}

impl StoreClient {
    /// Opens a client of the store at `server`; `timeout` is its timeout for waits and for
    /// the connect itself.
    pub async fn connect(server: SocketAddr, timeout: SimDuration) -> Result<Self, StoreError> {
        let rpc = RpcClient::connect(server, timeout);
        Ok(StoreClient {
            conn: Arc::new(futures::lock::Mutex::new(rpc)),
            timeout_ns: Arc::new(timeout.as_ns().into()),
            closed: Arc::default(),
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
    /// main thread waits for it (`signal_gate`), as for every call that reads a reply.
    async fn call_costing(
        &self,
        request: StoreRequest,
        cpu: CallCpu,
    ) -> Result<StoreResponse, StoreError> {
        gated(async move {
            let mut conn = self.conn.lock().await;
            self.call_locked(&mut conn, request, cpu).await
        })
        .await
    }

    /// [`Self::call_costing`] on the connection its caller has locked.
    async fn call_locked(
        &self,
        conn: &mut RpcClient,
        request: StoreRequest,
        cpu: CallCpu,
    ) -> Result<StoreResponse, StoreError> {
        let timeout = self.timeout();
        self.still_open()?;
        if !request.waits_for_keys() {
            let reply = conn.call_costing(request, ReplyWait::Unbounded, cpu).await;
            return self.settle(reply);
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
                let reply = conn
                    .call(StoreRequest::CancelWait, ReplyWait::Unbounded)
                    .await;
                self.settle(reply)?;
                Err(StoreError::WaitTimeout {
                    timeout_ms: timeout.as_ms(),
                    keys: waited.keys().join(", "),
                })
            }
            reply => self.settle(reply),
        }
    }

    /// Fails once the server has closed this connection: TCPStore's next send on it
    /// raises `Broken pipe`.
    fn still_open(&self) -> Result<(), StoreError> {
        match &*self.closed.lock().expect("closed lock") {
            Some(reason) => Err(StoreError::Connection(format!(
                "Broken pipe: the server closed the connection ({reason})"
            ))),
            None => Ok(()),
        }
    }

    /// A reply as the c10d backend sees it: refusals and connection errors apart. A closed
    /// connection stays closed.
    fn settle(&self, reply: Result<StoreResponse, NetError>) -> Result<StoreResponse, StoreError> {
        match reply {
            Ok(StoreResponse::Closed(reason)) => {
                let error = closed_error(&reason);
                *self.closed.lock().expect("closed lock") = Some(reason);
                Err(error)
            }
            Ok(StoreResponse::Error(e)) => Err(StoreError::Refused(e)),
            Ok(reply) => Ok(reply),
            Err(e) => Err(StoreError::Connection(e.to_string())),
        }
    }

    /// A request TCPStore sends without reading a reply: the caller goes on at once, and the
    /// connection carries it before anything the caller sends next. Its failure shows on
    /// that next call (the connection reset, or TCP gave up); only a connect that fails (as
    /// TCPStore's constructor would) fails the caller.
    async fn send(&self, request: StoreRequest) -> Result<(), StoreError> {
        if request.payload_over_bound().is_some() {
            // More than the socket's buffers take: the caller is still sending it when the
            // server closes the connection, and sees the reset itself.
            return self.call(request).await.map(|_| ());
        }
        let mut conn = Arc::clone(&self.conn).lock_owned().await;
        self.still_open()?;
        conn.connect_now()
            .await
            .map_err(|e| StoreError::Connection(e.to_string()))?;
        let closed = Arc::clone(&self.closed);
        let mut in_flight = Box::pin(async move {
            let reply = conn
                .call::<_, StoreResponse>(request, ReplyWait::Unbounded)
                .await;
            // Unanswered: the caller learns of it on its next call.
            if let Ok(StoreResponse::Closed(reason)) = reply {
                *closed.lock().expect("closed lock") = Some(reason);
            }
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
    ///
    /// Two requests, as TCPStore's `get`, under one hold of the client: a `WAIT` for the key
    /// with the client's timeout, then the `GET` itself, read with no timeout (its reply is
    /// what `cpu.after` is spent on).
    pub async fn get_costing(&self, key: &str, cpu: CallCpu) -> Result<Value, StoreError> {
        gated(self.get_now(key, cpu)).await
    }

    async fn get_now(&self, key: &str, cpu: CallCpu) -> Result<Value, StoreError> {
        let wait = StoreRequest::Wait {
            keys: vec![key.to_owned()].into(),
        };
        let before = CallCpu {
            before_ns: cpu.before_ns,
            after: None,
        };
        let mut conn = self.conn.lock().await;
        self.call_locked(&mut conn, wait, before).await?;
        let after = CallCpu {
            before_ns: 0,
            after: cpu.after,
        };
        let request = StoreRequest::Get { key: key.into() };
        let reply = conn
            .call_costing(request, ReplyWait::Unbounded, after)
            .await;
        match self.settle(reply)? {
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

    /// Two requests, as TCPStore's `multi_get`, under one hold of the client: a `WAIT` for
    /// every key with the client's timeout, then the read, with none.
    pub async fn multi_get(&self, keys: impl Into<Keys>) -> Result<Vec<Value>, StoreError> {
        gated(self.multi_get_now(keys.into())).await
    }

    async fn multi_get_now(&self, keys: Keys) -> Result<Vec<Value>, StoreError> {
        let wait = StoreRequest::Wait {
            keys: Arc::clone(&keys),
        };
        let mut conn = self.conn.lock().await;
        self.call_locked(&mut conn, wait, CallCpu::default())
            .await?;
        let read = StoreRequest::MultiGet { keys };
        let reply = conn.call(read, ReplyWait::Unbounded).await;
        match self.settle(reply)? {
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

/// What the call whose request made the server close its connection raises.
fn closed_error(reason: &str) -> StoreError {
    StoreError::Connection(format!("Connection reset by peer ({reason})"))
}

fn unexpected(reply: StoreResponse) -> StoreError {
    StoreError::Refused(format!("unexpected reply {reply:?}"))
}
