//! Quantities with units as serde newtypes: durations, clock offsets, sizes and bandwidths
//! read from the strings the scenario format documents, exactly (no floating point, so
//! `"0.1s"` is exactly 100000 µs), and written back in the largest exact unit.

use std::fmt;
use std::marker::PhantomData;
use std::str::FromStr;

/// How one kind of quantity is spelled: the units it reads, the units it writes (largest
/// first, ending with the base unit), and the words its error messages use.
struct Grammar {
    what: &'static str,
    base: &'static str,
    /// Every unit accepted on input, with its factor to the base unit.
    units: &'static [(&'static str, u64)],
    /// The units output uses, largest first; the last is the base unit.
    written: &'static [&'static str],
    /// How zero is written.
    zero: &'static str,
    example: &'static str,
    /// Whether parts in falling units add up, as `"1h5m"` or `"10m30s"`.
    compound: bool,
}

/// The longest quantity string read; anything longer cannot be meant.
const TEXT_CHARS_MAX: usize = 64;

const DURATION: Grammar = Grammar {
    what: "duration",
    base: "microseconds",
    units: &[
        ("h", 3_600_000_000),
        ("m", 60_000_000),
        ("s", 1_000_000),
        ("ms", 1_000),
        ("us", 1),
        ("µs", 1),
    ],
    written: &["h", "m", "s", "ms", "us"],
    zero: "0s",
    example: "\"250ms\", \"1.5s\" or \"10m30s\"",
    compound: true,
};

/// Sizes read binary (`KiB`) and decimal (`KB`, SI) multiples and are written in binary ones.
const SIZE: Grammar = Grammar {
    what: "size",
    base: "bytes",
    units: &[
        ("TiB", 1 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
        ("TB", 1_000_000_000_000),
        ("GB", 1_000_000_000),
        ("MB", 1_000_000),
        ("KB", 1_000),
        ("kB", 1_000),
        ("B", 1),
    ],
    written: &["TiB", "GiB", "MiB", "KiB", "B"],
    zero: "0B",
    example: "\"512MiB\" or \"1GiB\"",
    compound: false,
};

/// Bandwidths are decimal multiples of bits per second, as links are sold.
const BANDWIDTH: Grammar = Grammar {
    what: "bandwidth",
    base: "bits per second",
    units: &[
        ("Tbps", 1_000_000_000_000),
        ("Gbps", 1_000_000_000),
        ("Mbps", 1_000_000),
        ("Kbps", 1_000),
        ("kbps", 1_000),
        ("bps", 1),
    ],
    written: &["Tbps", "Gbps", "Mbps", "Kbps", "bps"],
    zero: "0bps",
    example: "\"100Gbps\"",
    compound: false,
};

/// Most digits accepted on either side of the decimal point; more cannot be meant.
const DIGITS_MAX: usize = 18;

/// A non-negative quantity in its base unit, read and written with one `Grammar`.
macro_rules! unsigned_quantity {
    ($(#[$doc:meta])* $name:ident, $grammar:ident, $from:ident, $get:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
        pub struct $name(u64);

        impl $name {
            pub const fn $from(value: u64) -> Self {
                Self(value)
            }

            pub const fn $get(self) -> u64 {
                self.0
            }
        }

        impl FromStr for $name {
            type Err = String;

            fn from_str(text: &str) -> Result<Self, String> {
                parse_compound(text, &$grammar).map(Self)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write_quantity(f, self.0, &$grammar)
            }
        }

        impl Quantity for $name {
            fn from_base(value: u64) -> Self {
                Self(value)
            }

            fn base(self) -> u64 {
                self.0
            }
        }
    };
}

unsigned_quantity!(
    /// A duration such as `"250ms"` or `"0.5s"`, in microseconds.
    Duration,
    DURATION,
    from_us,
    us
);

impl Duration {
    /// The duration as a simulated span.
    pub const fn span(self) -> crate::sim_time::SimDuration {
        crate::sim_time::SimDuration::from_us(self.0)
    }

    /// A simulated span as a duration of the format, in whole microseconds.
    pub const fn of_span(span: crate::sim_time::SimDuration) -> Self {
        Self(span.as_us())
    }
}

unsigned_quantity!(
    /// A size such as `"1GiB"` or `"512MB"`, in bytes.
    Size,
    SIZE,
    from_bytes,
    bytes
);

unsigned_quantity!(
    /// A bandwidth such as `"100Gbps"`, in bits per second.
    Bandwidth,
    BANDWIDTH,
    from_bits_per_sec,
    bits_per_sec
);

/// A signed duration such as `"-2s"` or `"+3ms"` (a clock offset), in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Offset(i64);

impl Offset {
    pub const fn from_us(us: i64) -> Self {
        Self(us)
    }

    pub const fn us(self) -> i64 {
        self.0
    }
}

impl FromStr for Offset {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let t = text.trim();
        let (negative, rest) = match t.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, t.strip_prefix('+').unwrap_or(t)),
        };
        let magnitude = parse_compound(rest, &DURATION)?;
        let magnitude = i64::try_from(magnitude).map_err(|_| format!("`{text}` is too large"))?;
        Ok(Self(if negative { -magnitude } else { magnitude }))
    }
}

