//! `[job.eval]`: one evaluation pass after training, over a `DistributedSampler` with
//! shuffling off (as evaluation scripts build it) on the world the job last trained in, and
//! what evening the set out over the ranks does to a mean metric.
//!
//! torch pads the index list by wrapping to its start, so with `drop_last = false` the first
//! samples of the set are evaluated twice; with `drop_last = true` the tail is never
//! evaluated. A metric averaged over what the ranks evaluated (an all-reduced sum over an
//! all-reduced count) then weighs samples unequally. The bias bound is the total variation
//! distance between those weights and the uniform ones: the most the mean can be off for a
//! metric whose per-sample values lie in [0, 1] (accuracy, say), reached when the
//! over-weighted samples all score 1 and the others 0.
//!
//! Pure: a function of the scenario's eval settings and the world size.

use crate::sampler::samples_per_rank;
use crate::scenario::model::EvalConfig;
use serde::Serialize;

/// The evaluation pass, as the report gives it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct EvalPass {
    /// Samples in the evaluation set.
    pub dataset_len: u64,
    /// Ranks the pass ran on: the world of the job's last trained step.
    pub world_size: u64,
    pub drop_last: bool,
    /// Samples each rank evaluates (torch's `num_samples`).
    pub per_rank: u64,
    /// Samples the ranks evaluate in all, copies included.
    pub evaluated: u64,
    /// Copies padding adds: samples counted twice (or more, when the set is smaller than
    /// the world).
    pub duplicated: u64,
    /// Samples `drop_last` leaves out: never evaluated.
    pub dropped: u64,
    /// The most the evaluated mean of a metric with values in [0, 1] can differ from the
    /// whole set's mean (scale by a metric's range for others); `None` when no rank
    /// evaluates a sample and the mean is undefined. Rounded to 6 decimals.
    pub mean_bias_max: Option<f64>,
}

impl EvalPass {
    /// The pass of `eval` over `world_size` ranks.
    pub fn of(eval: &EvalConfig, world_size: u64) -> Self {
        assert!(world_size > 0, "an eval pass runs on at least one rank");
        let n = eval.len;
        let (per_rank, evaluated) = samples_per_rank(n, world_size, eval.drop_last);
        EvalPass {
            dataset_len: n,
            world_size,
            drop_last: eval.drop_last,
            per_rank,
            evaluated,
            duplicated: evaluated.saturating_sub(n),
            dropped: n.saturating_sub(evaluated),
            mean_bias_max: mean_bias_max(n, evaluated),
        }
    }
}

/// The total variation distance between the weights a mean over `evaluated` places (the
/// padded or truncated list of `n` samples in index order) gives each sample and `1 / n`.
///
/// Sample `i` is evaluated `q + [i < r]` times, with `q = evaluated / n` and
/// `r = evaluated % n` (padding wraps to the start; truncation keeps the first `evaluated`).
/// Only the `r` samples evaluated `q + 1` times weigh more than `1 / n`, each by
/// `(q + 1) / evaluated − 1 / n`, so the distance is `r × ((q + 1) n − evaluated) /
/// (evaluated × n)`: `d (n − d) / (n (n + d))` for `d < n` copies, `k / n` for `k` dropped.
fn mean_bias_max(n: u64, evaluated: u64) -> Option<f64> {
    if evaluated == 0 || n == 0 {
        return None;
    }
    let (n, t) = (u128::from(n), u128::from(evaluated));
    let (q, r) = (t / n, t % n);
    let numerator = r * ((q + 1) * n - t);
    let bias = numerator as f64 / (t * n) as f64;
    Some((bias * 1e6).round() / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampler::DistributedSampler;

    fn pass(len: u64, drop_last: bool, world: u64) -> EvalPass {
        EvalPass::of(&EvalConfig { len, drop_last }, world)
    }

    /// The bound, brute force: the weights of torch's own padded or truncated list.
    fn brute_force(len: u64, drop_last: bool, world: u64) -> f64 {
        let s = DistributedSampler::new(len, world, 0, false, 0, drop_last).unwrap();
        let order = s.padded_order().unwrap();
        let mut copies = vec![0u64; len as usize];
        for &i in &order {
            copies[i as usize] += 1;
        }
        let t = order.len() as f64;
        let over = copies
            .iter()
            .map(|&c| (c as f64 / t - 1.0 / len as f64).max(0.0));
        over.sum()
    }

    #[test]
    fn padding_counts_the_first_samples_twice() {
        // torch: 10 001 samples over 8 ranks is 1 251 per rank, 10 008 in all.
        let p = pass(10_001, false, 8);
        assert_eq!(
            (p.per_rank, p.evaluated, p.duplicated, p.dropped),
            (1251, 10_008, 7, 0)
        );
        // d (n - d) / (n (n + d)) = 7 × 9 994 / (10 001 × 10 008).
        assert_eq!(p.mean_bias_max, Some(0.000699));
    }

    #[test]
    fn drop_last_leaves_the_tail_out() {
        let p = pass(10, true, 4);
        assert_eq!(
            (p.per_rank, p.evaluated, p.duplicated, p.dropped),
            (2, 8, 0, 2)
        );
        assert_eq!(p.mean_bias_max, Some(0.2));
    }

    #[test]
    fn an_even_split_is_unbiased_and_an_empty_one_undefined() {
        assert_eq!(pass(12, false, 4).mean_bias_max, Some(0.0));
        assert_eq!(pass(12, true, 4).mean_bias_max, Some(0.0));
        assert_eq!(pass(3, true, 4).mean_bias_max, None);
    }

    #[test]
    fn the_bound_is_the_distance_of_torch_s_own_weights() {
        for (len, drop_last, world) in
            [(10, false, 4), (2, false, 5), (7, true, 3), (103, false, 8)]
        {
            let got = pass(len, drop_last, world).mean_bias_max.unwrap();
            let want = brute_force(len, drop_last, world);
            assert!(
                (got - want).abs() < 1e-6,
                "{len} {drop_last} {world}: {got} {want}"
            );
        }
    }
}
