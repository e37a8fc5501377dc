"""The seam below torch's code: time, threads and locks, identity and chance, simulated.

torch's elastic modules are left as they are; what they imported (`time`, `threading`,
`socket`, `os`, `random`, `datetime`, `torch.distributed`'s `TCPStore`, `get_free_port`,
`start_processes`) is swapped, in each of those modules' namespaces only, for stand-ins
that read the node's simulated clocks and wait on the simulator. Nothing else in the host
(its own plumbing, logging) is touched.
"""

import datetime as _datetime
import os as _os
import random as _random
import socket as _socket
import threading as _threading
import time as _time
import types

from .fibers import SCHEDULER, current_node, start_thread

# --- time ------------------------------------------------------------------------------


def monotonic():
    return current_node().mono_s


def monotonic_ns():
    return int(current_node().mono_s * 1e9)


def wall_time():
    return current_node().utc_s


def wall_time_ns():
    return int(current_node().utc_s * 1e9)


def sleep(seconds):
    if seconds < 0:
        raise ValueError("sleep length must be non-negative")
    SCHEDULER.call({"call": "sleep", "s": float(seconds)})


def _module(name, real, **overrides):
    """A stand-in module: `overrides`, and every other attribute from `real`."""
    shim = types.ModuleType(name)
    shim.__dict__.update(overrides)
    shim.__getattr__ = lambda attr: getattr(real, attr)
    return shim


TIME = _module(
    "time",
    _time,
    time=wall_time,
    time_ns=wall_time_ns,
    monotonic=monotonic,
    monotonic_ns=monotonic_ns,
    perf_counter=monotonic,
    perf_counter_ns=monotonic_ns,
    sleep=sleep,
)


class SimDatetime(_datetime.datetime):
    """`datetime.now()` on the node's wall clock; the values made are plain datetimes."""

    @classmethod
    def now(cls, tz=None):
        stamp = current_node().utc_s
        if tz is None:
            return _datetime.datetime.fromtimestamp(stamp, _datetime.timezone.utc).replace(
                tzinfo=None
            )
        return _datetime.datetime.fromtimestamp(stamp, tz)

    @classmethod
    def utcnow(cls):
        return cls.now(None)

    @classmethod
    def today(cls):
        return cls.now(None)


DATETIME = _module("datetime", _datetime, datetime=SimDatetime)

# --- waiting: one primitive, parked on the simulator ----------------------------------

_keys = [0]


def new_key(kind):
    _keys[0] += 1
    return f"{kind}:{_keys[0]}"


def park(key, timeout_s):
    """Waits until `unpark(key)` or `timeout_s` (None: no bound); True when woken."""
    reply = SCHEDULER.call({"call": "park", "key": key, "timeout_s": timeout_s})
    return bool(reply.get("woken"))


def unpark(key):
    SCHEDULER.call({"call": "unpark", "key": key})


def _remaining(deadline):
    return None if deadline is None else deadline - monotonic()


def _deadline(timeout):
    if timeout is None or timeout < 0:
        return None
    return monotonic() + timeout


class _Parked:
    """Something threads wait on: a key to park on, and how many are parked there."""

    def __init__(self, kind):
        self._waiters = 0
        self._key = new_key(kind)

    def _wait_until(self, ready, timeout):
        """Parks until `ready()` or `timeout` seconds (None, or negative: no bound)."""
        deadline = _deadline(timeout)
        while not ready():
            remaining = _remaining(deadline)
            if remaining is not None and remaining <= 0:
                return False
            self._waiters += 1
            try:
                park(self._key, remaining)
            finally:
                self._waiters -= 1
        return True

    def _wake(self):
        if self._waiters:
            unpark(self._key)


class SimLock(_Parked):
    """`threading.Lock` whose waiters wait on the simulator."""

    def __init__(self):
        super().__init__("lock")
        self._locked = False

    def acquire(self, blocking=True, timeout=-1):
        if not self._locked:
            self._locked = True
            return True
        if not blocking or not self._wait_until(lambda: not self._locked, timeout):
            return False
        self._locked = True
        return True

    def release(self):
        if not self._locked:
            raise RuntimeError("release unlocked lock")
        self._locked = False
        self._wake()

    def locked(self):
        return self._locked

    __enter__ = acquire

    def __exit__(self, *exc):
        self.release()


class SimRLock:
    """`threading.RLock` on the simulator: a lock that its holder may take again."""

    def __init__(self):
        self._lock = SimLock()
        self._owner = None
        self._count = 0

    def acquire(self, blocking=True, timeout=-1):
        me = SCHEDULER.current
        if self._owner is me and me is not None:
            self._count += 1
            return True
        if not self._lock.acquire(blocking, timeout):
            return False
        self._owner, self._count = me, 1
        return True

    def release(self):
        if self._owner is not SCHEDULER.current or self._count == 0:
            raise RuntimeError("cannot release un-acquired lock")
        self._count -= 1
        if self._count == 0:
            self._owner = None
            self._lock.release()

    __enter__ = acquire

    def __exit__(self, *exc):
        self.release()


