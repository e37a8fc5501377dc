//! Tests of `sampler.coverage` on hand-built traces: steps dealt as the sampler deals them,
//! and steps that skip, repeat or take other samples.

use super::*;
use crate::check::testkit::{dealt_step, e, scenario, trace, workers_started, RanksOf};
use crate::check::Status;

/// 10 samples, batches of 2, no `drop_last`: over 4 ranks, 3 samples each (batches of 2
/// and 1) and 2 of padding.
fn small() -> Scenario {
    let mut s = scenario();
    s.job.dataset.len = 10;
    s.job.sampler.drop_last = false;
    s.job.sampler.batch_size = 2;
    s
}

/// One node training all 4 ranks of the world.
const ALONE: RanksOf = RanksOf {
    world_size: 4,
    first_rank: 0,
    ranks: 4,
};

/// node-0 (pid 1) alone in round 0, training `(epoch, batch)` in turn, one step a second.
fn alone(s: &Scenario, batches: &[(u64, u64)]) -> Vec<Event> {
    let mut events = vec![e(1, "node-0", workers_started(1, 0, 0, 1))];
    for (i, &(epoch, batch)) in (1u64..).zip(batches) {
        let step = dealt_step(s, (1, 0, i), ALONE, epoch, batch);
        events.push(e(1 + i, "node-0", step));
    }
    events
}

/// What the job's ledger would claim for a whole epoch 0 of [`small`]: full coverage.
fn full_coverage_claimed() -> EventKind {
    EventKind::EpochCovered {
        store_incarnation: 1,
        round: 0,
        epoch: 0,
        world_size: 4,
        first_batch: 0,
        samples: 12,
        distinct: 10,
        ranks: 4,
        rank_samples_min: 3,
        rank_samples_max: 3,
    }
}

fn judge(s: &Scenario, events: Vec<Event>) -> InvariantResult {
    coverage(s, 1, &trace(events))
}

fn messages(r: &InvariantResult) -> String {
    let all: Vec<&str> = r.violations.iter().map(|v| v.message.as_str()).collect();
    all.join("\n")
}

#[test]
fn whole_epochs_dealt_as_the_sampler_deals_them_hold() {
    let s = small();
    let r = judge(&s, alone(&s, &[(0, 0), (0, 1), (1, 0), (1, 1)]));
    assert_eq!(r.status, Status::Held, "{}", messages(&r));
}

#[test]
fn two_nodes_finish_an_epoch_together() {
    let s = small();
    let half = |first_rank| RanksOf {
        world_size: 4,
        first_rank,
        ranks: 2,
    };
    let mut events = vec![
        e(1, "node-0", workers_started(1, 0, 0, 2)),
        e(1, "node-1", workers_started(2, 0, 1, 2)),
    ];
    for batch in 0..2 {
        let step = batch + 1;
        events.push(e(
            2 + step,
            "node-0",
            dealt_step(&s, (1, 0, step), half(0), 0, batch),
        ));
        let only_node_0_done = judge(&s, events.clone());
        assert_eq!(only_node_0_done.status, Status::NotApplicable);
        events.push(e(
            2 + step,
            "node-1",
            dealt_step(&s, (2, 0, step), half(2), 0, batch),
        ));
    }
    let r = judge(&s, events);
    assert_eq!(r.status, Status::Held, "{}", messages(&r));
}

#[test]
fn a_repeated_batch_is_a_violation_whatever_the_ledger_claims() {
    let s = small();
    let mut events = alone(&s, &[(0, 0), (0, 0), (0, 1)]);
    events.push(e(9, "node-0", full_coverage_claimed()));
    let r = judge(&s, events);
    assert_eq!(r.status, Status::Violated);
    let said = messages(&r);
    assert!(
        said.contains("batch 0 trained again, after batch 0"),
        "{said}"
    );
    assert!(
        said.contains("unequal") || said.contains("num_samples leaves 3"),
        "{said}"
    );
    assert!(said.contains("padding accounts for only 2"), "{said}");
}

