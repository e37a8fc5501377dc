//! gloo's full-mesh connect (`connectFullMesh`): which side of each pair dials, and whether
//! a pair still connects when a side read an earlier group's address.
//!
//! Each rank's device publishes its address under its rank's key and reads every other
//! rank's. For each pair, gloo's `Device::isInitiator` compares the two addresses as this
//! side holds them (the IP's bytes, then the port as stored in network byte order): the
//! larger side dials and writes the sequence number the other side waits for; the other
//! only listens. The store keeps the last group's keys, so a side that reads a peer's key
//! before the peer rewrote it holds a dead worker's address and compares with that instead.
//! If it dials, its connects are refused and it fails at once; if it listens while its
//! peer, comparing the addresses as they are, listens too, neither ever connects. Between
//! hosts with their own addresses the IPs decide the roles, so only the higher address's
//! stale read breaks the pair; on one machine (`cluster.one_machine`, as the conformance
//! runs on localhost) every device has the same IP, the random ports decide, and a stale
//! port can turn either side's role.
//!
//! A side that fails leaves the group: its process exits and its device stops listening.
//! A side that reads that side's current address later (its own setup took longer) and
//! dials it is refused, or reset if it connected before the exit, and fails as quickly;
//! had it listened, it would wait for a connect that never comes.

use crate::sim_time::SimInstant;
use crate::world::node_ip;
use std::collections::{BTreeMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Mutex;

/// A gloo device's address as the store holds it: its node and its listening port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GlooAddress {
    pub node: u32,
    pub port: u16,
}

impl GlooAddress {
    /// The value a rank publishes: the group that wrote it, then the address.
    pub fn published(self, group: &str) -> String {
        format!("{group}@{}:{}", self.node, self.port)
    }

    /// A published value read back: the group that wrote it and the address.
    pub fn parse(value: &[u8]) -> Option<(&str, GlooAddress)> {
        let text = std::str::from_utf8(value).ok()?;
        let (group, address) = text.split_once('@')?;
        let (node, port) = address.split_once(':')?;
        let address = GlooAddress {
            node: node.parse().ok()?,
            port: port.parse().ok()?,
        };
        Some((group, address))
    }
}

/// gloo's `Device::isInitiator`: whether the side at `local`, holding `remote` for its peer,
/// dials. gloo subtracts the raw port fields, which hold network byte order, so on a
/// little-endian host the ports compare byte-swapped.
pub fn initiates(local: GlooAddress, remote: GlooAddress, one_machine: bool) -> bool {
    let ip = |a: GlooAddress| -> IpAddr {
        if one_machine {
            Ipv4Addr::LOCALHOST.into()
        } else {
            node_ip(a.node)
        }
    };
    // Two devices on one machine never share a port; the node breaks a tie between draws.
    let key = |a: GlooAddress| (ip(a), a.port.swap_bytes(), a.node);
    key(local) > key(remote)
}

/// Whether gloo connects the pair of `a` and `b`, each side holding what it read of the
/// other: exactly one side must dial, and it must have read the other's address as it is.
pub fn pair_connects(
    (a, a_read_of_b): (GlooAddress, GlooAddress),
    (b, b_read_of_a): (GlooAddress, GlooAddress),
    one_machine: bool,
) -> bool {
    match (
        initiates(a, a_read_of_b, one_machine),
        initiates(b, b_read_of_a, one_machine),
    ) {
        (true, false) => a_read_of_b == b,
        (false, true) => b_read_of_a == a,
        // Both dial (one of them a dead address) or both wait for the other.
        _ => false,
    }
}

/// What the ranks of recent worker groups published and which earlier groups' addresses
/// they read, so that each rank can tell, once every rank has read, whether every pair of
/// its group connects. The connections themselves are not simulated: their handshakes
/// carry nothing the store's keys do not already time.
#[derive(Default)]
pub struct MeshReads {
    /// The latest groups, newest first, by group.
    groups: Mutex<VecDeque<(String, GroupReads)>>,
}

/// One group's addresses, by node block (a node's ranks share its device's fate here).
#[derive(Default)]
struct GroupReads {
    published: BTreeMap<u64, GlooAddress>,
    /// Earlier groups' addresses read, by (reader's block, peer's block).
    stale: BTreeMap<(u64, u64), GlooAddress>,
    /// The blocks that failed before connecting, by when their processes exit.
    exited: BTreeMap<u64, SimInstant>,
}

/// Groups kept: the one connecting and a few before it.
const GROUPS_MAX: usize = 4;

