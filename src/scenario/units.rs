//! Quantities with units: durations, sizes and bandwidths, parsed exactly (no floating
//! point, so `"0.1s"` is exactly 100000 µs) and written back in the largest exact unit.

/// Duration units, in microseconds.
pub const DURATION_UNITS: &[(&str, u64)] = &[
    ("h", 3_600_000_000),
    ("m", 60_000_000),
    ("s", 1_000_000),
    ("ms", 1_000),
    ("us", 1),
    ("µs", 1),
];

/// Size units, in bytes: binary (`KiB`) and decimal (`KB`, SI) multiples.
pub const SIZE_UNITS: &[(&str, u64)] = &[
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
];

/// Bandwidth units, in bits per second (decimal multiples, as links are sold).
pub const BANDWIDTH_UNITS: &[(&str, u64)] = &[
    ("Tbps", 1_000_000_000_000),
    ("Gbps", 1_000_000_000),
    ("Mbps", 1_000_000),
    ("Kbps", 1_000),
    ("kbps", 1_000),
    ("bps", 1),
];

/// Most digits accepted on either side of the decimal point; more cannot be meant.
const DIGITS_MAX: usize = 18;

/// Parses a non-negative duration such as `"250ms"` or `"0.5s"` into microseconds.
pub fn parse_duration_us(text: &str) -> Result<u64, String> {
    parse_quantity(text, DURATION_UNITS, "duration", "microseconds")
}

/// Parses a signed duration such as `"-2s"` into microseconds.
pub fn parse_offset_us(text: &str) -> Result<i64, String> {
    let t = text.trim();
    let (negative, rest) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let magnitude = parse_quantity(rest, DURATION_UNITS, "duration", "microseconds")?;
    let magnitude = i64::try_from(magnitude).map_err(|_| format!("`{text}` is too large"))?;
    Ok(if negative { -magnitude } else { magnitude })
}

/// Parses a size such as `"1GiB"` or `"512MB"` into bytes.
pub fn parse_size_bytes(text: &str) -> Result<u64, String> {
    parse_quantity(text, SIZE_UNITS, "size", "bytes")
}

/// Parses a bandwidth such as `"100Gbps"` into bits per second.
pub fn parse_bandwidth_bits_per_sec(text: &str) -> Result<u64, String> {
    parse_quantity(text, BANDWIDTH_UNITS, "bandwidth", "bits per second")
}

/// Writes microseconds in the largest unit that holds them exactly.
pub fn format_duration_us(us: u64) -> String {
    format_quantity(us, &DURATION_UNITS[..5], "s")
}

/// Writes a signed offset in microseconds, `-` first when negative.
pub fn format_offset_us(us: i64) -> String {
    let magnitude = format_duration_us(us.unsigned_abs());
    if us < 0 {
        format!("-{magnitude}")
    } else {
        magnitude
    }
}

/// Writes bytes in the largest binary unit that holds them exactly.
pub fn format_size_bytes(bytes: u64) -> String {
    format_quantity(
        bytes,
        &[
            SIZE_UNITS[0],
            SIZE_UNITS[1],
            SIZE_UNITS[2],
            SIZE_UNITS[3],
            SIZE_UNITS[9],
        ],
        "B",
    )
}

/// Writes bits per second in the largest unit that holds them exactly.
pub fn format_bandwidth_bits_per_sec(bps: u64) -> String {
    let units = [
        BANDWIDTH_UNITS[0],
        BANDWIDTH_UNITS[1],
        BANDWIDTH_UNITS[2],
        BANDWIDTH_UNITS[3],
        BANDWIDTH_UNITS[5],
    ];
    format_quantity(bps, &units, "bps")
}

fn format_quantity(value: u64, units: &[(&str, u64)], zero_unit: &str) -> String {
    if value == 0 {
        return format!("0{zero_unit}");
    }
    for (name, factor) in units {
        if value.is_multiple_of(*factor) {
            return format!("{}{name}", value / factor);
        }
    }
    // The last unit has factor 1, so the loop always returns; this keeps the function total.
    format!("{value}{zero_unit}")
}

