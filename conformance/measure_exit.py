#!/usr/bin/env python3
"""Measures how long a torch worker takes to exit, and how a gloo peer's death spreads.

    measure_exit.py exit   [--python PY] [--world N] [--ending E]   error → process exit
    measure_exit.py spread [--python PY] [--world N] [--ending E]   SIGKILL one rank of a ring

`exit`: N ranks of a gloo group on this machine's loopback all-reduce a few times, then
every rank ends its script the way `--ending` says, logging the moment just before:
`raise` (an uncaught RuntimeError, as a training script that meets an error), `os_exit`
(`os._exit(1)`, as conformance/worker.py does), or `return` (the script ends normally).
Each line gives a rank's seconds from that moment to the process's exit as its parent
saw it (`Popen.wait` in a thread of its own; torchrun's agent polls the same exit).

`spread`: N ranks all-reduce a large tensor; rank N//2 is SIGKILLed inside one. Each other
rank logs when its collective raised and ends with `--ending`; each line gives, per rank,
its distance along the ring from the dead rank, when its collective raised and when its
process exited, in seconds from the SIGKILL. The figures in docs/fidelity.md ("Collectives",
"Worker exit") come from this script.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure_gloo import free_port, store_server  # noqa: E402  (the same loopback set-up)

WORKER = r"""
import datetime, json, os, sys, time
import torch, torch.distributed as dist
rank, world, port, numel, ending, rounds = (int(sys.argv[1]), int(sys.argv[2]),
    int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], int(sys.argv[6]))
def say(event, **kw):
    print(json.dumps(dict(t=time.time(), rank=rank, event=event, **kw)), flush=True)
store = dist.TCPStore("127.0.0.1", port, world, is_master=False,
                      timeout=datetime.timedelta(seconds=60))
dist.init_process_group("gloo", store=store, rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=60))
tensor = torch.ones(numel)
def end(why):
    say("ending", why=why)
    if ending == "os_exit":
        os._exit(1)
    if ending == "raise":
        raise RuntimeError(why)
try:
    for step in range(rounds):
        say("enter", step=step)
        dist.all_reduce(tensor)
        say("done", step=step)
except Exception as e:
    end(f"{type(e).__name__}: {e}"[:300])
else:
    end("finished")
"""


class Rank:
    """One worker process, its JSON lines and the moment its parent saw it exit."""

    def __init__(self, py, rank, world, port, numel, ending, rounds):
        env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", PYTHONUNBUFFERED="1")
        self.rank = rank
        self.lines = []
        self.exited_t = None
        self.proc = subprocess.Popen(
            [py, "-c", WORKER, str(rank), str(world), str(port), str(numel), ending,
             str(rounds)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
        self.got = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._wait, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            with self.got:
                self.lines.append(record)
                self.got.notify_all()

    def _wait(self):
        self.proc.wait()
        self.exited_t = time.time()

    def wait_for(self, event, step=None):
        with self.got:
            while not any(x["event"] == event and (step is None or x.get("step") == step)
                          for x in self.lines):
                if not self.got.wait(timeout=120):
                    raise SystemExit(f"rank {self.rank} never logged {event}")

    def first(self, event):
        return next((x for x in self.lines if x["event"] == event), None)

    def join(self):
        self.proc.wait()
        while self.exited_t is None:
            time.sleep(0.001)


def exit_times(py, world, ending):
    port = free_port()
    _server = store_server(port, world)
    ranks = [Rank(py, r, world, port, 1, ending, 3) for r in range(world)]
    out = []
    for r in ranks:
        r.join()
        ending_line = r.first("ending")
        out.append({"rank": r.rank, "world": world, "ending": ending,
                    "exit_s": round(r.exited_t - ending_line["t"], 3)})
    return out


def spread(py, world, ending, numel):
    port = free_port()
    _server = store_server(port, world)
    ranks = [Rank(py, r, world, port, numel, ending, 1_000_000) for r in range(world)]
    ranks[0].wait_for("done", step=2)
    lines = list(ranks[0].lines)
    ring_s = lines[-1]["t"] - next(x["t"] for x in lines if x["event"] == "enter"
                                    and x.get("step") == 2)
    ranks[0].wait_for("enter", step=4)
    time.sleep(ring_s / 3)
    dead = world // 2
    fault_t = time.time()
    os.kill(ranks[dead].proc.pid, signal.SIGKILL)
    out = []
    for r in ranks:
        r.join()
        if r.rank == dead:
            continue
        ending_line = r.first("ending")
        distance = min((r.rank - dead) % world, (dead - r.rank) % world)
        out.append({"rank": r.rank, "world": world, "distance": distance, "ending": ending,
                    "collective_s": round(ring_s, 3),
                    "raised_s": round(ending_line["t"] - fault_t, 3) if ending_line else None,
                    "exited_s": round(r.exited_t - fault_t, 3),
                    "error": (ending_line or {}).get("why", "")[:120]})
    return sorted(out, key=lambda x: (x["distance"], x["rank"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["exit", "spread"])
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--world", type=int, default=5)
    ap.add_argument("--ending", choices=["raise", "os_exit", "return"], default="raise")
    ap.add_argument("--numel", type=int, default=8 << 20, help="floats all-reduced")
    a = ap.parse_args()
    if a.what == "exit":
        out = exit_times(a.python, a.world, a.ending)
    else:
        out = spread(a.python, a.world, a.ending, a.numel)
    for line in out:
        print(json.dumps(line))


if __name__ == "__main__":
    main()
