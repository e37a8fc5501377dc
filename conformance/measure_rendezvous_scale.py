#!/usr/bin/env python3
"""Runs N of torch's real `DynamicRendezvousHandler`s (c10d backend) against one real TCPStore
on this machine, all joining round 0 at once, and records how long the round takes to form.

    measure_rendezvous_scale.py [--python PY] [--nodes N]... [--processes P]
                                [--cas-backoff-max S] [--keep-alive-max-attempt K]
                                [--limit-seconds L]

The store is a TCPStore server (torch's default libuv backend) in a process of its own. The
N handlers are threads spread over P client processes (each thread its own store client, as
each agent has its own); min_nodes = max_nodes = N, so the round completes when the last
one joins. Every handler calls `next_rendezvous()` at the same wall instant. Each handler's
backend is wrapped to count its compare-and-sets (`set_state` calls) and how many of them
wrote (`set_state`'s `has_set`), and its state reads. One JSON line per N: when the first and
the last handler returned (seconds after the start), how many returned within the limit,
the compare-and-sets and landed writes, and the CPU seconds of the server and of the client
processes (from their start, connecting included) over the run.
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import time

SERVER = r"""
import datetime, sys, time
import torch.distributed as dist
store = dist.TCPStore("127.0.0.1", int(sys.argv[1]), 1, is_master=True,
                      timeout=datetime.timedelta(seconds=900), wait_for_workers=False)
print("ready", flush=True)
time.sleep(3600)
"""

CLIENT = r"""
import json, os, sys, threading, time
from torch.distributed.elastic.rendezvous import RendezvousParameters
from torch.distributed.elastic.rendezvous import c10d_rendezvous_backend as c10d
from torch.distributed.elastic.rendezvous import dynamic_rendezvous as dyn

port, threads, nodes, run_id = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
backoff, keep_alive_max_attempt = float(sys.argv[5]), int(sys.argv[6])
lock = threading.Lock()
counts = dict(compare_sets=0, landed=0, reads=0)
original_set, original_get = c10d.C10dRendezvousBackend.set_state, c10d.C10dRendezvousBackend.get_state
def set_state(self, state, token=None):
    result = original_set(self, state, token)
    with lock:
        counts["compare_sets"] += 1
        counts["landed"] += 1 if result is not None and result[2] else 0
    return result
def get_state(self):
    with lock:
        counts["reads"] += 1
    return original_get(self)
c10d.C10dRendezvousBackend.set_state = set_state
c10d.C10dRendezvousBackend.get_state = get_state
handlers = []
for i in range(threads):
    params = RendezvousParameters(
        backend="c10d", endpoint=f"127.0.0.1:{port}", run_id=run_id,
        min_nodes=nodes, max_nodes=nodes, is_host=False,
        cas_backoff_max_seconds=backoff, keep_alive_max_attempt=keep_alive_max_attempt)
    backend, store = c10d.create_backend(params)
    handlers.append(dyn.create_handler(store, backend, params))
print("ready", flush=True)
start_at, stop_at = (float(x) for x in sys.stdin.readline().split())
done, errors = [], []
def join(h):
    while time.time() < start_at:
        time.sleep(0.0005)
    try:
        h.next_rendezvous()
        with lock:
            done.append(time.time() - start_at)
    except Exception as e:
        with lock:
            errors.append(type(e).__name__ + ": " + str(e)[:200])
workers = [threading.Thread(target=join, args=(h,), daemon=True) for h in handlers]
for w in workers: w.start()
for w in workers:
    w.join(timeout=max(0.0, stop_at - time.time()))
with lock:
    print(json.dumps(dict(done=sorted(done), errors=errors[:3], error_count=len(errors),
                          cpu_s=time.process_time(), **counts)), flush=True)
os._exit(0)
"""


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(args, nodes):
    port = free_port()
    server = subprocess.Popen([args.python, "-c", SERVER, str(port)], stdout=subprocess.PIPE, text=True)
    procs = []
    try:
        server.stdout.readline()
        per = [nodes // args.processes + (1 if i < nodes % args.processes else 0)
               for i in range(args.processes)]
        for threads in [n for n in per if n]:
            procs.append(subprocess.Popen(
                [args.python, "-c", CLIENT, str(port), str(threads), str(nodes), f"scale{nodes}",
                 str(args.cas_backoff_max), str(args.keep_alive_max_attempt)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
        for p in procs:
            p.stdout.readline()
        start_at = time.time() + 1.0
        stop_at = start_at + args.limit_seconds
        for p in procs:
            p.stdin.write(f"{start_at} {stop_at}\n")
            p.stdin.flush()
        cpu_start = cpu_seconds(server.pid)
        results = [json.loads(p.stdout.readline()) for p in procs]
        cpu = cpu_seconds(server.pid) - cpu_start
        done = sorted(d for r in results for d in r["done"])
        print(json.dumps(dict(
            measure="rendezvous_scale", nodes=nodes, processes=len(procs),
            cas_backoff_max_seconds=args.cas_backoff_max,
            keep_alive_max_attempt=args.keep_alive_max_attempt,
            limit_seconds=args.limit_seconds, returned=len(done),
            formed=len(done) == nodes,
            first_returned_s=round(done[0], 2) if done else None,
            last_returned_s=round(done[-1], 2) if done else None,
            compare_sets=sum(r["compare_sets"] for r in results),
            landed=sum(r["landed"] for r in results),
            state_reads=sum(r["reads"] for r in results),
            errors=sum(r["error_count"] for r in results),
            first_errors=[e for r in results for e in r["errors"]][:2],
            server_cpu_s=round(cpu, 2),
            clients_cpu_s=round(sum(r["cpu_s"] for r in results), 1))), flush=True)
    finally:
        for p in procs:
            p.kill()
        server.kill()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--nodes", type=int, nargs="+", default=[64, 128, 256])
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--cas-backoff-max", type=float, default=0.0)
    parser.add_argument("--keep-alive-max-attempt", type=int, default=200)
    parser.add_argument("--limit-seconds", type=float, default=240.0)
    args = parser.parse_args()
    if os.path.realpath(args.python) != os.path.realpath(sys.executable):
        os.execv(args.python, [args.python, __file__] + sys.argv[1:])
    for nodes in args.nodes:
        run(args, nodes)


if __name__ == "__main__":
    main()
