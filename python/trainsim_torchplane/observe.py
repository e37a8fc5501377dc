"""What the trace records of torch's agent, read where torch's own code acts.

Each hook wraps one of torch's methods without changing what it does: it calls the
original and tells the simulator what happened (a round joined or completed, a rendezvous
error, a worker group's state, a restart, a closed rendezvous), so the trace that the
checks read carries the same events as the model's. The rendezvous executor's steps (its
`_Action`s, with the state's lists after each write that landed) go to the run's story,
beside the trace, as the model's handler records them.
"""

import functools

from torch.distributed.elastic.agent.server import api as _agent_api
from torch.distributed.elastic.rendezvous import dynamic_rendezvous as _dyn

from torch.distributed.elastic.rendezvous import api as _rdzv_api

from .fibers import SCHEDULER, Killed
from .seam import monotonic


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
    """Records a close, and the story's step, once this node's write landed (`has_set`)."""

    @functools.wraps(original)
    def sync(self, *args, **kwargs):
        closing = getattr(self, "_trainsim_closing", False)
        self._trainsim_closing = False
        step = getattr(self, "_trainsim_step", None)
        self._trainsim_step = None
        # What a write carries: the state as it stands, with the removals of the nodes the
        # last sync's sanitize found dead.
        written = self._state
        dead = list(getattr(self, "_dead_nodes", ()))
        has_set = original(self, *args, **kwargs)
        if closing and has_set and self._state.closed:
            record({"kind": "rendezvous_closed", "round": int(self._state.round)})
        if step is not None and has_set and (step[1] != "KEEP_ALIVE" or dead):
            record_step(step, written, dead, listed=True)
        return has_set

    return sync


# The executor's method for each of torch's `_Action`s that writes the state.
STEP_METHODS = (
    ("_keep_alive", "KEEP_ALIVE"),
    ("_add_to_participants", "ADD_TO_PARTICIPANTS"),
    ("_add_to_wait_list", "ADD_TO_WAIT_LIST"),
    ("_add_to_redundancy_list", "ADD_TO_REDUNDANCY_LIST"),
    ("_remove_from_participants", "REMOVE_FROM_PARTICIPANTS"),
    ("_remove_from_wait_list", "REMOVE_FROM_WAIT_LIST"),
    ("_remove_from_redundancy_list", "REMOVE_FROM_REDUNDANCY_LIST"),
    ("_mark_rendezvous_complete", "MARK_RENDEZVOUS_COMPLETE"),
    ("_mark_rendezvous_closed", "MARK_RENDEZVOUS_CLOSED"),
)

# The story's names of torch's rendezvous ops, by class.
OPS = {
    "_RendezvousJoinOp": "join",
    "_RendezvousExitOp": "exit",
    "_RendezvousCloseOp": "close",
    "_RendezvousKeepAliveOp": "keep_alive",
}


def _members(nodes):
    return [[node.addr, int(node.pid)] for node in sorted(nodes)]


def record_step(step, state, dead, listed):
    """Tells the story one step of an op: `step` is (op, action, decided on the node's
    monotonic clock); `state` the state after it; with `listed`, its lists too."""
    op, action, decided = step
    redundancy = getattr(state, "redundancy_list", ())
    event = {
        "kind": "rendezvous_step",
        "op": op,
        "action": action,
        "decided_mono_s": decided,
        "round": int(state.round),
        "complete": bool(state.complete),
        "closed": bool(state.closed),
        "sizes": [len(state.participants), len(state.wait_list), len(redundancy)],
        "dropped": _members(dead),
    }
    if listed:
        event["participants"] = _members(state.participants)
        event["wait_list"] = _members(state.wait_list)
        event["redundancy_list"] = _members(redundancy)
    record(event)


def _step_method(original, action):
    """Notes the step the executor's next write makes; of nested steps (a join at max_nodes
    also keeps alive and completes the round) the outermost."""

    @functools.wraps(original)
    def step(self, *args, **kwargs):
        holder = self._state_holder
        if getattr(holder, "_trainsim_in_step", False):
            return original(self, *args, **kwargs)
        holder._trainsim_in_step = True
        try:
            result = original(self, *args, **kwargs)
        finally:
            holder._trainsim_in_step = False
        op = getattr(holder, "_trainsim_op", None)
        if op is not None:
            holder._trainsim_step = (op, action, monotonic())
        return result

    return step


def _run(original):
    """Names the op the executor runs, and tells the story how the op ended: FINISH of a
    join or a close, or an error of any op (the exit and keep-alive ops finish at every
    call with nothing more to do)."""

    @functools.wraps(original)
    def run(self, state_handler, *args, **kwargs):
        op = OPS.get(type(state_handler).__name__)
        holder = self._state_holder
        holder._trainsim_op = op
        ending = None
        try:
            result = original(self, state_handler, *args, **kwargs)
            if op in ("join", "close"):
                ending = "FINISH"
            return result
        except _rdzv_api.RendezvousClosedError:
            ending = "ERROR_CLOSED"
            raise
        except _rdzv_api.RendezvousTimeoutError:
            ending = "ERROR_TIMEOUT"
            raise
        finally:
            holder._trainsim_op = None
            if op is not None and ending is not None:
                record_step((op, ending, monotonic()), self._state, (), listed=False)

    return run


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
    for method, action in STEP_METHODS:
        if hasattr(executor, method):
            setattr(executor, method, _step_method(getattr(executor, method), action))
    executor.run = _run(executor.run)
    holder = _dyn._BackendRendezvousStateHolder
    holder.sync = _sync(holder.sync)
    _watch_group_state()
    _dyn._trainsim_observed = True
