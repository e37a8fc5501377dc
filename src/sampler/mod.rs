//! Samplers bit-exact to torch and Bagua: torch's CPU RNG, `DistributedSampler`, and Bagua's
//! load-balancing samplers, what padding or `drop_last` does to an epoch (`summary`), and
//! an epoch dealt to every rank and cut into batches (`rank_lists`, `dealt_epoch`), dealt
//! once per process (`shared_deal`), from a permutation drawn once per process
//! (`shared_perm`).

pub mod dealt_epoch;
pub mod distributed;
pub mod epoch_facts;
pub mod load_balancing;
pub mod rank_lists;
mod rng_kernels;
pub mod shared_deal;
pub mod shared_perm;
pub mod summary;
pub mod torch_rng;

pub use distributed::DistributedSampler;
pub use load_balancing::{
    LoadBalancingBatchSampler, LoadBalancingSampler, SamplerFix, BATCH_SAMPLER_NEGATIVE_SLICE,
};
pub use rank_lists::RankLists;
pub use torch_rng::TorchGenerator;

/// Why a sampler or a draw cannot be made; each mirrors an error the reference raises, or a
/// size this crate refuses rather than exhausting memory.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SamplerError {
    /// `rank` is outside `0..num_replicas` (torch and Bagua raise `ValueError`).
    #[error("invalid rank {rank}, rank should be in the interval [0, {}]", *.num_replicas as i128 - 1)]
    InvalidRank {
        /// The rank asked for.
        rank: u64,
        /// The number of replicas.
        num_replicas: u64,
    },
    /// `num_replicas` is 0: no rank can be valid.
    #[error("num_replicas must be at least 1")]
    NoReplicas,
    /// A size that does not fit in memory or in `usize`.
    #[error("size {n} is too large to materialise")]
    TooLarge {
        /// The requested number of elements.
        n: u64,
    },
    /// `randint(0, ...)`: torch raises because the range is empty.
    #[error("randint needs high >= 1 (the range [0, high) is empty)")]
    EmptyRandintRange,
    /// Bagua's sampler takes `max()` of the complexities, which fails on an empty dataset.
    #[error("the load-balancing sampler needs at least one item")]
    EmptyDataset,
    /// `random_level` outside `[0, 1]` (Bagua raises `ValueError`).
    #[error("invalid random level {0}, should be in the range [0.0, 1.0]")]
    InvalidRandomLevel(f64),
    /// The spread of complexities times `random_level` does not fit torch's `randint` bound.
    #[error("complexities span too wide a range for randint: {spread}")]
    ComplexitySpreadTooLarge {
        /// `max - min` of the complexities.
        spread: i128,
    },
    /// `batch_size` 0 would cut no batches.
    #[error("batch_size must be at least 1")]
    ZeroBatchSize,
    /// Bagua's batch sampler refuses a sampler with `drop_last` set.
    #[error("drop_last of the wrapped sampler should be false")]
    BatchSamplerNeedsNoDropLast,
    /// A fix name that this crate does not know.
    #[error("unknown sampler fix {0:?} (known: batch-sampler-negative-slice)")]
    UnknownFix(String),
}

/// Per-rank sample counts shared by torch's and Bagua's samplers: `(num_samples, total_size)`.
///
/// The reference computes `ceil((n - p) / p)` with float division when dropping the tail of a
/// dataset that does not divide evenly; that is `floor(n / p)` for `n >= p` and 0 below, which
/// this computes exactly in integers (the float form only differs past 2^50 items).
pub fn samples_per_rank(dataset_len: u64, num_replicas: u64, drop_last: bool) -> (u64, u64) {
    let num_samples = if drop_last && !dataset_len.is_multiple_of(num_replicas) {
        dataset_len / num_replicas
    } else {
        dataset_len.div_ceil(num_replicas)
    };
    (num_samples, num_samples * num_replicas)
}

/// Validates a `(rank, num_replicas)` pair as the reference constructors do.
pub(crate) fn check_rank(rank: u64, num_replicas: u64) -> Result<(), SamplerError> {
    if num_replicas == 0 {
        return Err(SamplerError::NoReplicas);
    }
    if rank >= num_replicas {
        return Err(SamplerError::InvalidRank { rank, num_replicas });
    }
    Ok(())
}

/// The generator seed torch uses for an epoch, `seed + epoch`; only its low 32 bits reach the
/// generator, so wrapping arithmetic gives the same generator as Python's unbounded ints.
pub(crate) fn epoch_seed(seed: i64, epoch: u64) -> u64 {
    (seed as u64).wrapping_add(epoch)
}
