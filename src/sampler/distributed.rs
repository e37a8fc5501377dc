//! torch's `DistributedSampler`: the per-rank index lists of one epoch, bit for bit.

use super::rank_lists::RankDeal;
use super::shared_perm;
use super::{check_rank, epoch_seed, samples_per_rank, RankLists, SamplerError, TorchGenerator};

/// `torch.utils.data.DistributedSampler` over a dataset of `dataset_len` items.
///
/// The epoch order is `randperm(dataset_len)` seeded with `seed + epoch` (or `0..dataset_len`
/// without shuffling), padded by repeating itself until it divides evenly among the replicas
/// (or truncated with `drop_last`), then dealt out with stride `num_replicas` from `rank`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DistributedSampler {
    dataset_len: u64,
    num_replicas: u64,
    rank: u64,
    shuffle: bool,
    seed: i64,
    drop_last: bool,
    epoch: u64,
}

impl DistributedSampler {
    /// A sampler for `rank` of `num_replicas`, at epoch 0. An invalid rank is an error, as
    /// torch raises `ValueError`.
    pub fn new(
        dataset_len: u64,
        num_replicas: u64,
        rank: u64,
        shuffle: bool,
        seed: i64,
        drop_last: bool,
    ) -> Result<Self, SamplerError> {
        check_rank(rank, num_replicas)?;
        Ok(DistributedSampler {
            dataset_len,
            num_replicas,
            rank,
            shuffle,
            seed,
            drop_last,
            epoch: 0,
        })
    }

    /// Selects the epoch whose order the next call to [`Self::indices`] yields.
    pub fn set_epoch(&mut self, epoch: u64) {
        self.epoch = epoch;
    }

    /// The epoch currently selected.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Number of indices each rank gets per epoch (torch's `num_samples`).
    pub fn len(&self) -> u64 {
        samples_per_rank(self.dataset_len, self.num_replicas, self.drop_last).0
    }

    /// True when each rank gets no index at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The indices this sampler's rank gets in the current epoch.
    pub fn indices(&self) -> Result<Vec<u64>, SamplerError> {
        let order = self.padded_order()?;
        Ok(deal(&order, self.rank, self.num_replicas))
    }

    /// The indices of every rank in the current epoch, computing the order once.
    pub fn indices_all_ranks(&self) -> Result<Vec<Vec<u64>>, SamplerError> {
        let order = self.padded_order()?;
        Ok((0..self.num_replicas)
            .map(|rank| deal(&order, rank, self.num_replicas))
            .collect())
    }

    /// Every rank's indices in the current epoch, laid out side by side; each rank's
    /// stride starts `offset` places late (0 but for a mutant).
    pub fn deal_all_ranks(&self, offset: u64) -> Result<RankLists, SamplerError> {
        Ok(self.deal(offset)?.into_lists())
    }

    /// Every rank's indices in the current epoch, as [`Self::deal_all_ranks`] gives them:
    /// torch's whole padded order itself when each rank takes its stride of it from its own
    /// rank (`offset` 0), else the lists laid out. The order is drawn with `u32` values when
    /// the dataset's indices fit: the same permutation in half the memory, which a
    /// 100 000-sample epoch's shuffle then keeps in a core's cache.
    ///
    /// The order is every index of the dataset once (shuffled or not), cut to `total_size`
    /// or padded with its own prefix: it holds `min(dataset_len, total_size)` distinct
    /// indices, which the deal is told rather than counting them.
    pub fn deal(&self, offset: u64) -> Result<RankDeal, SamplerError> {
        let (per_rank, total_size) =
            samples_per_rank(self.dataset_len, self.num_replicas, self.drop_last);
        let ranks = self.num_replicas;
        let deal = match u32::try_from(self.dataset_len) {
            Ok(len) => {
                let draw = |seed, room| shared_perm::randperm_u32_with_room(len, seed, room);
                let order = self.padded_in(len as usize, draw, 0..len)?;
                RankDeal::of_order(order, ranks, offset, per_rank)
            }
            Err(_) => {
                let order = self.padded_order()?;
                RankDeal::of_order(order, ranks, offset, per_rank)
            }
        };
        Ok(deal.knowing_distinct(self.dataset_len.min(total_size)))
    }

    /// The epoch order before it is dealt out: `total_size` indices.
    pub fn padded_order(&self) -> Result<Vec<u64>, SamplerError> {
        let n = self.dataset_len;
        let len = usize::try_from(n).map_err(|_| SamplerError::TooLarge { n })?;
        let draw = |seed, room| TorchGenerator::new(seed).randperm_with_room(n, room);
        self.padded_in(len, draw, 0..n)
    }

