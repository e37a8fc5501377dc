//! The `rendezvous.*` invariants: agreement, exclusive, bounds, liveness, closed_is_final.
//!
//! They read only `Rendezvous*` events and the agent lifecycle around them; liveness, the
//! one "eventually" property of the family, lives in `rendezvous/liveness.rs`. Exclusive and
//! liveness need who is alive, paused and in a live group at each event: they observe one
//! shared replay of the run (`check::run_model`) instead of each rebuilding it.

mod liveness;

pub use liveness::LivenessKind;
pub(crate) use liveness::{completion_bound, survivor_bound};

use super::kind::kind_enum;
use super::membership::RoundId;
#[cfg(test)]
use super::run_model::replay;
use super::run_model::{Observer, RunModel};
use super::{InvariantResult, Violation};
use crate::invariant::Invariant;
use crate::scenario::model::Scenario;
use crate::scenario::node::NodeIndex;
use crate::sim_time::SimInstant;
#[cfg(test)]
use crate::trace::Trace;
use crate::trace::{Event, EventKind, TraceNode};
pub(super) use liveness::Liveness;
use std::collections::{BTreeMap, BTreeSet};

kind_enum! {
    /// The ways `rendezvous.agreement` breaks.
    pub enum AgreementKind {
        /// A completion's world size is not the number of participants it lists.
        WorldSizeMismatch,
        /// A completion lists one participant twice.
        DuplicateParticipant,
        /// A node's rank is another participant's place in the list.
        RankOfAnother,
        /// A node's rank lies outside the world.
        RankOutsideWorld,
        /// Two nodes saw one round with different participants or world sizes.
        ViewsDiffer,
        /// One rank of a round went to two processes.
        RankGivenTwice,
    }
}

kind_enum! {
    /// The ways `rendezvous.exclusive` breaks.
    pub enum ExclusiveKind {
        /// One round completed as two different groups.
        TwoGroupsInRound,
        /// A node is listed in a round while still in another round's live group.
        InTwoLiveGroups,
    }
}

kind_enum! {
    /// The ways `rendezvous.bounds` breaks.
    pub enum BoundsKind {
        /// A round completed with fewer than min_nodes.
        BelowMin,
        /// A round completed with more than max_nodes.
        AboveMax,
    }
}

kind_enum! {
    /// The way `rendezvous.closed_is_final` breaks.
    pub enum ClosedIsFinalKind {
        /// A round completed after the rendezvous was closed.
        CompletedAfterClose,
    }
}

/// The fields of one `RendezvousCompleted` event, borrowed.
struct Completion<'a> {
    event: &'a Event,
    /// The node whose process completed the round.
    node: TraceNode,
    pid: u32,
    round: RoundId,
    rank: u32,
    world_size: u32,
    participants: &'a [NodeIndex],
}

/// The completion an event records, if it records one. An agent process records its
/// completion on its own node, so a completion always names one; one that did not could not
/// be told apart from another node's view and is passed over.
fn completion(event: &Event) -> Option<Completion<'_>> {
    let node = event.node?;
    match &event.kind {
        EventKind::RendezvousCompleted {
            pid,
            round,
            rank,
            world_size,
            participants,
            store_incarnation,
        } => Some(Completion {
            event,
            node,
            pid: *pid,
            round: RoundId {
                store_incarnation: *store_incarnation,
                round: *round,
            },
            rank: *rank,
            world_size: *world_size,
            participants,
        }),
        _ => None,
    }
}

/// `rendezvous.agreement`: every node completing round r sees the same participants and
/// world size, the participants are distinct, and each node's rank is its own index.
///
/// A rank nobody reported is not a violation: a participant may die between the round
/// completing in the shared state and its own `next_rendezvous()` returning.
#[cfg(test)]
pub(super) fn agreement(trace: &Trace) -> InvariantResult {
    let mut observer = Agreement::default();
    replay(trace, &mut [&mut observer]);
    observer.finish()
}

