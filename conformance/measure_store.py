#!/usr/bin/env python3
"""Measures what the real TCPStore costs per request, and what a rendezvous client spends on
its state, on this machine.

    measure_store.py server   [--python PY] [--seconds S]   the server's CPU time per request
    measure_store.py client   [--python PY]                 one client's time per call
    measure_store.py state    [--python PY]                 encode/decode of rendezvous states

`server` runs a TCPStore server (torch's default libuv backend) alone in one process and a
client in another. For each request kind and value size it sends requests back to back for
about S seconds and divides the server process's CPU time (utime + stime from /proc) by the
requests served: the service time of the server's one event loop, without the client's own
time. `client` times each call as a Python caller sees it (median of the repetitions).
`state` builds torch's own `_RendezvousState` with N participants and times what
`C10dRendezvousBackend.set_state` and the state holder do around a compare_set: pickle and
base64 out, base64 and unpickle back. Each line of output is one JSON object. The
calibration in docs/fidelity.md ("What the store costs") comes from this script.
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import time

SIZES = [0, 1_000, 10_000, 100_000, 200_000, 400_000, 700_000, 1_000_000]

SERVER = r"""
import datetime, sys, time
import torch.distributed as dist
store = dist.TCPStore("127.0.0.1", int(sys.argv[1]), 1, is_master=True,
                      timeout=datetime.timedelta(seconds=600), wait_for_workers=False)
print("ready", flush=True)
time.sleep(3600)
"""


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def value(size, fill):
    return (fill * size)[:size] if size else fill[:1]


def operations(store, size):
    """Each request kind at one value size: a callable that sends one request."""
    stored = value(size, "a")
    other = value(size, "b")
    store.set("v", stored)
    turns = [stored.encode()]
    return {
        # A compare_set that does not write, as most of a join storm's are: it carries the
        # expected and desired values and answers the value it found.
        "compare_set_fails": lambda: store.compare_set("v", other, other),
        # One that writes: expected matches, and the two values take turns.
        "compare_set_writes": lambda: turns.__setitem__(
            0, store.compare_set("v", turns[0], other if turns[0] == stored.encode() else stored)
        ),
        "get": lambda: store.get("v"),
        # set reads no reply; a check after it makes the server take it before the next.
        "set_then_check": lambda: (store.set("s", stored), store.check(["s"])),
        "check": lambda: store.check(["v"]),
    }


def measure_server(args):
    port = free_port()
    server = subprocess.Popen([args.python, "-c", SERVER, str(port)], stdout=subprocess.PIPE, text=True)
    try:
        server.stdout.readline()
        import datetime
        import torch.distributed as dist

        store = dist.TCPStore("127.0.0.1", port, 1, is_master=False,
                              timeout=datetime.timedelta(seconds=600))
        for size in SIZES:
            for kind, op in operations(store, size).items():
                op()
                requests = 0
                cpu_start = cpu_seconds(server.pid)
                wall_start = time.perf_counter()
                while time.perf_counter() - wall_start < args.seconds:
                    op()
                    requests += 2 if kind == "set_then_check" else 1
                cpu = cpu_seconds(server.pid) - cpu_start
                wall = time.perf_counter() - wall_start
                print(json.dumps(dict(measure="server", kind=kind, value_bytes=size,
                                      requests=requests,
                                      server_cpu_us_per_request=round(cpu / requests * 1e6, 2),
                                      wall_us_per_call=round(wall / (requests / (2 if kind == "set_then_check" else 1)) * 1e6, 2))),
                      flush=True)
    finally:
        server.kill()


def measure_client(args):
    import datetime
    import torch.distributed as dist

    port = free_port()
    store = dist.TCPStore("127.0.0.1", port, 1, is_master=True,
                          timeout=datetime.timedelta(seconds=600), wait_for_workers=False)
    for size in SIZES:
        for kind, op in operations(store, size).items():
            store.set("v", value(size, "a"))
            times = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                op()
                times.append(time.perf_counter() - start)
            times.sort()
            print(json.dumps(dict(measure="client", kind=kind, value_bytes=size,
                                  median_us=round(times[len(times) // 2] * 1e6, 1))), flush=True)


def measure_state(args):
    import pickle
    from base64 import b64decode, b64encode
    from datetime import datetime, timedelta

    from torch.distributed.elastic.rendezvous.dynamic_rendezvous import _NodeDesc, _RendezvousState

    for nodes in [64, 256, 1024, 2048, 4096]:
        state = _RendezvousState()
        state.round = 1
        state.deadline = datetime(2026, 1, 1)
        for i in range(nodes):
            desc = _NodeDesc(f"node-{i}.cluster.example.com", 10_000 + i, 0)
            state.participants[desc] = i
            state.last_heartbeats[desc] = datetime(2026, 1, 1) + timedelta(microseconds=i)
        reps = max(3, 2000 // nodes)
        start = time.perf_counter()
        for _ in range(reps):
            text = b64encode(pickle.dumps(state)).decode()
        encode = (time.perf_counter() - start) / reps
        start = time.perf_counter()
        for _ in range(reps):
            pickle.loads(b64decode(text))
        decode = (time.perf_counter() - start) / reps
        print(json.dumps(dict(measure="state", nodes=nodes, value_bytes=len(text),
                              encode_us=round(encode * 1e6, 1), decode_us=round(decode * 1e6, 1))),
              flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["server", "client", "state"])
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--seconds", type=float, default=1.5)
    parser.add_argument("--repeats", type=int, default=41)
    args = parser.parse_args()
    if os.path.realpath(args.python) != os.path.realpath(sys.executable):
        os.execv(args.python, [args.python, __file__] + sys.argv[1:])
    {"server": measure_server, "client": measure_client, "state": measure_state}[args.what](args)


if __name__ == "__main__":
    main()
