//! `sampler.epoch_reshuffled`: with `shuffle = true`, consecutive epochs a node's ranks train
//! come in different orders. A training script that never calls `sampler.set_epoch`, or
//! calls it after the epoch instead of before, trains every epoch (or every other one) in
//! the same order; the samples are all there, so `sampler.coverage` holds, but the model sees
//! the same sequence of batches epoch after epoch.
//!
//! Judged on what the ranks trained: each recorded step carries a digest of its ranks' ids,
//! and the batches a node's workers trained in two consecutive epochs are compared batch by
//! batch. Every compared batch equal is a violation, unless torch's own orders for the two
//! epochs (`set_epoch(e)` and `set_epoch(e + 1)`, dealt by the checker) coincide there too,
//! as a tiny dataset's permutations can. Bounded: per node's workers, the digests of two
//! epochs' batches.

use super::kind::kind_enum;
use super::sampler_deal::{DealSource, Dealer};
use super::{InvariantResult, Violation};
use crate::invariant::Invariant;
use crate::scenario::model::Scenario;
use crate::sim_time::SimInstant;
use crate::trace::{Event, EventKind, Trace, TraceNode, TrainedOn};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

kind_enum! {
    /// The ways `sampler.epoch_reshuffled` breaks.
    pub enum ReshuffledKind {
        /// A node's ranks trained an epoch in the same order as the epoch before.
        OrderRepeated,
    }
}

/// Which ranks of which world a node's workers trained: batches compare only within one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Shape {
    world_size: u64,
    first_rank: u64,
    ranks: u32,
}

impl Shape {
    fn of(t: &TrainedOn) -> Self {
        Shape {
            world_size: t.world_size,
            first_rank: t.first_rank,
            ranks: t.ranks,
        }
    }
}

/// The batches one node's workers trained in one epoch: batch → digest.
#[derive(Debug)]
struct EpochSeen {
    epoch: u64,
    shape: Shape,
    digests: BatchDigests,
}

/// Batch digests by batch, sorted. Workers train an epoch's batches in order, so a batch
/// is nearly always appended: a map's node per step is what this saves.
#[derive(Debug, Default)]
struct BatchDigests(Vec<(u64, u64)>);

impl BatchDigests {
    /// Keeps `digest` as batch `batch`'s, replacing one kept before.
    fn insert(&mut self, batch: u64, digest: u64) {
        match self.0.last() {
            Some(&(last, _)) if last >= batch => {
                match self.0.binary_search_by_key(&batch, |&(b, _)| b) {
                    Ok(at) => self.0[at].1 = digest,
                    Err(at) => self.0.insert(at, (batch, digest)),
                }
            }
            _ => self.0.push((batch, digest)),
        }
    }

    fn get(&self, batch: u64) -> Option<u64> {
        let at = self.0.binary_search_by_key(&batch, |&(b, _)| b).ok()?;
        Some(self.0[at].1)
    }
}

/// The comparison of an epoch with the one before, as far as it went.
#[derive(Debug)]
struct Pair {
    /// Batches both epochs trained.
    compared: Vec<u64>,
    /// Every compared batch had the same digest.
    all_equal: bool,
    /// The last compared step: where a violation is reported.
    at: SimInstant,
    node: TraceNode,
}

/// One node's workers (a round, an agent process, a node).
#[derive(Debug)]
struct Workers {
    previous: Option<EpochSeen>,
    current: EpochSeen,
    pair: Option<Pair>,
}

impl Workers {
    /// Records the batch digest of each step of one `Step` event in the current epoch, and
    /// compares it with the same batch of the previous epoch when both epochs have one shape.
    fn record_steps(&mut self, event: &Event, node: TraceNode) {
        for view in event.kind.each_step(event.at) {
            let trained = &view.trained;
            self.current
                .digests
                .insert(trained.batch, trained.samples_digest);
            let Some(previous) = &self.previous else {
                continue;
            };
            if previous.shape != Shape::of(trained) {
                continue;
            }
            if let Some(before) = previous.digests.get(trained.batch) {
                let pair = self.pair.get_or_insert(Pair {
                    compared: Vec::new(),
                    all_equal: true,
                    at: view.at,
                    node,
                });
                pair.compared.push(trained.batch);
                pair.all_equal &= before == trained.samples_digest;
                (pair.at, pair.node) = (view.at, node);
            }
        }
    }
}

