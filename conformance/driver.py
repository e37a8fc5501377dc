#!/usr/bin/env python3
"""Runs a trainsim scenario file on the real torchrun on this machine and writes its signature.

    driver.py run SCENARIO.toml --out DIR [--python PY]   run it; print the signature JSON
    driver.py check SCENARIO.toml                         exit 2 (with the reason) if it cannot run
    driver.py parse DIR                                   the signature of a saved run
    driver.py cleanup [--prefix P]                        remove namespaces runs left behind

One `python -m torch.distributed.run` agent per node, each on its own loopback address
(node-N is 127.0.0.(N+1)) or, when a fault cuts links or powers a host off, in its own network
namespace (node-N is 10.77.0.(N+1), the dedicated store 10.77.0.250; see `netns.py`), with the c10d rendezvous backend: the store lives in the store
node's agent (`is_host=1`) or, with `cluster.store = "dedicated"`, in a TCPStore process of
its own. Faults land at their times on a node's agent and every process below it. Every
agent's output, the workers' JSON lines and the driver's own event log stay in DIR, so the
signature can be parsed again (and tested) without torch: see `signature.py`.

Only the standard library; torchrun runs under `--python` (default: this interpreter).
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netns  # noqa: E402  (namespaces for network faults)
import signature  # noqa: E402  (the log parser, shared with the tests)
from procs import descendants, free_port, proc_table, torchrun_launch  # noqa: E402

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = None

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "worker.py")
# The most worker processes per node: this driver runs every node on one machine.
NPROC_CAP = 2
# No run lasts longer than this, whatever its `time_limit`.
HARD_CAP_S = 300.0
# Why a fault or setting cannot run on this machine: the same sentences as
# src/conform/localhost.rs (a test holds them together), so `trainsim conform` and
# `trainsim fuzz --confirm` can refuse without starting Python.
LATENCY_LOSS = ("network latency and loss are not yet made on localhost: changing them on the "
                "loopback interface needs root (tc netem)")
CLOCK_SKEW = ("clock skew is not yet made on localhost: every node reads this machine's one wall "
              "clock")
GPU = "GPU faults cannot be made on localhost: the workers run on the CPU"
SIGNAL_CHECKPOINT = "the driver's training script has no signal handler: it never checkpoints on one"
# A partition, a clogged link or a power-off is made in network namespaces (netns.py), and
# refused only where they cannot be made (not root, no `ip netns`), with netns.py's sentences.
UNSUPPORTED = {
    "latency": LATENCY_LOSS,
    "loss": LATENCY_LOSS,
    "clock_skew": CLOCK_SKEW,
    "gpu_slow": GPU,
    "gpu_fail": GPU,
}
UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


class Refused(Exception):
    """The scenario cannot run on the real torch (exit code 2); each argument is one reason."""


def secs_text(value):
    """Seconds to the millisecond as trainsim writes them (`23.162 s`, `11 s`)."""
    ms = int(round(value * 1000))
    text = f"{ms // 1000}.{ms % 1000:03d}".rstrip("0").rstrip(".")
    return f"{text} s"


def seconds(text, field):
    for unit in ("us", "ms", "s", "m", "h"):
        if text.endswith(unit):
            number = text[: -len(unit)]
            if unit == "s" and number.endswith(("m", "u")):
                continue
            try:
                return float(number) * UNITS[unit]
            except ValueError:
                break
    raise Refused(f"{field}: '{text}' is not a duration")


def whole_seconds(text, field, problems):
    value = seconds(text, field)
    if value != int(value) or value < 1:
        problems.append(f"{field}: torch reads it as whole seconds; {secs_text(value)} is not")
    return int(value)


def node_index(name, field):
    if not isinstance(name, str) or not name.startswith("node-"):
        raise Refused(f"{field}: '{name}' is not a node name")
    return int(name[len("node-"):])


def load_plan(path):
    """Reads the scenario and turns it into what the driver needs, refusing what it can't run."""
    if tomllib is None:
        raise Refused("the driver needs Python 3.11 or later (tomllib)")
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise Refused(f"cannot read: {e}")
    cluster = doc.get("cluster", {})
    rdzv = doc.get("rendezvous", {})
    agent = doc.get("agent", {})
    job = doc.get("job", {})
    net = doc.get("network", {})
    problems = []  # every reason to refuse, in file order, as "field: why"
    if cluster.get("clock_skew"):
        problems.append(f"cluster.clock_skew: {CLOCK_SKEW}")
    if float(net.get("loss", 0.0)) > 0:
        problems.append(f"network.loss: {LATENCY_LOSS}")
    if "reader" in doc:
        problems.append("[reader]: the driver runs no HugeCTR reader")
    if "checkpoint_on_signal" in job:
        problems.append(f"job.checkpoint_on_signal: {SIGNAL_CHECKPOINT}")
    fixes = list(rdzv.get("fixes", [])) + list(agent.get("fixes", []))
    if fixes:
        problems.append(f"fixes {fixes}: real torch has no fixes; run the unfixed twin instead")
    if job.get("backend", "nccl") != "gloo":
        problems.append("job.backend: the workers use gloo on the CPU; set backend = \"gloo\"")
    nodes = int(cluster.get("nodes", 3))
    spares = int(cluster.get("spare_nodes", 0))
    gpus = int(cluster.get("gpus_per_node", 8))
    store = cluster.get("store", "node-0")
    if nodes + spares > 200:
        problems.append("cluster: more than 200 nodes on one machine")
    timeouts = {}
    for key, default in (("join_timeout", "600s"), ("last_call_timeout", "30s"),
                         ("close_timeout", "30s"), ("heartbeat_timeout", "5s"),
                         ("keep_alive_interval", "5s"), ("read_timeout", "60s")):
        timeouts[key] = whole_seconds(rdzv.get(key, default), f"rendezvous.{key}", problems)
    plan = {
        "name": doc.get("name", os.path.basename(path)),
        "nodes": nodes,
        "spare_nodes": spares,
        "store": store,
        "store_node": None if store == "dedicated" else node_index(store, "cluster.store"),
        "min_nodes": int(rdzv.get("min_nodes", 1)),
        "max_nodes": int(rdzv.get("max_nodes", nodes)),
        **timeouts,
        "keep_alive_max_attempt": int(rdzv.get("keep_alive_max_attempt", 3)),
        "nproc_per_node": min(int(agent.get("nproc_per_node", gpus)), NPROC_CAP),
        "max_restarts": int(agent.get("max_restarts", 0)),
        "monitor_interval": seconds(agent.get("monitor_interval", "100ms"), "agent.monitor_interval"),
        "share_store": bool(agent.get("share_store", True)),
        "worker_identical": bool(agent.get("worker_identical", False)),
        "signals_to_handle": ",".join(agent.get("signals_to_handle", [])),
        "steps": int(job.get("steps", 500)),
        "step_time": seconds(job.get("step_time", "200ms"), "job.step_time"),
        "checkpoint_every": int(job.get("checkpoint_every", 50)),
        "collective_timeout": seconds(job.get("collective_timeout", "10m"), "job.collective_timeout"),
        "init_method": job.get("init_method", "env"),
        "script_master_port": job.get("script_master_port"),
        "time_limit": min(seconds(doc.get("time_limit", "2h"), "time_limit"), HARD_CAP_S),
        "faults": [],
        "netns": False,  # set when a fault needs network namespaces
    }
    if "exit_barrier_timeout" in agent:
        plan["exit_barrier_timeout"] = seconds(agent["exit_barrier_timeout"], "agent.exit_barrier_timeout")
    plan["tcp_retries2"] = int(cluster.get("tcp_retries2", 15))
    net_refusal = None
    for i, fault in enumerate(doc.get("faults", [])):
        kind = fault.get("kind")
        at = seconds(fault.get("at", "0s"), f"faults[{i}].at")
        field = f"faults[{i}] ({kind} at {secs_text(at)})"
        if kind in UNSUPPORTED:
            problems.append(f"{field}: {UNSUPPORTED[kind]}")
            continue
        if kind in netns.KINDS:
            net_refusal = net_refusal or netns.refusal()
            if net_refusal:
                problems.append(f"{field}: {net_refusal}")
                continue
            plan["netns"] = True
        entry = parse_fault(fault, i, kind, at, field, plan, problems)
        if entry is not None:
            plan["faults"].append(entry)
    if problems:
        raise Refused(*problems)
    plan["faults"].sort(key=lambda f: f["at"])
    return plan


