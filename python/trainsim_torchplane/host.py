"""The host: torch imported once, its elastic code run for the simulator, one run at a time.

    python host.py [--overlay DIR]

The simulator writes one JSON command per line on stdin and reads one JSON answer per line
from the protocol descriptor (the host's original stdout; what torch prints goes to
stderr). Commands:

    {"cmd": "hello"}                                   -> {"hello": {torch_version, ...}}
    {"cmd": "run", "env": {...}}                       -> {"ok": true}
    {"cmd": "spawn_agent", "node": {index, name, pid}, "seed": S, "argv": [...]}
                                                       -> {"fiber": F}
    {"cmd": "resume", "fiber": F, "reply": {...}}      -> the fiber's next message
                                        (written by that fiber's own thread, see fibers.py)
    {"cmd": "kill", "pid": P}                          -> {"ok": true, "stuck": [...]}
    {"cmd": "end_run"}                                 -> {"ok": true, "stuck": [...]}

A fiber's next message is a call into the world, `{"fiber": F, "call": ..., ...}`, or its
end, `{"fiber": F, "exit": {...}}`. Every reply to a call carries the node's clocks
(`"clock": [monotonic_s, utc_s]`), or `"kill": true` to unwind the fiber.
"""

import faulthandler
import gc
import json
import os
import random
import signal
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from trainsim_torchplane import fibers  # noqa: E402

PATCHED_PREFIXES = ("torch.distributed.elastic", "torch.distributed.launcher", "torch.distributed.run")


def import_torch(overlay):
    """Imports torch (with the overlay laid first) and every elastic module; the hello."""
    overlay_hash = None
    if overlay:
        from trainsim_torchplane import overlay as overlay_mod

        overlay_hash = overlay_mod.install(overlay)
    import torch
    import torch.distributed.run  # noqa: F401 - torchrun's entry point
    import torch.distributed.elastic.agent.server.local_elastic_agent  # noqa: F401
    import torch.distributed.elastic.rendezvous.c10d_rendezvous_backend  # noqa: F401
    import torch.distributed.elastic.rendezvous.dynamic_rendezvous  # noqa: F401

    return {
        "torch_version": torch.__version__,
        "python_version": sys.version.split()[0],
        "overlay_hash": overlay_hash,
    }


# torchrun builds its LocalElasticAgent with the 300 s exit barrier default and has no option
# for it; a scenario's `agent.exit_barrier_timeout` reaches the agent as a user of the Python
# API passes it (`LocalElasticAgent(..., exit_barrier_timeout=...)`).
EXIT_BARRIER_DEFAULT_S = 300.0
EXIT_BARRIER = {"timeout_s": EXIT_BARRIER_DEFAULT_S}


def pass_exit_barrier_timeout():
    from torch.distributed.elastic.agent.server import local_elastic_agent

    agent_class = local_elastic_agent.LocalElasticAgent
    init = agent_class.__init__

    def init_with_barrier_timeout(self, *args, **kwargs):
        if len(args) < 4:  # spec, logs_specs, start_method, then exit_barrier_timeout
            kwargs.setdefault("exit_barrier_timeout", EXIT_BARRIER["timeout_s"])
        init(self, *args, **kwargs)

    agent_class.__init__ = init_with_barrier_timeout


# Simulated time stands still while Python runs, but the Python a keep-alive runs after its
# last store call (logging through `inspect.stack()`) decides whether the next one finds its
# cached state stale: it is charged, at the model's measured figure (`KEEP_ALIVE_TAIL`).
KEEP_ALIVE = {"tail_s": 0.0}


def charge_keep_alive_tail():
    from torch.distributed.elastic.rendezvous import dynamic_rendezvous

    from trainsim_torchplane import seam

    handler_class = dynamic_rendezvous.DynamicRendezvousHandler
    keep_alive = handler_class._keep_alive

    def keep_alive_with_tail(self, *args, **kwargs):
        try:
            return keep_alive(self, *args, **kwargs)
        finally:
            if KEEP_ALIVE["tail_s"] > 0:
                seam.sleep(KEEP_ALIVE["tail_s"])

    handler_class._keep_alive = keep_alive_with_tail


