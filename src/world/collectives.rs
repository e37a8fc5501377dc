//! The workers' process groups: who joined each one, every step's all-reduce among the
//! group's ranks, and how a member's death reaches the others.
//!
//! A group is torch's process group of `WORLD_SIZE` ranks, as the rank-0 agent's rank
//! assignment set it: a step's all-reduce releases when every rank of that world has
//! arrived, whatever a node's own view of the round says (a node whose view lost the others
//! still waits for their ranks). After the release the ring moves the gradients for the
//! step's cost, and a member whose workers leave before the ring is done fails the step for
//! the others: a death on a live host closes the dead workers' connections (`PeerClosed`),
//! a host that vanishes only stops answering (`Stalled`). What each backend makes of those,
//! and when, is the job's business.
//!
//! Whom a closed connection reaches is the backend's [`Spread`]: gloo fails only the pairs
//! to the dead ranks that a waiting rank reads or writes, its ring neighbours; the others
//! wait on, and fail when a neighbour's own process exits (measured on torch 2.15.0, see
//! docs/fidelity.md "Collectives"). A silent member stalls the whole ring either way.

use super::env::NodeEnv;
use super::time;
use crate::sim_time::SimDuration;
use futures::channel::oneshot;
use futures::future::{select, Either};
use std::collections::{BTreeMap, BTreeSet};
use std::pin::pin;

/// Most worker groups whose collectives are remembered at once; the oldest go first.
const GROUPS_MAX: usize = 4096;

/// The global ranks one node's workers hold in their group's world.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RankBlock {
    pub first: u64,
    pub count: u64,
    /// `WORLD_SIZE`, as the rank assignment gave it to this node's workers.
    pub world_size: u64,
}

/// Whether `blocks` hold every rank of one world: they agree on its size and leave no rank
/// out. Two nodes holding the same ranks still cover them once.
pub fn covers_world(blocks: impl IntoIterator<Item = RankBlock>) -> bool {
    let mut blocks: Vec<RankBlock> = blocks.into_iter().collect();
    let Some(world_size) = blocks.first().map(|b| b.world_size) else {
        return false;
    };
    if blocks.iter().any(|b| b.world_size != world_size) {
        return false;
    }
    blocks.sort_by_key(|b| b.first);
    let mut next = 0u64;
    for b in blocks {
        if b.first > next {
            return false;
        }
        next = next.max(b.first.saturating_add(b.count));
    }
    next >= world_size
}

/// Whom a member's closed connections reach at once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Spread {
    /// Every other member (NCCL's communicator reports the remote error to every rank).
    #[default]
    Everyone,
    /// The members holding the ranks next to the dead ones on the ring (gloo's pairs).
    RingNeighbours,
}

impl Spread {
    pub fn of_backend(backend: crate::scenario::model::Backend) -> Spread {
        match backend {
            crate::scenario::model::Backend::Gloo => Spread::RingNeighbours,
            crate::scenario::model::Backend::Nccl => Spread::Everyone,
        }
    }
}

/// A member's workers left a group: when, and whether their connections closed (processes
/// that died on a live host) or the host just went silent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Departure {
    pub member: u32,
    pub at_ns: u64,
    pub closed: bool,
}

/// Why an all-reduce did not finish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CollectiveError {
    /// Nothing came before the timeout: a rank never arrived.
    Timeout,
    /// `member`'s workers died on a live host at `at_ns`: their connections closed.
    PeerClosed { member: u32, at_ns: u64 },
    /// `member`'s host went silent at `at_ns` while the ring was moving: the ring stalls.
    Stalled { member: u32, at_ns: u64 },
}

/// How a step's barrier ended for those waiting at it.
#[derive(Debug, Clone, Copy)]
enum BarrierEnd {
    Released,
    PeerClosed { member: u32, at_ns: u64 },
}

