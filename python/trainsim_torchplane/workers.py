"""`start_processes` as the simulated job: torch's agent starts, polls and stops its workers.

The process context torch's `LocalElasticAgent` gets back is a handle on the simulated
workers of this node: they start with the environment torch's agent built for them (so a
stale `MASTER_ADDR` or a wrong world size reaches the simulated process group as it would
reach gloo or NCCL), `wait` reports their exit as `RunProcsResult` with torch's own
`ProcessFailure`s, and `close` stops them. Starting them is where torchrun installs its
signal handlers, so from then on SIGTERM raises torch's `SignalException`.
"""

import signal

from torch.distributed.elastic.multiprocessing import errors as _errors
from torch.distributed.elastic.multiprocessing import api as _api

from .fibers import SCHEDULER, current_node

# The worker environment the simulated job reads; the rest stays in Python.
WORKER_ENV_KEYS = (
    "LOCAL_RANK", "RANK", "GROUP_RANK", "ROLE_RANK", "ROLE_NAME", "LOCAL_WORLD_SIZE",
    "WORLD_SIZE", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_USE_AGENT_STORE",
)


class SimPContext:
    """torch's `PContext` over this node's simulated workers."""

    def __init__(self, name, entrypoint, args, envs):
        self.name = name
        self.entrypoint = entrypoint
        self.args = args
        self.envs = envs
        self.nprocs = len(envs)
        self.stdouts = {r: "" for r in envs}
        self.stderrs = {r: "" for r in envs}
        self.error_files = {r: "" for r in envs}
        self._pids = {}
        self._closed = False

    def start(self):
        node = current_node()
        envs = [
            {k: self.envs[r][k] for k in WORKER_ENV_KEYS if k in self.envs[r]}
            for r in sorted(self.envs)
        ]
        reply = SCHEDULER.call({"call": "workers_start", "envs": envs})
        self._pids = {r: pid for r, pid in zip(sorted(self.envs), reply["pids"])}
        # torchrun's main thread registers its handlers here (PContext.start).
        node.signal_handler = True

    def pids(self):
        return dict(self._pids)

    def wait(self, timeout=-1, period=1):
        if current_node().workers_hint == "running":
            # The simulator said so at this slice's start, and time has not moved since.
            return None
        reply = SCHEDULER.call({"call": "workers_poll"})
        state = reply["state"]
        if state == "running":
            return None
        if state == "succeeded":
            return _api.RunProcsResult(
                return_values={r: None for r in self._pids},
                stdouts=dict(self.stdouts),
                stderrs=dict(self.stderrs),
            )
        failures = {
            f["local_rank"]: _errors.ProcessFailure(
                local_rank=f["local_rank"],
                pid=self._pids.get(f["local_rank"], 0),
                exitcode=f["exit_code"],
                error_file="",
            )
            for f in reply["failures"]
        }
        return _api.RunProcsResult(
            failures=failures, stdouts=dict(self.stdouts), stderrs=dict(self.stderrs)
        )

    def close(self, death_sig=None, timeout=30):
        if self._closed:
            return
        self._closed = True
        sig = int(death_sig) if death_sig else int(signal.SIGTERM)
        SCHEDULER.call({"call": "workers_close", "signal": sig})


def start_processes(name, entrypoint, args, envs, logs_specs=None, **_options):
    """torch's `start_processes`: the simulated workers, started."""
    context = SimPContext(name, entrypoint, args, envs)
    context.start()
    return context


def replacements():
    import torch.distributed.elastic.multiprocessing as _mp

    return {id(_mp.start_processes): start_processes}