/// `rendezvous.agreement` as an observer of the replay.
#[derive(Default)]
pub(super) struct Agreement<'t> {
    violations: Vec<Violation>,
    /// Each round's first view: its participants and world size.
    reference: BTreeMap<RoundId, (&'t [NodeIndex], u32)>,
    /// Which process each rank of a round went to first.
    rank_owner: BTreeMap<(RoundId, u32), u32>,
    /// Whether any round completed.
    any: bool,
}

impl Agreement<'_> {
    pub fn finish(self) -> InvariantResult {
        InvariantResult::judge(Invariant::RendezvousAgreement, self.any, self.violations)
    }
}

impl<'t> Observer<'t> for Agreement<'t> {
    fn before(&mut self, _model: &RunModel, event: &'t Event) {
        let Some(c) = completion(event) else {
            return;
        };
        self.any = true;
        let node = Some(c.node);
        let at = c.event.at;
        let violations = &mut self.violations;
        let mut fail = |kind: AgreementKind, message: String| {
            violations.push(Violation::new(at, node, kind, message))
        };
        for (kind, message) in self_contradictions(&c) {
            fail(kind, message);
        }
        let (r, own) = (c.round, c.node);
        match self.reference.get(&r) {
            None => {
                self.reference.insert(r, (c.participants, c.world_size));
            }
            Some((parts, size)) if *parts == c.participants && *size == c.world_size => {}
            Some((parts, size)) => fail(
                AgreementKind::ViewsDiffer,
                format!(
                "{own} sees round {r} with {} participants (world size {}), another node saw {} (world size {size}); {}",
                c.participants.len(),
                c.world_size,
                parts.len(),
                first_difference(c.participants, parts)
            ),
            ),
        }
        match self.rank_owner.get(&(r, c.rank)) {
            Some(&other) if other != c.pid => fail(
                AgreementKind::RankGivenTwice,
                format!(
                    "rank {} of round {r} was given to two processes (pids {other} and {})",
                    c.rank, c.pid
                ),
            ),
            Some(_) => {}
            None => {
                self.rank_owner.insert((r, c.rank), c.pid);
            }
        }
    }
}

/// What one completion gets wrong on its own, before any other node's view: a world size
/// that is not its participant count, a participant listed twice, a rank that is not the
/// node's own place in the list. In that order, as the report lists them.
fn self_contradictions(c: &Completion) -> Vec<(AgreementKind, String)> {
    let mut found = Vec::new();
    let r = c.round;
    if c.participants.len() != c.world_size as usize {
        found.push((
            AgreementKind::WorldSizeMismatch,
            format!(
                "round {r} reports world size {} but lists {} participants",
                c.world_size,
                c.participants.len()
            ),
        ));
    }
    let mut distinct: BTreeSet<NodeIndex> = BTreeSet::new();
    if let Some(twice) = c.participants.iter().find(|p| !distinct.insert(**p)) {
        found.push((
            AgreementKind::DuplicateParticipant,
            format!("round {r} lists participant {twice} twice"),
        ));
    }
    let own = c.node;
    match c.participants.get(c.rank as usize) {
        Some(&at_rank) if TraceNode::Node(at_rank) == own => {}
        Some(at_rank) => found.push((
            AgreementKind::RankOfAnother,
            format!(
                "{own} got rank {} in round {r}, but participant {} is {at_rank}",
                c.rank, c.rank
            ),
        )),
        None => found.push((
            AgreementKind::RankOutsideWorld,
            format!(
                "{own} got rank {} in round {r}, outside world size {}",
                c.rank, c.world_size
            ),
        )),
    }
    found
}

