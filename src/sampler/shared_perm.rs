//! torch's `randperm(n)` of a dataset, drawn once per process for each generator seed: the
//! shuffled order a `DistributedSampler` epoch starts from depends on the dataset's length,
//! the sampler's seed and the epoch, never on the world it is dealt to, so runs of one
//! campaign whose worlds differ (and a run whose world changes) share it.

use super::torch_rng::TorchGenerator;
use super::SamplerError;
use crate::memo::Memo;

/// Permuted ids the process keeps at most (4 bytes each: 32 MiB).
const PERMUTATION_IDS_MAX: usize = 8 << 20;

/// Permutations kept at most, however short: a campaign's runs share the first few epochs
/// of one dataset, and a long run's later epochs are each dealt once.
const PERMUTATIONS_KEPT_MAX: usize = 8;

/// By (dataset length, generator seed).
static PERMUTATIONS: Memo<(u32, u64), Vec<u32>> =
    Memo::bounded(PERMUTATION_IDS_MAX, PERMUTATIONS_KEPT_MAX);

/// `randperm(len)` of a generator seeded with `generator_seed`, as `u32` values, with room
/// for `spare` more: the kept draw copied, or drawn now and kept (one too heavy to keep is
/// drawn straight into its room). Copying a kept order costs a small part of drawing it.
pub fn randperm_u32_with_room(
    len: u32,
    generator_seed: u64,
    spare: usize,
) -> Result<Vec<u32>, SamplerError> {
    if len as usize > PERMUTATION_IDS_MAX / 4 {
        return TorchGenerator::new(generator_seed).randperm_u32_with_room(len, spare);
    }
    let kept = PERMUTATIONS.get_or_compute_inside(&(len, generator_seed), len as usize, || {
        TorchGenerator::new(generator_seed).randperm_u32(len)
    })?;
    let mut order = Vec::new();
    order
        .try_reserve_exact(kept.len().saturating_add(spare))
        .map_err(|_| SamplerError::TooLarge { n: u64::from(len) })?;
    order.extend_from_slice(&kept);
    Ok(order)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_permutation_is_the_generators_draw_with_its_room() {
        for (len, seed) in [(1000, 7), (1000, 8), (1, 0), (0, 3)] {
            let drawn = TorchGenerator::new(seed).randperm_u32(len).unwrap();
            for _ in 0..2 {
                let shared = randperm_u32_with_room(len, seed, 5).unwrap();
                assert_eq!(shared, drawn);
                assert!(shared.capacity() >= len as usize + 5);
            }
        }
    }
}
