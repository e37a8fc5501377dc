//! Simulated time as types: a moment on the run's clock ([`SimInstant`]), a span of it
//! ([`SimDuration`]) and deadlines on a node's own clock readings. Every conversion between
//! nanoseconds, microseconds and milliseconds is written here, and every sum saturates, so
//! no caller multiplies by 1 000 by hand or casts between signed and unsigned time.

/// A moment of the run: simulated nanoseconds since it began. Message latencies are drawn in
/// nanoseconds, so a moment computed ahead keeps them; the trace records microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimInstant {
    ns: u64,
}

/// A span of simulated time, in nanoseconds; sums saturate at about 584 years.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimDuration {
    ns: u64,
}

const NS_PER_US: u64 = 1_000;
const NS_PER_MS: u64 = 1_000_000;

impl SimInstant {
    /// The moment `ns` simulated nanoseconds after the start.
    pub const fn from_ns(ns: u64) -> Self {
        SimInstant { ns }
    }

    /// The moment `us` simulated microseconds after the start (saturating).
    pub const fn from_us(us: u64) -> Self {
        SimInstant {
            ns: us.saturating_mul(NS_PER_US),
        }
    }

    /// Nanoseconds since the start.
    pub const fn as_ns(self) -> u64 {
        self.ns
    }

    /// Whole microseconds since the start, the trace's unit (rounded down).
    pub const fn as_us(self) -> u64 {
        self.ns / NS_PER_US
    }

    /// The moment `span` later, saturating at the end of representable time.
    pub const fn after(self, span: SimDuration) -> Self {
        SimInstant {
            ns: self.ns.saturating_add(span.ns),
        }
    }

    /// The span from `earlier` to this moment; zero when `earlier` is not earlier.
    pub const fn since(self, earlier: SimInstant) -> SimDuration {
        SimDuration {
            ns: self.ns.saturating_sub(earlier.ns),
        }
    }
}

impl SimDuration {
    /// `us` microseconds (saturating).
    pub const fn from_us(us: u64) -> Self {
        SimDuration {
            ns: us.saturating_mul(NS_PER_US),
        }
    }

    /// `ms` milliseconds (saturating).
    pub const fn from_ms(ms: u64) -> Self {
        SimDuration {
            ns: ms.saturating_mul(NS_PER_MS),
        }
    }

    /// In nanoseconds.
    pub const fn as_ns(self) -> u64 {
        self.ns
    }

    /// In whole microseconds (rounded down).
    pub const fn as_us(self) -> u64 {
        self.ns / NS_PER_US
    }

    /// In whole milliseconds (rounded down): what torch's timeouts in `timedelta` become
    /// when c10d passes them as milliseconds.
    pub const fn as_ms(self) -> u64 {
        self.ns / NS_PER_MS
    }
}

/// A node's clock reading in microseconds (its monotonic or wall clock: signed, as Python's
/// `time.monotonic()` and epoch arithmetic are) for `elapsed` of the run plus `offset_us`.
pub fn clock_reading_us(offset_us: i64, elapsed: SimInstant) -> i64 {
    offset_us.saturating_add(clock_span_us(elapsed.as_us()))
}

/// A span of `span_us` microseconds as a difference of clock readings, saturating.
pub fn clock_span_us(span_us: u64) -> i64 {
    i64::try_from(span_us).unwrap_or(i64::MAX)
}

/// The reading of a node's clock `timeout_us` after `now_us`, saturating: a timeout of any
/// size makes a deadline that is never before now.
pub fn deadline_after_us(now_us: i64, timeout_us: u64) -> i64 {
    now_us.saturating_add(clock_span_us(timeout_us))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_convert_in_one_place() {
        let at = SimInstant::from_us(1_500);
        assert_eq!(at.as_ns(), 1_500_000);
        assert_eq!(SimInstant::from_ns(1_999).as_us(), 1);
        assert_eq!(SimDuration::from_ms(3).as_us(), 3_000);
        assert_eq!(SimDuration::from_us(2_500).as_ms(), 2);
        assert_eq!(at.after(SimDuration::from_us(500)).as_us(), 2_000);
    }

    #[test]
    fn sums_and_differences_saturate() {
        let end = SimInstant::from_us(u64::MAX);
        assert_eq!(end.as_ns(), u64::MAX);
        assert_eq!(end.after(SimDuration::from_ms(1)), end);
        assert_eq!(SimInstant::from_ns(0).since(end), SimDuration::from_us(0));
        assert_eq!(deadline_after_us(i64::MAX - 1, u64::MAX), i64::MAX);
        assert_eq!(deadline_after_us(-5, 10), 5);
        assert_eq!(clock_reading_us(7, SimInstant::from_us(3)), 10);
        assert_eq!(clock_reading_us(i64::MAX - 1, end), i64::MAX);
    }
}