impl MeshReads {
    fn with_group<R>(&self, group: &str, f: impl FnOnce(&mut GroupReads) -> R) -> R {
        let mut groups = self.groups.lock().expect("mesh reads lock");
        if !groups.iter().any(|(g, _)| g == group) {
            groups.push_front((group.to_owned(), GroupReads::default()));
            groups.truncate(GROUPS_MAX);
        }
        let (_, reads) = groups
            .iter_mut()
            .find(|(g, _)| g == group)
            .expect("kept above");
        f(reads)
    }

    /// Node block `block` of `group` published `address`.
    pub fn publish(&self, group: &str, block: u64, address: GlooAddress) {
        self.with_group(group, |g| g.published.insert(block, address));
    }

    /// Node block `reader` of `group` read `address`, an earlier group's, for block `peer`.
    pub fn read_stale(&self, group: &str, reader: u64, peer: u64, address: GlooAddress) {
        self.with_group(group, |g| g.stale.insert((reader, peer), address));
    }

    /// Node block `block` of `group` failed before connecting; its process exits at `at`.
    pub fn exits(&self, group: &str, block: u64, at: SimInstant) {
        self.with_group(group, |g| g.exited.insert(block, at));
    }

    /// When node block `block` of `group` exits, if it failed before connecting.
    pub fn exit_of(&self, group: &str, block: u64) -> Option<SimInstant> {
        self.with_group(group, |g| g.exited.get(&block).copied())
    }

    /// Whether every pair of `group` connects, by what its blocks published and read; asked
    /// once every block has read. A pair both of whose sides read the other as published
    /// connects, so only the pairs with a stale read are compared.
    pub fn all_pairs_connect(&self, group: &str, one_machine: bool) -> bool {
        self.with_group(group, |g| {
            g.stale.keys().all(|&(reader, peer)| {
                let (Some(&r), Some(&p)) = (g.published.get(&reader), g.published.get(&peer))
                else {
                    return false;
                };
                let read_of = |by: u64, of: u64, published: GlooAddress| {
                    g.stale.get(&(by, of)).copied().unwrap_or(published)
                };
                pair_connects(
                    (r, read_of(reader, peer, p)),
                    (p, read_of(peer, reader, r)),
                    one_machine,
                )
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(node: u32, port: u16) -> GlooAddress {
        GlooAddress { node, port }
    }

    #[test]
    fn a_published_address_reads_back() {
        let value = at(3, 40_001).published("1.2");
        assert_eq!(
            GlooAddress::parse(value.as_bytes()),
            Some(("1.2", at(3, 40_001)))
        );
        assert_eq!(GlooAddress::parse(b"1.2"), None);
    }

    #[test]
    fn between_hosts_the_higher_address_dials_and_only_its_stale_read_breaks_the_pair() {
        let (low, high, dead) = (at(0, 40_000), at(1, 50_000), at(1, 33_333));
        assert!(initiates(high, low, false) && !initiates(low, high, false));
        assert!(pair_connects((low, high), (high, low), false));
        // The listening side's stale read changes nothing; the dialling side's is refused.
        assert!(pair_connects((low, dead), (high, low), false));
        assert!(!pair_connects((high, at(0, 33_333)), (low, high), false));
    }

    #[test]
    fn on_one_machine_the_byte_swapped_ports_decide_and_a_stale_port_can_turn_a_role() {
        // Port 0x0100 compares as 0x0001 and 0x0002 as 0x0200: the port 2 side dials.
        let (a, b) = (at(0, 0x0100), at(1, 0x0002));
        assert!(initiates(b, a, true) && !initiates(a, b, true));
        assert!(pair_connects((a, b), (b, a), true));
        // b reads a stale a that compares higher than b: both listen, neither connects.
        let stale_a = at(0, 0x0003);
        assert!(!initiates(b, stale_a, true));
        assert!(!pair_connects((a, b), (b, stale_a), true));
        // b reads a stale a that compares lower: b dials it and is refused.
        assert!(!pair_connects((a, b), (b, at(0, 0x0200)), true));
        // a's stale read of b, where a listens either way, changes nothing.
        assert!(pair_connects((a, at(1, 0x0005)), (b, a), true));
    }

    #[test]
    fn a_group_connects_unless_a_pair_with_a_stale_read_fails() {
        let reads = MeshReads::default();
        for (block, node) in [(0, 0), (1, 1), (2, 2)] {
            reads.publish("0.1", block, at(node, 40_000 + node as u16));
        }
        assert!(reads.all_pairs_connect("0.1", false));
        // Block 0 (the lowest address, which only listens) read block 2's old address.
        reads.read_stale("0.1", 0, 2, at(2, 33_000));
        assert!(reads.all_pairs_connect("0.1", false));
        // Block 2 read block 1's: it dials a dead worker.
        reads.read_stale("0.1", 2, 1, at(1, 33_001));
        assert!(!reads.all_pairs_connect("0.1", false));
    }
}