    /// The epoch order of `len` indices brought to `total_size`, its values of type `T`:
    /// shuffled by `draw` (given the generator's seed and the room to leave for the
    /// padding), or `unshuffled`.
    fn padded_in<T: Copy>(
        &self,
        len: usize,
        draw: impl FnOnce(u64, usize) -> Result<Vec<T>, SamplerError>,
        unshuffled: impl Iterator<Item = T>,
    ) -> Result<Vec<T>, SamplerError> {
        let (_, total_size) = samples_per_rank(self.dataset_len, self.num_replicas, self.drop_last);
        let padding = (total_size as usize).saturating_sub(len);
        let mut order = if self.shuffle {
            draw(epoch_seed(self.seed, self.epoch), padding)?
        } else {
            let mut order = Vec::new();
            let too_large = |_| SamplerError::TooLarge {
                n: self.dataset_len,
            };
            order
                .try_reserve_exact(len.saturating_add(padding))
                .map_err(too_large)?;
            order.extend(unshuffled);
            order
        };
        pad_or_truncate(&mut order, total_size as usize);
        Ok(order)
    }
}

/// Brings `order` to `target_len` as torch does: truncating, or appending the list's own
/// prefix repeated as often as needed (the dataset may be shorter than the padding).
pub(crate) fn pad_or_truncate<T: Copy>(order: &mut Vec<T>, target_len: usize) {
    if order.len() >= target_len || order.is_empty() {
        order.truncate(target_len);
        return;
    }
    let original_len = order.len();
    let padding = target_len - original_len;
    order.reserve(padding);
    for j in 0..padding {
        order.push(order[j % original_len]);
    }
}

/// `order[rank::num_replicas]`.
fn deal(order: &[u64], rank: u64, num_replicas: u64) -> Vec<u64> {
    order
        .iter()
        .skip(rank as usize)
        .step_by(num_replicas as usize)
        .copied()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampler::dealt_epoch::distinct_ids;

    #[test]
    fn dealing_all_ranks_gives_each_rank_its_own_indices() {
        for (len, world, shuffle, drop_last) in [
            (103, 5, true, false),
            (103, 5, true, true),
            (100, 4, false, false),
            (3, 5, true, false),
        ] {
            let mut all = DistributedSampler::new(len, world, 0, shuffle, 7, drop_last).unwrap();
            all.set_epoch(3);
            let lists = all.deal_all_ranks(0).unwrap();
            for rank in 0..world {
                let mut one =
                    DistributedSampler::new(len, world, rank, shuffle, 7, drop_last).unwrap();
                one.set_epoch(3);
                assert_eq!(
                    lists.rank(rank),
                    one.indices().unwrap(),
                    "rank {rank} of {world}"
                );
            }
        }
    }

    /// The distinct indices a deal is told its whole order holds, against counting them.
    fn check_told_distinct(len: u64, world: u64, shuffle: bool, drop_last: bool, seed: i64) {
        let mut sampler = DistributedSampler::new(len, world, 0, shuffle, seed, drop_last).unwrap();
        sampler.set_epoch(seed as u64 % 7);
        let RankDeal::Strided(order) = sampler.deal(0).unwrap() else {
            panic!("torch's deal from each rank's own place is kept as its order");
        };
        let lists = sampler.deal_all_ranks(0).unwrap();
        let counted = distinct_ids((0..world).map(|rank| lists.rank(rank)));
        let told = order.distinct_in_rows(0..order.per_rank());
        assert_eq!(told, counted, "{len} over {world}, drop_last {drop_last}");
    }

    #[test]
    fn a_dataset_shorter_than_the_world_is_told_its_distinct_count_too() {
        for (len, world) in [(0, 4), (1, 7), (3, 5), (5, 5), (6, 5), (2, 64)] {
            for (shuffle, drop_last) in [(true, false), (true, true), (false, false)] {
                check_told_distinct(len, world, shuffle, drop_last, 11);
            }
        }
    }

    proptest::proptest! {
        /// Every shape a deal is made in (padded or cut, shuffled or not, datasets the world
        /// does not divide): the distinct count it is told is the one its order holds.
        #[test]
        fn a_deal_is_told_the_distinct_count_its_order_holds(
            len in 0u64..3_000,
            world in 1u64..80,
            shuffle: bool,
            drop_last: bool,
            seed: i64,
        ) {
            check_told_distinct(len, world, shuffle, drop_last, seed);
        }
    }

    #[test]
    fn rank_out_of_range_is_an_error() {
        assert!(DistributedSampler::new(10, 3, 3, true, 0, false).is_err());
        assert!(DistributedSampler::new(10, 0, 0, true, 0, false).is_err());
    }

    #[test]
    fn unshuffled_pads_by_wrapping() {
        let s = DistributedSampler::new(7, 3, 1, false, 0, false).unwrap();
        assert_eq!(s.indices().unwrap(), vec![1, 4, 0]);
        // A dataset shorter than the padding repeats itself.
        let s = DistributedSampler::new(2, 5, 0, false, 0, false).unwrap();
        assert_eq!(s.padded_order().unwrap(), vec![0, 1, 0, 1, 0]);
    }

    #[test]
    fn drop_last_truncates() {
        let s = DistributedSampler::new(7, 3, 0, false, 0, true).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(
            s.indices_all_ranks().unwrap(),
            vec![vec![0, 3], vec![1, 4], vec![2, 5]]
        );
    }
}
