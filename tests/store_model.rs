//! The store service against a reference model: random sequences of c10d store calls, from
//! one to three clients of one agent, go over the simulated network (with and without loss)
//! to the real server, and every reply must be the one a small model of TCPStore's
//! semantics gives. A failing sequence is shrunk to a short one by proptest.
//!
//! The model is written here, apart from `store::StoreState`, so that a slip in the pure
//! store and the same slip in the service cannot agree with each other.

mod common;

use common::{done, programs};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use trainsim::scenario::model::*;
use trainsim::store::service::{StoreClient, StoreError};
use trainsim::world::time::sleep_us;

const KEYS: [&str; 3] = ["a", "b", "c"];
/// Values the calls write: empty (the compare-and-set's "absent" marker), two counters and
/// a value `add` refuses.
const VALUES: [&[u8]; 4] = [b"", b"0", b"7", b"x"];
/// Every client's timeout: a blocking read of a key nobody sets gives up after it. Long
/// enough that loss never makes a call that is answered time out.
const TIMEOUT_US: u64 = 10_000_000;
/// How long a blocked `get` waits before another client sets its key.
const SETTER_DELAY_US: u64 = 50_000;

/// One step of a sequence. Clients are numbered modulo the number of clients the case has.
#[derive(Debug, Clone)]
enum Op {
    Set {
        client: usize,
        key: usize,
        value: usize,
    },
    Get {
        client: usize,
        key: usize,
    },
    Add {
        client: usize,
        key: usize,
        delta: i64,
    },
    CompareSet {
        client: usize,
        key: usize,
        expected: usize,
        desired: usize,
    },
    Check {
        client: usize,
        keys: Vec<usize>,
    },
    Wait {
        client: usize,
        keys: Vec<usize>,
    },
    Delete {
        client: usize,
        key: usize,
    },
    MultiGet {
        client: usize,
        keys: Vec<usize>,
    },
    MultiSet {
        client: usize,
        entries: Vec<(usize, usize)>,
    },
    NumKeys {
        client: usize,
    },
    /// `setter` deletes `key`; `waiter` then gets it while, 50 ms later, `setter` sets it to
    /// `value`, which wakes the waiter with the value. When both are one client, the set waits
    /// behind the blocked get (TCPStore holds a client's lock through a call), which times
    /// out. (Deleting first keeps the get blocked whatever loss delays: with the key present
    /// the get and the set would race.)
    GetWokenBySet {
        waiter: usize,
        setter: usize,
        key: usize,
        value: usize,
    },
}

/// A reply as the test compares it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Reply {
    Done,
    Value(Vec<u8>),
    Values(Vec<Vec<u8>>),
    Int(i64),
    Bool(bool),
    /// The store refused the request (`add` on a value that is not a number).
    Refused,
    /// No reply within the client's timeout.
    TimedOut,
    /// Any other failure: the model never expects one.
    Failed(String),
}

fn op() -> impl Strategy<Value = Op> {
    let client = 0usize..3;
    let key = 0..KEYS.len();
    let value = 0..VALUES.len();
    let keys = prop::collection::vec(0..KEYS.len(), 1..=3);
    prop_oneof![
        3 => (client.clone(), key.clone(), value.clone())
            .prop_map(|(client, key, value)| Op::Set { client, key, value }),
        2 => (client.clone(), key.clone()).prop_map(|(client, key)| Op::Get { client, key }),
        2 => (client.clone(), key.clone(), -3i64..=3)
            .prop_map(|(client, key, delta)| Op::Add { client, key, delta }),
        3 => (client.clone(), key.clone(), value.clone(), value.clone()).prop_map(
            |(client, key, expected, desired)| Op::CompareSet { client, key, expected, desired }
        ),
        1 => (client.clone(), keys.clone()).prop_map(|(client, keys)| Op::Check { client, keys }),
        1 => (client.clone(), keys.clone()).prop_map(|(client, keys)| Op::Wait { client, keys }),
        2 => (client.clone(), key.clone()).prop_map(|(client, key)| Op::Delete { client, key }),
        1 => (client.clone(), keys).prop_map(|(client, keys)| Op::MultiGet { client, keys }),
        1 => (
            client.clone(),
            prop::collection::vec((key.clone(), value.clone()), 1..=3)
        )
            .prop_map(|(client, entries)| Op::MultiSet { client, entries }),
        1 => client.clone().prop_map(|client| Op::NumKeys { client }),
        2 => (client.clone(), client, key, value).prop_map(|(waiter, setter, key, value)| {
            Op::GetWokenBySet { waiter, setter, key, value }
        }),
    ]
}

/// TCPStore's semantics over a map, one call at a time.
#[derive(Default)]
struct Model {
    data: BTreeMap<String, Vec<u8>>,
}