/// `sampler.epoch_reshuffled`; not applicable without shuffling (every epoch is in index
/// order by design) or when no node's workers trained a batch in two consecutive epochs.
pub(super) fn epoch_reshuffled(
    scenario: &Scenario,
    run_seed: u64,
    trace: &Trace,
) -> InvariantResult {
    if !scenario.job.sampler.shuffle {
        return InvariantResult::not_applicable(Invariant::SamplerEpochReshuffled);
    }
    let source = DealSource::new(&scenario.job, run_seed);
    let mut judge = Judge {
        dealer: Dealer::new(&source),
        applicable: false,
        violations: Vec::new(),
        reported: BTreeSet::new(),
    };
    let mut workers: BTreeMap<(u64, u32, TraceNode), Workers> = BTreeMap::new();
    for event in &trace.events {
        let (
            Some(node),
            EventKind::Step {
                pid,
                round,
                epoch,
                trained,
                ..
            },
        ) = (event.node, &event.kind)
        else {
            continue;
        };
        let seen = |epoch| EpochSeen {
            epoch,
            shape: Shape::of(trained),
            digests: BatchDigests::default(),
        };
        let w = workers
            .entry((*round, *pid, node))
            .or_insert_with(|| Workers {
                previous: None,
                current: seen(*epoch),
                pair: None,
            });
        if w.current.epoch != *epoch {
            judge.finish(*round, w);
            let next = *epoch == w.current.epoch + 1;
            let done = std::mem::replace(&mut w.current, seen(*epoch));
            w.previous = next.then_some(done);
        }
        w.record_steps(event, node);
    }
    for (&(round, _, _), w) in workers.iter_mut() {
        judge.finish(round, w);
    }
    judge
        .violations
        .sort_by(|a, b| (a.at, &a.message).cmp(&(b.at, &b.message)));
    InvariantResult::judge(
        Invariant::SamplerEpochReshuffled,
        judge.applicable,
        judge.violations,
    )
}

/// The verdicts so far.
struct Judge<'s, 'a> {
    dealer: Dealer<'s, 'a>,
    applicable: bool,
    violations: Vec<Violation>,
    /// (round, epoch, world size) already reported: one violation per group and epoch,
    /// however many of its nodes showed it.
    reported: BTreeSet<(u64, u64, u64)>,
}

impl Judge<'_, '_> {
    /// Judges the workers' comparison of their current epoch with the one before, if any.
    fn finish(&mut self, round: u64, w: &mut Workers) {
        let (Some(pair), Some(previous)) = (w.pair.take(), &w.previous) else {
            return;
        };
        self.applicable = true;
        let (before, after) = (previous.epoch, w.current.epoch);
        let shape = w.current.shape;
        if !pair.all_equal || !self.torch_orders_differ(before, after, shape, &pair.compared) {
            return;
        }
        if !self.reported.insert((round, after, shape.world_size)) {
            return;
        }
        let end = shape.first_rank + u64::from(shape.ranks);
        let message = format!(
            "epoch {after} (world size {}): ranks {}..{end} trained the same order as in epoch \
             {before} ({} batches compared), where set_epoch({after}) deals another; is \
             sampler.set_epoch(epoch) called before each epoch?",
            shape.world_size,
            shape.first_rank,
            pair.compared.len(),
        );
        let kind = ReshuffledKind::OrderRepeated;
        self.violations
            .push(Violation::new(pair.at, Some(pair.node), kind, message));
    }