/// `-` first when negative.
impl fmt::Display for Offset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 < 0 {
            f.write_str("-")?;
        }
        write_quantity(f, self.0.unsigned_abs(), &DURATION)
    }
}

/// A non-negative quantity in its base unit (µs, bytes, bits per second), so one range
/// check serves them all.
pub trait Quantity: Copy + Ord + fmt::Display {
    fn from_base(value: u64) -> Self;
    fn base(self) -> u64;
}

/// Serde reads and writes each quantity as its string form; `expecting` is what a value of
/// another type (a bare number) is told was wanted.
macro_rules! serde_as_text {
    ($($name:ident: $expecting:literal),*) => {$(
        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                deserializer.deserialize_str(TextVisitor($expecting, PhantomData))
            }
        }
    )*};
}

serde_as_text!(
    Duration: "a duration string, like \"250ms\" or \"1.5s\"",
    Offset: "a signed duration string, like \"-2s\" or \"3ms\"",
    Size: "a size string, like \"512MiB\" or \"1GiB\"",
    Bandwidth: "a bandwidth string, like \"100Gbps\""
);

/// Parses a string with `T::from_str`; its message becomes the serde error, which the
/// TOML deserializer places at the value's span.
struct TextVisitor<T>(&'static str, PhantomData<T>);

impl<T: FromStr<Err = String>> serde::de::Visitor<'_> for TextVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.0)
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<T, E> {
        text.parse().map_err(E::custom)
    }
}

/// Writes `value` in the largest written unit that holds it exactly.
fn write_quantity(f: &mut fmt::Formatter<'_>, value: u64, grammar: &Grammar) -> fmt::Result {
    if value == 0 {
        return f.write_str(grammar.zero);
    }
    let factor = |name: &str| {
        grammar
            .units
            .iter()
            .find(|u| u.0 == name)
            .map_or(1, |u| u.1)
    };
    // The last written unit is the base unit, which holds every value exactly.
    let name = grammar
        .written
        .iter()
        .find(|name| value.is_multiple_of(factor(name)))
        .map_or("", |name| *name);
    write!(f, "{}{name}", value / factor(name))
}

/// Parses one quantity, or for a compound grammar parts in strictly falling units that add
/// up (`"1h5m"`, `"10m30s"`, `"2m 0.5s"`), each unit at most once, a fraction only in the
/// last part, the sum bounded like a single value.
fn parse_compound(text: &str, grammar: &Grammar) -> Result<u64, String> {
    if text.chars().count() > TEXT_CHARS_MAX {
        return Err(format!(
            "a {} is at most {TEXT_CHARS_MAX} characters long",
            grammar.what
        ));
    }
    let parts = split_parts(text.trim());
    if !grammar.compound || parts.len() < 2 {
        return parse_quantity(text, grammar).map(|(value, _)| value);
    }
    let mut total: u64 = 0;
    let mut last_factor = u64::MAX;
    for (i, part) in parts.iter().enumerate() {
        let (value, factor) =
            parse_quantity(part, grammar).map_err(|e| format!("in `{}`: {e}", text.trim()))?;
        if factor >= last_factor {
            return Err(format!(
                "`{}`: the parts of a {} go from larger units to smaller, each once, like {}",
                text.trim(),
                grammar.what,
                grammar.example
            ));
        }
        if part.contains('.') && i + 1 < parts.len() {
            return Err(format!(
                "`{}`: only the last part of a {} may have a fraction",
                text.trim(),
                grammar.what
            ));
        }
        last_factor = factor;
        total = total
            .checked_add(value)
            .ok_or_else(|| format!("`{text}` is too large"))?;
    }
    Ok(total)
}

/// Cuts `"10m30s"` into `["10m", "30s"]`: a new part starts where a number follows a unit.
fn split_parts(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut start, mut in_unit) = (0, false);
    for (i, c) in text.char_indices() {
        let numeric = c.is_ascii_digit() || c == '.';
        if numeric && in_unit {
            parts.push(text[start..i].trim());
            start = i;
        }
        if !c.is_whitespace() {
            in_unit = !numeric;
        }
    }
    parts.push(text[start..].trim());
    parts
}