#[test]
fn a_skipped_batch_is_a_violation_whatever_the_ledger_claims() {
    let mut s = small();
    s.job.dataset.len = 40; // 10 per rank: 5 batches of 2.
    let mut events = alone(&s, &[(0, 0), (0, 1), (0, 3), (0, 4)]);
    events.push(e(9, "node-0", full_coverage_claimed()));
    let r = judge(&s, events);
    assert_eq!(r.status, Status::Violated);
    let said = messages(&r);
    assert!(said.contains("batches 2..3 skipped"), "{said}");
    assert!(
        said.contains("covered 32 distinct samples of the 40"),
        "{said}"
    );
}

#[test]
fn ranks_given_other_samples_than_the_deal_are_a_violation() {
    let s = small();
    let mut events = alone(&s, &[(0, 0), (0, 1)]);
    if let EventKind::Step { trained, .. } = &mut events[1].kind {
        trained.samples_digest ^= 1;
    }
    let r = judge(&s, events);
    assert_eq!(r.status, Status::Violated);
    assert!(messages(&r).contains(
        "at batch 0, ranks 0..4 were given other samples than the sampler deals them (8 taken, 8 dealt)"
    ));
}

#[test]
fn a_resumed_epoch_is_held_to_its_remaining_batches() {
    let mut s = small();
    s.job.dataset.len = 24; // 6 per rank: 3 batches of 2.
    let r = judge(&s, alone(&s, &[(0, 1), (0, 2), (1, 0)]));
    assert_eq!(r.status, Status::Held, "{}", messages(&r));
    // Only the group's first epoch may start mid-way.
    let r = judge(&s, alone(&s, &[(0, 1), (0, 2), (1, 1), (1, 2)]));
    assert!(
        messages(&r).contains("begun at batch 1, not at batch 0"),
        "{}",
        messages(&r)
    );
    let r = judge(&s, alone(&s, &[(0, 0), (0, 1), (1, 0)]));
    assert!(
        messages(&r).contains("begun after batch 1 of epoch 0's 3"),
        "{}",
        messages(&r)
    );
}

#[test]
fn a_node_told_it_is_alone_is_judged_with_the_rest_of_its_world() {
    let s = small();
    let ranks = |first_rank| RanksOf {
        world_size: 4,
        first_rank,
        ranks: 2,
    };
    // node-1's view says it is alone, but its ranks are 2..4 of a world of 4: the epoch is
    // the whole world's, judged once the node holding ranks 0..2 finished it too.
    let mut events = vec![
        e(1, "node-1", workers_started(2, 0, 1, 1)),
        e(2, "node-1", dealt_step(&s, (2, 0, 1), ranks(2), 0, 0)),
        e(3, "node-1", dealt_step(&s, (2, 0, 2), ranks(2), 0, 1)),
    ];
    let r = judge(&s, events.clone());
    assert_eq!(r.status, Status::NotApplicable, "{}", messages(&r));
    events.insert(1, e(1, "node-0", workers_started(1, 0, 0, 2)));
    events.push(e(4, "node-0", dealt_step(&s, (1, 0, 1), ranks(0), 0, 0)));
    events.push(e(5, "node-0", dealt_step(&s, (1, 0, 2), ranks(0), 0, 1)));
    let r = judge(&s, events);
    assert_eq!(r.status, Status::Held, "{}", messages(&r));
}

#[test]
fn a_world_larger_than_the_cluster_is_a_violation_not_a_deal() {
    let s = small();
    let mut events = alone(&s, &[(0, 0)]);
    if let EventKind::Step { trained, .. } = &mut events[1].kind {
        trained.world_size = u64::MAX;
    }
    let r = judge(&s, events);
    assert!(
        messages(&r).contains("a world of more ranks than the cluster's"),
        "{}",
        messages(&r)
    );
}

