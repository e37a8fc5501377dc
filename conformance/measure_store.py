#!/usr/bin/env python3
"""Measures what the real TCPStore costs per request, and what a rendezvous client spends on
its state, on this machine.

    measure_store.py server   [--python PY] [--seconds S]   the server's CPU time per request
    measure_store.py client   [--python PY]                 one client's time per call
    measure_store.py state    [--python PY]                 encode/decode of rendezvous states
    measure_store.py storm    [--python PY] [--clients N]... [--seconds S] [--pin]
                                                            large compare_sets and small gets at once
    measure_store.py refused  [--python PY] [--clients N] [--timeout S]
                                                            connects where nothing listens

`server` runs a TCPStore server (torch's default libuv backend) alone in one process and a
client in another. For each request kind and value size it sends requests back to back for
about S seconds and divides the server process's CPU time (utime + stime from /proc) by the
requests served: the service time of the server's one event loop, without the client's own
time. `client` times each call as a Python caller sees it (median of the repetitions).
`state` builds torch's own `_RendezvousState` with N participants and times what
`C10dRendezvousBackend.set_state` and the state holder do around a compare_set: pickle and
base64 out, base64 and unpickle back. `storm` starts the server, then N clients (threads
spread over --processes client processes) that each send failing compare_sets of 400 kB
(expected and desired both 400 kB) back to back, and one more client that sends small
`get`s; after a warm-up it times every call for S seconds and reports the medians and p99 of
both, and the server's CPU per request over the window; with `--pin` the server runs on the
first CPU alone and every client on the others, as a store host serves clients on other
hosts in a deployment. `refused` starts N client threads at
once, each constructing a TCPStore client for a port where nothing listens, and reports when
each gave up (its constructor's socket connects and their delays). Each line of output is one JSON object. The
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


STORM_CLIENT = r"""
import datetime, json, sys, threading, time
import torch.distributed as dist
port, threads, size, small = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
def connect():
    return dist.TCPStore("127.0.0.1", port, 1, is_master=False,
                         timeout=datetime.timedelta(seconds=600))
stores = [connect() for _ in range(threads)]
value = "b" * size
print("ready", flush=True)
start_at, stop_at = (float(x) for x in sys.stdin.readline().split())
records = [[] for _ in stores]
def cas_loop(i, store):
    while time.time() < start_at:
        time.sleep(0.001)
    while time.time() < stop_at:
        t0 = time.time()
        store.compare_set("v", value, value)
        records[i].append((t0, time.time() - t0))
def get_loop(i, store):
    while time.time() < start_at:
        time.sleep(0.001)
    while time.time() < stop_at:
        t0 = time.time()
        store.get("g")
        records[i].append((t0, time.time() - t0))
        time.sleep(0.01)