/// Parses `<digits>[.<digits>]<unit>`, exactly, with optional spaces around the number;
/// gives the value in the base unit and the unit's factor.
fn parse_quantity(text: &str, grammar: &Grammar) -> Result<(u64, u64), String> {
    let Grammar {
        what,
        base,
        units,
        example,
        ..
    } = grammar;
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = (&t[..split], t[split..].trim_start());
    let names: Vec<&str> = units.iter().map(|(n, _)| *n).collect();
    let expected = format!(
        "a {what} is a number and a unit ({}), like {example}",
        names.join(", ")
    );
    if number.is_empty() {
        return Err(format!("`{text}` is not a {what}: {expected}"));
    }
    let Some(&(_, factor)) = units.iter().find(|(n, _)| *n == unit) else {
        return Err(if unit.is_empty() {
            format!("`{text}` has no unit: {expected}")
        } else {
            format!("`{unit}` is not a {what} unit: {expected}")
        });
    };
    let (whole, frac) = match number.split_once('.') {
        Some((w, f)) => (w, f),
        None => (number, ""),
    };
    let bad_number = (whole.is_empty() && frac.is_empty()) || frac.contains('.');
    if bad_number {
        return Err(format!("`{text}` is not a {what}: {expected}"));
    }
    if whole.len() > DIGITS_MAX || frac.len() > DIGITS_MAX {
        return Err(format!("`{text}` has too many digits"));
    }
    let digits = |d: &str| -> Result<u128, String> {
        if d.is_empty() {
            return Ok(0);
        }
        d.parse().map_err(|_| format!("`{text}` is not a number"))
    };
    let (whole_value, frac_value) = (digits(whole)?, digits(frac)?);
    let scale = 10u128.pow(frac.len() as u32);
    let frac_scaled = frac_value * u128::from(factor);
    if !frac_scaled.is_multiple_of(scale) {
        return Err(format!("`{text}` is not a whole number of {base}"));
    }
    let total = whole_value * u128::from(factor) + frac_scaled / scale;
    let value = u64::try_from(total).map_err(|_| format!("`{text}` is too large"))?;
    Ok((value, factor))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(text: &str) -> Result<u64, String> {
        text.parse::<Duration>().map(Duration::us)
    }

    #[test]
    fn durations_parse_exactly() {
        assert_eq!(us("250ms"), Ok(250_000));
        assert_eq!(us("0.5s"), Ok(500_000));
        assert_eq!(us("0.1s"), Ok(100_000));
        assert_eq!(us("2h"), Ok(7_200_000_000));
        assert_eq!(us("5m"), Ok(300_000_000));
        assert_eq!(us("7us"), Ok(7));
        assert_eq!(us("7µs"), Ok(7));
        assert_eq!(us(" 3 ms "), Ok(3_000));
        assert_eq!(us(".5ms"), Ok(500));
        assert!(us("1.5us").unwrap_err().contains("whole number"));
        assert!(us("5").unwrap_err().contains("no unit"));
        assert!(us("5 sec").unwrap_err().contains("not a duration unit"));
        assert!(us("-5s").is_err());
        assert!(us("1.2.3s").is_err());
        assert!(us(".s").is_err());
        assert!(us("").is_err());
        assert!(us("99999999999999999999h")
            .unwrap_err()
            .contains("too many digits"));
        assert!(us("999999999999999999h").unwrap_err().contains("too large"));
    }

    #[test]
    fn durations_add_up_parts_in_falling_units() {
        assert_eq!(us("10m30s"), Ok(630_000_000));
        assert_eq!(us("1h5m"), Ok(3_900_000_000));
        assert_eq!(us("1h 5m 2s"), Ok(3_902_000_000));
        assert_eq!(us("2m0.5s"), Ok(120_500_000));
        assert_eq!(us("1s500ms"), Ok(1_500_000));
        assert!(us("30s10m")
            .unwrap_err()
            .contains("from larger units to smaller"));
        assert!(us("1m1m")
            .unwrap_err()
            .contains("from larger units to smaller"));
        assert!(us("1.5m30s").unwrap_err().contains("only the last part"));
        assert!(us("10m30x")
            .unwrap_err()
            .contains("`x` is not a duration unit"));
        assert!(us("10m30").unwrap_err().contains("in `10m30`"));
        assert!(us(&"1s".repeat(40))
            .unwrap_err()
            .contains("at most 64 characters"));
        assert!(us("5000000h5000000h").is_err());
        let big = format!("{}h2m", u64::MAX / 3_600_000_000);
        assert!(us(&big).unwrap_err().contains("too large"), "{big}");
        assert_eq!("-1m30s".parse::<Offset>().map(Offset::us), Ok(-90_000_000));
        // Sizes and bandwidths are one number and one unit.
        assert!("1GiB512MiB".parse::<Size>().is_err());
    }

    #[test]
    fn offsets_are_signed() {
        let offset = |text: &str| text.parse::<Offset>().map(Offset::us);
        assert_eq!(offset("-2s"), Ok(-2_000_000));
        assert_eq!(offset("+3ms"), Ok(3_000));
        assert_eq!(offset("3ms"), Ok(3_000));
        assert!(offset("--1s").is_err());
        assert!(offset("-9999999999999h").unwrap_err().contains("too large"));
        assert_eq!(Offset::from_us(-2_000_000).to_string(), "-2s");
        assert_eq!(Offset::from_us(1_500).to_string(), "1500us");
    }

    #[test]
    fn sizes_and_bandwidths() {
        let bytes = |text: &str| text.parse::<Size>().map(Size::bytes);
        let bps = |text: &str| text.parse::<Bandwidth>().map(Bandwidth::bits_per_sec);
        assert_eq!(bytes("1GiB"), Ok(1 << 30));
        assert_eq!(bytes("1.5KiB"), Ok(1536));
        assert_eq!(bytes("2MB"), Ok(2_000_000));
        assert_eq!(bytes("3kB"), Ok(3_000));
        assert_eq!(bps("100Gbps"), Ok(100_000_000_000));
        assert_eq!(bps("800Mbps"), Ok(800_000_000));
        assert!(bps("1GB").unwrap_err().contains("not a bandwidth unit"));
        assert!(bytes("1Gbps").unwrap_err().contains("not a size unit"));
    }

    #[test]
    fn writing_uses_the_largest_exact_unit_and_round_trips() {
        for value in [
            0,
            1,
            999,
            1_000,
            1_500,
            60_000_000,
            7_200_000_000,
            123_456_789,
        ] {
            let d = Duration::from_us(value);
            assert_eq!(d.to_string().parse(), Ok(d));
        }
        for value in [0, 1, 1023, 1 << 30, 3 << 20, 1_000_000] {
            let s = Size::from_bytes(value);
            assert_eq!(s.to_string().parse(), Ok(s));
        }
        for value in [0, 1, 100_000_000_000, 1_234] {
            let b = Bandwidth::from_bits_per_sec(value);
            assert_eq!(b.to_string().parse(), Ok(b));
        }
        assert_eq!(Duration::from_us(7_200_000_000).to_string(), "2h");
        assert_eq!(Duration::from_us(0).to_string(), "0s");
        assert_eq!(Duration::from_us(1_500).to_string(), "1500us");
        assert_eq!(Size::from_bytes(1 << 30).to_string(), "1GiB");
        assert_eq!(Size::from_bytes(1_000_000).to_string(), "1000000B");
        assert_eq!(Size::from_bytes(0).to_string(), "0B");
        assert_eq!(Bandwidth::from_bits_per_sec(0).to_string(), "0bps");
        assert_eq!(Bandwidth::from_bits_per_sec(1_000).to_string(), "1Kbps");
    }

    #[derive(Debug, PartialEq, serde::Deserialize, serde::Serialize)]
    struct Table {
        d: Duration,
        o: Offset,
        s: Size,
        b: Bandwidth,
    }

    #[test]
    fn serde_reads_and_writes_the_string_form() {
        let text = "d = \"0.5s\"\no = \"-90s\"\ns = \"2048KiB\"\nb = \"1000Mbps\"\n";
        let t: Table = toml::from_str(text).unwrap();
        assert_eq!(
            t,
            Table {
                d: Duration::from_us(500_000),
                o: Offset::from_us(-90_000_000),
                s: Size::from_bytes(2 << 20),
                b: Bandwidth::from_bits_per_sec(1_000_000_000),
            }
        );
        let written = toml::to_string(&t).unwrap();
        assert_eq!(
            written,
            "d = \"500ms\"\no = \"-90s\"\ns = \"2MiB\"\nb = \"1Gbps\"\n"
        );
        let bad = toml::from_str::<Table>(&text.replace("0.5s", "5")).unwrap_err();
        assert!(bad.message().starts_with("`5` has no unit"), "{bad}");
        assert_eq!(bad.span(), Some(4..7));
        let bad = toml::from_str::<Table>(&text.replace("\"0.5s\"", "5")).unwrap_err();
        assert_eq!(
            bad.message(),
            "invalid type: integer `5`, expected a duration string, like \"250ms\" or \"1.5s\""
        );
    }
}
