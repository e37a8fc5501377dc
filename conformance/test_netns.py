"""The `ip` commands netns.py builds and the driver's cut links, checked without root.

    python3 -m unittest conformance/test_netns.py     (tests/conform_cli.rs runs it too)
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import driver  # noqa: E402
import netns  # noqa: E402


class Names(unittest.TestCase):
    def test_prefixes_are_short_and_start_with_the_root_prefix(self):
        p = netns.run_prefix(4_194_304, 1_795_920_720.5)
        self.assertTrue(p.startswith(netns.ROOT_PREFIX))
        self.assertEqual(len(p), 8)
        # An interface name has at most 15 characters: node-199's bridge port fits.
        self.assertLessEqual(len(netns.port(p, 199)), 15)
        self.assertLessEqual(len(netns.port(p, netns.STORE)), 15)

    def test_addresses(self):
        self.assertEqual(netns.host_addr(0), "10.77.0.1")
        self.assertEqual(netns.host_addr(199), "10.77.0.200")
        self.assertEqual(netns.host_addr(netns.STORE), "10.77.0.250")
        self.assertEqual(netns.exec_prefix("tsn1", 2), ["ip", "netns", "exec", "tsn1-n2"])

    def test_leftovers_are_found_by_prefix(self):
        lines = ["tsn00001-n0 (id: 3)", "tsn00001-br (id: 2)", "other", "tsn00002-s"]
        self.assertEqual(netns.run_namespaces(lines, "tsn00001-"), ["tsn00001-n0", "tsn00001-br"])
        self.assertEqual(len(netns.run_namespaces(lines, "tsn")), 3)


class Commands(unittest.TestCase):
    def test_setup_makes_a_bridge_and_one_namespace_per_host(self):
        cmds = netns.setup_commands("tsn1", [0, netns.STORE], 5)
        self.assertEqual(cmds[0], ["ip", "netns", "add", "tsn1-br"])
        self.assertIn(["ip", "netns", "add", "tsn1-n0"], cmds)
        self.assertIn(["ip", "netns", "add", "tsn1-s"], cmds)
        self.assertIn(["ip", "-n", "tsn1-n0", "link", "add", "eth0", "type", "veth", "peer",
                       "name", "tsn1n0", "netns", "tsn1-br"], cmds)
        self.assertIn(["ip", "-n", "tsn1-s", "addr", "add", "10.77.0.250/24", "dev", "eth0"], cmds)
        self.assertIn(["ip", "netns", "exec", "tsn1-n0", "sysctl", "-qw",
                       "net.ipv4.tcp_retries2=5"], cmds)
        # Every address is inside the run's namespaces: nothing is added outside them.
        for cmd in cmds:
            if "addr" in cmd:
                self.assertEqual(cmd[:2], ["ip", "-n"])

    def test_a_partition_cuts_both_ways_between_groups_only(self):
        self.assertEqual(netns.cut_pairs([[0, 1], [2]]), {(0, 2), (1, 2), (2, 0), (2, 1)})
        self.assertEqual(netns.cut_pairs([[0]]), set())

    def test_cut_and_restored_links_are_neighbour_entries(self):
        cmds = netns.link_commands("tsn1", {(0, 1)}, {(2, 0)})
        self.assertEqual(cmds, [
            ["ip", "-n", "tsn1-n2", "neigh", "replace", "10.77.0.1", "lladdr", netns.NOWHERE_MAC,
             "dev", "eth0", "nud", "permanent"],
            ["ip", "-n", "tsn1-n0", "neigh", "del", "10.77.0.2", "dev", "eth0"],
        ])
        self.assertEqual(netns.link_commands("tsn1", {(0, 1)}, {(0, 1)}), [])

    def test_a_power_off_downs_the_hosts_bridge_port(self):
        self.assertEqual(netns.port_command("tsn1", 3, up=False),
                         ["ip", "-n", "tsn1-br", "link", "set", "tsn1n3", "down"])


class Faults(unittest.TestCase):
    def test_cut_links_follow_the_simulator(self):
        cut = driver.cut_after(set(), {"kind": "partition", "groups": [[0], [1, 2]]})
        self.assertEqual(cut, {(0, 1), (0, 2), (1, 0), (2, 0)})
        cut = driver.cut_after(cut, {"kind": "clog_link", "from": 1, "to": 2})
        self.assertIn((1, 2), cut)
        cut = driver.cut_after(cut, {"kind": "unclog_link", "from": 0, "to": 1})
        self.assertNotIn((0, 1), cut)
        self.assertEqual(driver.cut_after(cut, {"kind": "heal"}), set())

    def test_ranges_in_groups_are_expanded(self):
        self.assertEqual(driver.node_list(["node-0", "node-3..=node-5"], "g"), [0, 3, 4, 5])

    def test_refusals_need_root_and_ip_netns(self):
        self.assertEqual(netns.refusal(env={"TRAINSIM_NETNS": "off"}, euid=0, ip_works=True),
                         netns.NETNS_OFF)
        self.assertEqual(netns.refusal(env={}, euid=1000, ip_works=True), netns.NETNS_ROOT)
        self.assertEqual(netns.refusal(env={}, euid=0, ip_works=False), netns.NETNS_IP)
        self.assertIsNone(netns.refusal(env={}, euid=0, ip_works=True))


if __name__ == "__main__":
    unittest.main()
