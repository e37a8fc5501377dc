//! How many bytes a rendezvous state encodes to, counted from a state it was copied from.
//!
//! Every compare-and-set costs the store, the wire and the writer's pickling by the bytes of
//! the state it sends (`store::cost`), and in a join storm nearly every one of those states
//! loses and is never encoded. Counting each one's bytes by walking the whole state cost
//! O(nodes) per attempt, most of the simulator's time at thousands of nodes. A state about to
//! be written is a copy of the state last read with a few entries changed, and its maps share
//! everything else with that state (`NodeMap` is persistent): `imbl`'s diff skips what two
//! maps share, so counting only what differs costs O(changes × log nodes). The count is
//! `Encode::encoded_len`'s to the byte, whatever the two states are (sharing only makes it
//! fast).

use super::json_int::JsonInt;
use super::state::{push_int, push_node, ByteCount, NodeDesc, NodeMap, NodeSet, RendezvousState};
use imbl::ordmap::DiffItem as MapDiff;
use imbl::ordset::DiffItem as SetDiff;

impl RendezvousState {
    /// `encoded_len()`, counted from `base`'s encoded length `base_len` by what differs
    /// between the two.
    pub fn encoded_len_from(&self, base: &RendezvousState, base_len: usize) -> usize {
        let delta = count(|c| self.write_scalars(c)) - count(|c| base.write_scalars(c))
            + map_delta(&base.participants, &self.participants)
            + set_delta(&base.wait_list, &self.wait_list)
            + set_delta(&base.redundancy_list, &self.redundancy_list)
            + map_delta(&base.last_heartbeats, &self.last_heartbeats)
            + completed_world_delta(base, self);
        let len = i64::try_from(base_len).expect("a state's length fits i64") + delta;
        usize::try_from(len).unwrap_or_else(|_| {
            panic!("a state counted to {len} bytes from a base of {base_len}: not its base")
        })
    }
}

/// The bytes `write` puts into a counter.
fn count(write: impl FnOnce(&mut ByteCount)) -> i64 {
    let mut counter = ByteCount(0);
    write(&mut counter);
    i64::try_from(counter.0).expect("a state's length fits i64")
}

/// `{"addr":…,"pid":…,"local_id":…}`.
pub(super) fn node_bytes(node: &NodeDesc) -> i64 {
    count(|c| push_node(c, node))
}

/// `[node,value]`, an entry of a map's list.
pub(super) fn pair_bytes(node: &NodeDesc, value: impl JsonInt) -> i64 {
    entry_bytes(node_bytes(node), value_bytes(value))
}

/// `[node,value]` from the lengths of its node (`node_bytes`) and its value
/// (`value_bytes`): a writer counts its own node's once.
pub(super) fn entry_bytes(node_bytes: i64, value_bytes: i64) -> i64 {
    3 + node_bytes + value_bytes
}

/// An entry's value, as JSON writes it.
pub(super) fn value_bytes(value: impl JsonInt) -> i64 {
    count(|c| push_int(c, value))
}

/// The commas between a list's `entries`.
fn commas(entries: usize) -> i64 {
    i64::try_from(entries.saturating_sub(1)).expect("a count fits i64")
}

/// How many more bytes `now`'s list takes than `base`'s.
fn map_delta<V: JsonInt + PartialEq>(base: &NodeMap<V>, now: &NodeMap<V>) -> i64 {
    let entries: i64 = base
        .diff(now)
        .map(|item| match item {
            MapDiff::Add(node, value) => pair_bytes(node, *value),
            MapDiff::Remove(node, value) => -pair_bytes(node, *value),
            MapDiff::Update {
                old: (node, old),
                new: (_, new),
            } => pair_bytes(node, *new) - pair_bytes(node, *old),
        })
        .sum();
    entries + commas(now.len()) - commas(base.len())
}

