//! What evening out an epoch does, for both samplers: the samples padding repeats (and on
//! which ranks they land) and the ones `drop_last` cuts instead.
//!
//! Both samplers lay an epoch out as one list of `total_size` places dealt with stride
//! `num_replicas` (place `i` goes to rank `i % num_replicas`): torch's `DistributedSampler`
//! over its (shuffled) index list, Bagua's over its items in complexity order. Padding fills
//! the places past the dataset's end by wrapping to the list's start; `drop_last` stops the
//! list at `floor(len / replicas) × replicas` places, so the tail is never seen that epoch.

use super::samples_per_rank;
use std::collections::BTreeMap;

/// One place of an epoch's list: the rank it is dealt to and the dataset index it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    pub rank: u64,
    pub index: u64,
}

/// How one epoch is evened out over the ranks, with `drop_last` off and on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpochEvening {
    pub dataset_len: u64,
    pub num_replicas: u64,
    /// `num_samples` with `drop_last = false`: `ceil(len / replicas)`.
    pub padded_num_samples: u64,
    /// `num_samples` with `drop_last = true`: `floor(len / replicas)` (or `len / replicas`
    /// when it divides).
    pub dropped_num_samples: u64,
    /// The places padding adds past the dataset's end, in order.
    pub padding: Vec<Place>,
    /// The places `drop_last` cuts, in order.
    pub dropped: Vec<Place>,
}

impl EpochEvening {
    /// The evening of `order`, the epoch's list before padding or truncation (torch's
    /// `indices`, Bagua's items by complexity): one entry per dataset item.
    pub fn of(order: &[u64], num_replicas: u64) -> Self {
        assert!(num_replicas > 0, "an epoch is dealt to at least one rank");
        let len = order.len() as u64;
        let (padded_num_samples, padded_total) = samples_per_rank(len, num_replicas, false);
        let (dropped_num_samples, dropped_total) = samples_per_rank(len, num_replicas, true);
        let place = |i: u64, index: u64| Place {
            rank: i % num_replicas,
            index,
        };
        // Fewer than `num_replicas` places either way, so both lists stay small.
        let padding = (len..padded_total)
            .map(|i| place(i, order[((i - len) % len.max(1)) as usize]))
            .collect();
        let dropped = (dropped_total..len)
            .map(|i| place(i, order[i as usize]))
            .collect();
        EpochEvening {
            dataset_len: len,
            num_replicas,
            padded_num_samples,
            dropped_num_samples,
            padding,
            dropped,
        }
    }

    /// Every index padding repeats, ascending, with how many times the padded epoch deals it
    /// (its own place plus its copies).
    pub fn repeats(&self) -> Vec<(u64, u64)> {
        let mut copies: BTreeMap<u64, u64> = BTreeMap::new();
        for p in &self.padding {
            *copies.entry(p.index).or_default() += 1;
        }
        copies.into_iter().map(|(i, c)| (i, c + 1)).collect()
    }

    /// The padding copies dealt to `rank`, in the order it takes them: at most one, as
    /// padding fills fewer places than there are ranks.
    pub fn padding_of(&self, rank: u64) -> Vec<u64> {
        let mine = self.padding.iter().filter(|p| p.rank == rank);
        mine.map(|p| p.index).collect()
    }
}

/// A rank's `num_samples` cut into batches of `batch_size` as a `DataLoader` cuts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batching {
    pub batch_size: u64,
    /// Batches per rank, the short last one included.
    pub batches: u64,
    /// Samples in the last batch (`batch_size` when it is full, 0 with no batch).
    pub last_batch: u64,
}

impl Batching {
    pub fn of(num_samples: u64, batch_size: u64) -> Self {
        assert!(batch_size > 0, "a batch holds at least one sample");
        let batches = num_samples.div_ceil(batch_size);
        let last_batch = num_samples - batches.saturating_sub(1) * batch_size;
        Batching {
            batch_size,
            batches,
            last_batch,
        }
    }

    /// Samples per rank a `DataLoader(drop_last=True)` leaves out: the short last batch.
    pub fn loader_drops(&self) -> u64 {
        if self.last_batch < self.batch_size {
            self.last_batch
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampler::DistributedSampler;

    #[test]
    fn padding_wraps_to_the_start_and_drop_last_cuts_the_tail() {
        // torch: 10 items over 4 ranks pad to 12 with indices[:2]; drop_last keeps 8.
        let order: Vec<u64> = (0..10).collect();
        let e = EpochEvening::of(&order, 4);
        assert_eq!((e.padded_num_samples, e.dropped_num_samples), (3, 2));
        let at = |rank, index| Place { rank, index };
        assert_eq!(e.padding, vec![at(2, 0), at(3, 1)]);
        assert_eq!(e.dropped, vec![at(0, 8), at(1, 9)]);
        assert_eq!(e.repeats(), vec![(0, 2), (1, 2)]);
        assert_eq!(e.padding_of(2), vec![0]);
    }

    #[test]
    fn a_dataset_shorter_than_the_world_repeats_itself() {
        let e = EpochEvening::of(&[0, 1], 5);
        assert_eq!(
            e.padding.iter().map(|p| p.index).collect::<Vec<_>>(),
            [0, 1, 0]
        );
        assert_eq!(e.repeats(), vec![(0, 3), (1, 2)]);
        assert_eq!(e.dropped_num_samples, 0);
        assert_eq!(e.dropped.len(), 2);
    }

    #[test]
    fn agrees_with_the_sampler_s_own_padded_order() {
        for (len, world) in [(103, 5), (7, 3), (2, 5), (12, 4)] {
            let s = DistributedSampler::new(len, world, 0, true, 9, false).unwrap();
            let padded = s.padded_order().unwrap();
            let e = EpochEvening::of(&padded[..len as usize], world);
            for p in &e.padding {
                let place = padded.iter().enumerate().skip(len as usize);
                let mut on_rank = place.filter(|(i, _)| *i as u64 % world == p.rank);
                assert!(on_rank.any(|(_, &index)| index == p.index));
            }
            assert_eq!(e.padding.len() as u64, padded.len() as u64 - len);
        }
    }

    #[test]
    fn batching_counts_the_short_last_batch() {
        let b = Batching::of(3, 2);
        assert_eq!((b.batches, b.last_batch, b.loader_drops()), (2, 1, 1));
        let full = Batching::of(4, 2);
        assert_eq!(
            (full.batches, full.last_batch, full.loader_drops()),
            (2, 2, 0)
        );
        assert_eq!(Batching::of(0, 2).batches, 0);
    }
}