    /// Whether torch's orders for epochs `before` and `after` (each set with `set_epoch`)
    /// give the shape's ranks different samples in any of the `batches`.
    fn torch_orders_differ(
        &mut self,
        before: u64,
        after: u64,
        shape: Shape,
        batches: &[u64],
    ) -> bool {
        let digests = |deal: &Arc<super::sampler_deal::Deal>| -> Vec<u64> {
            let digest = |&b: &u64| deal.digest(shape.first_rank, shape.ranks, b);
            batches.iter().map(digest).collect()
        };
        let Ok(first) = self.dealer.deal(before, shape.world_size).map(digests) else {
            return false;
        };
        self.dealer
            .deal(after, shape.world_size)
            .map(digests)
            .is_ok_and(|second| second != first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::testkit::{dealt_step, e, scenario, trace, workers_started, RanksOf};
    use crate::check::Status;
    use crate::scenario::model::SetEpoch;
    use crate::trace::Event;

    const ALONE: RanksOf = RanksOf {
        world_size: 4,
        first_rank: 0,
        ranks: 4,
    };

    #[test]
    fn batch_digests_keep_the_last_digest_of_each_batch_in_any_order() {
        let mut d = BatchDigests::default();
        for (batch, digest) in [(3, 30), (5, 50), (1, 10), (5, 55), (4, 40), (9, 90)] {
            d.insert(batch, digest);
        }
        let kept: Vec<(u64, u64)> = (0..10)
            .filter_map(|b| d.get(b).map(|digest| (b, digest)))
            .collect();
        assert_eq!(kept, [(1, 10), (3, 30), (4, 40), (5, 55), (9, 90)]);
    }

    /// 40 samples in batches of 5 over 4 ranks: 2 batches per rank and epoch.
    fn small(set_epoch: SetEpoch) -> Scenario {
        let mut s = scenario();
        s.job.dataset.len = 40;
        s.job.sampler.batch_size = 5;
        s.job.set_epoch = set_epoch;
        s
    }

    /// node-0 alone training data epochs `0..epochs`, each in the order the pattern deals.
    fn run(s: &Scenario, epochs: u64) -> Vec<Event> {
        let mut events = vec![e(1, "node-0", workers_started(1, 0, 0, 1))];
        let mut step = 0;
        for epoch in 0..epochs {
            let dealt = s.job.set_epoch.sampler_epoch(epoch, 0);
            for batch in 0..2 {
                step += 1;
                let mut kind = dealt_step(s, (1, 0, step), ALONE, dealt, batch);
                if let EventKind::Step { epoch: data, .. } = &mut kind {
                    *data = epoch;
                }
                events.push(e(1 + step, "node-0", kind));
            }
        }
        events
    }

    fn judge(s: &Scenario, events: Vec<Event>) -> InvariantResult {
        epoch_reshuffled(s, 1, &trace(events))
    }

    #[test]
    fn set_epoch_before_each_epoch_holds() {
        let s = small(SetEpoch::Start);
        assert_eq!(judge(&s, run(&s, 3)).status, Status::Held);
    }

    #[test]
    fn late_repeats_epoch_0_once_and_never_every_time() {
        let s = small(SetEpoch::Late);
        let r = judge(&s, run(&s, 3));
        assert_eq!(r.status, Status::Violated);
        assert_eq!(
            r.violations.len(),
            1,
            "only epoch 1 repeats its predecessor"
        );
        assert!(r.violations[0]
            .message
            .starts_with("epoch 1 (world size 4)"));
        let s = small(SetEpoch::Never);
        assert_eq!(judge(&s, run(&s, 3)).violations.len(), 2);
    }

    #[test]
    fn an_order_that_torch_repeats_too_is_no_violation() {
        // One sample: every permutation is [0], so set_epoch changes nothing.
        let mut s = small(SetEpoch::Never);
        s.job.dataset.len = 1;
        s.job.sampler.batch_size = 1;
        let one = RanksOf {
            world_size: 1,
            first_rank: 0,
            ranks: 1,
        };
        let mut events = vec![e(1, "node-0", workers_started(1, 0, 0, 1))];
        for epoch in 0..2 {
            let mut kind = dealt_step(&s, (1, 0, epoch + 1), one, 0, 0);
            if let EventKind::Step { epoch: data, .. } = &mut kind {
                *data = epoch;
            }
            events.push(e(2 + epoch, "node-0", kind));
        }
        assert_eq!(judge(&s, events).status, Status::Held);
    }

    #[test]
    fn without_shuffling_it_does_not_apply() {
        let mut s = small(SetEpoch::Never);
        s.job.sampler.shuffle = false;
        assert_eq!(judge(&s, run(&s, 3)).status, Status::NotApplicable);
    }

    #[test]
    fn coverage_deals_the_order_the_pattern_leaves() {
        for pattern in [SetEpoch::Start, SetEpoch::Never, SetEpoch::Late] {
            let s = small(pattern);
            let r = crate::check::sampler::coverage(&s, 1, &trace(run(&s, 3)));
            assert_eq!(r.status, Status::Held, "{pattern:?}: {:?}", r.violations);
        }
    }
}
