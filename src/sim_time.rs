//! Simulated time as types: a moment on the run's clock ([`SimInstant`]), a span of it
//! ([`SimDuration`]) and deadlines on a node's own clock readings. Every conversion between
//! nanoseconds, microseconds and milliseconds is written here, and every sum saturates, so
//! no caller multiplies by 1 000 by hand or casts between signed and unsigned time
//! (`tests/time_units.rs` holds the rest of `src/` to that).

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
const NS_PER_S: u64 = 1_000_000_000;
const US_PER_MS: i64 = 1_000;
const US_PER_S_F64: f64 = 1e6;
const MS_PER_S: u64 = 1_000;

impl SimInstant {
    /// The moment the run begins.
    pub const START: SimInstant = SimInstant { ns: 0 };

    /// The last representable moment, after every run: "never" for a window with no end.
    pub const END: SimInstant = SimInstant { ns: u64::MAX };

    /// The moment `span` after the start: a budget or a schedule read as a moment of the run.
    pub const fn from_start(span: SimDuration) -> Self {
        SimInstant { ns: span.ns }
    }

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

    /// This moment cut to the whole microsecond: as the trace stamps it.
    pub const fn cut_to_whole_us(self) -> Self {
        SimInstant::from_us(self.as_us())
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

    /// The span from the start to this moment.
    pub const fn since_start(self) -> SimDuration {
        SimDuration { ns: self.ns }
    }

    /// The moment `span` earlier, or the start when that is before it.
    pub const fn before(self, span: SimDuration) -> Self {
        SimInstant {
            ns: self.ns.saturating_sub(span.ns),
        }
    }
}

impl SimDuration {
    /// No time at all.
    pub const ZERO: SimDuration = SimDuration { ns: 0 };

    /// `ns` nanoseconds.
    pub const fn from_ns(ns: u64) -> Self {
        SimDuration { ns }
    }

    /// `us` microseconds (saturating).
    pub const fn from_us(us: u64) -> Self {
        SimDuration {
            ns: us.saturating_mul(NS_PER_US),
        }
    }

