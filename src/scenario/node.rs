//! A node's index and its one spelling, `node-N`: every place that names a node or reads a
//! node's name goes through [`NodeIndex`], so the text and the number cannot drift apart.
//! Lists of nodes also take inclusive ranges, `node-0..=node-7` ([`NodeSpan`]), and a fault's
//! node may be a role resolved when it fires ([`NodeRole`]).

use std::fmt;
use std::str::FromStr;

/// The index of a node of the cluster; it displays and serializes as `node-N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeIndex(pub u32);

/// The prefix every node name starts with.
const PREFIX: &str = "node-";

/// The most digits a node name's number may have (`u32::MAX` has 10).
const DIGITS_MAX: usize = 10;

/// Why a text is no node name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NodeNameError {
    /// Not `node-` followed by the decimal digits of a number without leading zeros.
    #[error("not a node name (expected node-N, like node-0)")]
    Malformed,
    /// Spelled as a node name, but the number is above `u32::MAX`.
    #[error("the node number is out of range")]
    OutOfRange,
}

impl fmt::Display for NodeIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PREFIX}{}", self.0)
    }
}

/// Reads the canonical spelling only: `node-0`, `node-7`, `node-12`; `node-`, `node-x`,
/// `nodes-1`, `node-+1`, and a leading zero (`node-01`) are malformed, so each node has
/// exactly one name and a name read back is the name written.
impl FromStr for NodeIndex {
    type Err = NodeNameError;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        let digits = name.strip_prefix(PREFIX).unwrap_or("");
        let canonical = !digits.is_empty()
            && digits.len() <= DIGITS_MAX
            && digits.bytes().all(|b| b.is_ascii_digit())
            && (digits == "0" || !digits.starts_with('0'));
        if !canonical {
            return Err(NodeNameError::Malformed);
        }
        let index: u64 = digits.parse().map_err(|_| NodeNameError::Malformed)?;
        u32::try_from(index)
            .map(NodeIndex)
            .map_err(|_| NodeNameError::OutOfRange)
    }
}

impl serde::Serialize for NodeIndex {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for NodeIndex {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        name.parse()
            .map_err(|e| serde::de::Error::custom(format!("`{name}`: {e}")))
    }
}

/// How an inclusive range of nodes is spelled between its ends, as Rust spells `0..=7`.
pub const RANGE_SEPARATOR: &str = "..=";

/// One entry of a list of nodes: a node, or an inclusive range of them (`node-12..=node-15`
/// is node-12, node-13, node-14 and node-15).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeSpan {
    One(NodeIndex),
    /// First and last node, `first <= last`.
    Range(NodeIndex, NodeIndex),
}

/// Why a list entry is neither a node name nor a node range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NodeSpanError {
    #[error("not a node name or range (expected node-N, like node-0, or node-A..=node-B)")]
    Malformed,
    /// `node-0..node-7`: Rust's half-open range, which would leave the last node out.
    #[error("a node range includes its last node and is written with `..=` (node-A..=node-B)")]
    Exclusive,
    /// `node-7..=node-0`: empty in Rust, and surely not what the file meant.
    #[error("the range is reversed: its first node comes after its last")]
    Reversed,
    #[error("the node number is out of range")]
    OutOfRange,
}

impl NodeSpan {
    /// The nodes it names, first to last.
    pub fn nodes(self) -> std::ops::RangeInclusive<u32> {
        match self {
            NodeSpan::One(n) => n.0..=n.0,
            NodeSpan::Range(first, last) => first.0..=last.0,
        }
    }

    /// Its last node, the one that must exist for all of it to.
    pub fn last(self) -> NodeIndex {
        match self {
            NodeSpan::One(n) | NodeSpan::Range(_, n) => n,
        }
    }
}

impl FromStr for NodeSpan {
    type Err = NodeSpanError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let end = |name: &str| {
            name.parse::<NodeIndex>().map_err(|e| match e {
                NodeNameError::Malformed => NodeSpanError::Malformed,
                NodeNameError::OutOfRange => NodeSpanError::OutOfRange,
            })
        };
        let Some((first, last)) = text.split_once(RANGE_SEPARATOR) else {
            if let Some((first, last)) = text.split_once("..") {
                // Both ends must be names for `..` to read as a range meant half-open.
                if end(first).is_ok() && end(last).is_ok() {
                    return Err(NodeSpanError::Exclusive);
                }
            }
            return end(text).map(NodeSpan::One);
        };
        let (first, last) = (end(first)?, end(last)?);
        if first > last {
            return Err(NodeSpanError::Reversed);
        }
        Ok(NodeSpan::Range(first, last))
    }
}