/// `rendezvous.exclusive`: at most one group completes per round, and no node is in two
/// live groups at once.
///
/// A process is in a live group from its completion of round r until it calls
/// `next_rendezvous()` again, its rendezvous fails, it exits or it is killed. A completion
/// of round r' that lists a node whose process is still in live round r ≠ r' puts that node
/// in two groups: torch adds a node to a round only when it joins, which ends its old
/// membership, so this can only come from state that outlived its owner.
#[cfg(test)]
pub(super) fn exclusive(trace: &Trace) -> InvariantResult {
    let mut exclusive = Exclusive::default();
    replay(trace, &mut [&mut exclusive]);
    exclusive.finish()
}

/// `rendezvous.exclusive` as an observer of the replay: each completion against the first
/// group of its round and against the live groups just before it.
#[derive(Default)]
pub(super) struct Exclusive {
    violations: Vec<Violation>,
    /// Each round's first group.
    groups: BTreeMap<RoundId, BTreeSet<NodeIndex>>,
    /// Whether any round completed.
    any: bool,
}

impl Exclusive {
    pub fn finish(self) -> InvariantResult {
        InvariantResult::judge(Invariant::RendezvousExclusive, self.any, self.violations)
    }
}

impl<'t> Observer<'t> for Exclusive {
    fn before(&mut self, model: &RunModel, event: &'t Event) {
        let EventKind::RendezvousCompleted {
            round,
            participants,
            store_incarnation,
            ..
        } = &event.kind
        else {
            return;
        };
        let round = &RoundId {
            store_incarnation: *store_incarnation,
            round: *round,
        };
        self.any = true;
        let node = event.node;
        let set: BTreeSet<NodeIndex> = participants.iter().copied().collect();
        match self.groups.get(round) {
            None => {
                self.groups.insert(*round, set);
            }
            Some(first) if *first == set => {}
            Some(first) => self.violations.push(Violation::new(
                event.at,
                node,
                ExclusiveKind::TwoGroupsInRound,
                format!(
                    "round {round} completed as two different groups: {}",
                    group_difference(first, &set)
                ),
            )),
        }
        for participant in participants.iter() {
            let participant_node = TraceNode::Node(*participant);
            let Some(m) = model.membership().of_node(participant_node) else {
                continue;
            };
            if m.round != *round {
                self.violations.push(Violation::new(
                    event.at,
                    Some(participant_node),
                    ExclusiveKind::InTwoLiveGroups,
                    format!(
                        "{participant} is a participant of round {round} while still in the live group of round {}",
                        m.round
                    ),
                ));
            }
        }
    }
}

/// `rendezvous.bounds`: min_nodes ≤ world size ≤ max_nodes for every completion.
#[cfg(test)]
pub(super) fn bounds(scenario: &Scenario, trace: &Trace) -> InvariantResult {
    let mut observer = Bounds::new(scenario);
    replay(trace, &mut [&mut observer]);
    observer.finish()
}

/// `rendezvous.bounds` as an observer of the replay.
pub(super) struct Bounds {
    min: u32,
    max: u32,
    violations: Vec<Violation>,
    /// Whether any round completed.
    any: bool,
}

impl Bounds {
    pub fn new(scenario: &Scenario) -> Self {
        Bounds {
            min: scenario.rendezvous.min_nodes,
            max: scenario.rendezvous.max_nodes,
            violations: Vec::new(),
            any: false,
        }
    }

    pub fn finish(self) -> InvariantResult {
        InvariantResult::judge(Invariant::RendezvousBounds, self.any, self.violations)
    }
}

impl Observer<'_> for Bounds {
    fn before(&mut self, _model: &RunModel, event: &Event) {
        let Some(c) = completion(event) else {
            return;
        };
        let (min, max) = (self.min, self.max);
        self.any = true;
        let kind = if c.world_size < min {
            BoundsKind::BelowMin
        } else {
            BoundsKind::AboveMax
        };
        if c.world_size < min || c.world_size > max {
            self.violations.push(Violation::new(
                c.event.at,
                Some(c.node),
                kind,
                format!(
                    "round {} completed with world size {}, outside min_nodes {min} .. max_nodes {max}",
                    c.round, c.world_size
                ),
            ));
        }
    }
}

