//! The sample ledger: which dataset indices the ranks of a group actually trained on in
//! each epoch, summarised for the report (`EpochCovered`). `sampler.coverage` does not read
//! it: it deals each recorded step again from the sampler, so a ledger bug cannot hide a
//! sampler bug. Every node of a group adds its ranks' batches after each completed step;
//! when the last node of the group finishes the epoch, the ledger hands back a summary for
//! the trace. Epochs a restart cuts short are dropped unsummarised.
//!
//! Pure: the world only stores it. Bounded: a bitset of `dataset.len` bits per open epoch,
//! at most `OPEN_EPOCHS_MAX` open at once (the oldest is dropped first).

use std::collections::{BTreeMap, BTreeSet};

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
    world_size: u64,
    first_batch: u64,
    seen: Vec<u64>,
    samples: u64,
    distinct: u64,
    /// Samples per global rank below `world_size`, `None` until the rank consumes: a plain
    /// vector, as every step of every node adds to it.
    per_rank: Vec<Option<u64>>,
    /// Ranks at or past `world_size` (none in a well-formed group), kept so the summary
    /// counts whatever it is given.
    other_ranks: BTreeMap<u64, u64>,
    nodes_done: BTreeSet<u32>,
}

impl Tally {
    fn add(&mut self, rank: u64, indices: &[u64]) {
        for &i in indices {
            if let Some(w) = self.seen.get_mut((i / 64) as usize) {
                let bit = 1u64 << (i % 64);
                self.distinct += u64::from(*w & bit == 0);
                *w |= bit;
            }
        }
        let n = indices.len() as u64;
        self.samples += n;
        match self.per_rank.get_mut(rank as usize) {
            Some(count) => *count = Some(count.unwrap_or(0) + n),
            None => *self.other_ranks.entry(rank).or_default() += n,
        }
    }

    /// Per-rank sample counts of every rank that consumed, in no particular order.
    fn rank_counts(&self) -> impl Iterator<Item = u64> + '_ {
        let listed = self.per_rank.iter().flatten().copied();
        listed.chain(self.other_ranks.values().copied())
    }
}

/// The ledger of one run.
#[derive(Debug, Default)]
pub struct SampleLedger {
    open: BTreeMap<(u64, u64), Tally>,
}

impl SampleLedger {
    /// Opens the tally of (round, epoch) if no node of the group opened it yet.
    pub fn begin(&mut self, round: u64, epoch: u64, world_size: u64, first_batch: u64, len: u64) {
        if self.open.contains_key(&(round, epoch)) {
            return;
        }
        while self.open.len() >= OPEN_EPOCHS_MAX {
            let oldest = *self.open.keys().next().expect("non-empty");
            self.open.remove(&oldest);
        }
        self.open.insert(
            (round, epoch),
            Tally {
                world_size,
                first_batch,
                seen: vec![0; len.div_ceil(64) as usize],
                samples: 0,
                distinct: 0,
                per_rank: vec![None; usize::try_from(world_size).unwrap_or(0)],
                other_ranks: BTreeMap::new(),
                nodes_done: BTreeSet::new(),
            },
        );
        assert!(
            self.open.len() <= OPEN_EPOCHS_MAX,
            "{} epochs open in the ledger, at most {OPEN_EPOCHS_MAX} kept",
            self.open.len()
        );
    }

    /// `rank` trained on `indices` in (round, epoch).
    pub fn consume(&mut self, round: u64, epoch: u64, rank: u64, indices: &[u64]) {
        if let Some(t) = self.open.get_mut(&(round, epoch)) {
            t.add(rank, indices);
        }
    }

    /// Local rank `r` of a node whose first global rank is `base_rank` trained on
    /// `batches[r]` in (round, epoch): one step of one node, with one look-up of the tally.
    /// Returns how many samples the batches held.
    pub fn consume_step(
        &mut self,
        round: u64,
        epoch: u64,
        base_rank: u64,
        batches: &[Vec<u64>],
    ) -> u64 {
        let tally = self.open.get_mut(&(round, epoch));
        let mut samples = 0;
        if let Some(t) = tally {
            for (local_rank, batch) in (0u64..).zip(batches) {
                t.add(base_rank + local_rank, batch);
            }
        }
        for batch in batches {
            samples += batch.len() as u64;
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
        let t = self.open.remove(&(round, epoch))?;
        Some(EpochCoverage {
            round,
            epoch,
            world_size: t.world_size,
            first_batch: t.first_batch,
            samples: t.samples,
            distinct: t.distinct,
            ranks: t.rank_counts().count() as u64,
            rank_samples_min: t.rank_counts().min().unwrap_or(0),
            rank_samples_max: t.rank_counts().max().unwrap_or(0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summarises_when_every_node_is_done() {
        let mut l = SampleLedger::default();
        l.begin(1, 0, 2, 0, 5);
        l.begin(1, 0, 2, 3, 5);
        l.consume(1, 0, 0, &[0, 1, 2]);
        l.consume(1, 0, 1, &[3, 4, 0]);
        assert_eq!(l.node_done(1, 0, 0, 2), None);
        let c = l.node_done(1, 0, 1, 2).unwrap();
        assert_eq!((c.samples, c.distinct, c.ranks), (6, 5, 2));
        assert_eq!((c.rank_samples_min, c.rank_samples_max), (3, 3));
        assert_eq!(c.first_batch, 0, "the first node to begin sets the start");
        assert_eq!(l.node_done(1, 0, 1, 2), None, "summarised once");
    }

    #[test]
    fn a_step_counts_as_its_ranks_one_by_one() {
        let batches = vec![vec![0, 1, 2], vec![], vec![2, 9]];
        let mut by_step = SampleLedger::default();
        let mut by_rank = SampleLedger::default();
        for l in [&mut by_step, &mut by_rank] {
            l.begin(1, 0, 4, 0, 10);
        }
        assert_eq!(by_step.consume_step(1, 0, 2, &batches), 5);
        for (r, b) in (2u64..).zip(&batches) {
            by_rank.consume(1, 0, r, b);
        }
        let step = by_step.node_done(1, 0, 0, 1).unwrap();
        assert_eq!(step, by_rank.node_done(1, 0, 0, 1).unwrap());
        assert_eq!((step.samples, step.distinct, step.ranks), (5, 4, 3));
        assert_eq!((step.rank_samples_min, step.rank_samples_max), (0, 3));
    }

    #[test]
    #[should_panic(expected = "node 0 finished epoch 0 of a group with no member")]
    fn an_epoch_finished_by_a_memberless_group_stops_the_run() {
        let mut l = SampleLedger::default();
        l.begin(1, 0, 2, 0, 5);
        l.node_done(1, 0, 0, 0);
    }

    #[test]
    fn keeps_a_bounded_number_of_open_epochs() {
        let mut l = SampleLedger::default();
        for e in 0..20 {
            l.begin(0, e, 1, 0, 1000);
        }
        assert_eq!(l.open.len(), OPEN_EPOCHS_MAX);
        assert!(l.node_done(0, 0, 0, 1).is_none(), "the oldest was dropped");
        assert!(l.node_done(0, 19, 0, 1).is_some());
    }
}