def patch_modules():
    """Swaps what torch's elastic modules imported for the seam's stand-ins."""
    from trainsim_torchplane import observe, seam, store, workers

    pass_exit_barrier_timeout()
    charge_keep_alive_tail()
    table = {}
    for part in (seam, store, workers):
        table.update(part.replacements())
    count = 0
    for name in sorted(sys.modules):
        module = sys.modules[name]
        if module is None or not name.startswith(PATCHED_PREFIXES):
            continue
        for attr, value in list(vars(module).items()):
            replacement = table.get(id(value))
            if replacement is not None and not attr.startswith("__"):
                setattr(module, attr, replacement)
                count += 1
    observe.install()
    return count


class Host:
    """The host's state across runs."""

    def __init__(self, info):
        self.info = info
        self.nodes = {}
        self.saved_env = {}

    def command(self, msg, me):
        """Every command but `resume`, run by whichever thread holds the baton (`me`)."""
        cmd = msg["cmd"]
        if cmd == "hello":
            return {"hello": self.info}
        if cmd == "run":
            return self.start_run(msg.get("env", {}))
        if cmd == "spawn_agent":
            return self.spawn_agent(msg)
        if cmd == "kill":
            node = self.nodes.pop(msg["pid"], None)
            stuck = fibers.SCHEDULER.kill_node(node, me) if node else []
            return {"ok": True, "stuck": stuck}
        if cmd == "end_run":
            return self.end_run(me)
        return {"host_error": f"unknown command {cmd!r}"}

    def guarded(self, msg, me):
        try:
            return self.command(msg, me)
        except Exception as e:  # a broken host is reported, never hidden
            return {"host_error": f"{type(e).__name__}: {e}", **fibers.describe(e)}

    def start_run(self, env):
        from trainsim_torchplane import seam

        seam._keys[0] = 0
        for key, value in env.items():
            self.saved_env[key] = os.environ.get(key)
            os.environ[key] = value
        gc.collect()
        gc.disable()
        return {"ok": True}

    def spawn_agent(self, msg):
        import torch.distributed.run as torchrun

        EXIT_BARRIER["timeout_s"] = float(msg.get("exit_barrier_timeout_s", EXIT_BARRIER_DEFAULT_S))
        KEEP_ALIVE["tail_s"] = float(msg.get("keep_alive_tail_s", 0.0))
        spec = msg["node"]
        node = fibers.Node(spec["index"], spec["name"], spec["pid"], random.Random(msg["seed"]))
        self.nodes[node.pid] = node
        fiber = fibers.SCHEDULER.new_fiber(node, "MainThread")
        argv = list(msg["argv"])
        fibers.start_thread(fiber, lambda: torchrun.main(argv), f"{node.name}/MainThread")
        return {"fiber": fiber.id}

    def end_run(self, me):
        stuck = []
        for pid in sorted(self.nodes):
            stuck += fibers.SCHEDULER.kill_node(self.nodes[pid], me)
        self.nodes.clear()
        for key, value in self.saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self.saved_env.clear()
        gc.enable()
        gc.collect()
        return {"ok": True, "stuck": stuck}


def main(argv):
    overlay = None
    if len(argv) >= 2 and argv[0] == "--overlay":
        overlay = argv[1]
    # The protocol keeps the original stdout; anything torch prints goes to stderr.
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    try:
        info = import_torch(overlay)
        patch_modules()
    except BaseException as e:  # noqa: B036 - any failure to start is the hello's answer
        out.write(json.dumps({"hello_error": f"{type(e).__name__}: {e}"}) + "\n")
        return 2
    host = Host(info)
    fibers.SCHEDULER.attach(sys.stdin, out, host.guarded)
    # The main thread serves until it first hands the baton on; from then on whichever
    # thread holds the baton reads the commands, and the host exits at their end.
    fibers.SCHEDULER.serve(fibers.Parker())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
