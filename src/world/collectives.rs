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
    waiters: Vec<oneshot::Sender<BarrierEnd>>,
    /// When every rank had arrived but a cut link held the barrier back, in nanoseconds.
    held_since_ns: Option<u64>,
}

/// One worker group: the nodes whose workers joined it, how those that left it left, and
/// who watches for leavers.
#[derive(Default)]
struct Group {
    members: BTreeSet<u32>,
    departed: BTreeMap<u32, Departure>,
    watchers: Vec<oneshot::Sender<Departure>>,
}

impl Group {
    /// The first member whose connections closed, if one did.
    fn first_closed(&self) -> Option<Departure> {
        self.departed.values().find(|d| d.closed).copied()
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
}

impl Collectives {
    /// `node`'s workers joined `group` (their process group formed).
    pub fn join(&mut self, group: u64, node: u32) {
        if !self.groups.contains_key(&group) {
            while self.groups.len() >= GROUPS_MAX {
                self.groups.pop_first();
            }
        }
        self.groups.entry(group).or_default().members.insert(node);
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
        if let Some(d) = self.groups.get(&key.0).and_then(Group::first_closed) {
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
            for waiter in done.waiters {
                let _ = waiter.send(BarrierEnd::Released);
            }
            return Arrival::Released;
        }
        if covers_world(barrier.arrived.values().copied()) {
            barrier.held_since_ns.get_or_insert(now_ns);
        }
        let (tx, rx) = oneshot::channel();
        barrier.waiters.push(tx);
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
        for waiter in done.waiters {
            let _ = waiter.send(BarrierEnd::Released);
        }
    }

    /// Takes `node`'s arrivals back from every unfinished barrier: its workers are gone.
    /// With `closed` (they died on a live host), every barrier of its groups fails its
    /// waiters, and those groups fail every later collective. Returns the groups it was a
    /// member of.
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
        for key in failed {
            let barrier = self.barriers.remove(&key).expect("listed above");
            for waiter in barrier.waiters {
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
            for watcher in group.watchers.drain(..) {
                let _ = watcher.send(departure);
            }
            groups.push(*key);
        }
        groups
    }

    /// Where `group`'s next departure will be told; `Err` with one at once when the group
    /// already lost a member.
    fn watch(&mut self, group: u64) -> Result<oneshot::Receiver<Departure>, Departure> {
        let (tx, rx) = oneshot::channel();
        if let Some(g) = self.groups.get_mut(&group) {
            if let Some(departure) = g.first_closed().or(g.departed.values().next().copied()) {
                return Err(departure);
            }
            g.watchers.retain(|w| !w.is_canceled());
            g.watchers.push(tx);
        }
        Ok(rx)
    }
}

impl NodeEnv {
    /// This node's workers joined process group `group`: from now on their death reaches
    /// the group's other members.
    pub fn join_process_group(&self, group: u64) {
        self.world()
            .state
            .lock()
            .expect("world lock")
            .collectives
            .join(group, self.index);
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
        self.ring(group, ring).await
    }

    /// The ring phase of a released all-reduce: `ring` of transfers that a member leaving
    /// in the middle breaks.
    async fn ring(&self, group: u64, ring: SimDuration) -> Result<(), CollectiveError> {
        let departure = match self.watch(group) {
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

    /// A watch on `group`'s departures, or the departure it already had.
    fn watch(&self, group: u64) -> Result<oneshot::Receiver<Departure>, Departure> {
        self.world()
            .state
            .lock()
            .expect("world lock")
            .collectives
            .watch(group)
    }

    /// Fires when the workers of some member of `group` leave it (stopped, or dead). A
    /// group that lost a member already fires at once.
    pub fn watch_departures(&self, group: u64) -> oneshot::Receiver<Departure> {
        let now_ns = time::elapsed_ns();
        match self.watch(group) {
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
mod tests {
    use super::*;

    fn block(first: u64, count: u64, world_size: u64) -> RankBlock {
        RankBlock {
            first,
            count,
            world_size,
        }
    }

    #[test]
    fn a_world_is_covered_only_by_all_of_its_ranks() {
        assert!(covers_world([block(8, 8, 16), block(0, 8, 16)]));
        assert!(!covers_world([block(8, 8, 16)]));
        assert!(!covers_world([block(0, 8, 24), block(16, 8, 24)]));
        assert!(!covers_world([block(0, 8, 16), block(8, 8, 24)]));
        assert!(!covers_world(std::iter::empty()));
    }

    #[test]
    fn a_barrier_waits_for_every_rank_of_the_world() {
        let mut c = Collectives::default();
        let all = |_: &[u32]| true;
        // Node 2 sees itself alone, but its ranks are 16..24 of a world of 24.
        assert!(matches!(
            c.arrive((1, 1), 2, block(16, 8, 24), all, 0),
            Arrival::Wait(_)
        ));
        assert!(matches!(
            c.arrive((1, 1), 0, block(0, 8, 24), all, 0),
            Arrival::Wait(_)
        ));
        assert!(matches!(
            c.arrive((1, 1), 1, block(8, 8, 24), all, 0),
            Arrival::Released
        ));
    }

    #[test]
    fn a_closed_member_fails_the_waiters_and_every_later_arrival() {
        let mut c = Collectives::default();
        let all = |_: &[u32]| true;
        c.join(1, 0);
        c.join(1, 1);
        let Arrival::Wait(mut rx) = c.arrive((1, 1), 0, block(0, 1, 2), all, 0) else {
            panic!("one rank of two cannot release");
        };
        assert_eq!(c.withdraw(1, true, 5_000), vec![1]);
        assert!(matches!(
            rx.try_recv(),
            Ok(Some(BarrierEnd::PeerClosed {
                member: 1,
                at_ns: 5_000
            }))
        ));
        assert!(matches!(
            c.arrive((1, 2), 0, block(0, 1, 2), all, 0),
            Arrival::Failed(CollectiveError::PeerClosed { member: 1, .. })
        ));
        assert_eq!(c.depart(1, true, 6_000), Vec::<u64>::new(), "departs once");
    }

    #[test]
    fn a_silent_member_only_takes_its_arrival_back() {
        let mut c = Collectives::default();
        let all = |_: &[u32]| true;
        c.join(1, 0);
        c.join(1, 1);
        let _ = c.arrive((1, 1), 1, block(1, 1, 2), all, 0);
        c.withdraw(1, false, 5_000);
        assert!(matches!(
            c.arrive((1, 1), 0, block(0, 1, 2), all, 0),
            Arrival::Wait(_)
        ));
        assert!(matches!(
            c.watch(1),
            Err(Departure {
                member: 1,
                closed: false,
                ..
            })
        ));
    }

    #[test]
    fn a_barrier_a_cut_link_held_goes_on_once_connected() {
        let mut c = Collectives::default();
        let cut = |_: &[u32]| false;
        let all = |_: &[u32]| true;
        let _ = c.arrive((1, 1), 0, block(0, 1, 2), cut, 1_000);
        assert!(
            c.held_back(all).is_empty(),
            "one rank is not a held barrier"
        );
        let Arrival::Wait(mut rx) = c.arrive((1, 1), 1, block(1, 1, 2), cut, 2_000) else {
            panic!("a cut link holds the barrier");
        };
        assert!(c.held_back(cut).is_empty(), "still cut");
        assert_eq!(c.held_back(all), vec![((1, 1), 2_000)]);
        c.release_if_connected((1, 1), cut);
        assert!(rx.try_recv().expect("open").is_none());
        c.release_if_connected((1, 1), all);
        assert!(matches!(rx.try_recv(), Ok(Some(BarrierEnd::Released))));
    }
}
