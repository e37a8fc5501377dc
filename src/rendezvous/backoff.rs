//! torch's `cas_backoff_max_seconds`: the random wait after a state write that lost.
//!
//! torch 2.15's `_DistributedRendezvousOpExecutor.run` calls `_delay((0, max))` after a sync
//! whose compare-and-set did not land, and `_delay` skips waits under 10 ms. With many nodes
//! writing the whole state at once, the wait spreads their next attempts out.

use rand::Rng;

/// `_delay` ignores waits shorter than this.
const DELAY_US_MIN: u64 = 10_000;

/// How long to wait after a lost write: uniform in `0..=max_us`, none under 10 ms, and none
/// at all (no draw) when `max_us` is 0, torch's default.
pub fn delay_after_lost_write_us(max_us: u64, rng: &mut impl Rng) -> Option<u64> {
    if max_us == 0 {
        return None;
    }
    let delay_us = rng.gen_range(0..=max_us);
    (delay_us >= DELAY_US_MIN).then_some(delay_us)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn no_backoff_draws_nothing_and_short_waits_are_skipped() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let before = rng.clone();
        assert_eq!(delay_after_lost_write_us(0, &mut rng), None);
        assert_eq!(rng, before, "torch's default draws nothing");
        assert_eq!(delay_after_lost_write_us(DELAY_US_MIN - 1, &mut rng), None);
        let delays: Vec<u64> = (0..1000)
            .filter_map(|_| delay_after_lost_write_us(2_000_000, &mut rng))
            .collect();
        assert!(delays
            .iter()
            .all(|d| (DELAY_US_MIN..=2_000_000).contains(d)));
        // Uniform over 0..=2 s: about 99.5% are 10 ms or more.
        assert!(delays.len() > 980, "{}", delays.len());
    }
}