def node_list(names, field):
    """A partition group's nodes, ranges (`node-2..=node-5`) expanded."""
    out = []
    for name in names:
        if isinstance(name, str) and "..=" in name:
            first, last = name.split("..=", 1)
            out.extend(range(node_index(first, field), node_index(last, field) + 1))
        else:
            out.append(node_index(name, field))
    return out


def parse_fault(fault, i, kind, at, field, plan, problems):
    """One fault as the run applies it, or None (with a problem noted) if it cannot."""
    entry = {"at": at, "kind": kind}
    if kind in ("kill", "stop", "restart", "start", "pause", "resume", "worker_crash",
                "power_off", "signal"):
        entry["node"] = node_index(fault.get("node"), f"faults[{i}].node")
    if kind == "signal":  # the parser allows SIGUSR1 and SIGUSR2 only
        entry["signal"] = fault.get("signal")
    elif kind == "worker_crash":
        entry["local_rank"] = int(fault.get("local_rank", 0))
        entry["exit_code"] = int(fault.get("exit_code", 1))
        if entry["local_rank"] >= plan["nproc_per_node"]:
            problems.append(f"{field}: the driver runs {plan['nproc_per_node']} workers per node")
    elif kind == "store_crash":
        if plan["store"] != "dedicated":
            problems.append(f"{field}: store_crash needs cluster.store = \"dedicated\"")
    elif kind == "partition":
        entry["groups"] = [node_list(g, f"faults[{i}].groups") for g in fault.get("groups", [])]
    elif kind in ("clog_link", "unclog_link"):
        entry["from"] = node_index(fault.get("from"), f"faults[{i}].from")
        entry["to"] = node_index(fault.get("to"), f"faults[{i}].to")
    elif kind not in ("kill", "stop", "restart", "start", "pause", "resume", "heal",
                      "power_off", "signal"):
        problems.append(f"faults[{i}].kind: unknown fault kind '{kind}'")
        return None
    return entry


