//! One epoch's index lists of every rank side by side in one buffer, so a batch is a slice:
//! the layout both the job's epoch plans and the checker's own deals keep.
//!
//! A `Vec` per rank costs an allocation each (512 of them for a 64 × 8 world, every epoch)
//! and scatters the ranks' lists over the heap; one buffer with each rank's start is dealt
//! in one pass and read without indirection.

/// Every rank's indices, rank 0's first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RankLists {
    ids: Vec<u64>,
    /// Where each rank's indices start in `ids`, and where the last one's end.
    starts: Vec<usize>,
}

impl RankLists {
    /// Lays out per-rank lists: rank `r`'s are `rank_ids(r)`, for `r` in `0..world_size`;
    /// `total` is how many there are in all (a capacity hint).
    pub fn of<I: IntoIterator<Item = u64>>(
        world_size: u64,
        total: usize,
        rank_ids: impl Fn(u64) -> I,
    ) -> Self {
        let mut ids = Vec::with_capacity(total);
        let mut starts = Vec::with_capacity(world_size as usize + 1);
        for rank in 0..world_size {
            starts.push(ids.len());
            ids.extend(rank_ids(rank));
        }
        starts.push(ids.len());
        RankLists { ids, starts }
    }

    /// torch's deal of a padded epoch `order` over `world_size` ranks: rank `r` takes the
    /// entries at `r + offset + k × world_size` for `k < per_rank` that exist (`offset` is 0
    /// but for a mutant that shifts the stride).
    pub fn strided<T: Copy + Into<u64>>(
        order: &[T],
        world_size: u64,
        offset: u64,
        per_rank: u64,
    ) -> Self {
        let (ws, ns) = (world_size as usize, per_rank as usize);
        if offset != 0 || ws.checked_mul(ns) != Some(order.len()) {
            // Not a whole padded order: each rank takes the places its stride finds.
            let rest = order.get(offset as usize..).unwrap_or_default();
            let rank_ids = |rank| {
                let places = rest.iter().skip(rank as usize).step_by(ws.max(1));
                places.take(ns).map(|&id| id.into())
            };
            return RankLists::of(world_size, order.len(), rank_ids);
        }
        // A few rows of the order at a time, so that each rank's next few indices are
        // written together and the rows read stay cached (a world of 512 ranks puts one
        // rank's indices 4 KiB apart, all in one cache set).
        const ROWS: usize = 8;
        let mut ids = vec![0; order.len()];
        for first_row in (0..ns).step_by(ROWS) {
            let rows = ROWS.min(ns - first_row);
            for (rank, out) in ids.chunks_exact_mut(ns).enumerate() {
                let out = &mut out[first_row..first_row + rows];
                for (row, id) in (first_row..).zip(out) {
                    *id = order[row * ws + rank].into();
                }
            }
        }
        RankLists {
            ids,
            starts: (0..=ws).map(|rank| rank * ns).collect(),
        }
    }

    /// Lists already made one per rank.
    pub fn from_lists(lists: &[Vec<u64>]) -> Self {
        let total = lists.iter().map(Vec::len).sum();
        RankLists::of(lists.len() as u64, total, |rank| {
            lists[rank as usize].iter().copied()
        })
    }

    /// Ranks laid out.
    pub fn world_size(&self) -> u64 {
        self.starts.len().saturating_sub(1) as u64
    }

    /// `rank`'s indices; none for a rank outside the world.
    pub fn rank(&self, rank: u64) -> &[u64] {
        usize::try_from(rank)
            .ok()
            .and_then(|r| Some(&self.ids[*self.starts.get(r)?..*self.starts.get(r + 1)?]))
            .unwrap_or_default()
    }

    /// How many indices the rank with the fewest holds.
    pub fn shortest(&self) -> usize {
        self.starts
            .windows(2)
            .map(|w| w[1] - w[0])
            .min()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn by_rank(lists: &RankLists) -> Vec<Vec<u64>> {
        (0..lists.world_size())
            .map(|r| lists.rank(r).to_vec())
            .collect()
    }

    /// `order[offset + rank :: world][..per_rank]`, the slow way.
    fn naive(order: &[u64], world: u64, offset: u64, per_rank: u64) -> Vec<Vec<u64>> {
        (0..world)
            .map(|rank| {
                let from = (offset + rank) as usize;
                let places = order.iter().skip(from).step_by(world as usize);
                places.take(per_rank as usize).copied().collect()
            })
            .collect()
    }

    #[test]
    fn strided_deals_as_torch_strides() {
        let order: Vec<u64> = (0..120).map(|i| (i * 37) % 120).collect();
        for (world, offset, per_rank) in [(8, 0, 15), (12, 0, 10), (7, 0, 17), (8, 1, 15)] {
            let got = RankLists::strided(&order, world, offset, per_rank);
            assert_eq!(by_rank(&got), naive(&order, world, offset, per_rank));
        }
        let mutant = RankLists::strided(&order, 8, 1, 15);
        assert_eq!((mutant.rank(0).len(), mutant.rank(7).len()), (15, 14));
        assert_eq!(mutant.shortest(), 14);
    }

    #[test]
    fn lists_keep_their_order_and_a_rank_outside_has_none() {
        let lists = RankLists::from_lists(&[vec![5, 1], vec![], vec![9]]);
        assert_eq!(by_rank(&lists), vec![vec![5, 1], vec![], vec![9]]);
        assert_eq!(lists.rank(3), &[] as &[u64]);
        assert_eq!(lists.shortest(), 0);
    }
}
