"""The processes of a real run on this machine: how torchrun starts, what /proc says of
them, and a free loopback port.

Only the standard library (the driver's helpers; `driver.py` says what a run is).
"""

import os
import socket

# torchrun builds its LocalElasticAgent with this exit barrier timeout and has no option for
# another; the Python API takes one as the agent's `exit_barrier_timeout` argument.
EXIT_BARRIER_DEFAULT_S = 300.0
# torchrun's main, run after the agent class is given the scenario's exit barrier timeout as
# a user of the Python API would pass it. `-c` leaves torchrun's options in sys.argv[1:].
BARRIER_LAUNCH = """
import sys
from torch.distributed.elastic.agent.server import local_elastic_agent as lea
init = lea.LocalElasticAgent.__init__
def init_with_barrier_timeout(self, *args, **kwargs):
    if len(args) < 4:
        kwargs.setdefault("exit_barrier_timeout", {timeout_s!r})
    init(self, *args, **kwargs)
lea.LocalElasticAgent.__init__ = init_with_barrier_timeout
from torch.distributed.run import main
sys.exit(main())
"""


def torchrun_launch(exit_barrier_timeout_s):
    """The interpreter's arguments that start torchrun: `-m torch.distributed.run`, or the
    launch above when the scenario sets another exit barrier timeout."""
    if exit_barrier_timeout_s is None or exit_barrier_timeout_s == EXIT_BARRIER_DEFAULT_S:
        return ["-m", "torch.distributed.run"]
    return ["-c", BARRIER_LAUNCH.format(timeout_s=float(exit_barrier_timeout_s))]


def free_port(host="127.0.0.1"):
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def proc_table():
    """Every process's (parent pid, start time) from /proc."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        table[int(entry)] = (int(fields[1]), int(fields[19]))
    return table


def descendants(pid, table):
    """`pid` and every process below it, each with its start time."""
    children = {}
    for child, (parent, _) in table.items():
        children.setdefault(parent, []).append(child)
    found, todo = {}, [pid]
    while todo:
        p = todo.pop()
        if p in table and p not in found:
            found[p] = table[p][1]
            todo.extend(children.get(p, []))
    return found