/// Parses `<digits>[.<digits>]<unit>`, exactly, with optional spaces around the number.
fn parse_quantity(
    text: &str,
    units: &[(&str, u64)],
    what: &str,
    base: &str,
) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = (&t[..split], t[split..].trim_start());
    let names: Vec<&str> = units.iter().map(|(n, _)| *n).collect();
    let expected = format!(
        "a {what} is a number and a unit ({}), like {}",
        names.join(", "),
        example(what)
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
    let whole_value: u128 = if whole.is_empty() {
        0
    } else {
        whole
            .parse()
            .map_err(|_| format!("`{text}` is not a number"))?
    };
    let frac_value: u128 = if frac.is_empty() {
        0
    } else {
        frac.parse()
            .map_err(|_| format!("`{text}` is not a number"))?
    };
    let scale = 10u128.pow(frac.len() as u32);
    let frac_scaled = frac_value * u128::from(factor);
    if !frac_scaled.is_multiple_of(scale) {
        return Err(format!("`{text}` is not a whole number of {base}"));
    }
    let total = whole_value * u128::from(factor) + frac_scaled / scale;
    u64::try_from(total).map_err(|_| format!("`{text}` is too large"))
}

fn example(what: &str) -> &'static str {
    match what {
        "duration" => "\"250ms\" or \"1.5s\"",
        "size" => "\"512MiB\" or \"1GiB\"",
        _ => "\"100Gbps\"",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_exactly() {
        assert_eq!(parse_duration_us("250ms"), Ok(250_000));
        assert_eq!(parse_duration_us("0.5s"), Ok(500_000));
        assert_eq!(parse_duration_us("0.1s"), Ok(100_000));
        assert_eq!(parse_duration_us("2h"), Ok(7_200_000_000));
        assert_eq!(parse_duration_us("5m"), Ok(300_000_000));
        assert_eq!(parse_duration_us("7us"), Ok(7));
        assert_eq!(parse_duration_us(".5ms"), Ok(500));
        assert!(parse_duration_us("1.5us")
            .unwrap_err()
            .contains("whole number"));
        assert!(parse_duration_us("5").unwrap_err().contains("no unit"));
        assert!(parse_duration_us("5 sec")
            .unwrap_err()
            .contains("not a duration unit"));
        assert!(parse_duration_us("-5s").is_err());
        assert!(parse_duration_us("1.2.3s").is_err());
        assert!(parse_duration_us(".s").is_err());
        assert!(parse_duration_us("99999999999999999999h").is_err());
        assert!(parse_duration_us("999999999999999999h")
            .unwrap_err()
            .contains("too large"));
    }

    #[test]
    fn offsets_are_signed() {
        assert_eq!(parse_offset_us("-2s"), Ok(-2_000_000));
        assert_eq!(parse_offset_us("+3ms"), Ok(3_000));
        assert_eq!(format_offset_us(-2_000_000), "-2s");
    }

    #[test]
    fn sizes_and_bandwidths() {
        assert_eq!(parse_size_bytes("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size_bytes("1.5KiB"), Ok(1536));
        assert_eq!(parse_size_bytes("2MB"), Ok(2_000_000));
        assert_eq!(parse_bandwidth_bits_per_sec("100Gbps"), Ok(100_000_000_000));
        assert_eq!(parse_bandwidth_bits_per_sec("800Mbps"), Ok(800_000_000));
        assert!(parse_bandwidth_bits_per_sec("1GB").is_err());
    }

    #[test]
    fn formatting_round_trips() {
        for us in [
            0,
            1,
            999,
            1_000,
            1_500,
            60_000_000,
            7_200_000_000,
            123_456_789,
        ] {
            assert_eq!(parse_duration_us(&format_duration_us(us)), Ok(us));
        }
        for b in [0, 1, 1023, 1 << 30, 3 << 20, 1_000_000] {
            assert_eq!(parse_size_bytes(&format_size_bytes(b)), Ok(b));
        }
        for bps in [0, 1, 100_000_000_000, 1_234] {
            assert_eq!(
                parse_bandwidth_bits_per_sec(&format_bandwidth_bits_per_sec(bps)),
                Ok(bps)
            );
        }
        assert_eq!(format_duration_us(7_200_000_000), "2h");
        assert_eq!(format_size_bytes(1 << 30), "1GiB");
    }
}
