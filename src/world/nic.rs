//! Each host's network interface: a message's bytes leave its sender's link and enter its
//! receiver's link one message at a time, at each host's bandwidth.
//!
//! Messages are small next to a link's speed on most hosts, so this costs nothing but
//! arithmetic; it matters on the c10d store's host, where thousands of agents' rendezvous
//! states (each the whole state, pickled) queue on one link. A message between processes on
//! one host goes over loopback and costs no link time. Timing only: the message still
//! travels as the one timer its arrival needs.

use std::collections::BTreeMap;
use std::net::IpAddr;

/// Bytes of framing a TCP segment adds: Ethernet, IP and TCP headers.
const FRAMING_BYTES: u64 = 66;

/// One host's link: its own speed, if it has one, and when it is next free to send and to
/// receive. Kept together so that a message looks its host up once.
#[derive(Debug, Clone, Copy, Default)]
struct Link {
    bits_per_sec: Option<u64>,
    send_free_ns: u64,
    receive_free_ns: u64,
}

/// The links of every host: their bandwidths, and when each is next free.
#[derive(Debug, Clone)]
pub(super) struct Nics {
    default_bits_per_sec: u64,
    /// Node i's link at index i, grown to the highest node seen: two messages a
    /// compare-and-set look their hosts up, and a join storm makes millions of them.
    node_links: Vec<Link>,
    /// Every other host's (the dedicated store's), by address.
    other_links: BTreeMap<IpAddr, Link>,
}

impl Nics {
    /// Every host's link at `default_bits_per_sec` (at least 1).
    pub(super) fn new(default_bits_per_sec: u64) -> Self {
        Nics {
            default_bits_per_sec: default_bits_per_sec.max(1),
            node_links: Vec::new(),
            other_links: BTreeMap::new(),
        }
    }

    /// Gives one host a link of its own speed (the store's host, for one).
    pub(super) fn set_bandwidth(&mut self, host: IpAddr, bits_per_sec: u64) {
        self.link(host).bits_per_sec = Some(bits_per_sec.max(1));
    }

    /// `host`'s link, idle and at the default speed when first asked for.
    fn link(&mut self, host: IpAddr) -> &mut Link {
        let Some(index) = super::node_index_of_ip(host).map(|i| i as usize) else {
            return self.other_links.entry(host).or_default();
        };
        if index >= self.node_links.len() {
            self.node_links.resize(index + 1, Link::default());
        }
        &mut self.node_links[index]
    }

    /// The time `bytes` take on a link of `bits_per_sec` (the host's own, else the default).
    fn transfer_ns(default_bits_per_sec: u64, bits_per_sec: Option<u64>, bytes: u64) -> u64 {
        let bits_per_sec = bits_per_sec.unwrap_or(default_bits_per_sec);
        let bits = u128::from(bytes + FRAMING_BYTES) * 8;
        // Rounded up, so a message always takes some time; far below u64's range for any
        // message under the store's value bound.
        crate::sim_time::transfer_ns(bits, bits_per_sec)
    }

    /// When a message of `bytes` from `from` to `to`, ready to leave at `ready_ns`, has
    /// left its sender: once the sender's link is free, after its bytes' time there. A
    /// message between processes on one host (loopback) leaves when ready.
    pub(super) fn sent_ns(&mut self, from: IpAddr, to: IpAddr, bytes: u64, ready_ns: u64) -> u64 {
        if from == to {
            return ready_ns;
        }
        let default_bits_per_sec = self.default_bits_per_sec;
        let sender = self.link(from);
        let send_ns = Self::transfer_ns(default_bits_per_sec, sender.bits_per_sec, bytes);
        sender.send_free_ns = ready_ns.max(sender.send_free_ns).saturating_add(send_ns);
        sender.send_free_ns
    }