/// `rendezvous.closed_is_final`: once any node has closed the rendezvous, no round
/// completes for the rest of the run. Not applicable when nothing closed it.
///
/// A restarted store is a new rendezvous: a close ends only its own store incarnation's.
#[cfg(test)]
pub(super) fn closed_is_final(trace: &Trace) -> InvariantResult {
    let mut observer = ClosedIsFinal::default();
    replay(trace, &mut [&mut observer]);
    observer.finish()
}

/// `rendezvous.closed_is_final` as an observer of the replay.
#[derive(Default)]
pub(super) struct ClosedIsFinal {
    violations: Vec<Violation>,
    /// Per store incarnation, when its rendezvous was first closed and by which node.
    closed: BTreeMap<u64, (SimInstant, Option<TraceNode>)>,
}

impl ClosedIsFinal {
    pub fn finish(self) -> InvariantResult {
        let applicable = !self.closed.is_empty();
        InvariantResult::judge(
            Invariant::RendezvousClosedIsFinal,
            applicable,
            self.violations,
        )
    }
}

impl Observer<'_> for ClosedIsFinal {
    fn before(&mut self, _model: &RunModel, event: &Event) {
        match &event.kind {
            EventKind::RendezvousClosed {
                store_incarnation, ..
            } => {
                self.closed
                    .entry(*store_incarnation)
                    .or_insert((event.at, event.node));
            }
            EventKind::RendezvousCompleted {
                round,
                store_incarnation,
                ..
            } => {
                if let Some(&(closed_at, by)) = self.closed.get(store_incarnation) {
                    self.violations.push(Violation::new(
                        event.at,
                        event.node,
                        ClosedIsFinalKind::CompletedAfterClose,
                        format!(
                            "round {round} completed after {} closed the rendezvous at {}",
                            by.map_or_else(|| "a node".to_owned(), |n| n.to_string()),
                            super::at_secs(closed_at)
                        ),
                    ));
                }
            }
            _ => {}
        }
    }
}

/// How two groups differ, naming at most a few nodes on each side.
fn group_difference(first: &BTreeSet<NodeIndex>, second: &BTreeSet<NodeIndex>) -> String {
    const NAMED_MAX: usize = 8;
    let describe = |only: Vec<&NodeIndex>| -> String {
        let shown: Vec<String> = only
            .iter()
            .take(NAMED_MAX)
            .map(ToString::to_string)
            .collect();
        let more = only.len().saturating_sub(NAMED_MAX);
        match (shown.is_empty(), more) {
            (true, _) => "nobody".to_owned(),
            (false, 0) => shown.join(", "),
            (false, n) => format!("{} and {n} more", shown.join(", ")),
        }
    };
    format!(
        "{} nodes against {}; only in the first: {}; only in the second: {}",
        first.len(),
        second.len(),
        describe(first.difference(second).collect()),
        describe(second.difference(first).collect())
    )
}

/// Where two participant lists (in rank order) first differ, in words, without printing
/// lists that may hold thousands of nodes.
fn first_difference(ours: &[NodeIndex], theirs: &[NodeIndex]) -> String {
    let at = ours.iter().zip(theirs).position(|(a, b)| a != b);
    match at {
        Some(rank) => format!(
            "rank {rank} is {} in one view and {} in the other",
            ours[rank], theirs[rank]
        ),
        None if ours.len() > theirs.len() => format!(
            "the longer view adds {} from rank {}",
            ours[theirs.len()],
            theirs.len()
        ),
        None if theirs.len() > ours.len() => format!(
            "the longer view adds {} from rank {}",
            theirs[ours.len()],
            ours.len()
        ),
        None => "the lists are equal".to_owned(),
    }
}

#[cfg(test)]
mod tests;
