//! torch's `_NodeDesc`: one rendezvous handler instance, ordered as torch sorts them, with
//! its address's first bytes kept beside it so that most comparisons read no address text.

use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// One rendezvous handler instance, as torch's `_NodeDesc` describes it.
///
/// Ordered by (addr, pid, local_id), the order torch's `sorted(participants)` uses when it
/// hands out ranks. Every state map is keyed by it, and a look-up compares a dozen keys: the
/// address's first 16 bytes, kept in the key itself, decide nearly all of those comparisons
/// without following the address to its text (at 4 096 nodes the text is mostly out of
/// cache).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(from = "NodeDescParts")]
pub struct NodeDesc {
    /// The node's address (torch: the FQDN or the user-given local address). Shared, so
    /// copying a state (every heartbeat does) copies no address text.
    pub addr: Arc<str>,
    /// The process id of the handler.
    pub pid: u32,
    /// A process-wide counter that tells handlers of one process apart.
    pub local_id: u32,
    /// `addr`'s first 16 bytes as two big-endian words, zero-padded: they order as the
    /// text does, and equal words leave the order to the whole text.
    #[serde(skip_serializing)]
    addr_prefix: (u64, u64),
}

/// A node descriptor as it is written: its three parts.
#[derive(Deserialize)]
struct NodeDescParts {
    addr: Arc<str>,
    pid: u32,
    local_id: u32,
}

impl From<NodeDescParts> for NodeDesc {
    fn from(parts: NodeDescParts) -> Self {
        NodeDesc::new(parts.addr, parts.pid, parts.local_id)
    }
}

impl NodeDesc {
    /// A node descriptor from its three parts.
    pub fn new(addr: impl Into<Arc<str>>, pid: u32, local_id: u32) -> Self {
        let addr = addr.into();
        Self {
            addr_prefix: prefix_words(&addr),
            addr,
            pid,
            local_id,
        }
    }

    /// Whether the two addresses are the same text.
    fn same_addr(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.addr, &other.addr) || self.addr == other.addr
    }
}

/// The first 16 bytes of `text` as two big-endian words, zero-padded. A text that is a
/// proper prefix of another pads with zeros, below any byte but NUL, and NUL ties: so words
/// that differ order as the texts do.
fn prefix_words(text: &str) -> (u64, u64) {
    let mut bytes = [0u8; 16];
    let head = &text.as_bytes()[..text.len().min(16)];
    bytes[..head.len()].copy_from_slice(head);
    let (high, low) = bytes.split_at(8);
    (
        u64::from_be_bytes(high.try_into().expect("8 bytes")),
        u64::from_be_bytes(low.try_into().expect("8 bytes")),
    )
}

impl PartialEq for NodeDesc {
    fn eq(&self, other: &Self) -> bool {
        self.addr_prefix == other.addr_prefix
            && self.pid == other.pid
            && self.local_id == other.local_id
            && self.same_addr(other)
    }
}

impl Eq for NodeDesc {}

impl Ord for NodeDesc {
    fn cmp(&self, other: &Self) -> Ordering {
        let addr = match self.addr_prefix.cmp(&other.addr_prefix) {
            Ordering::Equal if Arc::ptr_eq(&self.addr, &other.addr) => Ordering::Equal,
            Ordering::Equal => self.addr.cmp(&other.addr),
            decided => decided,
        };
        addr.then(self.pid.cmp(&other.pid))
            .then(self.local_id.cmp(&other.local_id))
    }
}

impl PartialOrd for NodeDesc {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Hash for NodeDesc {
    /// The three parts only: the prefix is the address's.
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.addr.hash(state);
        self.pid.hash(state);
        self.local_id.hash(state);
    }
}

impl fmt::Display for NodeDesc {
    /// `addr_pid_localid`, the way torch's `_NodeDesc.__repr__` prints it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}_{}_{}", self.addr, self.pid, self.local_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The order torch sorts by: the parts as a tuple.
    fn parts(n: &NodeDesc) -> (&str, u32, u32) {
        (&n.addr, n.pid, n.local_id)
    }

    proptest! {
        #[test]
        fn orders_and_equals_as_its_three_parts(
            a in "(node-|10\\.0\\.|\\x00|a{0,20}|é)[0-9a-z\\x00]{0,20}",
            b in "(node-|10\\.0\\.|\\x00|a{0,20}|é)[0-9a-z\\x00]{0,20}",
            pids in (0u32..3, 0u32..3),
            ids in (0u32..2, 0u32..2),
        ) {
            let x = NodeDesc::new(a.as_str(), pids.0, ids.0);
            let y = NodeDesc::new(b.as_str(), pids.1, ids.1);
            prop_assert_eq!(x.cmp(&y), parts(&x).cmp(&parts(&y)));
            prop_assert_eq!(x == y, parts(&x) == parts(&y));
            let same_text = NodeDesc::new(String::from(a.as_str()), pids.1, ids.1);
            prop_assert_eq!(x.cmp(&same_text), parts(&x).cmp(&parts(&same_text)));
        }
    }

    #[test]
    fn a_prefix_and_a_nul_padded_text_differ() {
        let short = NodeDesc::new("node-1", 1, 0);
        let padded = NodeDesc::new("node-1\0", 1, 0);
        assert_eq!(short.addr_prefix, padded.addr_prefix);
        assert!(short < padded);
        assert_ne!(short, padded);
    }

    #[test]
    fn writes_and_reads_its_three_parts() {
        let node = NodeDesc::new("10.0.0.17", 4242, 1);
        let json = serde_json::to_string(&node).unwrap();
        assert_eq!(json, r#"{"addr":"10.0.0.17","pid":4242,"local_id":1}"#);
        let back: NodeDesc = serde_json::from_str(&json).unwrap();
        assert_eq!(back, node);
        assert_eq!(back.addr_prefix, node.addr_prefix);
    }
}
