//! The sample ledger: which dataset indices the ranks of a group actually trained on in
//! each epoch, summarised for the report (`EpochCovered`). `sampler.coverage` does not read
//! it: it deals each recorded step again from the sampler, so a ledger bug cannot hide a
//! sampler bug. Every node of a group adds its ranks' batches after each completed step;
//! when the last node of the group finishes the epoch, the ledger hands back a summary for
//! the trace. Epochs a restart cuts short are dropped unsummarised.
//!
//! Pure: the world only stores it. Bounded: a bit per (rank, batch) of the epoch's plan
//! per open epoch, at most `OPEN_EPOCHS_MAX` open at once (the oldest is dropped first).

use crate::sampler::dealt_epoch::{DealtEpoch, PairTally};
use crate::sampler::shared_deal::KeptEpoch;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Open (round, epoch) tallies kept at once.
pub const OPEN_EPOCHS_MAX: usize = 8;

/// What one group consumed in one epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpochCoverage {
    pub round: u64,
    pub epoch: u64,
    pub world_size: u64,
    /// The batch the group started the epoch at (non-zero when resumed mid-epoch).
    pub first_batch: u64,
    /// Samples consumed, repeats counted.
    pub samples: u64,
    /// Distinct dataset indices consumed.
    pub distinct: u64,
    /// Ranks that consumed anything, and the least and most any one of them consumed.
    pub ranks: u64,
    pub rank_samples_min: u64,
    pub rank_samples_max: u64,
}

#[derive(Debug)]
struct Tally {
    /// The plan's batches the group's ranks trained on.
    pairs: PairTally,
    nodes_done: BTreeSet<u32>,
}

/// The ledger of one run.
#[derive(Debug, Default)]
pub struct SampleLedger {
    open: BTreeMap<(u64, u64), Tally>,
}

impl SampleLedger {
    /// Opens the tally of (round, epoch), trained from `plan` from `first_batch` on, if no
    /// node of the group opened it yet.
    pub fn begin(&mut self, round: u64, epoch: u64, plan: &Arc<DealtEpoch>, first_batch: u64) {
        if self.open.contains_key(&(round, epoch)) {
            return;
        }
        while self.open.len() >= OPEN_EPOCHS_MAX {
            let oldest = *self.open.keys().next().expect("non-empty");
            self.open.remove(&oldest);
        }
        let tally = Tally {
            pairs: PairTally::new(
                &Arc::new(KeptEpoch::of_dealt(Arc::clone(plan))),
                first_batch,
            ),
            nodes_done: BTreeSet::new(),
        };
        self.open.insert((round, epoch), tally);
        assert!(
            self.open.len() <= OPEN_EPOCHS_MAX,
            "{} epochs open in the ledger, at most {OPEN_EPOCHS_MAX} kept",
            self.open.len()
        );
    }

    /// Each of a node's ranks, with its batch's length, trained on the plan's batch
    /// `batch` in (round, epoch): one step of one node, with one look-up of the tally.
    /// Returns how many samples the batches held.
    pub fn consume_step(
        &mut self,
        round: u64,
        epoch: u64,
        rank_lens: impl Iterator<Item = (u64, u64)>,
        batch: u64,
    ) -> u64 {
        let mut tally = self.open.get_mut(&(round, epoch));
        let mut samples = 0;
        for (rank, len) in rank_lens {
            if let Some(t) = tally.as_mut() {
                t.pairs.add(rank, batch, len);
            }
            samples += len;
        }
        samples
    }