class Run:
    """One run: the processes it started, the faults it applies, the logs it keeps."""

    def __init__(self, plan, out, python):
        self.plan, self.out, self.python = plan, out, python
        self.events = open(os.path.join(out, "driver.jsonl"), "a")
        self.agents = {}  # node -> (proc index, Popen)
        self.procs = {}  # node -> number of agent processes started
        self.known = {}  # pid -> start time: every process this run started, for clean-up
        self.trees = {}  # node -> {pid: start time}: every process seen below its agents
        self.paused = {}  # node -> pids stopped by `pause`
        self.store = None
        self.port = None
        self.t0 = None
        self.net = None  # the run's network namespaces, when a fault needs them
        self.powered_off = set()  # nodes whose port on the bridge is down

    def record(self, event, **fields):
        fields.update(t=time.time(), event=event)
        self.events.write(json.dumps(fields, sort_keys=True) + "\n")
        self.events.flush()

    def remember(self, pid):
        self.known.update(descendants(pid, proc_table()))

    def addr(self, host):
        """A host's address: its namespace's on the run's bridge, or its loopback one."""
        if self.net is not None:
            return netns.host_addr(host)
        return "127.0.0.250" if host == netns.STORE else f"127.0.0.{host + 1}"

    def in_host(self, host):
        """The argv prefix that runs a command on a host (nothing without namespaces)."""
        return [] if self.net is None else self.net.exec_prefix(host)

    def start_net(self):
        prefix = netns.run_prefix(os.getpid(), time.time())
        hosts = list(range(self.plan["nodes"] + self.plan["spare_nodes"]))
        if self.plan["store_node"] is None:
            hosts.append(netns.STORE)
        self.net = netns.Net(prefix, hosts, self.plan["tcp_retries2"], self.record)
        self.net.up()

    def start_store(self):
        code = (
            "import sys, time, datetime, torch.distributed as d\n"
            "s = d.TCPStore(sys.argv[1], 0, is_master=True, wait_for_workers=False,"
            " timeout=datetime.timedelta(seconds=300))\n"
            "print(s.port, flush=True)\n"
            "time.sleep(86400)\n"
        )
        log = open(os.path.join(self.out, "store.log"), "w")
        self.store = subprocess.Popen(
            self.in_host(netns.STORE) + [self.python, "-c", code, self.addr(netns.STORE)],
            stdout=subprocess.PIPE, stderr=log, start_new_session=True, text=True,
        )
        self.known[self.store.pid] = proc_table().get(self.store.pid, (0, 0))[1]
        line = self.store.stdout.readline().strip()
        if not line.isdigit():
            raise RuntimeError(f"the dedicated store did not start (see {log.name})")
        self.port = int(line)
        self.record("store_started", pid=self.store.pid, port=self.port)

    def endpoint_and_host(self, node):
        if self.plan["store_node"] is None:
            return f"{self.addr(netns.STORE)}:{self.port}", 0
        host = self.plan["store_node"]
        return f"{self.addr(host)}:{self.port}", int(node == host)

    def start_agent(self, node):
        p = self.plan
        index = self.procs.get(node, 0)
        self.procs[node] = index + 1
        name = f"node-{node}"
        worker_cfg = os.path.join(self.out, f"worker-{name}.json")
        with open(worker_cfg, "w") as f:
            json.dump({
                "node": name,
                "log": os.path.join(self.out, f"workers-{name}.jsonl"),
                "control_dir": self.out,
                "checkpoint": os.path.join(self.out, "checkpoint.json"),
                "steps": p["steps"],
                "step_time": p["step_time"],
                "checkpoint_every": p["checkpoint_every"],
                "collective_timeout": p["collective_timeout"],
                "init_method": p["init_method"],
                "script_master_port": p["script_master_port"],
            }, f)
        endpoint, is_host = self.endpoint_and_host(node)
        conf = ",".join(f"{k}={p[k]}" for k in (
            "join_timeout", "last_call_timeout", "close_timeout", "heartbeat_timeout",
            "keep_alive_interval", "keep_alive_max_attempt", "read_timeout")) + f",is_host={is_host}"
        cmd = self.in_host(node) + [self.python] + torchrun_launch(p.get("exit_barrier_timeout")) + [
            "--nnodes", f"{p['min_nodes']}:{p['max_nodes']}",
            "--nproc-per-node", str(p["nproc_per_node"]),
            "--max-restarts", str(p["max_restarts"]),
            "--monitor-interval", str(p["monitor_interval"]),
            "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint, "--rdzv-id", "conform",
            "--rdzv-conf", conf, "--local-addr", self.addr(node),
            WORKER, worker_cfg,
        ]
        env = dict(os.environ)
        env.update(
            LOGLEVEL="INFO", PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1",
            TORCH_LOGS="torch.distributed.elastic.rendezvous.dynamic_rendezvous",
            PATH=os.path.dirname(self.python) + os.pathsep + env.get("PATH", ""),
        )
        if self.net is not None:  # gloo would pick the hostname's address, not the node's
            env["GLOO_SOCKET_IFNAME"] = netns.IFACE
        if not p["share_store"]:
            env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
        if p["worker_identical"]:
            env["TORCH_ELASTIC_WORKER_IDENTICAL"] = "1"
        if p["signals_to_handle"]:  # torchrun's `--signals-to-handle`
            env["PET_SIGNALS_TO_HANDLE"] = p["signals_to_handle"]
        log_name = f"agent-{name}-{index}.log"
        log = open(os.path.join(self.out, log_name), "w")
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
        log.close()
        self.agents[node] = (index, proc)
        self.remember(proc.pid)
        self.record("agent_started", node=name, proc=index, pid=proc.pid, log=log_name)

    def signal_tree(self, node, sig, whole=True):
        index, proc = self.agents[node]
        pids = descendants(proc.pid, proc_table()) if whole else {proc.pid: None}
        self.known.update({k: v for k, v in pids.items() if v is not None})
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        return pids

    def kill_orphans(self, node):
        """A node's death reaches the workers its dead agents left running (a signal's
        default action ends torchrun alone), checked by start time."""
        table = proc_table()
        agent = self.agents.get(node, (None, None))[1]
        live = descendants(agent.pid, table) if agent and agent.poll() is None else {}
        for pid, started in self.trees.get(node, {}).items():
            if pid not in live and pid in table and table[pid][1] == started:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def apply(self, fault):
        kind, node = fault["kind"], fault.get("node")
        alive = node in self.agents and self.agents[node][1].poll() is None
        self.record("fault", kind=kind, node=None if node is None else f"node-{node}",
                    applied=alive or kind in ("start", "restart", "store_crash", "partition", "heal",
                                  "clog_link", "unclog_link"))
        if kind == "power_off":  # silence first, as the model: the kills' resets stay inside
            self.net.set_port(node, up=False)
            self.powered_off.add(node)
        if kind in ("kill", "power_off", "restart", "start"):
            self.kill_orphans(node)
        if kind == "kill" and alive:
            self.signal_tree(node, signal.SIGKILL)
            self.record("agent_killed", node=f"node-{node}", proc=self.agents[node][0])
        elif kind == "stop" and alive:
            self.signal_tree(node, signal.SIGCONT, whole=False)
            self.signal_tree(node, signal.SIGTERM, whole=False)
        elif kind == "signal" and alive:  # to torchrun alone, as a scheduler's warning
            self.signal_tree(node, getattr(signal, fault["signal"]), whole=False)
        elif kind == "pause" and alive:
            self.paused[node] = self.signal_tree(node, signal.SIGSTOP)
        elif kind == "resume" and alive:
            for pid in self.paused.pop(node, {}):
                try:
                    os.kill(pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
        elif kind == "power_off" and alive:
            self.signal_tree(node, signal.SIGKILL)
            self.record("agent_killed", node=f"node-{node}", proc=self.agents[node][0])
        elif kind in ("partition", "heal", "clog_link", "unclog_link"):
            self.net.set_cut(cut_after(self.net.cut, fault))
        elif kind in ("restart", "start"):
            if node in self.powered_off:  # the host comes back up with the new agent
                self.powered_off.discard(node)
                self.net.set_port(node, up=True)
            if alive:  # a reboot of a live node: it dies first
                self.signal_tree(node, signal.SIGKILL)
                self.record("agent_killed", node=f"node-{node}", proc=self.agents[node][0])
                self.agents[node][1].wait(timeout=10)
            self.start_agent(node)
        elif kind == "worker_crash":
            path = os.path.join(self.out, f"crash-node-{node}-{fault['local_rank']}")
            with open(path + ".tmp", "w") as f:
                f.write(str(fault["exit_code"]))
            os.replace(path + ".tmp", path)
        elif kind == "store_crash" and self.store is not None:
            self.store.kill()
            self.record("store_crashed", pid=self.store.pid)

    def reap(self):
        for node, (index, proc) in self.agents.items():
            if proc.poll() is not None and not getattr(proc, "_reported", False):
                proc._reported = True
                self.record("agent_exited", node=f"node-{node}", proc=index,
                            returncode=proc.returncode)

    def main_loop(self):
        p = self.plan
        if p["netns"]:
            self.start_net()
        self.t0 = time.time()
        self.record("run", plan=p, t0=self.t0, utc_offset=time.localtime(self.t0).tm_gmtoff)
        if p["store_node"] is None:
            self.start_store()
        else:
            self.port = free_port()
        for node in range(p["nodes"]):
            self.start_agent(node)
        pending = list(p["faults"])
        tick = 0
        while True:
            now = time.time() - self.t0
            while pending and pending[0]["at"] <= now:
                self.apply(pending.pop(0))
            self.reap()
            tick += 1
            if tick % 5 == 0:  # a /proc scan every quarter second is enough to track workers
                table = proc_table()
                for node, (index, proc) in self.agents.items():
                    if proc.poll() is None:
                        tree = descendants(proc.pid, table)
                        self.known.update(tree)
                        self.trees.setdefault(node, {}).update(tree)
            starts_left = any(f["kind"] in ("start", "restart") for f in pending)
            if not starts_left and all(proc.poll() is not None for _, proc in self.agents.values()):
                self.record("end", reason="every agent exited", at=now)
                return
            if now >= p["time_limit"]:
                self.record("end", reason="time limit", at=now)
                return
            time.sleep(0.05)

    def cleanup(self):
        """Kills every process this run started that still lives, checked by start time."""
        table = proc_table()
        for node, (index, proc) in self.agents.items():
            if proc.poll() is None:
                self.known.update(descendants(proc.pid, table))
        for pid, started in sorted(self.known.items()):
            if pid in table and table[pid][1] == started and pid != os.getpid():
                for sig in (signal.SIGCONT, signal.SIGKILL):
                    try:
                        os.kill(pid, sig)
                    except ProcessLookupError:
                        break
        for index, proc in self.agents.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        if self.store is not None:
            self.store.kill()
            self.store.wait(timeout=10)
        self.reap()
        if self.net is not None:
            self.net.down()
        self.events.close()


def cut_after(cut, fault):
    """The set of cut directed links after a partition, heal, clog or unclog, as the
    simulator keeps it: a partition adds, a heal restores every link (clogs too)."""
    kind = fault["kind"]
    if kind == "partition":
        return cut | netns.cut_pairs(fault["groups"])
    if kind == "heal":
        return set()
    pair = (fault["from"], fault["to"])
    return cut | {pair} if kind == "clog_link" else cut - {pair}


def print_refusal(path, refused):
    for reason in refused.args:
        print(f"error: {path}: {reason}", file=sys.stderr)


def interrupted(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def cmd_run(args):
    try:
        plan = load_plan(args.scenario)
    except Refused as e:
        print_refusal(args.scenario, e)
        return 2
    python = args.python or sys.executable
    os.makedirs(args.out, exist_ok=True)
    if os.listdir(args.out):
        print(f"error: {args.out} is not empty", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGINT, interrupted)
    run = Run(plan, args.out, python)
    try:
        run.main_loop()
    except KeyboardInterrupt:
        run.record("end", reason="interrupted", at=time.time() - (run.t0 or time.time()))
        run.cleanup()
        return 130
    finally:
        if not run.events.closed:
            run.cleanup()
    sig = signature.parse_dir(args.out)
    text = json.dumps(sig, sort_keys=True)
    with open(os.path.join(args.out, "signature.json"), "w") as f:
        f.write(text + "\n")
    print(text)
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run a scenario on real torchrun")
    r.add_argument("scenario")
    r.add_argument("--out", required=True, help="an empty directory for the logs")
    r.add_argument("--python", help="the interpreter with torch (default: this one)")
    c = sub.add_parser("check", help="exit 2 if the scenario cannot run on real torch")
    c.add_argument("scenario")
    s = sub.add_parser("parse", help="print the signature of a saved run directory")
    s.add_argument("dir")
    k = sub.add_parser("cleanup", help="remove the network namespaces runs left behind")
    k.add_argument("--prefix", default=netns.ROOT_PREFIX,
                   help=f"remove namespaces whose names start with this (default: {netns.ROOT_PREFIX}, every run's)")
    args = p.parse_args(argv)
    if args.command == "cleanup":
        for name in netns.remove_namespaces(args.prefix):
            print(f"removed {name}")
        return 0
    if args.command == "run":
        return cmd_run(args)
    if args.command == "check":
        try:
            load_plan(args.scenario)
        except Refused as e:
            print_refusal(args.scenario, e)
            return 2
        return 0
    print(json.dumps(signature.parse_dir(args.dir), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
