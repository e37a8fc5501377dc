//! Properties of the samplers over random configurations: coverage, padding bounds, equal
//! lengths per rank, determinism per (seed, epoch), and load-balancing chunk structure.

use proptest::prelude::*;
use trainsim::sampler::{DistributedSampler, LoadBalancingSampler, TorchGenerator};

/// Occurrences of each index `0..n` across all ranks.
fn occurrences(all: &[Vec<u64>], n: u64) -> Vec<u64> {
    let mut counts = vec![0u64; n as usize];
    for &index in all.iter().flatten() {
        counts[index as usize] += 1;
    }
    counts
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 96,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn randperm_is_a_permutation(n in 0u64..3000, seed in any::<u64>()) {
        let mut perm = TorchGenerator::new(seed).randperm(n).unwrap();
        perm.sort_unstable();
        prop_assert!(perm.into_iter().eq(0..n));
    }

    #[test]
    fn distributed_covers_and_pads_within_bounds(
        n in 0u64..500, p in 1u64..17, seed in any::<i64>(), epoch in 0u64..50,
        shuffle in any::<bool>(), drop_last in any::<bool>(),
    ) {
        let mut s = DistributedSampler::new(n, p, 0, shuffle, seed, drop_last).unwrap();
        s.set_epoch(epoch);
        let all = s.indices_all_ranks().unwrap();
        prop_assert!(all.iter().all(|r| r.len() as u64 == s.len()));
        let counts = occurrences(&all, n);
        let total = s.len() * p;
        if drop_last {
            // Each index at most once; fewer than p dropped.
            prop_assert!(counts.iter().all(|&c| c <= 1));
            prop_assert!(n - total < p);
        } else {
            // Every index at least once; repeats only as padding, spread evenly by wrapping.
            prop_assert!(counts.iter().all(|&c| c >= 1));
            prop_assert!(total - n < p);
            let most = counts.iter().max().copied().unwrap_or(0);
            prop_assert!(most <= total.div_ceil(n.max(1)));
        }
    }

    #[test]
    fn distributed_is_deterministic_per_seed_and_epoch(
        n in 1u64..400, p in 1u64..9, seed in any::<i64>(), epoch in 0u64..20,
    ) {
        let make = || {
            let mut s = DistributedSampler::new(n, p, p - 1, true, seed, false).unwrap();
            s.set_epoch(epoch);
            s.indices().unwrap()
        };
        prop_assert_eq!(make(), make());
    }

    #[test]
    fn load_balancing_covers_with_equal_lengths(
        complexities in prop::collection::vec(-50i64..50, 1..300), p in 1u64..9,
        seed in any::<i64>(), epoch in 0u64..20, level in 0.0f64..=1.0, drop_last in any::<bool>(),
    ) {
        let n = complexities.len() as u64;
        let mut s = LoadBalancingSampler::new(complexities, p, 0, true, seed, drop_last, level)
            .unwrap();
        s.set_epoch(epoch);
        let all = s.indices_all_ranks().unwrap();
        prop_assert!(all.iter().all(|r| r.len() as u64 == s.len()));
        let counts = occurrences(&all, n);
        if drop_last {
            prop_assert!(counts.iter().all(|&c| c <= 1));
        } else {
            prop_assert!(counts.iter().all(|&c| c >= 1));
            prop_assert!(s.len() * p - n < p);
        }
        let again = s.indices_all_ranks().unwrap();
        prop_assert_eq!(all, again);
    }

    #[test]
    fn load_balancing_steps_take_one_sorted_chunk(
        chunks in 1usize..40, p in 1usize..9, seed in any::<i64>(), epoch in 0u64..20,
        max_complexity in 1i64..1000,
    ) {
        // random_level 0: no jitter, so each step gives the ranks p neighbours in the
        // stable complexity order, rank r taking the r-th of them.
        let n = chunks * p;
        let mut g = TorchGenerator::new(seed as u64);
        let complexities: Vec<i64> = g
            .randint(max_complexity as u64, n).unwrap().into_iter().map(|c| c as i64).collect();
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&i| complexities[i]);
        let mut position = vec![0usize; n];
        for (pos, &item) in order.iter().enumerate() {
            position[item] = pos;
        }
        let mut s = LoadBalancingSampler::new(complexities, p as u64, 0, true, seed, false, 0.0)
            .unwrap();
        s.set_epoch(epoch);
        let all = s.indices_all_ranks().unwrap();
        for step in 0..chunks {
            let first = position[all[0][step] as usize];
            prop_assert_eq!(first % p, 0);
            for (rank, indices) in all.iter().enumerate() {
                prop_assert_eq!(position[indices[step] as usize], first + rank);
            }
        }
    }
}
