//! Checks shared by every section: a located `Issue`, required keys, ranges, durations,
//! sizes, probabilities and node names.

use super::limits;
use super::locate::FieldPath;
use super::node::{NodeIndex, NodeNameError};
use super::units;
use std::fmt::Display;

/// A validation failure at a field path; `parse` turns it into a located `ScenarioError`.
#[derive(Debug, Clone, PartialEq)]
pub struct Issue {
    pub path: FieldPath,
    pub message: String,
}

/// The result of a check.
pub type Check<T> = Result<T, Issue>;

/// An issue at `path`.
pub fn issue(path: &FieldPath, message: impl Into<String>) -> Issue {
    Issue {
        path: path.clone(),
        message: message.into(),
    }
}

/// A key that must be present; the error points at the enclosing table.
pub fn required<T: Clone>(path: &FieldPath, value: &Option<T>) -> Check<T> {
    value.clone().ok_or_else(|| issue(path, "is required"))
}

/// `value` within `min..=max`; the message says which side is broken.
pub fn in_range<T: PartialOrd + Display + Copy>(
    path: &FieldPath,
    value: T,
    min: T,
    max: T,
) -> Check<T> {
    if value < min {
        return Err(issue(path, format!("must be at least {min} (got {value})")));
    }
    if value > max {
        return Err(issue(path, format!("must be at most {max} (got {value})")));
    }
    Ok(value)
}

/// A finite float within `min..=max`.
pub fn float_in(path: &FieldPath, value: f64, min: f64, max: f64) -> Check<f64> {
    if !value.is_finite() {
        return Err(issue(
            path,
            format!("must be a finite number (got {value})"),
        ));
    }
    in_range(path, value, min, max)
}

/// A probability: a finite number in [0, 1].
pub fn probability(path: &FieldPath, value: f64) -> Check<f64> {
    float_in(path, value, 0.0, 1.0)
}

/// A duration string within `min_us..=max_us`.
pub fn duration_in(path: &FieldPath, text: &str, min_us: u64, max_us: u64) -> Check<u64> {
    let us = units::parse_duration_us(text).map_err(|m| issue(path, m))?;
    if us < min_us {
        let min = units::format_duration_us(min_us);
        return Err(issue(
            path,
            format!("must be at least {min} (got {text:?})"),
        ));
    }
    if us > max_us {
        let max = units::format_duration_us(max_us);
        return Err(issue(path, format!("must be at most {max} (got {text:?})")));
    }
    Ok(us)
}

/// A positive duration that defaults to `default_us` when absent.
pub fn positive_duration(
    path: &FieldPath,
    text: &Option<String>,
    default_us: u64,
    max_us: u64,
) -> Check<u64> {
    match text {
        Some(t) => duration_in(path, t, 1, max_us),
        None => Ok(default_us),
    }
}

/// A signed duration within `±max_us`.
pub fn offset_in(path: &FieldPath, text: &str, max_us: u64) -> Check<i64> {
    let us = units::parse_offset_us(text).map_err(|m| issue(path, m))?;
    if us.unsigned_abs() > max_us {
        let max = units::format_duration_us(max_us);
        return Err(issue(path, format!("must be within ±{max} (got {text:?})")));
    }
    Ok(us)
}

/// A positive size string (bytes) up to `max_bytes`, defaulting when absent.
pub fn size_in(
    path: &FieldPath,
    text: &Option<String>,
    default_bytes: u64,
    max_bytes: u64,
) -> Check<u64> {
    let Some(text) = text else {
        return Ok(default_bytes);
    };
    let bytes = units::parse_size_bytes(text).map_err(|m| issue(path, m))?;
    if bytes == 0 {
        return Err(issue(path, "must be more than 0 bytes"));
    }
    if bytes > max_bytes {
        let max = units::format_size_bytes(max_bytes);
        return Err(issue(path, format!("must be at most {max} (got {text:?})")));
    }
    Ok(bytes)
}

/// A positive bandwidth string (bits per second) up to the bound, defaulting when absent.
pub fn bandwidth(path: &FieldPath, text: &Option<String>, default_bps: u64) -> Check<u64> {
    let Some(text) = text else {
        return Ok(default_bps);
    };
    let bps = units::parse_bandwidth_bits_per_sec(text).map_err(|m| issue(path, m))?;
    if bps == 0 {
        return Err(issue(path, "must be more than 0 bps"));
    }
    let max = limits::BANDWIDTH_BITS_PER_SEC_MAX;
    if bps > max {
        let max = units::format_bandwidth_bits_per_sec(max);
        return Err(issue(path, format!("must be at most {max} (got {text:?})")));
    }
    Ok(bps)
}

/// A `[min, max]` latency pair of durations, each up to `LATENCY_US_MAX`, min ≤ max.
pub fn latency_range(path: &FieldPath, pair: &[String]) -> Check<(u64, u64)> {
    let [min, max] = pair else {
        return Err(issue(
            path,
            format!(
                "must be two durations [min, max] (got {} values)",
                pair.len()
            ),
        ));
    };
    let min_us = duration_in(&path.index(0), min, 0, limits::LATENCY_US_MAX)?;
    let max_us = duration_in(&path.index(1), max, 0, limits::LATENCY_US_MAX)?;
    if min_us > max_us {
        return Err(issue(
            path,
            format!("the minimum {min:?} is above the maximum {max:?}"),
        ));
    }
    Ok((min_us, max_us))
}

/// The index of a node name `node-N` with `N < total`.
pub fn node_index(path: &FieldPath, name: &str, total: u32) -> Check<u32> {
    match name.parse::<NodeIndex>() {
        Ok(node) if node.0 < total => Ok(node.0),
        Err(NodeNameError::Malformed) => Err(issue(
            path,
            format!("`{name}` is not a node name (expected node-N, like node-0)"),
        )),
        // A node name whose number is at or above `total` (or above any node's).
        _ => {
            let last = NodeIndex(total.saturating_sub(1));
            Err(issue(
                path,
                format!("`{name}` is not a node of this cluster (it has node-0 .. {last})"),
            ))
        }
    }
}

/// A list whose length is at most `max`.
pub fn list_len<T>(path: &FieldPath, list: &[T], max: usize) -> Check<()> {
    if list.len() > max {
        return Err(issue(
            path,
            format!("has {} entries; at most {max} are allowed", list.len()),
        ));
    }
    Ok(())
}