    /// When a message of `bytes` from `from`, whose last byte reached `to` at `arrived_ns`,
    /// is all in: later if `to`'s link is still taking in the messages before it. Called in
    /// arrival order, at arrival (a server's host, where many clients' messages converge).
    pub(super) fn received_ns(
        &mut self,
        from: IpAddr,
        to: IpAddr,
        bytes: u64,
        arrived_ns: u64,
    ) -> u64 {
        if from == to {
            return arrived_ns;
        }
        let default_bits_per_sec = self.default_bits_per_sec;
        let receiver = self.link(to);
        let receive_ns = Self::transfer_ns(default_bits_per_sec, receiver.bits_per_sec, bytes);
        receiver.receive_free_ns =
            arrived_ns.max(receiver.receive_free_ns.saturating_add(receive_ns));
        receiver.receive_free_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    #[test]
    fn a_message_takes_its_bytes_time_on_the_senders_link() {
        // 8 Gbps: one byte per nanosecond.
        let mut nics = Nics::new(8_000_000_000);
        let bytes = 1_000_000 - FRAMING_BYTES;
        assert_eq!(nics.sent_ns(ip(1), ip(2), bytes, 0), 1_000_000);
        assert_eq!(
            nics.sent_ns(ip(1), ip(3), bytes, 0),
            2_000_000,
            "behind the first"
        );
        assert_eq!(
            nics.sent_ns(ip(1), ip(3), bytes, 5_000_000),
            6_000_000,
            "an idle link"
        );
    }

    #[test]
    fn messages_into_one_host_queue_on_its_link_in_arrival_order() {
        let mut nics = Nics::new(8_000_000_000);
        let bytes = 1_000_000 - FRAMING_BYTES;
        // Three senders' last bytes reach the host together, 1 ms after they began sending.
        let first = nics.received_ns(ip(1), ip(9), bytes, 1_001_000);
        let second = nics.received_ns(ip(2), ip(9), bytes, 1_001_000);
        let third = nics.received_ns(ip(3), ip(9), bytes, 1_001_000);
        assert_eq!(first, 1_001_000, "an idle link takes it as it arrives");
        assert_eq!(
            second,
            first + 1_000_000,
            "behind the first on the receiver's link"
        );
        assert_eq!(third, second + 1_000_000);
        assert_eq!(nics.received_ns(ip(4), ip(9), bytes, 9_000_000), 9_000_000);
    }

    #[test]
    fn a_slow_host_link_is_its_own_and_loopback_costs_nothing() {
        let mut nics = Nics::new(8_000_000_000);
        nics.set_bandwidth(ip(9), 800_000_000);
        let bytes = 100_000 - FRAMING_BYTES;
        // Out of the slow host: ten times the bytes' time.
        assert_eq!(nics.sent_ns(ip(9), ip(1), bytes, 0), 1_000_000);
        assert_eq!(nics.sent_ns(ip(9), ip(9), bytes, 7), 7);
        assert_eq!(nics.received_ns(ip(9), ip(9), bytes, 7), 7);
        // Its sending link stays busy for the next message out of it.
        assert_eq!(nics.sent_ns(ip(9), ip(2), bytes, 0), 2_000_000);
    }

    #[test]
    fn a_host_that_is_no_node_has_a_link_of_its_own_too() {
        let mut nics = Nics::new(8_000_000_000);
        let store = IpAddr::from([10, 255, 0, 1]);
        nics.set_bandwidth(store, 800_000_000);
        let bytes = 100_000 - FRAMING_BYTES;
        assert_eq!(nics.sent_ns(store, ip(1), bytes, 0), 1_000_000);
        assert_eq!(nics.sent_ns(store, ip(2), bytes, 0), 2_000_000, "behind it");
        // Into it, at its own speed, behind what it is still taking in.
        assert_eq!(nics.received_ns(ip(1), store, bytes, 5_000_000), 5_000_000);
        assert_eq!(nics.received_ns(ip(2), store, bytes, 5_000_000), 6_000_000);
        // A node's link is unaffected by the store's.
        assert_eq!(nics.sent_ns(ip(1), ip(2), bytes, 0), 100_000);
    }
}
