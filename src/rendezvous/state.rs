//! The shared rendezvous state (torch's `_RendezvousState` and `_NodeDesc`), its byte encoding
//! for the store, and read-only helpers the async shell needs.

use serde::Deserialize;

use super::error::RendezvousError;
use super::json_int::JsonInt;
use super::settings::{RendezvousFix, RendezvousSettings};
use crate::scenario::node::NodeIndex;

pub use super::node_desc::NodeDesc;

/// The cluster nodes at `addrs`: where the state's addresses (text, as torch keeps them)
/// become the job's nodes, read once. An address that names no node is a corrupt state.
pub fn nodes_at<'a>(
    addrs: impl IntoIterator<Item = &'a str>,
) -> Result<Vec<NodeIndex>, RendezvousError> {
    addrs
        .into_iter()
        .map(|addr| {
            addr.parse().map_err(|e| {
                RendezvousError::State(format!("the participant address `{addr}`: {e}"))
            })
        })
        .collect()
}

/// A map keyed by node. Persistent (structure-sharing): copying a state to change one entry,
/// as every write does, costs O(log nodes) rather than a copy of every node, which in a
/// join storm's O(nodes²) writes made the simulator O(nodes³).
pub type NodeMap<V> = imbl::OrdMap<NodeDesc, V>;
/// A set of nodes, persistent like [`NodeMap`].
pub type NodeSet = imbl::OrdSet<NodeDesc>;

/// The state every node reads from and writes to the store.
///
/// `Default` is torch's freshly constructed `_RendezvousState`: round 0, open, incomplete,
/// no deadline, every collection empty.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RendezvousState {
    /// The current round.
    pub round: u64,
    /// Whether the current round has completed (ranks assigned).
    pub complete: bool,
    /// Wall-clock time after which a participant may complete the round (set when
    /// `min_nodes` is reached); `None` while there is no last call.
    pub deadline_utc_us: Option<i64>,
    /// Whether the rendezvous is closed for good.
    pub closed: bool,
    /// Participants of the current round and their ranks (all 0 until completion).
    pub participants: NodeMap<u32>,
    /// Nodes waiting for the next round; their number is `num_nodes_waiting`.
    pub wait_list: NodeSet,
    /// Nodes that found the round full; they join the next round without asking for one.
    pub redundancy_list: NodeSet,
    /// Each known node's last heartbeat, wall clock.
    pub last_heartbeats: NodeMap<i64>,
    /// The participants and ranks the current round completed with, kept whatever sanitize
    /// drops afterwards. Not in torch: only the fix `world-at-completion` records it, so
    /// without that fix it is always `None` and the state encodes exactly as torch's.
    pub completed_world: Option<NodeMap<u32>>,
}

/// Why bytes from the store could not be read back as a state.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The bytes are not a state in our encoding.
    #[error("malformed rendezvous state: {0}")]
    Malformed(String),
    /// A node appears twice in one collection, which a set or map cannot hold.
    #[error("node {node} appears twice in {field}")]
    Duplicate {
        /// The collection holding the duplicate.
        field: &'static str,
        /// The repeated node.
        node: String,
    },
}

/// The encoded form: the parity vectors' `state` object, with every list sorted by node.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    round: u64,
    complete: bool,
    deadline_utc_us: Option<i64>,
    closed: bool,
    participants: Vec<(NodeDesc, u32)>,
    wait_list: Vec<NodeDesc>,
    redundancy_list: Vec<NodeDesc>,
    last_heartbeats: Vec<(NodeDesc, i64)>,
    #[serde(default)]
    completed_world: Option<Vec<(NodeDesc, u32)>>,
}