/// One step's all-reduce barrier: the ranks arrived so far, by node, and who waits.
#[derive(Default)]
struct Barrier {
    arrived: BTreeMap<u32, RankBlock>,
    /// Who waits, by node.
    waiters: Vec<(u32, oneshot::Sender<BarrierEnd>)>,
    /// When every rank had arrived but a cut link held the barrier back, in nanoseconds.
    held_since_ns: Option<u64>,
}

/// One worker group: the nodes whose workers joined it, how those that left it left, and
/// who watches for leavers.
#[derive(Default)]
struct Group {
    members: BTreeSet<u32>,
    /// The ranks each member's workers hold, which place it on the ring.
    blocks: BTreeMap<u32, RankBlock>,
    departed: BTreeMap<u32, Departure>,
    /// Who watches for leavers: a node (told only of departures that reach it), or anyone
    /// (`None`, told of every departure).
    watchers: Vec<(Option<u32>, oneshot::Sender<Departure>)>,
}

impl Group {
    /// The members holding the ranks just before and just after `node`'s on the ring;
    /// every other member when `node`'s ranks are not known.
    fn ring_neighbours(&self, node: u32) -> BTreeSet<u32> {
        let Some(own) = self.blocks.get(&node) else {
            return self
                .members
                .iter()
                .copied()
                .filter(|m| *m != node)
                .collect();
        };
        let world = own.world_size.max(1);
        let before = (own.first + world - 1) % world;
        let after = (own.first + own.count) % world;
        let holds = |b: &RankBlock, rank: u64| rank >= b.first && rank < b.first + b.count;
        self.blocks
            .iter()
            .filter(|(m, b)| **m != node && (holds(b, before) || holds(b, after)))
            .map(|(m, _)| *m)
            .collect()
    }

    /// Whether `departure` reaches `node` at once under `spread`: a silent member stalls
    /// everyone's ring, closed connections reach whom the spread says.
    fn reaches(&self, spread: Spread, departure: &Departure, node: u32) -> bool {
        !departure.closed
            || spread == Spread::Everyone
            || self.ring_neighbours(node).contains(&departure.member)
    }

    /// The earliest departure that reaches `node` (any, for `None`), closed ones first.
    fn first_reaching(&self, spread: Spread, node: Option<u32>) -> Option<Departure> {
        let reaching: Vec<Departure> = self
            .departed
            .values()
            .filter(|d| node.is_none_or(|n| self.reaches(spread, d, n)))
            .copied()
            .collect();
        let earliest = |closed_only: bool| {
            reaching
                .iter()
                .filter(|d| d.closed || !closed_only)
                .min_by_key(|d| (d.at_ns, d.member))
                .copied()
        };
        earliest(true).or_else(|| earliest(false))
    }

    /// The earliest closed departure that reaches `node`: the peer whose death the backend
    /// reports (a later one may be a peer that failed because of it).
    fn closed_reaching(&self, spread: Spread, node: u32) -> Option<Departure> {
        self.departed
            .values()
            .filter(|d| d.closed && self.reaches(spread, d, node))
            .min_by_key(|d| (d.at_ns, d.member))
            .copied()
    }
}

/// What arriving at a barrier gives at once.
enum Arrival {
    Released,
    Failed(CollectiveError),
    Wait(oneshot::Receiver<BarrierEnd>),
}

/// Every worker group's collectives, by group key.
#[derive(Default)]
pub struct Collectives {
    barriers: BTreeMap<(u64, u64), Barrier>,
    groups: BTreeMap<u64, Group>,
    spread: Spread,
}

impl Collectives {
    pub fn new(spread: Spread) -> Collectives {
        Collectives {
            spread,
            ..Collectives::default()
        }
    }

    /// `node`'s workers, holding `ranks`, joined `group` (their process group formed).
    pub fn join(&mut self, group: u64, node: u32, ranks: RankBlock) {
        if !self.groups.contains_key(&group) {
            while self.groups.len() >= GROUPS_MAX {
                self.groups.pop_first();
            }
        }
        let g = self.groups.entry(group).or_default();
        g.members.insert(node);
        g.blocks.insert(node, ranks);
    }