impl Model {
    /// The replies `op` gets, in the order its calls return.
    fn apply(&mut self, op: &Op, clients: usize) -> Vec<Reply> {
        match op {
            Op::Set { key, value, .. } => vec![self.set(*key, *value)],
            Op::Get { key, .. } => vec![self.get(*key)],
            Op::Add { key, delta, .. } => vec![self.add(*key, *delta)],
            Op::CompareSet {
                key,
                expected,
                desired,
                ..
            } => vec![self.compare_set(*key, *expected, *desired)],
            Op::Check { keys, .. } => vec![Reply::Bool(self.all_present(keys))],
            Op::Wait { keys, .. } => vec![if self.all_present(keys) {
                Reply::Done
            } else {
                Reply::TimedOut
            }],
            Op::Delete { key, .. } => vec![Reply::Bool(self.data.remove(KEYS[*key]).is_some())],
            Op::MultiGet { keys, .. } => vec![if self.all_present(keys) {
                Reply::Values(keys.iter().map(|k| self.data[KEYS[*k]].clone()).collect())
            } else {
                Reply::TimedOut
            }],
            Op::MultiSet { entries, .. } => {
                for (key, value) in entries {
                    self.set(*key, *value);
                }
                vec![Reply::Done]
            }
            Op::NumKeys { .. } => vec![Reply::Int(self.data.len() as i64)],
            Op::GetWokenBySet {
                waiter,
                setter,
                key,
                value,
            } => {
                let deleted = Reply::Bool(self.data.remove(KEYS[*key]).is_some());
                let got = if waiter % clients == setter % clients {
                    Reply::TimedOut
                } else {
                    Reply::Value(VALUES[*value].to_vec())
                };
                vec![deleted, got, self.set(*key, *value)]
            }
        }
    }

    /// TCPStore's `add`: the key's integer plus `delta` (a missing key counts as 0), refused
    /// on a value that is not an integer.
    fn add(&mut self, key: usize, delta: i64) -> Reply {
        let now = match self.data.get(KEYS[key]) {
            None => 0,
            Some(bytes) => match std::str::from_utf8(bytes)
                .ok()
                .and_then(|s| s.parse::<i64>().ok())
            {
                Some(n) => n,
                None => return Reply::Refused,
            },
        };
        let next = now + delta;
        self.data
            .insert(KEYS[key].into(), next.to_string().into_bytes());
        Reply::Int(next)
    }

    /// TCPStore's `compare_set`: `desired` is written when the key holds `expected` (or is
    /// missing and `expected` is empty); the reply is the value the key then holds, or
    /// `expected` itself for a missing key.
    fn compare_set(&mut self, key: usize, expected: usize, desired: usize) -> Reply {
        let (expected, desired) = (VALUES[expected].to_vec(), VALUES[desired].to_vec());
        let reply = match self.data.get(KEYS[key]) {
            None if expected.is_empty() => {
                self.data.insert(KEYS[key].into(), desired.clone());
                desired
            }
            None => expected,
            Some(current) if *current == expected => {
                self.data.insert(KEYS[key].into(), desired.clone());
                desired
            }
            Some(current) => current.clone(),
        };
        Reply::Value(reply)
    }

    fn set(&mut self, key: usize, value: usize) -> Reply {
        self.data.insert(KEYS[key].into(), VALUES[value].to_vec());
        Reply::Done
    }

    fn get(&self, key: usize) -> Reply {
        match self.data.get(KEYS[key]) {
            Some(v) => Reply::Value(v.clone()),
            None => Reply::TimedOut,
        }
    }

    fn all_present(&self, keys: &[usize]) -> bool {
        keys.iter().all(|k| self.data.contains_key(KEYS[*k]))
    }
}

fn reply<T>(result: Result<T, StoreError>, ok: impl FnOnce(T) -> Reply) -> Reply {
    match result {
        Ok(v) => ok(v),
        Err(StoreError::Refused(_)) => Reply::Refused,
        Err(StoreError::WaitTimeout { .. }) => Reply::TimedOut,
        Err(e) => Reply::Failed(e.to_string()),
    }
}

fn names(keys: &[usize]) -> Vec<String> {
    keys.iter().map(|k| KEYS[*k].to_owned()).collect()
}

/// Makes the calls of `op` through the clients and returns their replies.
/// `set` and `multi_set` read no reply, so the next op, on another client, could reach the
/// server first (as with TCPStore). A reply to a later request on the same connection
/// means the server applied them: the model's ops are then in one order.
async fn fence(client: &StoreClient) {
    let _ = client.num_keys().await;
}