    /// `s` seconds (saturating).
    pub const fn from_secs(s: u64) -> Self {
        SimDuration {
            ns: s.saturating_mul(NS_PER_S),
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

    /// In milliseconds, rounded to the nearest.
    pub const fn as_ms_rounded(self) -> u64 {
        (self.ns + NS_PER_MS / 2) / NS_PER_MS
    }

    /// Seconds, for reports and rates.
    pub fn as_secs_f64(self) -> f64 {
        self.ns as f64 / NS_PER_S as f64
    }

    /// Whole seconds (rounded down).
    pub const fn as_secs(self) -> u64 {
        self.ns / NS_PER_S
    }

    /// The milliseconds past the last whole second (rounded down).
    pub const fn subsec_ms(self) -> u64 {
        self.ns % NS_PER_S / NS_PER_MS
    }

    /// The microseconds past the last whole second (rounded down).
    pub const fn subsec_us(self) -> u64 {
        self.ns % NS_PER_S / NS_PER_US
    }

    /// This span rounded down to a whole number of `unit`s (a zero unit is no rounding).
    pub const fn floor_to(self, unit: SimDuration) -> Self {
        if unit.ns == 0 {
            return self;
        }
        SimDuration {
            ns: self.ns / unit.ns * unit.ns,
        }
    }

    /// This span rounded up to a whole number of `unit`s (saturating; a zero unit is no
    /// rounding).
    pub const fn ceil_to(self, unit: SimDuration) -> Self {
        if unit.ns == 0 {
            return self;
        }
        SimDuration {
            ns: self.ns.div_ceil(unit.ns).saturating_mul(unit.ns),
        }
    }

    /// Whether the span is empty.
    pub const fn is_zero(self) -> bool {
        self.ns == 0
    }

    /// The two spans one after the other, saturating.
    pub const fn saturating_add(self, other: SimDuration) -> Self {
        SimDuration {
            ns: self.ns.saturating_add(other.ns),
        }
    }

    /// This span less `other`, or zero when `other` is longer.
    pub const fn saturating_sub(self, other: SimDuration) -> Self {
        SimDuration {
            ns: self.ns.saturating_sub(other.ns),
        }
    }

    /// This span times `num / den` (`den` at least 1), rounded down to whole microseconds,
    /// saturating: a schedule that grows by a fraction in whole microseconds.
    pub const fn scaled_to_whole_us(self, num: u64, den: u64) -> Self {
        let us = self.as_us().saturating_mul(num) / den;
        SimDuration::from_us(us)
    }

    /// Fractional microseconds rounded to the nearest whole one: where a float cost model
    /// (a batch's compute, a ring's transfers) becomes a span. A negative count is no time;
    /// one past the range, or not a number, the longest span.
    pub fn from_us_f64_rounded(us: f64) -> Self {
        let rounded = us.round();
        let whole_us = if rounded.is_finite() {
            // `as` saturates: a negative count is 0, one past the range `u64::MAX`.
            rounded.min(u64::MAX as f64) as u64
        } else {
            u64::MAX
        };
        SimDuration::from_us(whole_us)
    }

    /// The time `bits` take at `bits_per_sec` (at least 1), rounded up to whole microseconds
    /// and saturating: a copy at a bandwidth, in the reader's whole-microsecond clock.
    pub fn transfer_whole_us(bits: u128, bits_per_sec: u64) -> Self {
        let us = bits
            .saturating_mul(u128::from(NS_PER_S / NS_PER_US))
            .div_ceil(u128::from(bits_per_sec.max(1)));
        SimDuration::from_us(u64::try_from(us).unwrap_or(u64::MAX))
    }

    /// This span's whole microseconds stretched by `factor` (at least 1), rounded up and
    /// saturating: a copy slowed down by a slow GPU.
    pub fn stretched_whole_us(self, factor: f64) -> Self {
        let scaled = (self.as_us() as f64 * factor.max(1.0)).ceil();
        if scaled >= u64::MAX as f64 {
            SimDuration::from_us(u64::MAX)
        } else {
            SimDuration::from_us(scaled as u64)
        }
    }

    /// `n` of this span one after another, saturating.
    pub const fn saturating_mul(self, n: u64) -> Self {
        SimDuration {
            ns: self.ns.saturating_mul(n),
        }
    }
}

/// A span written as whole microseconds, the unit of the parity vectors' settings:
/// `#[serde(rename = "join_timeout_us", with = "crate::sim_time::span_whole_us")]` on a
/// [`SimDuration`] field keeps the serialization a plain `u64` of microseconds.
pub mod span_whole_us {
    use super::SimDuration;
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes `span` as its whole microseconds (rounded down).
    pub fn serialize<S: Serializer>(span: &SimDuration, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(span.as_us())
    }

    /// Reads whole microseconds back as a span (saturating).
    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<SimDuration, D::Error> {
        u64::deserialize(deserializer).map(SimDuration::from_us)
    }
}

/// A moment written as whole microseconds since the start, the unit of the trace and the
/// JSON report: `#[serde(rename = "at_us", with = "crate::sim_time::whole_us")]` on a
/// [`SimInstant`] field keeps the serialization a plain `u64` of microseconds.
pub mod whole_us {
    use super::SimInstant;
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes `at` as its whole microseconds (rounded down).
    pub fn serialize<S: Serializer>(at: &SimInstant, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(at.as_us())
    }

    /// Reads whole microseconds back as a moment (saturating).
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<SimInstant, D::Error> {
        u64::deserialize(deserializer).map(SimInstant::from_us)
    }
}

/// Nanoseconds `bits` take on a link of `bits_per_sec` (at least 1), rounded up so a message
/// always takes some time; `u64::MAX` past the range.
pub fn transfer_ns(bits: u128, bits_per_sec: u64) -> u64 {
    // Every message but a huge one (over 2 GB) fits 64 bits scaled to nanoseconds, where the
    // division is a machine instruction rather than a 128-bit routine: two per message.
    let narrow = u64::try_from(bits)
        .ok()
        .and_then(|bits| bits.checked_mul(NS_PER_S));
    if let Some(scaled) = narrow {
        return scaled.div_ceil(bits_per_sec);
    }
    let ns = bits
        .saturating_mul(u128::from(NS_PER_S))
        .div_ceil(u128::from(bits_per_sec));
    u64::try_from(ns).unwrap_or(u64::MAX)
}

/// Seconds as fractional microseconds: a float cost model (bits over a bandwidth) adds its
/// terms in microseconds before it rounds once to a span.
pub fn secs_f64_as_us_f64(secs: f64) -> f64 {
    secs * US_PER_S_F64
}

/// A clock reading in microseconds as seconds, as Python's `time.monotonic()` gives them.
pub fn reading_as_secs_f64(reading_us: i64) -> f64 {
    reading_us as f64 / US_PER_S_F64
}

/// A clock offset of `ms` milliseconds as signed microseconds, the unit of clock readings
/// (saturating).
pub const fn offset_us_of_ms(ms: i64) -> i64 {
    ms.saturating_mul(US_PER_MS)
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

/// `span` as a difference of clock readings in whole microseconds, saturating.
pub fn clock_span(span: SimDuration) -> i64 {
    clock_span_us(span.as_us())
}

/// The span from clock reading `earlier_us` to `later_us`, whole microseconds; zero when
/// `later_us` is not later.
pub fn span_between_readings(earlier_us: i64, later_us: i64) -> SimDuration {
    let span_us = u64::try_from(later_us.saturating_sub(earlier_us)).unwrap_or(0);
    SimDuration::from_us(span_us)
}

/// The reading of a node's clock `timeout` after `now_us`, saturating: a timeout of any
/// size makes a deadline that is never before now.
pub fn deadline_after(now_us: i64, timeout: SimDuration) -> i64 {
    now_us.saturating_add(clock_span(timeout))
}

/// The reading of a node's clock `span` before `now_us`, saturating: the horizon an age is
/// measured against (a heartbeat stamped at or before it is `span` old).
pub fn reading_before(now_us: i64, span: SimDuration) -> i64 {
    now_us.saturating_sub(clock_span(span))
}

/// A span as a page writes it for people: to the millisecond, in the largest unit that
/// keeps it readable (`350 ms`, `42.3 s`, `12.5 min`, `1.24 h`); exact figures stay in
/// the reports.
pub fn brief(span: SimDuration) -> String {
    const S_PER_MIN: f64 = 60.0;
    const S_PER_H: f64 = 3_600.0;
    let secs = span.as_secs_f64();
    if span.ns < NS_PER_S {
        let ms = span.ns as f64 / NS_PER_MS as f64;
        return format!("{} ms", trim_decimals(&format!("{ms:.1}")));
    }
    let (value, unit) = if secs < 2.0 * S_PER_MIN {
        (secs, "s")
    } else if secs < 2.0 * S_PER_H {
        (secs / S_PER_MIN, "min")
    } else {
        (secs / S_PER_H, "h")
    };
    let digits = if value < 10.0 { 2 } else { 1 };
    format!("{} {unit}", trim_decimals(&format!("{value:.digits$}")))
}

/// Seconds to the millisecond (`759.62 s`): how a page writes a moment or a span that
/// the reports give to the microsecond.
pub fn secs_to_ms(us: u64) -> String {
    let ms = SimDuration::from_us(us).as_ms_rounded();
    let text = format!("{}.{:03}", ms / MS_PER_S, ms % MS_PER_S);
    format!("{} s", trim_decimals(&text))
}

/// `12.500` → `12.5`, `12.000` → `12`.
pub fn trim_decimals(text: &str) -> String {
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        text.to_owned()
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn pages_write_spans_briefly_and_moments_to_the_millisecond() {
        assert_eq!(brief(SimDuration::from_us(507_300)), "507.3 ms");
        assert_eq!(brief(SimDuration::from_us(42_600_000)), "42.6 s");
        assert_eq!(brief(SimDuration::from_secs(600)), "10 min");
        assert_eq!(brief(SimDuration::from_secs(209)), "3.48 min");
        assert_eq!(brief(SimDuration::from_secs(89_254)), "24.8 h");
        assert_eq!(secs_to_ms(759_620_094), "759.62 s");
        assert_eq!(secs_to_ms(40_000_000), "40 s");
        assert_eq!(secs_to_ms(1_000_400), "1 s");
    }

    use super::*;

    #[test]
    fn a_copy_at_a_bandwidth_takes_whole_microseconds_rounded_up() {
        let us = |n| SimDuration::from_us(n);
        assert_eq!(SimDuration::transfer_whole_us(8_000, 8_000_000_000), us(1));
        assert_eq!(SimDuration::transfer_whole_us(8_001, 8_000_000), us(1_001));
        assert_eq!(
            SimDuration::transfer_whole_us(8, 0),
            us(8_000_000),
            "at least 1 bps"
        );
        assert_eq!(us(10).stretched_whole_us(1.25), us(13), "rounded up");
        assert_eq!(us(10).stretched_whole_us(0.5), us(10), "never faster");
        assert_eq!(
            us(10).stretched_whole_us(f64::MAX),
            us(u64::MAX),
            "saturates"
        );
    }

    #[test]
    fn units_convert_in_one_place() {
        let at = SimInstant::from_us(1_500);
        assert_eq!(at.as_ns(), 1_500_000);
        assert_eq!(SimInstant::from_ns(1_999).as_us(), 1);
        assert_eq!(
            SimInstant::from_ns(1_999).cut_to_whole_us(),
            SimInstant::from_us(1)
        );
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
        let us = SimDuration::from_us;
        assert_eq!(deadline_after(i64::MAX - 1, us(u64::MAX)), i64::MAX);
        assert_eq!(deadline_after(-5, us(10)), 5);
        assert_eq!(reading_before(i64::MIN + 1, us(10)), i64::MIN);
        assert_eq!(reading_before(5, us(10)), -5);
        assert_eq!(span_between_readings(-5, 5), us(10));
        assert_eq!(span_between_readings(5, -5), SimDuration::ZERO);
        assert_eq!(clock_reading_us(7, SimInstant::from_us(3)), 10);
        assert_eq!(clock_reading_us(i64::MAX - 1, end), i64::MAX);
    }

    #[test]
    fn spans_scale_round_and_split() {
        let s = SimDuration::from_secs;
        assert_eq!(s(3).saturating_mul(4), s(12));
        assert_eq!(
            SimDuration::from_ns(u64::MAX).saturating_mul(2).as_ns(),
            u64::MAX
        );
        assert_eq!(s(1).saturating_sub(s(2)), SimDuration::ZERO);
        assert_eq!(SimDuration::from_ms(61_500).ceil_to(s(60)), s(120));
        assert_eq!(SimDuration::from_ms(61_500).floor_to(s(60)), s(60));
        assert_eq!(s(7).ceil_to(SimDuration::ZERO), s(7));
        let span = SimDuration::from_us(12_345_678);
        assert_eq!(
            (span.as_secs(), span.subsec_ms(), span.subsec_us()),
            (12, 345, 345_678)
        );
        assert_eq!(SimDuration::from_ms(1_500).as_secs_f64(), 1.5);
        assert_eq!(
            SimDuration::from_us_f64_rounded(2.5),
            SimDuration::from_us(3)
        );
        assert_eq!(SimDuration::from_us_f64_rounded(-4.0), SimDuration::ZERO);
        assert_eq!(SimDuration::from_us_f64_rounded(f64::NAN).as_ns(), u64::MAX);
        assert_eq!(SimDuration::from_us_f64_rounded(1e300).as_ns(), u64::MAX);
        assert_eq!(SimInstant::from_us(5).before(s(1)), SimInstant::from_ns(0));
        assert_eq!(offset_us_of_ms(-20), -20_000);
        assert_eq!(transfer_ns(8, 8_000_000_000), 1);
        assert_eq!(transfer_ns(9, 8_000_000_000), 2);
    }

    proptest::proptest! {
        /// The 64-bit path gives the 128-bit result, on each side of where it stops.
        #[test]
        fn transfer_time_is_the_wide_quotient_rounded_up(
            offset in -1_000i128..1_000,
            small in 0u128..1 << 40,
            bits_per_sec in 1u64..u64::MAX,
        ) {
            let wide = |bits: u128| {
                let ns = (bits * u128::from(NS_PER_S)).div_ceil(u128::from(bits_per_sec));
                u64::try_from(ns).unwrap_or(u64::MAX)
            };
            let edge = i128::from(u64::MAX / NS_PER_S);
            for bits in [small, (edge + offset) as u128] {
                proptest::prop_assert_eq!(transfer_ns(bits, bits_per_sec), wide(bits));
            }
        }
    }

    #[test]
    fn a_moment_serializes_as_whole_microseconds() {
        #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
        struct Stamped {
            #[serde(rename = "at_us", with = "whole_us")]
            at: SimInstant,
        }
        let stamped = Stamped {
            at: SimInstant::from_ns(2_500_999),
        };
        let text = serde_json::to_string(&stamped).unwrap();
        assert_eq!(text, r#"{"at_us":2500}"#);
        let back: Stamped = serde_json::from_str(&text).unwrap();
        assert_eq!(back.at, SimInstant::from_us(2_500));
    }
}
