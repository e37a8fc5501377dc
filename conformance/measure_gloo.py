#!/usr/bin/env python3
"""Measures how torch's gloo process group meets a dead or silent peer on this machine.

    measure_gloo.py ring-kill    [--python PY]   SIGKILL a rank inside a large all-reduce
    measure_gloo.py ring-stop    [--python PY]   SIGSTOP a rank inside a large all-reduce
    measure_gloo.py idle-kill    [--python PY]   SIGKILL a rank while the others compute
    measure_gloo.py stale        [--python PY]   a second group reads the first group's
                                                 addresses from the same store
    measure_gloo.py spread       [--python PY]   start a group's ranks at once, as an agent
                                 [--world N]     does, and time when each one is ready to
                                 [--repeat K]    publish its gloo address

Each prints one JSON line per worker outcome: its rank, what ended it, and seconds from the
fault (or, for `stale`, from its own start, which includes 2 to 3 s of importing torch) to
the end; `spread` prints one line per group: each rank's seconds from the spawn to its
`init_process_group` call, and the spread between the first and the last rank. The ranks are processes on this machine's loopback, with a TCPStore on 127.0.0.1
that outlives the groups, as the rank-0 agent's store does under torchrun. The figures in
docs/fidelity.md ("Collectives") come from this script.
"""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time

WORKER = r"""
import datetime, json, os, sys, time
import torch, torch.distributed as dist
rank, world, port, timeout_s, numel, mode = (int(sys.argv[1]), int(sys.argv[2]),
    int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
def say(event, **kw):
    print(json.dumps(dict(t=time.time(), rank=rank, event=event, **kw)), flush=True)
store = dist.TCPStore("127.0.0.1", port, world, is_master=False,
                      timeout=datetime.timedelta(seconds=timeout_s))
say("start")
try:
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout_s))
    say("ready")
    tensor = torch.ones(numel)
    for step in range(1000000):
        if mode == "idle":
            time.sleep(1.0)
        say("enter", step=step)
        dist.all_reduce(tensor)
        say("done", step=step)
        if mode == "once":
            break
    dist.destroy_process_group()
    say("finish")
except Exception as e:
    say("error", error=f"{type(e).__name__}: {e}"[:400])
    sys.stdout.flush()
    os._exit(1)
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(py, rank, world, port, timeout_s, numel, mode):
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", PYTHONUNBUFFERED="1")
    return subprocess.Popen(
        [py, "-c", WORKER, str(rank), str(world), str(port), str(timeout_s), str(numel), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        text=True,
    )


def events(proc):
    out = []
    for line in proc.stdout:
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def store_server(port, world):
    import datetime

    import torch.distributed as dist

    return dist.TCPStore(
        "127.0.0.1",
        port,
        world,
        is_master=True,
        timeout=datetime.timedelta(seconds=300),
        wait_for_workers=False,
    )


def wait_line(proc, event, step=None):
    """Reads the process's lines until `event` (at `step`, if given); returns the lines."""
    seen = []
    for line in proc.stdout:
        record = json.loads(line)
        seen.append(record)
        if record["event"] == event and (step is None or record.get("step") == step):
            return seen
    return seen


def fault_in_collective(py, sig, timeout_s, numel, mode="ring"):
    world = 3
    port = free_port()
    _server = store_server(port, world)
    procs = [spawn(py, r, world, port, timeout_s, numel, mode) for r in range(world)]
    # Let a few collectives pass so their duration is known, then hit rank 2 inside one.
    lines = wait_line(procs[0], "done", step=3)
    enters = [x["t"] for x in lines if x["event"] == "enter"]
    dones = [x["t"] for x in lines if x["event"] == "done"]
    ring_s = dones[-1] - enters[-1]
    if mode == "idle":
        time.sleep(0.3)  # the ranks now sleep their 1 s of "compute"
    else:
        wait_line(procs[0], "enter", step=4)
        time.sleep(ring_s / 3)
    fault_t = time.time()
    os.kill(procs[2].pid, sig)
    results = []
    for rank in (0, 1):
        for record in events(procs[rank]):
            if record["event"] == "error":
                results.append(
                    {
                        "rank": rank,
                        "seconds_after_fault": round(record["t"] - fault_t, 3),
                        "collective_s": round(ring_s, 3),
                        "error": record["error"],
                    }
                )
    if sig == signal.SIGSTOP:
        os.kill(procs[2].pid, signal.SIGKILL)
    for p in procs:
        p.wait()
    return results


def stale(py, timeout_s, late_rank, late_s):
    """Group A forms and exits cleanly; group B reuses the store, one rank `late_s` late."""
    world = 2
    port = free_port()
    _server = store_server(port, world)
    first = [spawn(py, r, world, port, timeout_s, 1, "once") for r in range(world)]
    for p in first:
        events(p)
        p.wait()
    starts = {}
    second = []
    for r in range(world):
        if r == late_rank:
            time.sleep(late_s)
        starts[r] = time.time()
        second.append(spawn(py, r, world, port, timeout_s, 1, "once"))
    results = []
    for r, p in enumerate(second):
        for record in events(p):
            if record["event"] in ("error", "finish"):
                results.append(
                    {
                        "rank": r,
                        "late": r == late_rank,
                        "event": record["event"],
                        "seconds_after_start": round(record["t"] - starts[r], 3),
                        "error": record.get("error"),
                    }
                )
        p.wait()
    return results


def spread(py, world, repeat):
    """Starts `world` ranks at once, `repeat` times; when each reaches its gloo setup."""
    out = []
    for _ in range(repeat):
        port = free_port()
        _server = store_server(port, world)
        spawned = time.time()
        group = [spawn(py, r, world, port, 20.0, 1, "once") for r in range(world)]
        ready = []
        for p in group:
            ready += [e["t"] - spawned for e in events(p) if e["event"] == "start"]
            p.wait()
        out.append(
            {
                "world": world,
                "seconds_to_setup": sorted(round(t, 3) for t in ready),
                "spread_s": round(max(ready) - min(ready), 3),
            }
        )
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["ring-kill", "ring-stop", "idle-kill", "stale", "spread"])
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--timeout", type=float, default=20.0, help="process-group timeout, s")
    ap.add_argument("--numel", type=int, default=32 << 20, help="floats all-reduced")
    ap.add_argument("--late-rank", type=int, default=1)
    ap.add_argument("--late", type=float, default=3.0, help="seconds the late rank waits")
    ap.add_argument("--world", type=int, default=2, help="ranks started at once (spread)")
    ap.add_argument("--repeat", type=int, default=10, help="groups started (spread)")
    a = ap.parse_args()
    if a.what == "ring-kill":
        out = fault_in_collective(a.python, signal.SIGKILL, a.timeout, a.numel)
    elif a.what == "ring-stop":
        out = fault_in_collective(a.python, signal.SIGSTOP, a.timeout, a.numel)
    elif a.what == "idle-kill":
        out = fault_in_collective(a.python, signal.SIGKILL, a.timeout, a.numel, "idle")
    elif a.what == "spread":
        out = spread(a.python, a.world, a.repeat)
    else:
        out = stale(a.python, a.timeout, a.late_rank, a.late)
    for line in out:
        print(json.dumps(line))


if __name__ == "__main__":
    main()
