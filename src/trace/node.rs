//! The machine an event happened on: a node of the cluster or the dedicated store machine.
//! It stays a number inside the trace and the checks; its text (`node-N`, `store`) is made
//! only where a trace or a report is written out.

use crate::scenario::node::NodeIndex;
use std::fmt;

/// Where an event happened. Nodes order by their number (`node-2` before `node-10`), and the
/// dedicated store machine comes after every node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TraceNode {
    /// A node of the cluster, spares included.
    Node(NodeIndex),
    /// The dedicated store machine (`cluster.store = "dedicated"`).
    Store,
}

/// The dedicated store machine's name, as the trace and the reports spell it.
pub const STORE_NAME: &str = "store";

impl TraceNode {
    /// The cluster node with index `index`.
    pub fn node(index: u32) -> Self {
        TraceNode::Node(NodeIndex(index))
    }

    /// The node's index, or `None` for the store machine.
    pub fn index(self) -> Option<NodeIndex> {
        match self {
            TraceNode::Node(index) => Some(index),
            TraceNode::Store => None,
        }
    }
}

impl From<NodeIndex> for TraceNode {
    fn from(index: NodeIndex) -> Self {
        TraceNode::Node(index)
    }
}

impl fmt::Display for TraceNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceNode::Node(index) => index.fmt(f),
            TraceNode::Store => f.write_str(STORE_NAME),
        }
    }
}

/// The name, as the trace has always carried it: the trace hash covers it.
impl serde::Serialize for TraceNode {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// Reads `node-N` or `store`, the names [`TraceNode`] displays as (tests write traces by
/// hand with them).
impl std::str::FromStr for TraceNode {
    type Err = crate::scenario::node::NodeNameError;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        if name == STORE_NAME {
            return Ok(TraceNode::Store);
        }
        name.parse().map(TraceNode::Node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_trace_s_old_strings() {
        assert_eq!(TraceNode::node(12).to_string(), "node-12");
        assert_eq!(TraceNode::Store.to_string(), "store");
        let json = serde_json::to_string(&[TraceNode::node(0), TraceNode::Store]).unwrap();
        assert_eq!(json, r#"["node-0","store"]"#);
        for node in [TraceNode::node(0), TraceNode::node(10), TraceNode::Store] {
            assert_eq!(node.to_string().parse(), Ok(node));
        }
        assert!("node-01".parse::<TraceNode>().is_err());
    }

    #[test]
    fn nodes_order_by_number_and_the_store_last() {
        let mut nodes = [
            TraceNode::Store,
            TraceNode::node(10),
            TraceNode::node(2),
            TraceNode::node(0),
        ];
        nodes.sort();
        let names: Vec<String> = nodes.iter().map(ToString::to_string).collect();
        assert_eq!(names, ["node-0", "node-2", "node-10", "store"]);
    }
}
