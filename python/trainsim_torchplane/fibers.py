"""Python threads as simulated tasks: exactly one runs at a time, and the simulator picks it.

Every Python thread of a simulated process (torchrun's main thread, the rendezvous's
keep-alive timer, ...) is a *fiber*: a real OS thread that only runs while it holds the
baton. The host's main thread hands the baton to a fiber when the simulator resumes it, and
takes it back when the fiber makes its next call into the world (a sleep, a store request,
a wait on a lock); the call is what the host answers the simulator with. So the simulator
orders every piece of Python, and a seed gives one run.

A killed process's fibers unwind: every call they make raises `Killed`, which no
`except Exception` in torch catches, so `finally` blocks run without touching the world.
"""

import _thread
import sys
import threading
import traceback


class Killed(BaseException):
    """The simulated process this fiber belongs to was killed: unwind without side effects."""


class Node:
    """One simulated process: its identity, its clocks as last read, its chance."""

    def __init__(self, index, name, pid, rng):
        self.index = index
        self.name = name
        self.pid = pid
        self.rng = rng
        self.mono_s = 0.0
        self.utc_s = 0.0
        self.dying = False
        # Set once the agent's PContext started its workers: from then on SIGTERM raises
        # torch's SignalException instead of ending the process (torch installs the handler
        # in `PContext.start`).
        self.signal_handler = False


class Fiber:
    """One Python thread of a simulated process, parked until the simulator resumes it."""

    def __init__(self, fid, node, name):
        self.id = fid
        self.node = node
        self.name = name
        self.go = _thread.allocate_lock()
        self.go.acquire()
        self.reply = None
        self.done = False


class Scheduler:
    """Hands the baton between the host's main thread and the fibers."""

    def __init__(self):
        self.back = _thread.allocate_lock()
        self.back.acquire()
        self.outbox = None
        self.fibers = {}
        self.current = None
        self.next_id = 1

    def new_fiber(self, node, name):
        fid = self.next_id
        self.next_id += 1
        fiber = Fiber(fid, node, name)
        self.fibers[fid] = fiber
        return fiber

    # --- called on a fiber -------------------------------------------------------------

    def call(self, message):
        """Sends `message` to the simulator as this fiber's next call; returns its reply."""
        fiber = self.current
        if fiber is None:
            raise RuntimeError("a call into the simulated world from outside any fiber")
        if fiber.node.dying:
            raise Killed()
        message["fiber"] = fiber.id
        self._hand_back(fiber, message)
        reply = fiber.reply
        if reply.get("kill"):
            raise Killed()
        if "signal" in reply:
            raise signal_exception(reply["signal"], fiber.node.pid)
        return reply

    def _hand_back(self, fiber, message):
        self.outbox = message
        self.current = None
        self.back.release()
        fiber.go.acquire()
        self.current = fiber
        reply = fiber.reply
        clock = reply.get("clock")
        if clock is not None:
            fiber.node.mono_s, fiber.node.utc_s = clock

    def fiber_body(self, fiber, target):
        """Runs `target` as `fiber`: waits for the first resume, then posts its exit."""
        fiber.go.acquire()
        self.current = fiber
        clock = fiber.reply.get("clock")
        if clock is not None:
            fiber.node.mono_s, fiber.node.utc_s = clock
        result = {"ok": True}
        try:
            if fiber.reply.get("kill"):
                raise Killed()
            target()
        except Killed:
            result = {"killed": True}
        except SystemExit as e:
            result = {"system_exit": str(e.code)}
        except BaseException as e:  # noqa: B036 - the fiber's end is reported, whatever it was
            result = describe(e)
        fiber.done = True
        self.current = None
        self.outbox = {"fiber": fiber.id, "exit": result}
        self.back.release()

    # --- called on the host's main thread ----------------------------------------------

    def resume(self, fid, reply):
        """Resumes fiber `fid` with `reply`; returns the fiber's next message."""
        fiber = self.fibers[fid]
        if fiber.done:
            raise RuntimeError(f"fiber {fid} has ended and cannot be resumed")
        fiber.reply = reply
        fiber.go.release()
        self.back.acquire()
        message = self.outbox
        self.outbox = None
        if fiber.done:
            del self.fibers[fid]
        return message

    def kill_node(self, node):
        """Unwinds every fiber of `node`; returns those that would not end."""
        node.dying = True
        stuck = []
        for fid in sorted(f.id for f in self.fibers.values() if f.node is node):
            fiber = self.fibers[fid]
            for _ in range(1000):
                message = self.resume(fid, {"kill": True})
                if "exit" in message:
                    break
            else:
                stuck.append(fiber.name)
        return stuck


def signal_exception(signum, pid):
    """What torchrun's handler raises in its main thread (`_terminate_process_handler`)."""
    import signal

    from torch.distributed.elastic.multiprocessing.api import SignalException

    sigval = signal.Signals(signum)
    return SignalException(f"Process {pid} got signal: {sigval}", sigval=sigval)


def describe(error):
    """An exception as the simulator records it: its type, its message, its stack."""
    return {
        "error": type(error).__name__,
        "module": type(error).__module__,
        "message": str(error),
        "stack": "".join(traceback.format_exception(error))[-4000:],
    }


SCHEDULER = Scheduler()


def start_thread(fiber, target, name):
    """A real thread for `fiber`, parked until the simulator resumes it."""
    thread = threading.Thread(
        target=SCHEDULER.fiber_body, args=(fiber, target), name=name, daemon=True
    )
    thread.start()
    return thread


def current_node():
    fiber = SCHEDULER.current
    if fiber is None:
        raise RuntimeError("no simulated process is running")
    return fiber.node


def log(*parts):
    print("[trainsim host]", *parts, file=sys.stderr, flush=True)
