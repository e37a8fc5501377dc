//! Tests of the `rendezvous.*` checkers other than liveness, each over a hand-built trace.

use super::super::testkit::*;
use super::super::{Kind, Status};
use super::*;
use crate::trace::TraceNode;

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
    assert_eq!(r.violations[0].node, Some(TraceNode::node(1)));
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
    assert_eq!(r.violations[0].at.as_us(), 25 * S);
    assert!(r.violations[0]
        .message
        .contains("node-0 closed the rendezvous at 20 s"));
}
