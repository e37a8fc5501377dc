//! How an epoch's deal to every rank is kept: each rank's index list side by side in one
//! buffer, so a batch is a slice; or, for torch's whole padded deal, the padded order itself,
//! every rank's list read from it by stride (`StridedOrder`), laid out as lists only for a
//! reader that needs slices.
//!
//! A `Vec` per rank costs an allocation each (512 of them for a 64 × 8 world, every epoch)
//! and scatters the ranks' lists over the heap; one buffer with each rank's start is dealt
//! in one pass and read without indirection. Laying the lists out at all is a transpose of
//! the whole order into fresh memory (800 kB for 100 000 samples), which what a job's step
//! needs (its batch digests and lengths, the epoch's distinct count) can do without.

use super::dealt_epoch::distinct_ids;
use std::ops::Range;
use std::sync::OnceLock;

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

/// An epoch dealt to every rank, kept as it was dealt.
#[derive(Debug)]
pub enum RankDeal {
    /// Each rank's list laid out (a mutant's shifted stride, a load-balancing deal).
    Lists(RankLists),
    /// torch's whole padded order, every rank taking its stride of it from its own rank.
    Strided(StridedOrder),
}

impl RankDeal {
    /// torch's deal of a padded epoch `order` over `world_size` ranks, as
    /// [`RankLists::strided`] deals it: the order itself when every rank takes `per_rank`
    /// of it from its own rank on and nothing is left over, else the lists laid out.
    pub fn of_order<T: OrderId>(
        order: Vec<T>,
        world_size: u64,
        offset: u64,
        per_rank: u64,
    ) -> Self {
        let dealt = world_size.checked_mul(per_rank);
        let whole = dealt.and_then(|dealt| usize::try_from(dealt).ok()) == Some(order.len());
        if offset != 0 || !whole {
            return RankDeal::Lists(RankLists::strided(&order, world_size, offset, per_rank));
        }
        RankDeal::Strided(StridedOrder {
            order: T::keep(order),
            world_size,
            per_rank,
            distinct: None,
            lists: OnceLock::new(),
        })
    }

    /// The deal, told how many distinct indices the whole order holds, as its maker knows
    /// from how it drew it, so that they are not counted; a deal of laid-out lists counts.
    pub fn knowing_distinct(mut self, distinct: u64) -> Self {
        if let RankDeal::Strided(order) = &mut self {
            order.distinct = Some(distinct);
        }
        self
    }

    /// Every rank's list, laid out now if it was not.
    pub fn lists(&self) -> &RankLists {
        match self {
            RankDeal::Lists(lists) => lists,
            RankDeal::Strided(order) => order.lists(),
        }
    }

    /// The lists, laid out now if they were not.
    pub fn into_lists(self) -> RankLists {
        match self {
            RankDeal::Lists(lists) => lists,
            RankDeal::Strided(mut order) => order.lists.take().unwrap_or_else(|| order.lay_out()),
        }
    }

    /// Ranks dealt to.
    pub fn world_size(&self) -> u64 {
        match self {
            RankDeal::Lists(lists) => lists.world_size(),
            RankDeal::Strided(order) => order.world_size,
        }
    }

    /// How many indices each rank's list holds, in rank order.
    pub fn rank_lens(&self) -> Vec<u64> {
        match self {
            RankDeal::Lists(lists) => (0..lists.world_size())
                .map(|rank| lists.rank(rank).len() as u64)
                .collect(),
            RankDeal::Strided(order) => vec![order.per_rank; order.world_size as usize],
        }
    }
}

/// The id types a padded order is drawn in: `u32` where the dataset's indices fit, half the
/// memory of `u64`.
pub trait OrderId: Copy + Into<u64> {
    /// The order, kept.
    fn keep(order: Vec<Self>) -> Order;
}

impl OrderId for u32 {
    fn keep(order: Vec<u32>) -> Order {
        Order::Narrow(order)
    }
}

impl OrderId for u64 {
    fn keep(order: Vec<u64>) -> Order {
        Order::Wide(order)
    }
}

/// A padded order as drawn.
#[derive(Debug)]
pub enum Order {
    /// A dataset whose indices fit in 32 bits.
    Narrow(Vec<u32>),
    /// A larger one.
    Wide(Vec<u64>),
}