loop = get_loop if small else cas_loop
workers = [threading.Thread(target=loop, args=(i, s)) for i, s in enumerate(stores)]
for w in workers: w.start()
for w in workers: w.join()
print(json.dumps([r for rs in records for r in rs]), flush=True)
"""


def quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else None


def pinned_to(cpus):
    """A `preexec_fn` that keeps the child on `cpus`, or None to leave it unpinned."""
    if cpus is None:
        return None
    return lambda: os.sched_setaffinity(0, cpus)


def measure_storm(args):
    port = free_port()
    every = sorted(os.sched_getaffinity(0))
    server_cpus, client_cpus = ({every[0]}, set(every[1:])) if args.pin else (None, None)
    if args.pin and not client_cpus:
        raise SystemExit("--pin needs at least two CPUs")
    server = subprocess.Popen([args.python, "-c", SERVER, str(port)], stdout=subprocess.PIPE, text=True,
                              preexec_fn=pinned_to(server_cpus))
    try:
        server.stdout.readline()
        import datetime
        import torch.distributed as dist

        seed = dist.TCPStore("127.0.0.1", port, 1, is_master=False,
                             timeout=datetime.timedelta(seconds=600))
        seed.set("v", "a" * args.value_bytes)
        seed.set("g", "x")
        for clients in args.clients:
            procs = []
            per = [clients // args.processes + (1 if i < clients % args.processes else 0)
                   for i in range(args.processes)]
            for threads in [n for n in per if n] + [1]:
                small = "1" if len(procs) == len([n for n in per if n]) else "0"
                procs.append(subprocess.Popen(
                    [args.python, "-c", STORM_CLIENT, str(port), str(threads),
                     str(args.value_bytes), small],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                    preexec_fn=pinned_to(client_cpus)))
            for p in procs:
                p.stdout.readline()
            start_at = time.time() + 1.0 + args.warmup
            stop_at = start_at + args.seconds
            for p in procs:
                p.stdin.write(f"{time.time() + 1.0} {stop_at}\n")
                p.stdin.flush()
            while time.time() < start_at:
                time.sleep(0.01)
            cpu_start = cpu_seconds(server.pid)
            while time.time() < stop_at:
                time.sleep(0.01)
            cpu = cpu_seconds(server.pid) - cpu_start
            results = [json.loads(p.stdout.readline()) for p in procs]
            for p in procs:
                p.wait()
            window = lambda rs: [d for t, d in rs if start_at <= t and t + d <= stop_at]
            cas = [d for r in results[:-1] for d in window(r)]
            gets = window(results[-1])
            # Each compare_set is one request, each get two (WAIT, then GET).
            requests = len(cas) + 2 * len(gets)
            ms = lambda x: None if x is None else round(x * 1e3, 1)
            print(json.dumps(dict(
                measure="storm", clients=clients, value_bytes=args.value_bytes, pinned=args.pin,
                seconds=args.seconds, compare_sets=len(cas), gets=len(gets),
                compare_set_ms_p50=ms(quantile(cas, 0.5)), compare_set_ms_p99=ms(quantile(cas, 0.99)),
                get_ms_p50=ms(quantile(gets, 0.5)), get_ms_p99=ms(quantile(gets, 0.99)),
                server_cpu_us_per_compare_set=round((cpu - 2 * len(gets) * 50e-6) / max(1, len(cas)) * 1e6, 1),
                server_cpu_busy=round(cpu / args.seconds, 3), requests=requests)), flush=True)
    finally:
        server.kill()


def measure_refused(args):
    import datetime
    import threading

    import torch.distributed as dist

    spans = []

    def one():
        port = free_port()
        started = time.monotonic()
        try:
            dist.TCPStore("127.0.0.1", port, 2, False,
                          timeout=datetime.timedelta(seconds=args.timeout))
        except Exception:
            spans.append(time.monotonic() - started)

    clients = args.clients[0]
    threads = [threading.Thread(target=one) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    spans.sort()
    print(json.dumps(dict(measure="refused", clients=clients, timeout_s=args.timeout,
                          gave_up_s=[round(x, 2) for x in spans],
                          median_s=round(quantile(spans, 0.5), 2))), flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["server", "client", "state", "storm", "refused"])
    parser.add_argument("--clients", type=int, nargs="+", default=[16, 64, 256])
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--value-bytes", type=int, default=400_000)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--seconds", type=float, default=1.5)
    parser.add_argument("--repeats", type=int, default=41)
    parser.add_argument("--timeout", type=float, default=10.0, help="refused: the store timeout, s")
    parser.add_argument("--pin", action="store_true", help="storm: the server on a CPU of its own")
    args = parser.parse_args()
    if os.path.realpath(args.python) != os.path.realpath(sys.executable):
        os.execv(args.python, [args.python, __file__] + sys.argv[1:])
    {"server": measure_server, "client": measure_client, "state": measure_state,
     "storm": measure_storm, "refused": measure_refused}[args.what](args)


if __name__ == "__main__":
    main()
