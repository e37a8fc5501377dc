"""Network namespaces for a conformance run whose file cuts links or powers hosts off.

Every host gets a namespace of its own (node-N `<prefix>-nN` at 10.77.0.(N+1), the
dedicated store `<prefix>-s` at 10.77.0.250), with one veth pair to a bridge that lives in a
namespace of its own (`<prefix>-br`), so nothing is added to the machine's own namespace
and deleting the run's namespaces deletes everything it made.

A cut link from A to B is a permanent neighbour entry in A's namespace giving B's address a
MAC no host has: A's kernel still sends, the bridge floods the frame, and every port drops
it, so A's packets to B vanish without an error or a reset, one direction only, while B's
packets to A still arrive. This needs only `ip` (no iptables, nft or tc actions, which this
kind of machine may lack). A power-off sets the host's port on the bridge down before its
processes die, so their resets never leave the host: peers hear silence.

The functions building `ip` commands are pure (tested without root); `Net` runs them.
"""

import os
import shutil
import subprocess
import signal
import time

SUBNET = "10.77.0"
STORE_ADDR = f"{SUBNET}.250"
# A locally administered unicast address no veth has: frames sent to it reach nobody.
NOWHERE_MAC = "02:77:00:de:ad:00"
# Every run's prefix starts with this, so `driver.py cleanup` finds leftovers of any run.
ROOT_PREFIX = "tsn"
STORE = "store"
IFACE = "eth0"

# Why a partition, a clogged link or a power-off cannot be made: the same sentences as
# src/conform/localhost.rs (a test holds them together).
NETNS_ROOT = ("a partition, a clogged link or a power-off is made here with network "
              "namespaces, which need root")
NETNS_IP = ("a partition, a clogged link or a power-off is made here with network "
            "namespaces, and `ip netns` (iproute2) is not available")
NETNS_OFF = ("a partition, a clogged link or a power-off is made here with network "
             "namespaces, which TRAINSIM_NETNS=off turns off")
KINDS = ("partition", "heal", "clog_link", "unclog_link", "power_off")


def refusal(env=None, euid=None, ip_works=None):
    """Why this machine cannot make network faults, or None when it can."""
    env = os.environ if env is None else env
    if env.get("TRAINSIM_NETNS", "") == "off":
        return NETNS_OFF
    if (os.geteuid() if euid is None else euid) != 0:
        return NETNS_ROOT
    if ip_works is None:
        ip_works = shutil.which("ip") is not None and subprocess.run(
            ["ip", "netns", "list"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        ).returncode == 0
    return None if ip_works else NETNS_IP


def run_prefix(pid, now):
    """A prefix no other live run has: `tsn` and five hex digits (interface names stay short)."""
    return f"{ROOT_PREFIX}{(pid * 7919 + int(now * 1000)) % 0x100000:05x}"


def host_ns(prefix, host):
    return f"{prefix}-s" if host == STORE else f"{prefix}-n{host}"


def bridge_ns(prefix):
    return f"{prefix}-br"


def port(prefix, host):
    """The bridge's end of a host's veth (at most 15 characters: 8 + 1 + 3)."""
    return f"{prefix}s" if host == STORE else f"{prefix}n{host}"


def host_addr(host):
    return STORE_ADDR if host == STORE else f"{SUBNET}.{host + 1}"


def exec_prefix(prefix, host):
    """The argv prefix that runs a command inside a host's namespace (ip execs it: same pid)."""
    return ["ip", "netns", "exec", host_ns(prefix, host)]


def setup_commands(prefix, hosts, tcp_retries2):
    """Every command that makes the run's namespaces, bridge and links, in order."""
    br = bridge_ns(prefix)
    cmds = [
        ["ip", "netns", "add", br],
        ["ip", "-n", br, "link", "add", "br0", "type", "bridge"],
        ["ip", "-n", br, "link", "set", "br0", "up"],
    ]
    for host in hosts:
        ns, p = host_ns(prefix, host), port(prefix, host)
        cmds += [
            ["ip", "netns", "add", ns],
            ["ip", "-n", ns, "link", "add", IFACE, "type", "veth", "peer", "name", p,
             "netns", br],
            ["ip", "-n", br, "link", "set", p, "master", "br0"],
            ["ip", "-n", br, "link", "set", p, "up"],
            ["ip", "-n", ns, "addr", "add", f"{host_addr(host)}/24", "dev", IFACE],
            ["ip", "-n", ns, "link", "set", "lo", "up"],
            ["ip", "-n", ns, "link", "set", IFACE, "up"],
            ["ip", "netns", "exec", ns, "sysctl", "-qw", f"net.ipv4.tcp_retries2={tcp_retries2}"],
        ]
    return cmds


def cut_pairs(groups):
    """The directed links a partition cuts: every pair of nodes in different groups."""
    pairs = set()
    for i, a_group in enumerate(groups):
        for j, b_group in enumerate(groups):
            if i != j:
                pairs.update((a, b) for a in a_group for b in b_group)
    return pairs


def link_commands(prefix, before, after):
    """The commands that turn the set of cut directed links `before` into `after`."""
    cmds = []
    for a, b in sorted(after - before, key=str):
        cmds.append(["ip", "-n", host_ns(prefix, a), "neigh", "replace", host_addr(b),
                     "lladdr", NOWHERE_MAC, "dev", IFACE, "nud", "permanent"])
    for a, b in sorted(before - after, key=str):
        cmds.append(["ip", "-n", host_ns(prefix, a), "neigh", "del", host_addr(b), "dev", IFACE])
    return cmds


def port_command(prefix, host, up):
    return ["ip", "-n", bridge_ns(prefix), "link", "set", port(prefix, host),
            "up" if up else "down"]


def run_namespaces(names, prefix):
    """The namespaces of `ip netns list` output lines that belong to `prefix`'s run(s)."""
    found = []
    for line in names:
        name = line.split()[0] if line.split() else ""
        if name.startswith(prefix):
            found.append(name)
    return found


def remove_namespaces(prefix):
    """Kills every process inside the namespaces named `prefix`* and deletes them; returns
    their names. Deleting a namespace deletes its veth ends, their peers and the bridge."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    names = run_namespaces(listed.stdout.splitlines(), prefix)
    for ns in names:
        for attempt in range(20):
            pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True,
                                  text=True).stdout.split()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGCONT)
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            time.sleep(0.1)
        subprocess.run(["ip", "netns", "del", ns], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    return names


class Net:
    """One run's namespaces: made by `up`, changed by the faults, always removed by `down`."""

    def __init__(self, prefix, hosts, tcp_retries2, record):
        self.prefix, self.hosts, self.tcp_retries2 = prefix, list(hosts), tcp_retries2
        self.record = record  # the driver's event log
        self.cut = set()

    def _run(self, cmds):
        for cmd in cmds:
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"{' '.join(cmd)}: {done.stderr.strip()}")

    def up(self):
        self._run(setup_commands(self.prefix, self.hosts, self.tcp_retries2))
        self.record("netns_up", prefix=self.prefix, tcp_retries2=self.tcp_retries2)

    def exec_prefix(self, host):
        return exec_prefix(self.prefix, host)

    def set_cut(self, after):
        self._run(link_commands(self.prefix, self.cut, after))
        self.cut = set(after)
        self.record("links_cut", pairs=sorted([list(p) for p in self.cut], key=str))

    def set_port(self, host, up):
        self._run([port_command(self.prefix, host, up)])
        self.record("port_up" if up else "port_down", host=host)

    def down(self):
        removed = remove_namespaces(self.prefix + "-")
        self.record("netns_down", removed=removed)