    /// `node` finished the epoch; when all `members` have, the summary.
    pub fn node_done(
        &mut self,
        round: u64,
        epoch: u64,
        node: u32,
        members: usize,
    ) -> Option<EpochCoverage> {
        // With no member, the first node done would summarise an epoch nobody trained.
        assert!(
            members > 0,
            "node {node} finished epoch {epoch} of a group with no member"
        );
        let t = self.open.get_mut(&(round, epoch))?;
        t.nodes_done.insert(node);
        if t.nodes_done.len() < members {
            return None;
        }
        let t = self.open.remove(&(round, epoch))?.pairs;
        Some(EpochCoverage {
            round,
            epoch,
            world_size: t.epoch().world_size(),
            first_batch: t.first_batch,
            samples: t.samples,
            distinct: t.distinct(),
            ranks: t.rank_counts().count() as u64,
            rank_samples_min: t.rank_counts().min().unwrap_or(0),
            rank_samples_max: t.rank_counts().max().unwrap_or(0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampler::RankLists;

    /// Ranks' whole lists as one batch each (batch size = the longest list).
    fn plan(lists: &[Vec<u64>]) -> Arc<DealtEpoch> {
        let longest = lists.iter().map(Vec::len).max().unwrap_or(0) as u64;
        let dealt = DealtEpoch::new(RankLists::from_lists(lists), longest, longest.max(1));
        Arc::new(dealt)
    }

    fn lens(plan: &DealtEpoch, ranks: std::ops::Range<u64>) -> Vec<(u64, u64)> {
        ranks.map(|r| (r, plan.batch(r, 0).len() as u64)).collect()
    }

    #[test]
    fn summarises_when_every_node_is_done() {
        let p = plan(&[vec![0, 1, 2], vec![3, 4, 0]]);
        let mut l = SampleLedger::default();
        l.begin(1, 0, &p, 0);
        l.begin(1, 0, &p, 3);
        assert_eq!(l.consume_step(1, 0, lens(&p, 0..1).into_iter(), 0), 3);
        assert_eq!(l.consume_step(1, 0, lens(&p, 1..2).into_iter(), 0), 3);
        assert_eq!(l.node_done(1, 0, 0, 2), None);
        let c = l.node_done(1, 0, 1, 2).unwrap();
        assert_eq!((c.samples, c.distinct, c.ranks), (6, 5, 2));
        assert_eq!((c.rank_samples_min, c.rank_samples_max), (3, 3));
        assert_eq!(
            (c.first_batch, c.world_size),
            (0, 2),
            "the first node to begin sets the start"
        );
        assert_eq!(l.node_done(1, 0, 1, 2), None, "summarised once");
    }

    #[test]
    fn a_step_of_some_ranks_counts_what_they_took() {
        let p = plan(&[vec![7], vec![], vec![0, 1, 2], vec![2, 9]]);
        let mut l = SampleLedger::default();
        l.begin(1, 0, &p, 0);
        assert_eq!(l.consume_step(1, 0, lens(&p, 1..4).into_iter(), 0), 5);
        let step = l.node_done(1, 0, 0, 1).unwrap();
        assert_eq!((step.samples, step.distinct, step.ranks), (5, 4, 3));
        assert_eq!((step.rank_samples_min, step.rank_samples_max), (0, 3));
    }

    #[test]
    fn a_step_of_an_epoch_not_open_still_counts_its_samples() {
        let p = plan(&[vec![1, 2]]);
        let mut l = SampleLedger::default();
        assert_eq!(l.consume_step(4, 0, lens(&p, 0..1).into_iter(), 0), 2);
        assert!(l.node_done(4, 0, 0, 1).is_none());
    }

    #[test]
    #[should_panic(expected = "node 0 finished epoch 0 of a group with no member")]
    fn an_epoch_finished_by_a_memberless_group_stops_the_run() {
        let mut l = SampleLedger::default();
        l.begin(1, 0, &plan(&[vec![0]]), 0);
        l.node_done(1, 0, 0, 0);
    }

    #[test]
    fn keeps_a_bounded_number_of_open_epochs() {
        let p = plan(&[vec![0]]);
        let mut l = SampleLedger::default();
        for e in 0..20 {
            l.begin(0, e, &p, 0);
        }
        assert_eq!(l.open.len(), OPEN_EPOCHS_MAX);
        assert!(l.node_done(0, 0, 0, 1).is_none(), "the oldest was dropped");
        assert!(l.node_done(0, 19, 0, 1).is_some());
    }
}
