//! When Bagua's batch-sampler quirk (a negative slice with `drop_last`) acts: only when ranks
//! get different numbers of batches. Cut by a batch size, as the job and `trainsim sample`
//! cut them, every rank has as many batches and the quirk never shows; a `batch_fn` that
//! packs items under a complexity budget gives ranks different counts, and it shows; the
//! fix `batch-sampler-negative-slice` removes it.

use proptest::prelude::*;
use trainsim::sampler::{LoadBalancingBatchSampler, LoadBalancingSampler, SamplerFix};

fn batch_sampler(
    complexities: Vec<i64>,
    replicas: u64,
    seed: i64,
    batch_size: usize,
) -> LoadBalancingBatchSampler {
    let sampler =
        LoadBalancingSampler::new(complexities, replicas, 0, true, seed, false, 0.5).unwrap();
    LoadBalancingBatchSampler::new(sampler, batch_size, true).unwrap()
}

/// Packs consecutive items into a batch while their complexities add up to at most
/// `budget` (an item over the budget gets a batch of its own).
fn pack(complexities: &[i64], budget: i64) -> impl Fn(&[u64]) -> Vec<Vec<u64>> + '_ {
    move |indices: &[u64]| {
        let mut batches: Vec<Vec<u64>> = Vec::new();
        let mut load = 0;
        for &i in indices {
            let c = complexities[i as usize];
            match batches.last_mut() {
                Some(batch) if load + c <= budget => batch.push(i),
                _ => {
                    batches.push(vec![i]);
                    load = 0;
                }
            }
            load += c;
        }
        batches
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn batches_of_a_batch_size_never_meet_the_negative_slice(
        complexities in proptest::collection::vec(1i64..100, 1..300),
        replicas in 1u64..9,
        seed in any::<i64>(),
        batch_size in 1usize..40,
    ) {
        let quirky = batch_sampler(complexities, replicas, seed, batch_size);
        let fixed = quirky.clone().with_fixes(&[SamplerFix::BatchSamplerNegativeSlice]);
        let all = quirky.batches_all_ranks().unwrap();
        let counts: Vec<usize> = all.iter().map(Vec::len).collect();
        prop_assert!(counts.windows(2).all(|w| w[0] == w[1]), "{:?}", counts);
        prop_assert_eq!(all, fixed.batches_all_ranks().unwrap());
    }
}

#[test]
fn a_complexity_budget_batch_fn_meets_it() {
    // Unshuffled over 2 ranks: rank 0 gets items 0, 2, …, 10 and rank 1 items 1, 3, …, 11.
    // Packed under a budget of 6, rank 0 has 4 batches and rank 1 has 5.
    let complexities: Vec<i64> = (0..12).collect();
    let sampler = LoadBalancingSampler::new(complexities.clone(), 2, 0, false, 0, false, 0.0);
    let quirky = LoadBalancingBatchSampler::new(sampler.unwrap(), 1, true).unwrap();
    let fixed = quirky
        .clone()
        .with_fixes(&[SamplerFix::BatchSamplerNegativeSlice]);
    let as_bagua = quirky
        .batches_all_ranks_with(pack(&complexities, 6))
        .unwrap();
    let truncated = fixed
        .batches_all_ranks_with(pack(&complexities, 6))
        .unwrap();
    // drop_last should cut rank 1 to 4 batches; `batches[:4 - 5]` appends its first 4 instead.
    assert_eq!(as_bagua[0].len(), 4);
    assert_eq!(as_bagua[1].len(), 9);
    assert_eq!(as_bagua[1][5..], as_bagua[1][..4]);
    assert_eq!(truncated[1].len(), 4);
    assert_eq!(truncated[0], as_bagua[0]);
}
