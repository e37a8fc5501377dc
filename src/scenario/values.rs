//! Checks shared by every section: a located `Issue`, required keys, ranges, durations,
//! sizes, probabilities, node names and lists of nodes with ranges.

use super::limits;
use super::locate::FieldPath;
use super::node::{NodeIndex, NodeNameError, NodeSpan, NodeSpanError};
use super::units::{Duration, Offset, Quantity};
use crate::sim_time::SimDuration;
use std::fmt::Display;
use std::ops::RangeInclusive;

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

/// A quantity within `bounds`, in its base unit (µs, bytes, bits per second).
pub fn quantity_in<Q: Quantity>(
    path: &FieldPath,
    value: Q,
    bounds: RangeInclusive<u64>,
) -> Check<u64> {
    let (min, max) = bounds.into_inner();
    in_range(path, value, Q::from_base(min), Q::from_base(max)).map(Q::base)
}

/// An optional quantity within `bounds`, in its base unit, `default` when absent.
pub fn quantity_or<Q: Quantity>(
    path: &FieldPath,
    value: Option<Q>,
    default: u64,
    bounds: RangeInclusive<u64>,
) -> Check<u64> {
    value.map_or(Ok(default), |v| quantity_in(path, v, bounds))
}

/// A duration within `bounds_us` (microseconds, the format's base unit) as a simulated span.
pub fn duration_in(
    path: &FieldPath,
    value: Duration,
    bounds_us: RangeInclusive<u64>,
) -> Check<SimDuration> {
    quantity_in(path, value, bounds_us).map(SimDuration::from_us)
}

/// An optional duration within `bounds_us` as a simulated span, `default` when absent.
pub fn duration_or(
    path: &FieldPath,
    value: Option<Duration>,
    default: SimDuration,
    bounds_us: RangeInclusive<u64>,
) -> Check<SimDuration> {
    value.map_or(Ok(default), |v| duration_in(path, v, bounds_us))
}

/// A signed duration within `±max_us`, in microseconds.
pub fn offset_in(path: &FieldPath, value: Offset, max_us: u64) -> Check<i64> {
    if value.us().unsigned_abs() > max_us {
        let max = Duration::from_us(max_us);
        return Err(issue(path, format!("must be within ±{max} (got {value})")));
    }
    Ok(value.us())
}

/// A `[min, max]` latency pair of durations, each up to `LATENCY_US_MAX`, min ≤ max.
pub fn latency_range(path: &FieldPath, pair: &[Duration]) -> Check<(SimDuration, SimDuration)> {
    let [min, max] = pair else {
        return Err(issue(
            path,
            format!(
                "must be two durations [min, max] (got {} values)",
                pair.len()
            ),
        ));
    };
    let min_span = duration_in(&path.index(0), *min, 0..=limits::LATENCY_US_MAX)?;
    let max_span = duration_in(&path.index(1), *max, 0..=limits::LATENCY_US_MAX)?;
    if min_span > max_span {
        return Err(issue(
            path,
            format!("the minimum {min} is above the maximum {max}"),
        ));
    }
    Ok((min_span, max_span))
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

/// A list of node names and inclusive ranges (`node-0..=node-7`), expanded in order: each
/// node with the index of the entry that named it, so a caller can point at that entry. A
/// node named twice is an error (`twice` says how the caller words it); as no node can then
/// come twice, the expansion is bounded by `total`, the cluster's node count.
pub fn node_list(
    path: &FieldPath,
    entries: &[String],
    total: u32,
    twice: &str,
) -> Check<Vec<(usize, u32)>> {
    list_len(path, entries, total as usize)?;
    let mut out: Vec<(usize, u32)> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for (i, text) in entries.iter().enumerate() {
        let at = path.index(i);
        let span = node_span(&at, text, total)?;
        for node in span.nodes() {
            if !seen.insert(node) {
                let name = NodeIndex(node);
                let from = match span {
                    NodeSpan::One(_) => String::new(),
                    NodeSpan::Range(..) => format!(" (in `{text}`)"),
                };
                return Err(issue(&at, format!("`{name}`{from} {twice}")));
            }
            out.push((i, node));
        }
    }
    Ok(out)
}

/// One entry of a node list: a node name or an inclusive range, every node below `total`.
fn node_span(path: &FieldPath, text: &str, total: u32) -> Check<NodeSpan> {
    let span = match text.parse::<NodeSpan>() {
        Ok(span) => span,
        Err(NodeSpanError::OutOfRange) => NodeSpan::One(NodeIndex(u32::MAX)),
        Err(e) => return Err(issue(path, format!("`{text}`: {e}"))),
    };
    let last = span.last();
    if last.0 >= total {
        let cluster_last = NodeIndex(total.saturating_sub(1));
        let what = match span {
            NodeSpan::One(_) => format!("`{text}` is"),
            NodeSpan::Range(..) => format!("`{text}` reaches {last}, which is"),
        };
        return Err(issue(
            path,
            format!("{what} not a node of this cluster (it has node-0 .. {cluster_last})"),
        ));
    }
    Ok(span)
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