/// How many more bytes `now`'s list takes than `base`'s.
fn set_delta(base: &NodeSet, now: &NodeSet) -> i64 {
    let entries: i64 = base
        .diff(now)
        .map(|item| match item {
            SetDiff::Add(node) => node_bytes(node),
            SetDiff::Remove(node) => -node_bytes(node),
        })
        .sum();
    entries + commas(now.len()) - commas(base.len())
}

/// How many more bytes `now`'s completed world takes than `base`'s: counted in full when one
/// of them has none (a round completed or reopened), else by what differs.
fn completed_world_delta(base: &RendezvousState, now: &RendezvousState) -> i64 {
    match (&base.completed_world, &now.completed_world) {
        (Some(base), Some(now)) => map_delta(base, now),
        _ => count(|c| now.write_completed_world(c)) - count(|c| base.write_completed_world(c)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Encode;
    use proptest::prelude::*;

    fn node(i: u32) -> NodeDesc {
        // Addresses and numbers of varying widths, so entries differ in length.
        NodeDesc::new(format!("node-{}", i * 37 % 1_000), i % 3 * 4_000, i % 2)
    }

    /// A state of `nodes` nodes: maps deep enough to have shared inner nodes.
    fn big(nodes: u32) -> RendezvousState {
        let mut s = RendezvousState::default();
        for i in 0..nodes {
            s.participants.insert(node(i), i % 11);
            s.last_heartbeats
                .insert(node(i), 1_700_000_000_000_000 + i64::from(i));
            if i % 5 == 0 {
                s.wait_list.insert(node(i + nodes));
            }
        }
        s
    }

    /// One change of the kinds the rendezvous makes, to entry `i`.
    fn change(s: &mut RendezvousState, kind: u8, i: u32, value: i64) {
        match kind {
            0 => drop(s.participants.insert(node(i), value as u32)),
            1 => drop(s.participants.remove(&node(i))),
            2 => drop(s.last_heartbeats.insert(node(i), value)),
            3 => drop(s.last_heartbeats.remove(&node(i))),
            4 => drop(s.wait_list.insert(node(i))),
            5 => drop(s.wait_list.remove(&node(i))),
            6 => drop(s.redundancy_list.insert(node(i))),
            7 => drop(s.redundancy_list.remove(&node(i))),
            8 => {
                s.round = value.unsigned_abs();
                s.complete = !s.complete;
                s.deadline_utc_us = (value % 2 == 0).then_some(value);
                s.closed = value % 3 == 0;
            }
            9 => s.completed_world = Some(s.participants.clone()),
            10 => s.completed_world = None,
            _ => {
                if let Some(world) = &mut s.completed_world {
                    world.insert(node(i), value as u32);
                }
            }
        }
    }

    proptest! {
        /// Counted from any earlier state of a chain of changes, the length is the encoding's.
        #[test]
        fn a_length_counted_from_a_base_is_the_encodings(
            nodes in 0u32..300,
            changes in prop::collection::vec((0u8..12, 0u32..700, any::<i64>()), 1..40),
        ) {
            let first = big(nodes);
            let first_len = first.encode().len();
            let mut base = (first.clone(), first_len);
            let mut now = first.clone();
            for (step, (kind, i, value)) in changes.into_iter().enumerate() {
                change(&mut now, kind, i, value);
                let len = now.encode().len();
                prop_assert_eq!(now.encoded_len_from(&base.0, base.1), len);
                prop_assert_eq!(now.encoded_len_from(&first, first_len), len);
                prop_assert_eq!(first.encoded_len_from(&now, len), first_len);
                if step % 3 == 0 {
                    base = (now.clone(), len);
                }
            }
        }
    }

    #[test]
    fn a_length_from_a_copy_with_one_join_matches_a_full_count() {
        let base = big(4_096);
        let mut joined = base.clone();
        joined.participants.insert(node(9_999), 0);
        joined.last_heartbeats.insert(node(9_999), 1);
        let base_len = base.encoded_len();
        assert_eq!(
            joined.encoded_len_from(&base, base_len),
            joined.encoded_len()
        );
        assert_eq!(base.encoded_len_from(&base, base_len), base_len);
    }
}
