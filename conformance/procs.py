"""The processes of a real run on this machine, read from /proc, and a free loopback port.

Only the standard library (the driver's helpers; `driver.py` says what a run is).
"""

import os
import socket


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
