//! torch's `cas_backoff_max_seconds`: the random wait after a state write that lost.
//!
//! torch 2.15's `_DistributedRendezvousOpExecutor.run` calls `_delay((0, max))` after a sync
//! whose compare-and-set did not land, and `_delay` skips waits under 10 ms. With many nodes
//! writing the whole state at once, the wait spreads their next attempts out.

use crate::sim_time::SimDuration;
use rand::Rng;

/// `_delay` ignores waits shorter than this.
const DELAY_MIN: SimDuration = SimDuration::from_ms(10);

/// How long to wait after a lost write: uniform in whole microseconds over `0..=max`, none
/// under 10 ms, and none at all (no draw) when `max` is 0, torch's default.
pub fn delay_after_lost_write(max: SimDuration, rng: &mut impl Rng) -> Option<SimDuration> {
    if max.is_zero() {
        return None;
    }
    let delay = SimDuration::from_us(rng.gen_range(0..=max.as_us()));
    (delay >= DELAY_MIN).then_some(delay)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn no_backoff_draws_nothing_and_short_waits_are_skipped() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let before = rng.clone();
        assert_eq!(delay_after_lost_write(SimDuration::ZERO, &mut rng), None);
        assert_eq!(rng, before, "torch's default draws nothing");
        let just_short = DELAY_MIN.saturating_sub(SimDuration::from_us(1));
        assert_eq!(delay_after_lost_write(just_short, &mut rng), None);
        let max = SimDuration::from_secs(2);
        let delays: Vec<SimDuration> = (0..1000)
            .filter_map(|_| delay_after_lost_write(max, &mut rng))
            .collect();
        assert!(delays.iter().all(|d| (DELAY_MIN..=max).contains(d)));
        // Uniform over 0..=2 s: about 99.5% are 10 ms or more.
        assert!(delays.len() > 980, "{}", delays.len());
    }
}
