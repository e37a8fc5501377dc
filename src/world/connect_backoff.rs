//! How TCPStore's client paces its retries of a refused connect: c10d's
//! `ExponentialBackoffWithJitter` with its defaults (500 ms, ×1.5 a try, ±50 %, at most
//! 60 s), drawn from the run's seed instead of `std::random_device`.
//!
//! The store's constructor retries until a try fails past its timeout (`deadline < now`,
//! checked after the try), so a connect to a port where nothing listens fails somewhat after
//! the timeout, not at it: measured on torch 2.15.0 (`conformance/measure_store.py`), 5.0 and
//! 6.9 s with a 4 s timeout, 13.2 and 16.2 s with 10 s.

use crate::sim_time::SimDuration;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// The first retry's mean delay.
const INITIAL_INTERVAL: SimDuration = SimDuration::from_ms(500);
/// Each retry's mean delay over the last's, as a fraction `NUM / DEN` (1.5).
const MULTIPLIER_NUM: u64 = 3;
const MULTIPLIER_DEN: u64 = 2;
/// The largest mean delay.
const MAX_INTERVAL: SimDuration = SimDuration::from_secs(60);
/// The draw's spread either side of the mean, as a share of it (±50 %).
const RANDOMIZATION_PERCENT: u64 = 50;

/// One connect's retry delays.
pub struct ConnectBackoff {
    interval: SimDuration,
    rng: ChaCha8Rng,
}

impl ConnectBackoff {
    pub fn new(rng: ChaCha8Rng) -> Self {
        ConnectBackoff {
            interval: INITIAL_INTERVAL,
            rng,
        }
    }

    /// The delay before the next try: uniform within ±50 % of the current interval, which
    /// then grows by half, up to a minute. c10d draws whole milliseconds.
    pub fn next(&mut self) -> SimDuration {
        let interval_ms = self.interval.as_ms();
        let spread_ms = interval_ms * RANDOMIZATION_PERCENT / 100;
        let delay_ms = self
            .rng
            .gen_range(interval_ms - spread_ms..=interval_ms + spread_ms);
        // The interval grows in whole microseconds, as the seeded runs always grew it.
        self.interval = self
            .interval
            .scaled_to_whole_us(MULTIPLIER_NUM, MULTIPLIER_DEN)
            .min(MAX_INTERVAL);
        SimDuration::from_ms(delay_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::rng::stream;

    #[test]
    fn delays_grow_by_half_within_their_spread_up_to_a_minute() {
        let mut backoff = ConnectBackoff::new(stream(7, "t"));
        let mut mean_us = INITIAL_INTERVAL.as_us();
        for _ in 0..30 {
            let delay_us = backoff.next().as_us();
            assert!(
                delay_us >= mean_us / 2 && delay_us <= mean_us * 3 / 2,
                "{delay_us}"
            );
            mean_us = (mean_us * 3 / 2).min(MAX_INTERVAL.as_us());
        }
        assert_eq!(mean_us, MAX_INTERVAL.as_us());
    }

    #[test]
    fn a_refused_connect_with_a_4_s_timeout_fails_between_4_and_10_s() {
        // The tries land at the running sums of the delays; the first past 4 s fails.
        for seed in 0..50 {
            let mut backoff = ConnectBackoff::new(stream(seed, "t"));
            let mut at_us = 0;
            while at_us <= 4_000_000 {
                at_us += backoff.next().as_us();
            }
            assert!(
                (4_000_000..10_000_000).contains(&at_us),
                "seed {seed}: {at_us}"
            );
        }
    }
}