/// A node named by the part it plays when a fault fires, in a fault's `node`.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    serde::Serialize,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
pub enum NodeRole {
    /// The node whose agent holds group rank 0 in the latest rendezvous round an agent has
    /// completed (the node torch's workers are given as `MASTER_ADDR`).
    #[serde(rename = "rank0")]
    #[strum(serialize = "rank0")]
    Rank0,
    /// The node whose agent process hosts the c10d store (`cluster.store`).
    #[serde(rename = "store_host")]
    #[strum(serialize = "store_host")]
    StoreHost,
}

/// The order nodes are shown in: `node-N` by N, then any other name (the dedicated `store`)
/// by name.
pub fn node_order(name: &str) -> (u64, String) {
    let index = name.parse::<NodeIndex>().map(|n| u64::from(n.0));
    (index.unwrap_or(u64::MAX), name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_round_trips_through_its_index() {
        assert_eq!(NodeIndex(7).to_string(), "node-7");
        assert_eq!("node-7".parse(), Ok(NodeIndex(7)));
        assert_eq!("node-0".parse(), Ok(NodeIndex(0)));
        let max = NodeIndex(u32::MAX);
        assert_eq!(max.to_string().parse(), Ok(max));
    }

    #[test]
    fn only_the_canonical_spelling_is_a_node_name() {
        for text in [
            "node-", "node-x", "nodes-1", "node-01", "node-00", "node-+1", "node--1", "node-1 ",
            " node-1", "Node-1", "node-1.0", "store", "", "7",
        ] {
            assert_eq!(
                text.parse::<NodeIndex>(),
                Err(NodeNameError::Malformed),
                "{text:?}"
            );
        }
        // Ten digits read as a number that may not fit; eleven are no node name at all.
        assert_eq!(
            "node-4294967296".parse::<NodeIndex>(),
            Err(NodeNameError::OutOfRange)
        );
        assert_eq!(
            "node-10000000000".parse::<NodeIndex>(),
            Err(NodeNameError::Malformed)
        );
    }

    #[test]
    fn serde_uses_the_name() {
        let json = serde_json::to_string(&vec![NodeIndex(0), NodeIndex(12)]).unwrap();
        assert_eq!(json, r#"["node-0","node-12"]"#);
        let back: Vec<NodeIndex> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, vec![NodeIndex(0), NodeIndex(12)]);
        let bad = serde_json::from_str::<NodeIndex>(r#""node-01""#).unwrap_err();
        assert!(
            bad.to_string().contains("`node-01`: not a node name"),
            "{bad}"
        );
    }

    #[test]
    fn nodes_sort_by_number_then_other_names() {
        let mut names = vec!["store", "node-10", "node-2", "node-0"];
        names.sort_by_key(|n| node_order(n));
        assert_eq!(names, vec!["node-0", "node-2", "node-10", "store"]);
    }

    #[test]
    fn a_span_is_a_name_or_an_inclusive_range() {
        assert_eq!("node-3".parse(), Ok(NodeSpan::One(NodeIndex(3))));
        let range: NodeSpan = "node-12..=node-15".parse().unwrap();
        assert_eq!(range, NodeSpan::Range(NodeIndex(12), NodeIndex(15)));
        assert_eq!(range.nodes().collect::<Vec<_>>(), vec![12, 13, 14, 15]);
        assert_eq!(range.last(), NodeIndex(15));
        let single: NodeSpan = "node-4..=node-4".parse().unwrap();
        assert_eq!(single.nodes().count(), 1);
        let bad = |text: &str| text.parse::<NodeSpan>().unwrap_err();
        assert_eq!(bad("node-15..=node-12"), NodeSpanError::Reversed);
        assert_eq!(bad("node-0..node-7"), NodeSpanError::Exclusive);
        for text in [
            "node-0..=",
            "..=node-3",
            "node-0..=7",
            "node-0..=node-1..=node-2",
            "node-0...node-2",
            "node-0 ..= node-2",
            "node-01..=node-3",
            "node-0..",
            "node-0..=node-x",
        ] {
            assert_eq!(bad(text), NodeSpanError::Malformed, "{text:?}");
        }
        assert_eq!(bad("node-0..=node-4294967296"), NodeSpanError::OutOfRange);
    }
}