/// [`Wire`] borrowing from a state: the same fields in the same order, so it serializes to
/// the same bytes without copying a node.
#[cfg(test)]
#[derive(serde::Serialize)]
struct WireRef<'a> {
    round: u64,
    complete: bool,
    deadline_utc_us: Option<i64>,
    closed: bool,
    participants: Vec<(&'a NodeDesc, u32)>,
    wait_list: Vec<&'a NodeDesc>,
    redundancy_list: Vec<&'a NodeDesc>,
    last_heartbeats: Vec<(&'a NodeDesc, i64)>,
    #[serde(skip_serializing_if = "Option::is_none")]
    completed_world: Option<Vec<(&'a NodeDesc, u32)>>,
}

fn into_map<V: Clone>(
    field: &'static str,
    pairs: Vec<(NodeDesc, V)>,
) -> Result<NodeMap<V>, DecodeError> {
    let mut map = NodeMap::new();
    for (node, value) in pairs {
        if map.contains_key(&node) {
            let node = node.to_string();
            return Err(DecodeError::Duplicate { field, node });
        }
        map.insert(node, value);
    }
    Ok(map)
}

fn into_set(field: &'static str, nodes: Vec<NodeDesc>) -> Result<NodeSet, DecodeError> {
    let mut set = NodeSet::new();
    for node in nodes {
        if set.contains(&node) {
            let node = node.to_string();
            return Err(DecodeError::Duplicate { field, node });
        }
        set.insert(node);
    }
    Ok(set)
}

/// Where an encoding goes: the bytes themselves, or only how many there are.
pub(super) trait Sink {
    fn put(&mut self, bytes: &[u8]);

    /// An integer as JSON writes it.
    fn put_int(&mut self, value: impl JsonInt) {
        self.put(itoa::Buffer::new().format(value).as_bytes());
    }
}

impl Sink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// Counts the bytes an encoding would write, writing none.
pub(super) struct ByteCount(pub(super) usize);

impl Sink for ByteCount {
    fn put(&mut self, bytes: &[u8]) {
        self.0 += bytes.len();
    }

    fn put_int(&mut self, value: impl JsonInt) {
        self.0 += value.json_len();
    }
}

/// Appends an integer as JSON writes it.
pub(super) fn push_int(out: &mut impl Sink, value: impl JsonInt) {
    out.put_int(value);
}

/// Appends `{"addr":…,"pid":…,"local_id":…}`, the serde form of a [`NodeDesc`].
pub(super) fn push_node(out: &mut impl Sink, node: &NodeDesc) {
    out.put(b"{\"addr\":");
    let plain = node
        .addr
        .bytes()
        .all(|b| b >= 0x20 && b != b'"' && b != b'\\' && b < 0x7f);
    if plain {
        out.put(b"\"");
        out.put(node.addr.as_bytes());
        out.put(b"\"");
    } else {
        // Escaping is serde_json's; such addresses are rare.
        out.put(&serde_json::to_vec(&node.addr).expect("a string serializes"));
    }
    out.put(b",\"pid\":");
    push_int(out, node.pid);
    out.put(b",\"local_id\":");
    push_int(out, node.local_id);
    out.put(b"}");
}

/// Appends `[node,…]`.
fn push_nodes(out: &mut impl Sink, nodes: &NodeSet) {
    out.put(b"[");
    for (i, node) in nodes.iter().enumerate() {
        if i > 0 {
            out.put(b",");
        }
        push_node(out, node);
    }
    out.put(b"]");
}

/// Appends `[[node,value],…]`.
fn push_pairs<'a, V: JsonInt>(out: &mut impl Sink, pairs: impl Iterator<Item = (&'a NodeDesc, V)>) {
    out.put(b"[");
    for (i, (node, value)) in pairs.enumerate() {
        if i > 0 {
            out.put(b",");
        }
        out.put(b"[");
        push_node(out, node);
        out.put(b",");
        push_int(out, value);
        out.put(b"]");
    }
    out.put(b"]");
}

impl crate::store::Encode for RendezvousState {
    fn encode(&self) -> Vec<u8> {
        RendezvousState::encode(self)
    }

    fn encoded_len(&self) -> usize {
        let mut count = ByteCount(0);
        self.write_to(&mut count);
        count.0
    }

    fn encoded_len_from(&self, base: &Self, base_len: usize) -> usize {
        RendezvousState::encoded_len_from(self, base, base_len)
    }
}

impl RendezvousState {
    /// The canonical bytes of this state: compact JSON in the parity `state` format, lists in
    /// node order. Equal states give equal bytes, and different states different bytes
    /// (`decode` gives the state back), so the bytes can serve as the CAS token the way
    /// torch's c10d backend uses the stored base64 text as its fencing token.
    pub fn encode(&self) -> Vec<u8> {
        let nodes = self.participants.len() + self.last_heartbeats.len();
        let mut out = Vec::with_capacity(160 + nodes * 64);
        self.write_to(&mut out);
        out
    }

