//! The `rendezvous.*` invariants: agreement, exclusive, bounds, liveness, closed_is_final.
//!
//! They read only `Rendezvous*` events and the agent lifecycle around them; liveness, the
//! one "eventually" property of the family, lives in `rendezvous/liveness.rs`.

mod liveness;

pub(crate) use liveness::completion_bound_us;
pub(super) use liveness::liveness;
pub use liveness::LivenessKind;

use super::kind::kind_enum;
use super::membership::{Membership, RoundId};
use super::{InvariantResult, Violation};
use crate::invariant::Invariant;
use crate::scenario::model::Scenario;
use crate::trace::{Event, EventKind, Trace};
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
    pid: u32,
    round: RoundId,
    rank: u32,
    world_size: u32,
    participants: &'a [String],
}

/// Every completion in the trace, in trace order.
fn completions(trace: &Trace) -> impl Iterator<Item = Completion<'_>> {
    trace.events.iter().filter_map(|event| match &event.kind {
        EventKind::RendezvousCompleted {
            pid,
            round,
            rank,
            world_size,
            participants,
            store_incarnation,
        } => Some(Completion {
            event,
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
    })
}

/// `rendezvous.agreement`: every node completing round r sees the same participants and
/// world size, the participants are distinct, and each node's rank is its own index.
///
/// A rank nobody reported is not a violation: a participant may die between the round
/// completing in the shared state and its own `next_rendezvous()` returning.
pub(super) fn agreement(trace: &Trace) -> InvariantResult {
    let mut violations = Vec::new();
    let mut reference: BTreeMap<RoundId, (&[String], u32)> = BTreeMap::new();
    let mut rank_owner: BTreeMap<(RoundId, u32), u32> = BTreeMap::new();
    let mut any = false;
    for c in completions(trace) {
        any = true;
        let node = c.event.node.as_deref();
        let at_us = c.event.at_us;
        let mut fail = |kind: AgreementKind, message: String| {
            violations.push(Violation::new(at_us, node, kind, message))
        };
        for (kind, message) in self_contradictions(&c) {
            fail(kind, message);
        }
        let (r, own) = (c.round, node.unwrap_or("?"));
        match reference.get(&r) {
            None => {
                reference.insert(r, (c.participants, c.world_size));
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
        match rank_owner.get(&(r, c.rank)) {
            Some(&other) if other != c.pid => fail(
                AgreementKind::RankGivenTwice,
                format!(
                    "rank {} of round {r} was given to two processes (pids {other} and {})",
                    c.rank, c.pid
                ),
            ),
            Some(_) => {}
            None => {
                rank_owner.insert((r, c.rank), c.pid);
            }
        }
    }
    InvariantResult::judge(Invariant::RendezvousAgreement, any, violations)
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
    let mut distinct: BTreeSet<&String> = BTreeSet::new();
    if let Some(twice) = c.participants.iter().find(|p| !distinct.insert(*p)) {
        found.push((
            AgreementKind::DuplicateParticipant,
            format!("round {r} lists participant {twice} twice"),
        ));
    }
    let own = c.event.node.as_deref().unwrap_or("?");
    match c.participants.get(c.rank as usize) {
        Some(at_rank) if at_rank == own => {}
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
pub(super) fn exclusive(trace: &Trace) -> InvariantResult {
    let mut violations = Vec::new();
    let mut groups: BTreeMap<RoundId, BTreeSet<&String>> = BTreeMap::new();
    let mut membership = Membership::default();
    let mut any = false;
    for event in &trace.events {
        if let EventKind::RendezvousCompleted {
            round,
            participants,
            store_incarnation,
            ..
        } = &event.kind
        {
            let round = &RoundId {
                store_incarnation: *store_incarnation,
                round: *round,
            };
            any = true;
            let node = event.node.as_deref();
            let set: BTreeSet<&String> = participants.iter().collect();
            match groups.get(round) {
                None => {
                    groups.insert(*round, set);
                }
                Some(first) if *first == set => {}
                Some(first) => violations.push(Violation::new(
                    event.at_us,
                    node,
                    ExclusiveKind::TwoGroupsInRound,
                    format!(
                        "round {round} completed as two different groups: {}",
                        group_difference(first, &set)
                    ),
                )),
            }
            for participant in participants.iter() {
                if let Some(m) = membership.of_node(participant) {
                    if m.round != *round {
                        violations.push(Violation::new(
                            event.at_us,
                            Some(participant),
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
        membership.observe(event);
    }
    InvariantResult::judge(Invariant::RendezvousExclusive, any, violations)
}

/// `rendezvous.bounds`: min_nodes ≤ world size ≤ max_nodes for every completion.
pub(super) fn bounds(scenario: &Scenario, trace: &Trace) -> InvariantResult {
    let min = scenario.rendezvous.min_nodes;
    let max = scenario.rendezvous.max_nodes;
    let mut violations = Vec::new();
    let mut any = false;
    for c in completions(trace) {
        any = true;
        let kind = if c.world_size < min {
            BoundsKind::BelowMin
        } else {
            BoundsKind::AboveMax
        };
        if c.world_size < min || c.world_size > max {
            violations.push(Violation::new(
                c.event.at_us,
                c.event.node.as_deref(),
                kind,
                format!(
                    "round {} completed with world size {}, outside min_nodes {min} .. max_nodes {max}",
                    c.round, c.world_size
                ),
            ));
        }
    }
    InvariantResult::judge(Invariant::RendezvousBounds, any, violations)
}

/// `rendezvous.closed_is_final`: once any node has closed the rendezvous, no round
/// completes for the rest of the run. Not applicable when nothing closed it.
///
/// A restarted store is a new rendezvous: a close ends only its own store incarnation's.
pub(super) fn closed_is_final(trace: &Trace) -> InvariantResult {
    let mut violations = Vec::new();
    let mut closed: BTreeMap<u64, (u64, Option<&str>)> = BTreeMap::new();
    for event in &trace.events {
        match &event.kind {
            EventKind::RendezvousClosed {
                store_incarnation, ..
            } => {
                closed
                    .entry(*store_incarnation)
                    .or_insert((event.at_us, event.node.as_deref()));
            }
            EventKind::RendezvousCompleted {
                round,
                store_incarnation,
                ..
            } => {
                if let Some(&(at_us, by)) = closed.get(store_incarnation) {
                    violations.push(Violation::new(
                        event.at_us,
                        event.node.as_deref(),
                        ClosedIsFinalKind::CompletedAfterClose,
                        format!(
                            "round {round} completed after {} closed the rendezvous at {}",
                            by.unwrap_or("a node"),
                            super::secs(at_us)
                        ),
                    ));
                }
            }
            _ => {}
        }
    }
    InvariantResult::judge(
        Invariant::RendezvousClosedIsFinal,
        !closed.is_empty(),
        violations,
    )
}

/// How two groups differ, naming at most a few nodes on each side.
fn group_difference(first: &BTreeSet<&String>, second: &BTreeSet<&String>) -> String {
    const NAMED_MAX: usize = 8;
    let describe = |only: Vec<&&String>| -> String {
        let shown: Vec<&str> = only.iter().take(NAMED_MAX).map(|s| s.as_str()).collect();
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
fn first_difference(ours: &[String], theirs: &[String]) -> String {
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
mod tests {
    use super::super::testkit::*;
    use super::super::{Kind, Status};
    use super::*;

    #[test]
    fn agreement_holds_for_a_clean_round() {
        let r = agreement(&trace(round_zero(3)));
        assert_eq!(r.status, Status::Held, "{:?}", r.violations);
    }

    #[test]
    fn agreement_not_applicable_without_completions() {
        let events = vec![e(0, "node-0", started(1)), e(1, "node-0", joining(1))];
        assert_eq!(agreement(&trace(events)).status, Status::NotApplicable);
    }

    #[test]
    fn agreement_catches_different_views_and_wrong_ranks() {
        let events = vec![
            e(2, "node-0", completed(100, 0, 0, &[0, 1])),
            e(2, "node-1", completed(101, 0, 1, &[0, 1, 2])),
            e(2, "node-2", completed(102, 0, 0, &[0, 1, 2])),
        ];
        let r = agreement(&trace(events));
        assert_eq!(r.status, Status::Violated);
        let text: Vec<&str> = r.violations.iter().map(|v| v.message.as_str()).collect();
        assert!(
            text.iter().any(|m| m.contains("another node saw")),
            "{text:?}"
        );
        assert!(
            text.iter().any(|m| m.contains("node-2 got rank 0")),
            "{text:?}"
        );
        assert!(
            text.iter().any(|m| m.contains("given to two processes")),
            "{text:?}"
        );
        let kinds: BTreeSet<Kind> = r.violations.iter().map(|v| v.kind).collect();
        let expected: BTreeSet<Kind> = [
            AgreementKind::ViewsDiffer,
            AgreementKind::RankOfAnother,
            AgreementKind::RankGivenTwice,
        ]
        .map(Kind::from)
        .into();
        assert_eq!(kinds, expected);
    }

    #[test]
    fn agreement_catches_duplicate_participants_and_size_mismatch() {
        let mut kind = completed(100, 0, 0, &[0, 0]);
        if let EventKind::RendezvousCompleted { world_size, .. } = &mut kind {
            *world_size = 3;
        }
        let r = agreement(&trace(vec![e(2, "node-0", kind)]));
        assert_eq!(r.violations.len(), 2, "{:?}", r.violations);
    }

    #[test]
    fn exclusive_holds_across_rejoined_rounds() {
        let mut events = round_zero(2);
        events.push(e(10, "node-0", joining(100)));
        events.push(e(10, "node-1", joining(101)));
        events.push(e(12, "node-0", completed(100, 1, 0, &[0, 1])));
        events.push(e(12, "node-1", completed(101, 1, 1, &[0, 1])));
        assert_eq!(exclusive(&trace(events)).status, Status::Held);
    }

    #[test]
    fn exclusive_catches_two_groups_in_one_round() {
        let events = vec![
            e(2, "node-0", completed(100, 0, 0, &[0, 1])),
            e(2, "node-2", completed(102, 0, 0, &[2, 3])),
        ];
        let r = exclusive(&trace(events));
        assert_eq!(r.status, Status::Violated);
        assert!(r.violations[0].message.contains("two different groups"));
    }

    #[test]
    fn exclusive_catches_a_node_in_two_live_groups() {
        // node-1 never re-joined, yet round 1 lists it.
        let mut events = round_zero(2);
        events.push(e(10, "node-0", joining(100)));
        events.push(e(12, "node-0", completed(100, 1, 0, &[0, 1])));
        let r = exclusive(&trace(events));
        assert_eq!(r.status, Status::Violated);
        assert_eq!(r.violations[0].node.as_deref(), Some("node-1"));
    }

    #[test]
    fn exclusive_not_applicable_without_completions() {
        assert_eq!(exclusive(&trace(vec![])).status, Status::NotApplicable);
    }

    #[test]
    fn bounds_hold_violate_and_skip() {
        let s = scenario();
        assert_eq!(bounds(&s, &trace(round_zero(3))).status, Status::Held);
        let r = bounds(&s, &trace(vec![e(2, "node-0", completed(100, 0, 0, &[0]))]));
        assert_eq!(r.status, Status::Violated);
        assert_eq!(r.violations[0].kind, BoundsKind::BelowMin.into());
        let r = bounds(
            &s,
            &trace(vec![e(2, "node-0", completed(100, 0, 0, &[0, 1, 2, 3]))]),
        );
        assert_eq!(r.status, Status::Violated);
        assert_eq!(r.violations[0].kind, BoundsKind::AboveMax.into());
        assert_eq!(bounds(&s, &trace(vec![])).status, Status::NotApplicable);
    }

    #[test]
    fn closed_is_final_cases() {
        let mut events = round_zero(2);
        assert_eq!(
            closed_is_final(&trace(events.clone())).status,
            Status::NotApplicable
        );
        events.push(e(20, "node-0", closed(100, 0)));
        assert_eq!(closed_is_final(&trace(events.clone())).status, Status::Held);
        events.push(e(21, "node-1", joining(101)));
        events.push(e(25, "node-1", completed(101, 1, 0, &[1])));
        let r = closed_is_final(&trace(events));
        assert_eq!(r.status, Status::Violated);
        assert_eq!(r.violations[0].at_us, 25 * S);
        assert!(r.violations[0]
            .message
            .contains("node-0 closed the rendezvous at 20 s"));
    }
}
