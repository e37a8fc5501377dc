"""A small stand-in for trainsim's simulator, to test the host without it.

It speaks the host's protocol over pipes and plays the world: one clock, a store held in a
dict (blocking gets wait for their keys), parks and unparks, and workers that finish after a
set time. Events run in time order, ties in the order they were scheduled, so a test run is
deterministic as the real simulator's is.
"""

import base64
import heapq
import json
import os
import subprocess
import sys

HOST = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "trainsim_torchplane", "host.py")


class FakeWorld:
    def __init__(self, python, nodes=3, work_s=5.0, overlay=None, time_limit_s=300.0):
        argv = [python, "-s", "-B", HOST] + (["--overlay", overlay] if overlay else [])
        env = dict(os.environ, PYTHONHASHSEED="0", TZ="UTC", LOGLEVEL="WARNING")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        self.nodes, self.work_s, self.time_limit_s = nodes, work_s, time_limit_s
        self.now = 0.0
        self.queue = []
        self.seq = 0
        self.store = {}
        self.blocked = []  # (keys, fiber, op, deadline)
        self.parked = {}  # key -> [(fiber, token)]
        self.tokens = {}
        self.fiber_node = {}
        self.workers = {}  # node -> (start time, closed)
        self.events = []
        self.exits = {}
        self.argv_min_nodes = 1

    def ask(self, msg):
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the host died")
        return json.loads(line)

    def at(self, t, fiber, reply):
        self.seq += 1
        heapq.heappush(self.queue, (t, self.seq, fiber, reply))

    def argv(self, index):
        conf = "join_timeout=60,last_call_timeout=1,close_timeout=10,heartbeat_timeout=5,keep_alive_interval=1,is_host=0"
        return ["--nnodes", f"{self.argv_min_nodes}:{max(self.nodes, self.argv_min_nodes)}", "--nproc-per-node", "1", "--max-restarts", "0",
                "--monitor-interval", "0.5", "--rdzv-backend", "c10d", "--rdzv-endpoint", "store:29400",
                "--rdzv-id", "test", "--rdzv-conf", conf, "--local-addr", f"node-{index}", "train.py"]

    def run(self):
        hello = self.ask({"cmd": "hello"})
        assert "hello" in hello, hello
        self.ask({"cmd": "run", "env": {}})
        for i in range(self.nodes):
            node = {"index": i, "name": f"node-{i}", "pid": 1000 + i}
            fid = self.ask({"cmd": "spawn_agent", "node": node, "seed": i, "argv": self.argv(i)})["fiber"]
            self.fiber_node[fid] = i
            self.at(0.0, fid, {})
        while self.queue and self.now <= self.time_limit_s:
            t, _, fiber, reply = heapq.heappop(self.queue)
            self.now = t
            if isinstance(reply, tuple):
                if not self.tokens.pop(reply[1], False):
                    continue
                for key in list(self.parked):
                    self.parked[key] = [p for p in self.parked[key] if p[1] != reply[1]]
                reply = {"woken": False}
            reply = dict(reply, clock=[1000.0 + t, 1.7e9 + t])
            self.handle(fiber, self.ask({"cmd": "resume", "fiber": fiber, "reply": reply}))
        self.ask({"cmd": "end_run"})
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        return self

    def handle(self, fiber, msg):
        if "exit" in msg:
            self.exits[self.fiber_node[fiber], fiber] = msg["exit"]
            self.unpark(f"exit:{fiber}")
            return
        call = msg["call"]
        getattr(self, "call_" + call)(fiber, msg)

    def call_sleep(self, fiber, msg):
        self.at(self.now + msg["s"], fiber, {})

    def call_record(self, fiber, msg):
        self.events.append((round(self.now, 6), self.fiber_node[fiber], msg["event"]))
        self.at(self.now, fiber, {})

    def call_spawn(self, fiber, msg):
        self.fiber_node[msg["child"]] = self.fiber_node[fiber]
        self.at(self.now, msg["child"], {})
        self.at(self.now, fiber, {})

    def call_free_port(self, fiber, msg):
        self.seq += 1
        self.at(self.now, fiber, {"port": 30000 + self.seq})

    def call_park(self, fiber, msg):
        self.seq += 1
        token = self.seq
        self.parked.setdefault(msg["key"], []).append((fiber, token))
        if msg["timeout_s"] is not None:
            self.tokens[token] = True
            self.at(self.now + msg["timeout_s"], fiber, ("timeout", token))

    def unpark(self, key):
        for fiber, token in self.parked.pop(key, []):
            self.tokens[token] = False
            self.at(self.now, fiber, {"woken": True})

    def call_unpark(self, fiber, msg):
        self.unpark(msg["key"])
        self.at(self.now, fiber, {})

    def call_store_connect(self, fiber, msg):
        self.at(self.now + 0.001, fiber, {"store": 1, "port": msg["port"] or 29500})

    def call_workers_start(self, fiber, msg):
        node = self.fiber_node[fiber]
        self.workers[node] = [self.now, False]
        self.events.append((round(self.now, 6), node, {"kind": "workers_started", "envs": msg["envs"]}))
        self.at(self.now, fiber, {"pids": [5000 + node * 10 + i for i in range(len(msg["envs"]))]})

    def call_workers_poll(self, fiber, msg):
        start, _ = self.workers[self.fiber_node[fiber]]
        state = "succeeded" if self.now - start >= self.work_s else "running"
        self.at(self.now, fiber, {"state": state})

    def call_workers_close(self, fiber, msg):
        self.workers[self.fiber_node[fiber]][1] = True
        self.at(self.now + 0.05, fiber, {})

    def wake_blocked(self):
        e = lambda v: base64.b64encode(v).decode()
        still = []
        for keys, fiber, op in self.blocked:
            if all(k in self.store for k in keys):
                vals = [e(self.store[k]) for k in keys]
                self.at(self.now + 0.001, fiber, {"value": vals[0]} if op == "get" else {"values": vals})
            else:
                still.append((keys, fiber, op))
        self.blocked = still

    def call_store(self, fiber, msg):
        self.store_op(fiber, msg)
        self.wake_blocked()

    def store_op(self, fiber, msg):
        op = msg["op"]
        later = self.now + 0.001
        b = lambda v: base64.b64decode(v)
        e = lambda v: base64.b64encode(v).decode()
        if op in ("set", "set_timeout"):
            if op == "set":
                self.store[msg["key"]] = b(msg["value"])
            self.at(later, fiber, {})
        elif op == "compare_set":
            cur = self.store.get(msg["key"])
            exp, des = b(msg["expected"]), b(msg["desired"])
            if (cur is None and exp == b"") or cur == exp:
                self.store[msg["key"]] = des
                cur = des
            elif cur is None:
                cur = exp
            self.at(later, fiber, {"value": e(cur)})
        elif op == "add":
            cur = int(self.store.get(msg["key"], b"0")) + msg["amount"]
            self.store[msg["key"]] = str(cur).encode()
            self.at(later, fiber, {"int": cur})
        elif op in ("get", "wait", "multi_get"):
            keys = [msg["key"]] if op == "get" else msg["keys"]
            if all(k in self.store for k in keys):
                vals = [e(self.store[k]) for k in keys]
                self.at(later, fiber, {"value": vals[0]} if op == "get" else {"values": vals})
            else:
                self.blocked.append((keys, fiber, op))

        elif op == "multi_set":
            for k, v in zip(msg["keys"], msg["values"]):
                self.store[k] = b(v)
            self.at(later, fiber, {})
        elif op == "check":
            self.at(later, fiber, {"bool": all(k in self.store for k in msg["keys"])})
        elif op == "delete_key":
            self.at(later, fiber, {"bool": self.store.pop(msg["key"], None) is not None})
        elif op == "num_keys":
            self.at(later, fiber, {"int": len(self.store)})
        else:
            raise AssertionError(f"unknown store op {op}")