/// torch's whole padded order of an epoch, `world_size × per_rank` indices, kept as drawn:
/// rank `r`'s `i`-th index is `order[i × world_size + r]`, so a row of the order holds every
/// rank's `i`-th, and a node's consecutive ranks lie side by side in it.
#[derive(Debug)]
pub struct StridedOrder {
    order: Order,
    world_size: u64,
    per_rank: u64,
    /// How many distinct indices the whole order holds, when its maker said.
    distinct: Option<u64>,
    /// Every rank's list, laid out on first need of a slice.
    lists: OnceLock<RankLists>,
}

impl StridedOrder {
    /// Indices each rank takes.
    pub fn per_rank(&self) -> u64 {
        self.per_rank
    }

    /// Every rank's list, laid out now if it was not.
    pub fn lists(&self) -> &RankLists {
        self.lists.get_or_init(|| self.lay_out())
    }

    /// Every rank's list, copied out of the order (a transpose, into fresh memory).
    fn lay_out(&self) -> RankLists {
        let (world_size, per_rank) = (self.world_size, self.per_rank);
        match &self.order {
            Order::Narrow(order) => RankLists::strided(order, world_size, 0, per_rank),
            Order::Wide(order) => RankLists::strided(order, world_size, 0, per_rank),
        }
    }

    /// The [`crate::trace::samples_digest`] of ranks `first_rank..first_rank + ranks`'s
    /// samples at places `rows` of their lists (a rank outside the world has none).
    pub fn digest(&self, first_rank: u64, ranks: u64, rows: Range<u64>) -> u64 {
        let world_size = self.world_size;
        let len = |rank: u64| {
            let inside = first_rank.saturating_add(rank) < world_size;
            if inside {
                rows.end - rows.start
            } else {
                0
            }
        };
        let at = |rank: u64, i: u64| ((rows.start + i) * world_size + first_rank + rank) as usize;
        match &self.order {
            Order::Narrow(order) => {
                crate::trace::digest::samples_digest_by(ranks, len, |r, i| order[at(r, i)].into())
            }
            Order::Wide(order) => {
                crate::trace::digest::samples_digest_by(ranks, len, |r, i| order[at(r, i)])
            }
        }
    }

    /// The digests of four nodes of `ranks` ranks each, the first one's from `first_rank`,
    /// as [`StridedOrder::digest`] gives each.
    ///
    /// # Panics
    /// If the four nodes reach past the world.
    pub fn digests_x4(&self, first_rank: u64, ranks: u64, rows: Range<u64>) -> [u64; 4] {
        let world_size = self.world_size;
        assert!(
            first_rank + 4 * ranks <= world_size,
            "four nodes of {ranks} ranks from rank {first_rank} in a world of {world_size}"
        );
        let len = rows.end - rows.start;
        let at = |node: usize, rank: u64, i: u64| {
            let column = first_rank + node as u64 * ranks + rank;
            ((rows.start + i) * world_size + column) as usize
        };
        match &self.order {
            Order::Narrow(order) => crate::trace::digest::even_digests_x4(ranks, len, |n, r, i| {
                order[at(n, r, i)].into()
            }),
            Order::Wide(order) => {
                crate::trace::digest::even_digests_x4(ranks, len, |n, r, i| order[at(n, r, i)])
            }
        }
    }