#[test]
fn steps_of_workers_never_started_or_no_finished_epoch_do_not_apply() {
    let s = small();
    let mut events = alone(&s, &[(0, 0), (0, 1)]);
    events.remove(0);
    assert_eq!(judge(&s, events).status, Status::NotApplicable);
    assert_eq!(
        judge(&s, alone(&s, &[(0, 0)])).status,
        Status::NotApplicable
    );
    assert_eq!(judge(&scenario(), Vec::new()).status, Status::NotApplicable);
}

/// 40 epochs of [`small`] on one node, with repeated batches, a skipped one, a jump of two
/// epochs and steps given other samples than the deal's, one of them an epoch's last.
fn many_epochs_some_wrong(s: &Scenario) -> Vec<Event> {
    let mut plan: Vec<(u64, u64)> = (0..40).flat_map(|e| [(e, 0), (e, 1)]).collect();
    plan[7] = (3, 0); // Epoch 3 never ends.
    plan.insert(12, (6, 0)); // Epoch 6 ends with batch 0 twice.
    plan.remove(21); // Epoch 10 begins at batch 1.
    for place in &mut plan[50..] {
        place.0 += 2; // From epoch 24 to 27.
    }
    let mut events = alone(s, &plan);
    // Events after the group's start: plan entry `i` is event `i + 1`.
    for i in [3, 7, 30, 61] {
        if let EventKind::Step { trained, .. } = &mut events[i].kind {
            trained.samples_digest ^= 1;
        }
    }
    events
}

#[test]
fn two_threads_find_what_one_finds_in_the_same_order() {
    let s = small();
    let t = trace(many_epochs_some_wrong(&s));
    let one = coverage_with(&s, 1, &t, u64::MAX);
    let two = coverage_with(&s, 1, &t, 0);
    assert_eq!(one, two);
    assert_eq!(one.status, Status::Violated);
    let said = messages(&one);
    for part in [
        "epoch 3 (world size 4): batch 0 trained again, after batch 0",
        "epoch 4 (world size 4): begun after batch 0 of epoch 3's 2, not its last",
        "epoch 6 (world size 4): batch 0 trained again, after batch 0",
        "epoch 6 (world size 4): 10 samples were repeated, but padding accounts for only 2",
        "epoch 10 (world size 4): begun at batch 1, not at batch 0",
        "epoch 27 (world size 4): the ranks went from epoch 24 to epoch 27",
        "epoch 14 (world size 4): at batch 1, ranks 0..4 were given other samples",
    ] {
        assert!(said.contains(part), "{part}: {said}");
    }
    let times: Vec<u64> = one.violations.iter().map(|v| v.at.as_us()).collect();
    assert!(times.is_sorted(), "in trace order: {times:?}");
}

#[test]
fn a_step_is_placed_then_compared_then_ends_its_epoch() {
    let mut s = small();
    s.job.dataset.len = 24; // 6 per rank: 3 batches of 2.
                            // Batch 1 skipped, and the epoch's last batch given other samples.
    let mut events = alone(&s, &[(0, 0), (0, 2)]);
    if let EventKind::Step { trained, .. } = &mut events[2].kind {
        trained.samples_digest ^= 1;
    }
    for second_thread_from_ids in [0, u64::MAX] {
        let r = coverage_with(&s, 1, &trace(events.clone()), second_thread_from_ids);
        let said: Vec<&str> = r.violations.iter().map(|v| v.message.as_str()).collect();
        assert_eq!(said.len(), 4, "{said:?}");
        assert!(
            said[0].ends_with("batches 1..2 skipped, from batch 0 to 2"),
            "{said:?}"
        );
        assert!(said[1].contains("were given other samples"), "{said:?}");
        assert!(said[2].ends_with("num_samples leaves 6"), "{said:?}");
        assert!(
            said[3].contains("covered 16 distinct samples of the 24"),
            "{said:?}"
        );
    }
}