class SimEvent(_Parked):
    """`threading.Event` whose `wait` waits on the simulator."""

    def __init__(self):
        super().__init__("event")
        self._flag = False

    def is_set(self):
        return self._flag

    isSet = is_set

    def set(self):
        self._flag = True
        self._wake()

    def clear(self):
        self._flag = False

    def wait(self, timeout=None):
        return self._wait_until(lambda: self._flag, timeout)


class SimCondition(_Parked):
    """`threading.Condition` on the simulator (a notify wakes every waiter to look again)."""

    def __init__(self, lock=None):
        self._lock = lock if lock is not None else SimRLock()
        super().__init__("condition")
        self.acquire = self._lock.acquire
        self.release = self._lock.release

    def __enter__(self):
        return self._lock.__enter__()

    def __exit__(self, *exc):
        return self._lock.__exit__(*exc)

    def wait(self, timeout=None):
        self._lock.release()
        self._waiters += 1
        try:
            return park(self._key, None if timeout is None else max(timeout, 0.0))
        finally:
            self._waiters -= 1
            self._lock.acquire()

    def wait_for(self, predicate, timeout=None):
        deadline = _deadline(timeout)
        result = predicate()
        while not result:
            remaining = _remaining(deadline)
            if remaining is not None and remaining <= 0:
                break
            self.wait(remaining)
            result = predicate()
        return result

    def notify(self, n=1):
        self._wake()

    def notify_all(self):
        self.notify()


class SimThread(_threading.Thread):
    """`threading.Thread` whose body is a fiber of the current simulated process."""

    def start(self):
        node = current_node()
        self._sim_fiber = SCHEDULER.new_fiber(node, self.name)
        fiber = self._sim_fiber
        self._sim_real = start_thread(fiber, self.run, f"{node.name}/{self.name}")
        SCHEDULER.call({"call": "spawn", "child": fiber.id, "name": self.name})

    def join(self, timeout=None):
        fiber = getattr(self, "_sim_fiber", None)
        if fiber is None:
            raise RuntimeError("cannot join thread before it is started")
        deadline = _deadline(timeout)
        while not fiber.done:
            remaining = _remaining(deadline)
            if remaining is not None and remaining <= 0:
                return
            park(f"exit:{fiber.id}", remaining)

    def is_alive(self):
        fiber = getattr(self, "_sim_fiber", None)
        return fiber is not None and not fiber.done


class SimTimer(SimThread):
    """`threading.Timer` on the simulator."""

    def __init__(self, interval, function, args=None, kwargs=None):
        super().__init__()
        self.interval, self.function = interval, function
        self.args, self.kwargs = args or [], kwargs or {}
        self.finished = SimEvent()

    def cancel(self):
        self.finished.set()

    def run(self):
        self.finished.wait(self.interval)
        if not self.finished.is_set():
            self.function(*self.args, **self.kwargs)
        self.finished.set()


THREADING = _module(
    "threading",
    _threading,
    Thread=SimThread,
    Timer=SimTimer,
    Event=SimEvent,
    Lock=SimLock,
    RLock=SimRLock,
    Condition=SimCondition,
)

# --- identity and chance ---------------------------------------------------------------


def getfqdn(name=""):
    return current_node().name if name in ("", current_node().name) else name


def gethostname():
    return current_node().name


SOCKET = _module("socket", _socket, getfqdn=getfqdn, gethostname=gethostname)


def getpid():
    return current_node().pid


OS = _module("os", _os, getpid=getpid)


def _node_rng_call(method):
    def draw(*args, **kwargs):
        return getattr(current_node().rng, method)(*args, **kwargs)

    draw.__name__ = method
    return draw


RANDOM = _module(
    "random",
    _random,
    **{
        name: _node_rng_call(name)
        for name in (
            "random", "uniform", "randint", "randrange", "choice", "choices",
            "shuffle", "sample", "getrandbits", "gauss", "expovariate",
        )
    },
)


def free_port():
    """torch's `get_free_port`: a port of this node no other server of the run was given."""
    return SCHEDULER.call({"call": "free_port"})["port"]


def replacements():
    """What the seam swaps, by the identity of what torch's modules hold."""
    table = {
        id(_time): TIME,
        id(_threading): THREADING,
        id(_socket): SOCKET,
        id(_os): OS,
        id(_random): RANDOM,
        id(_datetime): DATETIME,
        id(_datetime.datetime): SimDatetime,
        id(_threading.Thread): SimThread,
        id(_threading.Timer): SimTimer,
        id(_threading.Event): SimEvent,
        id(_threading.Lock): SimLock,
        id(_threading.RLock): SimRLock,
        id(_threading.Condition): SimCondition,
        id(_time.time): wall_time,
        id(_time.monotonic): monotonic,
        id(_time.perf_counter): monotonic,
        id(_time.sleep): sleep,
        id(_os.getpid): getpid,
        id(_socket.getfqdn): getfqdn,
        id(_socket.gethostname): gethostname,
    }
    return table