    /// The nodes whose workers joined `group`.
    pub fn members(&self, group: u64) -> Vec<u32> {
        self.groups
            .get(&group)
            .map(|g| g.members.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Whether some member's workers left `group`.
    pub fn has_departures(&self, group: u64) -> bool {
        self.groups
            .get(&group)
            .is_some_and(|g| !g.departed.is_empty())
    }

    /// `node` arrives at the barrier of `step` with `ranks`; `connected` says whether a set
    /// of nodes can reach each other.
    fn arrive(
        &mut self,
        key: (u64, u64),
        node: u32,
        ranks: RankBlock,
        connected: impl Fn(&[u32]) -> bool,
        now_ns: u64,
    ) -> Arrival {
        let spread = self.spread;
        if let Some(d) = self
            .groups
            .get(&key.0)
            .and_then(|g| g.closed_reaching(spread, node))
        {
            return Arrival::Failed(CollectiveError::PeerClosed {
                member: d.member,
                at_ns: d.at_ns,
            });
        }
        let barrier = self.barriers.entry(key).or_default();
        barrier.arrived.insert(node, ranks);
        let nodes: Vec<u32> = barrier.arrived.keys().copied().collect();
        if covers_world(barrier.arrived.values().copied()) && connected(&nodes) {
            let done = self.barriers.remove(&key).expect("barrier just touched");
            for (_, waiter) in done.waiters {
                let _ = waiter.send(BarrierEnd::Released);
            }
            return Arrival::Released;
        }
        if covers_world(barrier.arrived.values().copied()) {
            barrier.held_since_ns.get_or_insert(now_ns);
        }
        let (tx, rx) = oneshot::channel();
        barrier.waiters.push((node, tx));
        Arrival::Wait(rx)
    }

    /// The barriers a cut link held back with every rank arrived whose nodes are connected
    /// again, each with when it was first held back.
    pub fn held_back(&self, connected: impl Fn(&[u32]) -> bool) -> Vec<((u64, u64), u64)> {
        self.barriers
            .iter()
            .filter_map(|(key, barrier)| {
                let since = barrier.held_since_ns?;
                let nodes: Vec<u32> = barrier.arrived.keys().copied().collect();
                let whole = covers_world(barrier.arrived.values().copied());
                (whole && connected(&nodes)).then_some((*key, since))
            })
            .collect()
    }

    /// Releases the barrier `key` if every rank is still there and connected (a held-back
    /// all-reduce whose data got through once the link healed).
    pub fn release_if_connected(&mut self, key: (u64, u64), connected: impl Fn(&[u32]) -> bool) {
        let Some(barrier) = self.barriers.get(&key) else {
            return;
        };
        let nodes: Vec<u32> = barrier.arrived.keys().copied().collect();
        if !covers_world(barrier.arrived.values().copied()) || !connected(&nodes) {
            return;
        }
        let done = self.barriers.remove(&key).expect("barrier just read");
        for (_, waiter) in done.waiters {
            let _ = waiter.send(BarrierEnd::Released);
        }
    }

    /// Takes `node`'s arrivals back from every unfinished barrier: its workers are gone.
    /// With `closed` (they died on a live host), every barrier of its groups fails the
    /// waiters the closed connections reach (the spread's), and those groups fail those
    /// members' later collectives. Returns the groups it was a member of.
    pub fn withdraw(&mut self, node: u32, closed: bool, now_ns: u64) -> Vec<u64> {
        for barrier in self.barriers.values_mut() {
            barrier.arrived.remove(&node);
        }
        self.depart(node, closed, now_ns);
        // How the node left each group first decides what its peers see, whoever told.
        let closed_in: BTreeMap<u64, u64> = self
            .groups
            .iter()
            .filter_map(|(key, g)| {
                let d = g.departed.get(&node).filter(|d| d.closed)?;
                Some((*key, d.at_ns))
            })
            .collect();
        let failed: Vec<(u64, u64)> = self
            .barriers
            .keys()
            .filter(|(group, _)| closed_in.contains_key(group))
            .copied()
            .collect();
        let spread = self.spread;
        for key in failed {
            let (Some(barrier), Some(group)) =
                (self.barriers.get_mut(&key), self.groups.get(&key.0))
            else {
                continue;
            };
            let departure = group.departed[&node];
            let (reached, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut barrier.waiters)
                .into_iter()
                .partition(|(waiter, _)| group.reaches(spread, &departure, *waiter));
            barrier.waiters = waiting;
            for (_, waiter) in reached {
                let _ = waiter.send(BarrierEnd::PeerClosed {
                    member: node,
                    at_ns: closed_in[&key.0],
                });
            }
        }
        self.barriers.retain(|_, b| !b.arrived.is_empty());
        // What `withdraw` promises: no unfinished all-reduce counts the node as arrived.
        assert!(
            self.barriers
                .values()
                .all(|b| !b.arrived.contains_key(&node)),
            "node {node} still counts as arrived at an all-reduce it withdrew from"
        );
        self.groups
            .iter()
            .filter(|(_, g)| g.members.contains(&node))
            .map(|(key, _)| *key)
            .collect()
    }

    /// Marks `node` departed from every group it joined (once: how it left first is what
    /// its peers saw), and tells those groups' watchers. Returns the groups it left now.
    pub fn depart(&mut self, node: u32, closed: bool, now_ns: u64) -> Vec<u64> {
        let departure = Departure {
            member: node,
            at_ns: now_ns,
            closed,
        };
        let mut groups = Vec::new();
        for (key, group) in self.groups.iter_mut() {
            if !group.members.contains(&node) || group.departed.contains_key(&node) {
                continue;
            }
            group.departed.insert(node, departure);
            let spread = self.spread;
            let (told, left): (Vec<_>, Vec<_>) = std::mem::take(&mut group.watchers)
                .into_iter()
                .partition(|(who, _)| who.is_none_or(|n| group.reaches(spread, &departure, n)));
            group.watchers = left;
            for (_, watcher) in told {
                let _ = watcher.send(departure);
            }
            groups.push(*key);
        }
        groups
    }

    /// Where `group`'s next departure that reaches `node` (any, for `None`) will be told;
    /// `Err` with one at once when the group already lost such a member.
    fn watch(
        &mut self,
        group: u64,
        node: Option<u32>,
    ) -> Result<oneshot::Receiver<Departure>, Departure> {
        let (tx, rx) = oneshot::channel();
        let spread = self.spread;
        if let Some(g) = self.groups.get_mut(&group) {
            if let Some(departure) = g.first_reaching(spread, node) {
                return Err(departure);
            }
            g.watchers.retain(|(_, w)| !w.is_canceled());
            g.watchers.push((node, tx));
        }
        Ok(rx)
    }
}

impl NodeEnv {
    /// This node's workers joined process group `group`: from now on their death reaches
    /// the group's other members.
    pub fn join_process_group(&self, group: u64, ranks: RankBlock) {
        self.world()
            .state
            .lock()
            .expect("world lock")
            .collectives
            .join(group, self.index, ranks);
    }

    /// The all-reduce of `step` in `group`, this node holding `ranks`: it releases when every
    /// rank of the world arrived over connected links (or fails after `timeout`), then
    /// the ring moves the gradients for `ring`, unless a member's workers leave first.
    pub async fn all_reduce(
        &self,
        group: u64,
        step: u64,
        ranks: RankBlock,
        ring: SimDuration,
        timeout: SimDuration,
    ) -> Result<(), CollectiveError> {
        let arrival = {
            let mut st = self.world().state.lock().expect("world lock");
            let st = &mut *st;
            let clogged = &st.clogged;
            let now_ns = time::now().as_ns();
            st.collectives.arrive(
                (group, step),
                self.index,
                ranks,
                |nodes| super::state::links_connected(clogged, nodes),
                now_ns,
            )
        };
        match arrival {
            Arrival::Released => {}
            Arrival::Failed(error) => return Err(error),
            Arrival::Wait(rx) => match time::timeout(timeout, rx).await {
                Some(Ok(BarrierEnd::Released)) => {}
                Some(Ok(BarrierEnd::PeerClosed { member, at_ns })) => {
                    return Err(CollectiveError::PeerClosed { member, at_ns })
                }
                _ => return Err(CollectiveError::Timeout),
            },
        }
        self.ring(group, ring, timeout).await
    }

    /// The ring phase of a released all-reduce: `ring` of transfers that a member leaving
    /// in the middle breaks. The ring stops moving at the first departure; this node learns
    /// of it when a departure reaches it (see [`Spread`]), or `timeout` after the stop.
    async fn ring(
        &self,
        group: u64,
        ring: SimDuration,
        timeout: SimDuration,
    ) -> Result<(), CollectiveError> {
        let stopped = match self.watch(group, None) {
            Err(departure) => departure,
            Ok(rx) => match select(pin!(time::sleep(ring)), rx).await {
                Either::Left(((), _)) => return Ok(()),
                Either::Right((Ok(departure), _)) => departure,
                // The group is forgotten (more groups than kept): nothing can break the ring.
                Either::Right((Err(_), sleep)) => {
                    sleep.await;
                    return Ok(());
                }
            },
        };
        let stalled = CollectiveError::Stalled {
            member: stopped.member,
            at_ns: stopped.at_ns,
        };
        let departure = match self.watch(group, Some(self.index)) {
            Err(departure) => departure,
            Ok(rx) => match time::timeout(timeout, rx).await {
                Some(Ok(departure)) => departure,
                _ => return Err(stalled),
            },
        };
        let Departure {
            member,
            at_ns,
            closed,
        } = departure;
        Err(if closed {
            CollectiveError::PeerClosed { member, at_ns }
        } else {
            CollectiveError::Stalled { member, at_ns }
        })
    }

    /// Takes this node's arrivals back from every unfinished all-reduce: its workers were
    /// stopped on a live host, so their connections closed.
    pub fn leave_collectives(&self) {
        self.world()
            .state
            .lock()
            .expect("world lock")
            .withdraw(self.index, true);
    }

    /// A watch on `group`'s departures that reach `node` (any, for `None`), or the
    /// departure it already had.
    fn watch(
        &self,
        group: u64,
        node: Option<u32>,
    ) -> Result<oneshot::Receiver<Departure>, Departure> {
        self.world()
            .state
            .lock()
            .expect("world lock")
            .collectives
            .watch(group, node)
    }

    /// Fires when the workers of some member of `group` leave it (stopped, or dead). A
    /// group that lost a member already fires at once.
    pub fn watch_departures(&self, group: u64) -> oneshot::Receiver<Departure> {
        let now_ns = time::elapsed_ns();
        match self.watch(group, None) {
            Ok(rx) => rx,
            Err(departure) => {
                let (tx, rx) = oneshot::channel();
                let _ = tx.send(Departure {
                    at_ns: departure.at_ns.min(now_ns),
                    ..departure
                });
                rx
            }
        }
    }

    /// This node's workers vanished in the middle of a closed-form run (their task was
    /// dropped): a stop on a live host closes their connections; a death that already
    /// withdrew them changes nothing.
    pub fn workers_vanished(&self) {
        self.world()
            .state
            .lock()
            .expect("world lock")
            .depart(self.index, true);
    }
}

#[cfg(test)]
#[path = "collectives_tests.rs"]
mod tests;
