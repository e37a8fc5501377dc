"""Every TCPStore torch's control plane makes is a client of the simulated store.

`SimStore` is a `torch.distributed.Store` (so torch's C++ `PrefixStore` wraps it as it wraps
a real TCPStore) whose every call is a request on the simulated network, with the store
server's costs, its silences and its resets. `SimTCPStore(...)` stands where torch's code
constructs `TCPStore`: with `is_master` it first starts a server in this simulated process
(on a free port for port 0), as the real constructor does, then connects.
"""

import base64
from datetime import timedelta

import torch.distributed as _dist

from .fibers import SCHEDULER


def _bytes(value):
    if isinstance(value, str):
        return value.encode()
    return bytes(value)


def _b64(value):
    return base64.b64encode(_bytes(value)).decode("ascii")


def _unb64(text):
    return base64.b64decode(text)


def _raise_store_error(reply):
    kind, message = reply["error"], reply.get("message", "")
    if kind == "timeout":
        raise _dist.DistStoreError(message)
    raise _dist.DistNetworkError(message)


class SimStore(_dist.Store):
    """A client of a store server in the simulated world (see the module docs).

    Its timeout is the C++ `Store`'s own: torch's `PrefixStore` forwards `set_timeout` there
    (never to a Python override), so every call that waits reads it at the call, as
    TCPStore's client reads its own.
    """

    def __init__(self, handle, host, port, timeout_s):
        super().__init__()
        self.set_timeout(timedelta(seconds=timeout_s))
        self._handle = handle
        self._host = host
        self._port = port

    # What torch reads of a TCPStore beside its calls.
    @property
    def host(self):
        return self._host

    @property
    def port(self):
        return self._port

    @property
    def libuvBackend(self):  # noqa: N802 - torch's name
        return True

    def _call(self, op, **args):
        reply = SCHEDULER.call({"call": "store", "store": self._handle, "op": op, **args})
        if "error" in reply:
            _raise_store_error(reply)
        return reply

    def _waiting(self, op, timeout=None, **args):
        """A call that waits for keys, up to the client's timeout now (or `timeout`)."""
        span = timeout if timeout is not None else self.timeout
        return self._call(op, timeout_s=span.total_seconds(), **args)

    def set(self, key, value):
        self._call("set", key=key, value=_b64(value))

    def get(self, key):
        return _unb64(self._waiting("get", key=key)["value"])

    def add(self, key, amount):
        return int(self._call("add", key=key, amount=int(amount))["int"])

    def compare_set(self, key, expected, desired):
        reply = self._call(
            "compare_set", key=key, expected=_b64(expected), desired=_b64(desired)
        )
        return _unb64(reply["value"])

    def wait(self, keys, timeout=None):
        self._waiting("wait", timeout, keys=list(keys))

    def check(self, keys):
        return bool(self._call("check", keys=list(keys))["bool"])

    def delete_key(self, key):
        return bool(self._call("delete_key", key=key)["bool"])

    def num_keys(self):
        return int(self._call("num_keys")["int"])

    def multi_get(self, keys):
        return [_unb64(v) for v in self._waiting("multi_get", keys=list(keys))["values"]]

    def multi_set(self, keys, values):
        self._call("multi_set", keys=list(keys), values=[_b64(v) for v in values])

    def has_extended_api(self):
        return True


def SimTCPStore(  # noqa: N802 - stands where torch calls the class
    host_name=None,
    port=None,
    world_size=None,
    is_master=False,
    timeout=timedelta(seconds=300),
    wait_for_workers=True,
    multi_tenant=False,
    master_listen_fd=None,
    use_libuv=None,
    **kwargs,
):
    host = host_name if host_name is not None else kwargs.get("host")
    reply = SCHEDULER.call(
        {
            "call": "store_connect",
            "host": str(host),
            "port": int(port or 0),
            "is_master": bool(is_master),
            "timeout_s": timeout.total_seconds(),
        }
    )
    if "error" in reply:
        _raise_store_error(reply)
    return SimStore(reply["store"], str(host), reply["port"], timeout.total_seconds())


def _distributed_shim():
    import types

    shim = types.ModuleType("torch.distributed")
    shim.TCPStore = SimTCPStore
    shim.__getattr__ = lambda attr: getattr(_dist, attr)
    return shim


DIST = _distributed_shim()


def replacements():
    return {id(_dist): DIST, id(_dist.TCPStore): SimTCPStore}
