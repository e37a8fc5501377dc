"""What the trace records of torch's agent, read where torch's own code acts.

Each hook wraps one of torch's methods without changing what it does: it calls the
original and tells the simulator what happened (a round joined or completed, a rendezvous
error, a worker group's state, a restart, a closed rendezvous), so the trace that the
checks read carries the same events as the model's.
"""

import functools

from torch.distributed.elastic.agent.server import api as _agent_api
from torch.distributed.elastic.rendezvous import dynamic_rendezvous as _dyn

from .fibers import SCHEDULER, Killed


def record(event):
    SCHEDULER.call({"call": "record", "event": event})


# The trace's rendezvous error kinds, by torch's exception class.
ERROR_KINDS = (
    ("RendezvousGracefulExitError", "graceful_exit"),
    ("RendezvousClosedError", "closed"),
    ("RendezvousTimeoutError", "timeout"),
    ("RendezvousConnectionError", "store_unreachable"),
    ("RendezvousStateError", "state_error"),
)


def error_kind(error):
    names = {cls.__name__ for cls in type(error).__mro__}
    for name, kind in ERROR_KINDS:
        if name in names:
            return kind
    return "state_error"


def _next_rendezvous(original):
    @functools.wraps(original)
    def next_rendezvous(self, *args, **kwargs):
        record({"kind": "rendezvous_joining"})
        try:
            info = original(self, *args, **kwargs)
        except Killed:
            raise
        except Exception as e:
            record({"kind": "rendezvous_failed", "error": error_kind(e), "message": str(e)})
            raise
        state = self._state_holder.state
        ranked = sorted(state.participants.items(), key=lambda item: item[1])
        record(
            {
                "kind": "rendezvous_completed",
                "round": int(state.round),
                "rank": int(info.rank),
                "world_size": int(info.world_size),
                "participants": [node.addr for node, _ in ranked],
            }
        )
        return info

    return next_rendezvous


def _restart_workers(original):
    @functools.wraps(original)
    def restart_workers(self, worker_group):
        failed = worker_group.state in (
            _agent_api.WorkerState.FAILED,
            _agent_api.WorkerState.UNHEALTHY,
        )
        spec = worker_group.spec
        record(
            {
                "kind": "agent_restart",
                "counted": failed,
                "restart_count": int(spec.max_restarts - self._remaining_restarts),
                "reason": "failure" if failed else "membership_change",
            }
        )
        return original(self, worker_group)

    return restart_workers


def _mark_rendezvous_closed(original):
    """Notes that this node's op closes the rendezvous; the write is judged in `sync`."""

    @functools.wraps(original)
    def mark_rendezvous_closed(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        self._state_holder._trainsim_closing = True
        return result

    return mark_rendezvous_closed


def _sync(original):
    """Records a close once this node's write of it landed (torch's `has_set`)."""

    @functools.wraps(original)
    def sync(self, *args, **kwargs):
        closing = getattr(self, "_trainsim_closing", False)
        self._trainsim_closing = False
        has_set = original(self, *args, **kwargs)
        if closing and has_set and self._state.closed:
            record({"kind": "rendezvous_closed", "round": int(self._state.round)})
        return has_set

    return sync


def _watch_group_state():
    """`WorkerGroup.state` (a slot) recorded on each change."""
    group = _agent_api.WorkerGroup
    slot = group.__dict__["state"]
    if isinstance(slot, property):
        return

    def get(self):
        return slot.__get__(self, group)

    def set_(self, state):
        try:
            before = slot.__get__(self, group)
        except AttributeError:
            before = None
        slot.__set__(self, state)
        if before != state and SCHEDULER.current is not None:
            record({"kind": "worker_group_state", "state": state.name})

    group.state = property(get, set_)


def install():
    """Wraps the methods once per host (the wrappers read the calling fiber's node)."""
    if getattr(_dyn, "_trainsim_observed", False):
        return
    handler = _dyn.DynamicRendezvousHandler
    handler.next_rendezvous = _next_rendezvous(handler.next_rendezvous)
    agent = _agent_api.SimpleElasticAgent
    agent._restart_workers = _restart_workers(agent._restart_workers)
    executor = _dyn._DistributedRendezvousOpExecutor
    executor._mark_rendezvous_closed = _mark_rendezvous_closed(
        executor._mark_rendezvous_closed
    )
    holder = _dyn._BackendRendezvousStateHolder
    holder.sync = _sync(holder.sync)
    _watch_group_state()
    _dyn._trainsim_observed = True