async fn call(clients: &[StoreClient], op: &Op) -> Vec<Reply> {
    let at = |client: &usize| &clients[client % clients.len()];
    let value = |v: &usize| VALUES[*v].to_vec();
    let one = match op {
        Op::Set {
            client,
            key,
            value: v,
        } => {
            let sent = at(client).set(KEYS[*key], value(v)).await;
            fence(at(client)).await;
            reply(sent, |()| Reply::Done)
        }
        Op::Get { client, key } => reply(at(client).get(KEYS[*key]).await, |v| {
            Reply::Value(v.to_vec())
        }),
        Op::Add { client, key, delta } => {
            reply(at(client).add(KEYS[*key], *delta).await, Reply::Int)
        }
        Op::CompareSet {
            client,
            key,
            expected,
            desired,
        } => reply(
            at(client)
                .compare_set(KEYS[*key], value(expected), value(desired))
                .await,
            |v| Reply::Value(v.to_vec()),
        ),
        Op::Check { client, keys } => reply(at(client).check(names(keys)).await, Reply::Bool),
        Op::Wait { client, keys } => reply(at(client).wait(names(keys)).await, |()| Reply::Done),
        Op::Delete { client, key } => reply(at(client).delete_key(KEYS[*key]).await, Reply::Bool),
        Op::MultiGet { client, keys } => reply(at(client).multi_get(names(keys)).await, |vs| {
            Reply::Values(vs.iter().map(|v| v.to_vec()).collect())
        }),
        Op::MultiSet { client, entries } => {
            let entries = entries
                .iter()
                .map(|(k, v)| (KEYS[*k].to_owned(), value(v)))
                .collect();
            let sent = at(client).multi_set(entries).await;
            fence(at(client)).await;
            reply(sent, |()| Reply::Done)
        }
        Op::NumKeys { client } => reply(at(client).num_keys().await, Reply::Int),
        Op::GetWokenBySet {
            waiter,
            setter,
            key,
            value: v,
        } => {
            let (waiter, key) = (at(waiter).clone(), KEYS[*key]);
            let deleted = reply(at(setter).delete_key(key).await, Reply::Bool);
            let get = trainsim::world::spawn(async move {
                reply(waiter.get(key).await, |v| Reply::Value(v.to_vec()))
            });
            sleep_us(SETTER_DELAY_US).await;
            let sent = at(setter).set(key, value(v)).await;
            fence(at(setter)).await;
            let set = reply(sent, |()| Reply::Done);
            let got = get.await.expect("the get task runs to its end");
            return vec![deleted, got, set];
        }
    };
    vec![one]
}

/// Runs `ops` through `clients` clients in the simulated world; the replies of each op.
fn run(ops: &[Op], clients: usize, loss: f64, seed: u64) -> Vec<Vec<Reply>> {
    let mut s = trainsim::scenario::default_scenario("store-model");
    s.seed = seed;
    s.time_limit = trainsim::sim_time::SimDuration::from_secs(3_600);
    s.cluster.nodes = 1;
    s.cluster.spare_nodes = 0;
    s.cluster.store = StoreHost::Dedicated;
    s.network.loss = loss;
    s.faults.clear();
    let log: Arc<Mutex<Vec<Vec<Reply>>>> = Arc::default();
    let (l, ops) = (Arc::clone(&log), Arc::new(ops.to_vec()));
    let programs = programs(move |env| {
        let (log, ops) = (Arc::clone(&l), Arc::clone(&ops));
        async move {
            let mut connected = Vec::new();
            for _ in 0..clients {
                let client = StoreClient::connect(
                    env.store_addr(),
                    trainsim::sim_time::SimDuration::from_us(TIMEOUT_US),
                )
                .await;
                connected.push(client.expect("a client binds"));
            }
            for op in ops.iter() {
                let replies = call(&connected, op).await;
                log.lock().unwrap().push(replies);
            }
            done()
        }
    });
    trainsim::world::simulate(&s, seed, programs).expect("the run finishes");
    let replies = log.lock().unwrap().clone();
    replies
}

proptest! {
    // A case is one short simulated run (milliseconds of wall time); a failure is shrunk
    // and printed, not saved.
    #![proptest_config(ProptestConfig {
        cases: 64,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_reply_is_the_models(
        ops in prop::collection::vec(op(), 1..20),
        clients in 1usize..=3,
        loss in prop::sample::select(vec![0.0, 0.02]),
        seed in 0u64..1_000,
    ) {
        let seen = run(&ops, clients, loss, seed);
        prop_assert_eq!(seen.len(), ops.len(), "every op ran");
        let mut model = Model::default();
        for (i, (op, seen)) in ops.iter().zip(&seen).enumerate() {
            let expected = model.apply(op, clients);
            prop_assert_eq!(seen, &expected, "op {} of {}: {:?}", i, ops.len(), op);
        }
    }
}
