//! Agreement at two levels, and a stated test for racy files.
//!
//! The mode rule (`compare::judge`) asks whether torch's most common full signature is the
//! simulator's. With two deaths, three real runs can give three signatures (rounds and
//! restart counts vary with timing) while every run agrees on what matters first: whether
//! the job finished and how each node ended. So a file is also judged on that coarse
//! outcome alone, and a racy file (more than one distinct signature on either side) is
//! judged on its distribution: are the real runs a plausible sample of the simulator's?
//!
//! The test is an exact multinomial goodness-of-fit test by Monte Carlo: the simulator's
//! counts, with half a run added to every signature either side saw (so a real signature the
//! simulator never gave is unlikely, not impossible), give each signature's probability;
//! the p-value is the share of samples of as many runs as the real side made whose
//! probability is at most the real runs' own. A racy file passes at p >= 0.05. The draws
//! come from a fixed seed: the same runs always give the same p-value.

use super::compare::{judge, Distribution};
use super::signature::Signature;
use rand::Rng;
use rand::SeedableRng;
use serde::Serialize;
use std::collections::BTreeMap;

/// Samples drawn for the Monte Carlo test.
const SAMPLES: u32 = 10_000;
/// Below this p-value a racy file's distributions disagree.
pub const P_VALUE_MIN: f64 = 0.05;
/// The fixed seed of the test's draws.
const TEST_SEED: u64 = 0x0063_6f6e_666f_726d;

/// The verdicts beside the mode rule's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Levels {
    /// `agree` or `disagree` on the coarse outcome: finished or not, each node's final state.
    pub coarse: String,
    /// For a racy file: the p-value of the real runs under the simulator's distribution.
    pub distribution_p: Option<f64>,
}

impl Levels {
    /// Whether a racy file's distributions agree (`None` for a file that is not racy).
    pub fn distribution_agrees(&self) -> Option<bool> {
        self.distribution_p.map(|p| p >= P_VALUE_MIN)
    }
}

/// Judges the coarse outcome and, for a racy file, the distribution.
pub fn judge_levels(real: &Distribution, sim: &Distribution) -> Levels {
    let coarse_agree = judge(&coarse(real), &coarse(sim)).agree;
    let racy = real.entries.len() > 1 || sim.entries.len() > 1;
    Levels {
        coarse: if coarse_agree { "agree" } else { "disagree" }.to_owned(),
        distribution_p: (racy && real.runs() > 0).then(|| p_value(real, sim)),
    }
}

/// The distribution of coarse outcomes: rounds, exit codes and restart counts left out.
pub fn coarse(d: &Distribution) -> Distribution {
    Distribution::of(
        d.entries
            .iter()
            .flat_map(|e| std::iter::repeat_n(coarse_signature(&e.signature), e.count as usize)),
    )
}

/// One run's coarse outcome: whether the job finished and how each node ended.
pub fn coarse_signature(s: &Signature) -> Signature {
    let mut s = s.clone();
    s.rounds.clear();
    for node in s.nodes.values_mut() {
        node.exit_code = None;
        node.restarts = 0;
    }
    s
}

/// The Monte Carlo p-value of `real`'s counts under `sim`'s smoothed distribution.
pub fn p_value(real: &Distribution, sim: &Distribution) -> f64 {
    let mut counts: BTreeMap<&Signature, (u32, u32)> = BTreeMap::new();
    for e in &sim.entries {
        counts.entry(&e.signature).or_default().1 += e.count;
    }
    for e in &real.entries {
        counts.entry(&e.signature).or_default().0 += e.count;
    }
    let total = f64::from(sim.runs()) + 0.5 * counts.len() as f64;
    let probabilities: Vec<f64> = counts
        .values()
        .map(|(_, s)| (f64::from(*s) + 0.5) / total)
        .collect();
    let observed: Vec<u32> = counts.values().map(|(r, _)| *r).collect();
    let runs = real.runs();
    let observed_log_p = log_probability(&observed, &probabilities);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(TEST_SEED);
    let mut sample = vec![0u32; probabilities.len()];
    let mut as_unlikely = 0u32;
    for _ in 0..SAMPLES {
        sample.iter_mut().for_each(|c| *c = 0);
        for _ in 0..runs {
            sample[draw(&probabilities, rng.gen::<f64>())] += 1;
        }
        // A tolerance keeps samples equal to the observed one from falling on either side
        // by rounding.
        if log_probability(&sample, &probabilities) <= observed_log_p + 1e-9 {
            as_unlikely += 1;
        }
    }
    f64::from(as_unlikely) / f64::from(SAMPLES)
}

/// The index `u` (uniform in 0..1) falls on, by cumulative probability.
fn draw(probabilities: &[f64], u: f64) -> usize {
    let mut cumulative = 0.0;
    for (i, p) in probabilities.iter().enumerate() {
        cumulative += p;
        if u < cumulative {
            return i;
        }
    }
    probabilities.len() - 1
}

/// The multinomial log-probability of `counts`, up to the term every sample of the same
/// size shares (log n!).
fn log_probability(counts: &[u32], probabilities: &[f64]) -> f64 {
    counts
        .iter()
        .zip(probabilities)
        .map(|(k, p)| f64::from(*k) * p.ln() - log_factorial(*k))
        .sum()
}

fn log_factorial(k: u32) -> f64 {
    (2..=k).map(|i| f64::from(i).ln()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conform::signature::NodeSig;

    fn sig(finished: bool, restarts: u32) -> Signature {
        let node = NodeSig {
            final_state: if finished { "SUCCEEDED" } else { "FAILED" }.into(),
            exit_code: Some(if finished { 0 } else { 1 }),
            restarts,
        };
        Signature {
            rounds: Vec::new(),
            nodes: [("node-0".to_owned(), node)].into_iter().collect(),
            finished,
        }
    }

    fn dist(entries: &[(Signature, usize)]) -> Distribution {
        Distribution::of(
            entries
                .iter()
                .flat_map(|(s, n)| std::iter::repeat_n(s.clone(), *n)),
        )
    }

    #[test]
    fn restart_counts_differ_but_the_coarse_outcome_agrees() {
        let real = dist(&[(sig(false, 1), 2), (sig(false, 2), 1)]);
        let sim = dist(&[(sig(false, 3), 20)]);
        assert!(!judge(&real, &sim).agree);
        let levels = judge_levels(&real, &sim);
        assert_eq!(levels.coarse, "agree");
        // Three real runs with signatures the simulator never gave: far from its spread.
        assert_eq!(levels.distribution_agrees(), Some(false));
    }

    #[test]
    fn a_real_sample_drawn_like_the_simulators_passes_and_a_skewed_one_fails() {
        let sim = dist(&[(sig(true, 1), 10), (sig(false, 1), 10)]);
        let even = dist(&[(sig(true, 1), 3), (sig(false, 1), 2)]);
        assert!(p_value(&even, &sim) > 0.5, "{}", p_value(&even, &sim));
        let sim = dist(&[(sig(true, 1), 19), (sig(false, 1), 1)]);
        let skewed = dist(&[(sig(false, 1), 5)]);
        assert!(p_value(&skewed, &sim) < 0.01, "{}", p_value(&skewed, &sim));
        // Deterministic: the same runs give the same p-value.
        assert_eq!(p_value(&even, &sim), p_value(&even, &sim));
    }

    #[test]
    fn a_file_with_one_signature_on_each_side_is_not_racy() {
        let one = dist(&[(sig(true, 0), 5)]);
        assert_eq!(judge_levels(&one, &one).distribution_p, None);
        assert_eq!(judge_levels(&one, &one).coarse, "agree");
    }
}