    /// How many distinct indices every rank's places `rows` hold together: rows of the
    /// order, one slice of it.
    pub fn distinct_in_rows(&self, rows: Range<u64>) -> u64 {
        if let Some(distinct) = self.distinct.filter(|_| rows == (0..self.per_rank)) {
            return distinct;
        }
        let ids = (rows.start * self.world_size) as usize..(rows.end * self.world_size) as usize;
        match &self.order {
            Order::Narrow(order) => distinct_ids(std::iter::once(&order[ids])),
            Order::Wide(order) => distinct_ids(std::iter::once(&order[ids])),
        }
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

    /// `order` kept whole, and every rank's rows `rows` of its lists, the slow way.
    fn whole_and_slices<T: OrderId>(
        order: Vec<T>,
        world: u64,
        per_rank: u64,
    ) -> (StridedOrder, RankLists) {
        let wide: Vec<u64> = order.iter().map(|&id| id.into()).collect();
        let lists = RankLists::from_lists(&naive(&wide, world, 0, per_rank));
        match RankDeal::of_order(order, world, 0, per_rank) {
            RankDeal::Strided(order) => (order, lists),
            RankDeal::Lists(_) => panic!("a whole padded order is kept as it is"),
        }
    }

    fn check_read_in_place(order: &StridedOrder, lists: &RankLists, rows: Range<u64>) {
        let world = lists.world_size();
        let slice = |rank: u64| {
            let list = lists.rank(rank);
            &list[(rows.start as usize).min(list.len())..(rows.end as usize).min(list.len())]
        };
        for ranks in 0..=world + 1 {
            for first in 0..=world {
                let want = crate::trace::samples_digest((first..first + ranks).map(slice));
                assert_eq!(order.digest(first, ranks, rows.clone()), want);
                if first + 4 * ranks <= world {
                    let four = order.digests_x4(first, ranks, rows.clone());
                    for (node, &digest) in (0..).zip(&four) {
                        let node_ranks = first + node * ranks..first + (node + 1) * ranks;
                        let want = crate::trace::samples_digest(node_ranks.map(slice));
                        assert_eq!(digest, want, "node {node} of four from rank {first}");
                    }
                }
            }
        }
        let slices = (0..world).map(slice);
        let want = crate::sampler::dealt_epoch::distinct_ids(slices);
        assert_eq!(order.distinct_in_rows(rows), want);
    }

    proptest::proptest! {
        /// Digests and distinct counts read from a whole order in place are those of the
        /// lists laid out, for orders of `u32` and of `u64` ids (repeats as padding makes).
        #[test]
        fn an_order_read_in_place_gives_what_its_lists_give(
            world in 1u64..11,
            per_rank in 0u64..9,
            first_row in 0u64..10,
            rows in 0u64..10,
            ids in proptest::collection::vec(0u32..40, 100),
        ) {
            let dealt = (world * per_rank) as usize;
            let order: Vec<u32> = ids.iter().cycle().take(dealt).copied().collect();
            let rows = first_row.min(per_rank)..(first_row + rows).min(per_rank);
            let (narrow, lists) = whole_and_slices(order.clone(), world, per_rank);
            check_read_in_place(&narrow, &lists, rows.clone());
            assert_eq!(narrow.lists(), &lists);
            let wide: Vec<u64> = order.iter().map(|&id| u64::from(id) * 1_000 + 5).collect();
            let (wide, lists) = whole_and_slices(wide, world, per_rank);
            check_read_in_place(&wide, &lists, rows);
            assert_eq!(RankDeal::Strided(wide).into_lists(), lists);
        }
    }

    #[test]
    fn an_order_is_kept_whole_only_when_every_rank_takes_its_stride_of_it_all() {
        let order: Vec<u32> = (0..12).collect();
        let deal = RankDeal::of_order(order.clone(), 4, 0, 3);
        assert!(matches!(deal, RankDeal::Strided(_)));
        assert_eq!((deal.world_size(), deal.rank_lens()), (4, vec![3; 4]));
        assert_eq!(deal.lists().rank(1), &[1, 5, 9]);
        for (world, offset, per_rank) in [(4, 1, 3), (4, 0, 2), (5, 0, 3)] {
            let deal = RankDeal::of_order(order.clone(), world, offset, per_rank);
            let want = RankLists::strided(&order, world, offset, per_rank);
            assert_eq!(
                deal.rank_lens(),
                by_rank(&want)
                    .iter()
                    .map(|l| l.len() as u64)
                    .collect::<Vec<_>>()
            );
            match deal {
                RankDeal::Lists(lists) => assert_eq!(lists, want),
                RankDeal::Strided(_) => panic!("{world} ranks from {offset}: not whole"),
            }
        }
    }

    #[test]
    fn a_distinct_count_told_answers_for_the_whole_order_only() {
        // Ids 0..6 padded to 8: told a count (a wrong one, to see it used), it gives it for
        // every row and counts any fewer rows.
        let order: Vec<u32> = (0..6).chain(0..2).collect();
        let RankDeal::Strided(order) = RankDeal::of_order(order, 2, 0, 4).knowing_distinct(99)
        else {
            panic!("a whole order is kept");
        };
        assert_eq!(order.distinct_in_rows(0..4), 99);
        assert_eq!(order.distinct_in_rows(1..4), 6);
        assert_eq!(order.distinct_in_rows(3..4), 2);
        let lists = RankDeal::of_order(vec![1u32, 2, 3], 2, 1, 1).knowing_distinct(99);
        assert!(
            matches!(lists, RankDeal::Lists(_)),
            "a shifted stride is laid out"
        );
    }

    #[test]
    fn lists_keep_their_order_and_a_rank_outside_has_none() {
        let lists = RankLists::from_lists(&[vec![5, 1], vec![], vec![9]]);
        assert_eq!(by_rank(&lists), vec![vec![5, 1], vec![], vec![9]]);
        assert_eq!(lists.rank(3), &[] as &[u64]);
        assert_eq!(lists.shortest(), 0);
    }
}