    fn write_to(&self, out: &mut impl Sink) {
        // Written by hand: this runs on every landed CAS and was the harness's hottest
        // function as serde output. `encode_with_serde` is the reference it must equal byte
        // for byte.
        self.write_scalars(out);
        out.put(b",\"participants\":");
        push_pairs(out, self.participants.iter().map(|(n, r)| (n, *r)));
        out.put(b",\"wait_list\":");
        push_nodes(out, &self.wait_list);
        out.put(b",\"redundancy_list\":");
        push_nodes(out, &self.redundancy_list);
        out.put(b",\"last_heartbeats\":");
        push_pairs(out, self.last_heartbeats.iter().map(|(n, t)| (n, *t)));
        self.write_completed_world(out);
        out.put(b"}");
    }

    /// The completed world's field: absent unless the fix `world-at-completion` recorded it,
    /// so torch's state keeps torch's bytes (the CAS payload, and so the simulated timing,
    /// stays the same).
    pub(super) fn write_completed_world(&self, out: &mut impl Sink) {
        if let Some(world) = &self.completed_world {
            out.put(b",\"completed_world\":");
            push_pairs(out, world.iter().map(|(n, r)| (n, *r)));
        }
    }

    /// The encoding's first part: `{` and the fields that are not collections.
    pub(super) fn write_scalars(&self, out: &mut impl Sink) {
        out.put(b"{\"round\":");
        push_int(out, self.round);
        out.put(b",\"complete\":");
        out.put(if self.complete { b"true" } else { b"false" });
        out.put(b",\"deadline_utc_us\":");
        match self.deadline_utc_us {
            Some(deadline) => push_int(out, deadline),
            None => out.put(b"null"),
        }
        out.put(b",\"closed\":");
        out.put(if self.closed { b"true" } else { b"false" });
    }

    /// The serde encoding [`RendezvousState::encode`] reproduces (kept for its tests).
    #[cfg(test)]
    pub(crate) fn encode_with_serde(&self) -> Vec<u8> {
        let wire = WireRef {
            round: self.round,
            complete: self.complete,
            deadline_utc_us: self.deadline_utc_us,
            closed: self.closed,
            participants: self.participants.iter().map(|(n, r)| (n, *r)).collect(),
            wait_list: self.wait_list.iter().collect(),
            redundancy_list: self.redundancy_list.iter().collect(),
            last_heartbeats: self.last_heartbeats.iter().map(|(n, t)| (n, *t)).collect(),
            completed_world: self
                .completed_world
                .as_ref()
                .map(|w| w.iter().map(|(n, r)| (n, *r)).collect()),
        };
        serde_json::to_vec(&wire).expect("state serializes")
    }

    /// Reads bytes written by [`RendezvousState::encode`] (list order is not required).
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let wire: Wire =
            serde_json::from_slice(bytes).map_err(|e| DecodeError::Malformed(e.to_string()))?;
        Ok(Self {
            round: wire.round,
            complete: wire.complete,
            deadline_utc_us: wire.deadline_utc_us,
            closed: wire.closed,
            participants: into_map("participants", wire.participants)?,
            wait_list: into_set("wait_list", wire.wait_list)?,
            redundancy_list: into_set("redundancy_list", wire.redundancy_list)?,
            last_heartbeats: into_map("last_heartbeats", wire.last_heartbeats)?,
            completed_world: wire
                .completed_world
                .map(|pairs| into_map("completed_world", pairs))
                .transpose()?,
        })
    }

    /// Reads a state from the parity vectors' JSON `state` object.
    pub fn from_json(value: &serde_json::Value) -> Result<Self, DecodeError> {
        let bytes = serde_json::to_vec(value).map_err(|e| DecodeError::Malformed(e.to_string()))?;
        Self::decode(&bytes)
    }

    /// This state as the parity vectors' JSON `state` object (lists sorted by node).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.encode()).expect("encoded state is JSON")
    }

    /// Whether `node` is a participant of the current round.
    pub fn is_participant(&self, node: &NodeDesc) -> bool {
        self.participants.contains_key(node)
    }

    /// `node`'s rank, once the round is complete (torch's `_get_world` reads it then).
    pub fn rank_of(&self, node: &NodeDesc) -> Option<u32> {
        if self.complete {
            self.participants.get(node).copied()
        } else {
            None
        }
    }

    /// The world size torch reports: the number of participants.
    pub fn world_size(&self) -> usize {
        self.participants.len()
    }

    /// The world a node that finished its join is told, as node → rank: torch's
    /// `_get_world` reads the participants as last synced, after sanitize may have dropped
    /// some; with the fix `world-at-completion` it is the world the round completed with.
    pub fn world(&self) -> &NodeMap<u32> {
        self.completed_world.as_ref().unwrap_or(&self.participants)
    }

    /// torch's `_get_world`: `node`'s rank and the world, read from the synced `state` (with
    /// `world-at-completion`, from the world the round completed with).
    /// Returns (round, rank, world size, participant addresses by rank).
    ///
    /// The world's ranks are distinct (sanitize only drops nodes after completion), and with
    /// `world-at-completion` they are exactly 0..world size. Without it they may have gaps:
    /// that is torch's world-size race, which `rendezvous.agreement` judges.
    pub fn world_of(
        &self,
        node: &NodeDesc,
        settings: &RendezvousSettings,
    ) -> (u64, u32, u32, Vec<String>) {
        let (state, world) = (self, self.world());
        let rank = world.get(node).copied().unwrap_or_else(|| {
            panic!(
                "{node} finished its join of round {} but is not in its world",
                state.round
            )
        });
        let mut by_rank: Vec<(u32, &NodeDesc)> = world.iter().map(|(n, r)| (*r, n)).collect();
        by_rank.sort();
        let planted_collision = settings.has_mutant(crate::mutant::Mutant::RankCollision)
            || settings.has_mutant(crate::mutant::Mutant::LateJoinerJoinsCompleteRound);
        if !planted_collision {
            if let Some(pair) = by_rank.windows(2).find(|pair| pair[0].0 == pair[1].0) {
                panic!(
                    "round {}: {} and {} share rank {} in the world {node} was told",
                    state.round, pair[0].1, pair[1].1, pair[0].0
                );
            }
            if settings.has_fix(RendezvousFix::WorldAtCompletion) {
                let last = by_rank.last().map(|(rank, _)| *rank as usize);
                assert_eq!(
                    last.map_or(0, |rank| rank + 1),
                    by_rank.len(),
                    "round {}: the completed world of {} nodes has ranks up to {last:?}",
                    state.round,
                    by_rank.len()
                );
            }
        }
        (
            state.round,
            rank,
            world.len() as u32,
            by_rank
                .into_iter()
                .map(|(_, n)| n.addr.to_string())
                .collect(),
        )
    }

    /// torch's `num_nodes_waiting()`: the wait list only. Redundant nodes do not count, which
    /// is what lets them wait without triggering a re-rendezvous.
    pub fn num_nodes_waiting(&self) -> usize {
        self.wait_list.len()
    }

    /// Whether `node`'s join has ended with it as a participant of a complete round: the join
    /// op answers FINISH exactly then (unless the rendezvous is closed first).
    pub fn join_finished(&self, node: &NodeDesc) -> bool {
        self.complete && self.is_participant(node)
    }

    /// Whether `node` appears anywhere in the state.
    pub fn knows(&self, node: &NodeDesc) -> bool {
        self.is_participant(node)
            || self.wait_list.contains(node)
            || self.redundancy_list.contains(node)
            || self.last_heartbeats.contains_key(node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> RendezvousState {
        let mut s = RendezvousState {
            round: 3,
            deadline_utc_us: Some(-5),
            ..Default::default()
        };
        s.participants.insert(NodeDesc::new("b", 1, 0), 0);
        s.participants.insert(NodeDesc::new("a", 2, 1), 0);
        s.wait_list.insert(NodeDesc::new("c", 1, 0));
        s.redundancy_list.insert(NodeDesc::new("d", 1, 0));
        s.last_heartbeats.insert(NodeDesc::new("a", 2, 1), 77);
        s
    }

    #[test]
    fn node_orders_as_tuple_and_prints_like_torch() {
        assert!(NodeDesc::new("a", 9, 9) < NodeDesc::new("b", 0, 0));
        assert!(NodeDesc::new("a", 1, 9) < NodeDesc::new("a", 2, 0));
        assert!(NodeDesc::new("a", 1, 0) < NodeDesc::new("a", 1, 1));
        assert_eq!(NodeDesc::new("host", 12, 3).to_string(), "host_12_3");
    }

    #[test]
    fn encode_round_trips_and_is_canonical() {
        let s = sample();
        let bytes = s.encode();
        assert_eq!(RendezvousState::decode(&bytes).unwrap(), s);
        assert_eq!(s.clone().encode(), bytes);
        assert_eq!(
            RendezvousState::default().encode(),
            RendezvousState::default().encode()
        );
        assert_ne!(RendezvousState::default().encode(), bytes);
    }

    #[test]
    fn a_completed_world_is_encoded_only_when_recorded() {
        let mut s = sample();
        assert!(!String::from_utf8(s.encode())
            .unwrap()
            .contains("completed_world"));
        s.completed_world = Some(s.participants.clone());
        let bytes = s.encode();
        assert_eq!(bytes, s.encode_with_serde());
        assert_eq!(RendezvousState::decode(&bytes).unwrap(), s);
        assert_eq!(s.world(), &s.participants);
    }

    #[test]
    fn decode_refuses_garbage_and_duplicates() {
        assert!(matches!(
            RendezvousState::decode(b"nope"),
            Err(DecodeError::Malformed(_))
        ));
        let n = r#"{"addr":"a","pid":1,"local_id":0}"#;
        let text = format!(
            r#"{{"round":0,"complete":false,"deadline_utc_us":null,"closed":false,"participants":[],"wait_list":[{n},{n}],"redundancy_list":[],"last_heartbeats":[]}}"#
        );
        assert!(matches!(
            RendezvousState::decode(text.as_bytes()),
            Err(DecodeError::Duplicate {
                field: "wait_list",
                ..
            })
        ));
    }

    #[test]
    fn a_node_is_told_its_rank_and_the_world_in_rank_order() {
        let settings = RendezvousSettings::new("r", 1, 3);
        let mut s = sample();
        s.complete = true;
        s.participants.insert(NodeDesc::new("b", 1, 0), 2);
        let (round, rank, size, world) = s.world_of(&NodeDesc::new("b", 1, 0), &settings);
        assert_eq!((round, rank, size), (3, 2, 2));
        assert_eq!(world, vec!["a", "b"]);
    }

    #[test]
    #[should_panic(expected = "share rank 0 in the world")]
    fn a_world_with_a_repeated_rank_fires() {
        let mut s = sample();
        s.complete = true;
        s.world_of(
            &NodeDesc::new("b", 1, 0),
            &RendezvousSettings::new("r", 1, 3),
        );
    }

    #[test]
    #[should_panic(expected = "the completed world of 2 nodes has ranks up to Some(2)")]
    fn a_completed_world_with_a_gap_fires() {
        let mut settings = RendezvousSettings::new("r", 1, 3);
        settings.fixes.insert(RendezvousFix::WorldAtCompletion);
        let mut s = sample();
        s.complete = true;
        s.participants.insert(NodeDesc::new("b", 1, 0), 2);
        s.completed_world = Some(s.participants.clone());
        s.world_of(&NodeDesc::new("b", 1, 0), &settings);
    }

    #[test]
    fn helpers() {
        let mut s = sample();
        let a = NodeDesc::new("a", 2, 1);
        assert!(s.is_participant(&a));
        assert_eq!(s.rank_of(&a), None);
        assert!(!s.join_finished(&a));
        s.complete = true;
        assert_eq!(s.rank_of(&a), Some(0));
        assert!(s.join_finished(&a));
        assert_eq!(s.world_size(), 2);
        assert_eq!(s.num_nodes_waiting(), 1);
        assert!(s.knows(&NodeDesc::new("d", 1, 0)));
        assert!(!s.knows(&NodeDesc::new("z", 1, 0)));
    }
}
