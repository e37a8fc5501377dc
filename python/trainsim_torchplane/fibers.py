"""Python threads as simulated tasks: exactly one runs at a time, and the simulator picks it.

Every Python thread of a simulated process (torchrun's main thread, the rendezvous's
keep-alive timer, ...) is a *fiber*: a real OS thread that only runs while it holds the
baton. A fiber runs until its next call into the world (a sleep, a store request, a wait on
a lock), writes that call to the simulator and reads the simulator's next command: the
resumption of itself (it runs on), of another fiber (it hands the baton over and parks), or
a command for the host. So the simulator orders every piece of Python, and a seed gives one
run.

A killed process's fibers unwind: every call they make raises `Killed`, which no
`except Exception` in torch catches, so `finally` blocks run without touching the world.
"""

import _thread
import json
import os
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
        # "running" when the simulator said, at the start of this slice, that the workers run.
        self.workers_hint = None
        # Set once the agent's PContext started its workers: from then on SIGTERM raises
        # torch's SignalException instead of ending the process (torch installs the handler
        # in `PContext.start`).
        self.signal_handler = False


class Parker:
    """A thread's place to wait for the baton."""

    def __init__(self):
        self.go = _thread.allocate_lock()
        self.go.acquire()
        self.reply = None


class Fiber(Parker):
    """One Python thread of a simulated process, parked until the simulator resumes it."""

    def __init__(self, fid, node, name):
        super().__init__()
        self.id = fid
        self.node = node
        self.name = name
        self.done = False
        # Left behind by a killed process while it held the baton: it unwinds silently.
        self.abandoned = False


class Scheduler:
    """Hands the baton between threads. Whichever thread holds it does the host's I/O: it
    writes its own call to the simulator and reads the next command, so a thread resumed
    again (the common case: a sleep, a store call) runs on without a thread switch."""

    def __init__(self):
        self.fibers = {}
        self.current = None
        self.next_id = 1
        self.input = None
        self.output = None
        self.commands = None
        # The thread waiting for a fiber's next message when the host drives fibers itself
        # (to unwind a killed process), and that message.
        self.local_driver = None
        self.local_message = None
        # The fiber an abandoned thread hands the baton to once it has unwound.
        self.pending_handoff = None

    def attach(self, input_lines, output, commands):
        """The protocol's streams, and the handler of every command but `resume`."""
        self.input, self.output, self.commands = input_lines, output, commands

    def new_fiber(self, node, name):
        fid = self.next_id
        self.next_id += 1
        fiber = Fiber(fid, node, name)
        self.fibers[fid] = fiber
        return fiber

    def write(self, message):
        try:
            self.output.write(json.dumps(message) + "\n")
            self.output.flush()
        except OSError:
            # The simulator is gone: no caller is left to answer, and torch's code would
            # take the error for a store's and retry for ever.
            os._exit(0)

    # --- the running thread --------------------------------------------------------------

    def call(self, message):
        """Sends `message` to the simulator as this fiber's next call; returns its reply."""
        fiber = self.current
        if fiber is None:
            raise RuntimeError("a call into the simulated world from outside any fiber")
        if fiber.node.dying:
            raise Killed()
        message["fiber"] = fiber.id
        reply = self._post(fiber, message)
        if reply is None or reply.get("kill"):
            raise Killed()
        if "signal" in reply:
            raise signal_exception(reply["signal"], fiber.node.pid)
        return reply

    def _post(self, me, message):
        """Posts `me`'s message and waits for its reply (None: abandoned, unwind)."""
        self.current = None
        me.node.workers_hint = None
        driver = self.local_driver
        if driver is not None:
            self.local_driver = None
            self.local_message = message
            driver.go.release()
            me.go.acquire()
        else:
            self.write(message)
            if not self.serve(me):
                return None
        return self._running(me)

    def _running(self, fiber):
        self.current = fiber
        reply = fiber.reply
        clock = reply.get("clock") if reply else None
        if clock is not None:
            fiber.node.mono_s, fiber.node.utc_s = clock
        # Valid for this slice only: time stands still until the fiber's next call.
        fiber.node.workers_hint = reply.get("workers") if reply else None
        return reply

    def serve(self, me, ending=False):
        """Reads commands until one resumes `me`; True then. An `ending` thread returns as
        soon as it handed the baton on; an abandoned one returns False."""
        while True:
            line = self.input.readline()
            if not line:
                os._exit(0)
            command = json.loads(line)
            if command.get("cmd") != "resume":
                self.write(self.commands(command, me))
                continue
            target = self.fibers.get(command["fiber"])
            if target is None or target.done:
                self.write({"host_error": f"fiber {command['fiber']} cannot be resumed"})
                continue
            target.reply = command["reply"]
            if target is me:
                return True
            if getattr(me, "abandoned", False):
                # A killed process's thread: it unwinds first, then hands the baton on.
                self.pending_handoff = target
                return False
            target.go.release()
            if ending:
                return False
            me.go.acquire()
            return not getattr(me, "abandoned", False)

    def fiber_body(self, fiber, target):
        """Runs `target` as `fiber`: waits for the first resume, then posts its end."""
        fiber.go.acquire()
        reply = self._running(fiber)
        result = {"ok": True}
        try:
            if reply.get("kill"):
                raise Killed()
            target()
        except Killed:
            result = {"killed": True}
        except SystemExit as e:
            result = {"system_exit": str(e.code)}
        except BaseException as e:  # noqa: B036 - the fiber's end is reported, whatever it was
            result = describe(e)
        fiber.done = True
        self.fibers.pop(fiber.id, None)
        self.current = None
        if fiber.abandoned:
            target, self.pending_handoff = self.pending_handoff, None
            if target is not None:
                target.go.release()
            return
        message = {"fiber": fiber.id, "exit": result}
        driver = self.local_driver
        if driver is not None:
            self.local_driver = None
            self.local_message = message
            driver.go.release()
            return
        self.write(message)
        self.serve(Parker(), ending=True)

    # --- the host driving fibers itself ----------------------------------------------------

    def resume_locally(self, fiber, reply, me):
        """Runs `fiber` from the baton holder `me` until its next message, and returns it."""
        self.local_driver = me
        fiber.reply = reply
        fiber.go.release()
        me.go.acquire()
        message, self.local_message = self.local_message, None
        return message

    def kill_node(self, node, me):
        """Unwinds every fiber of `node`; returns those that would not end."""
        node.dying = True
        stuck = []
        for fid in sorted(f.id for f in self.fibers.values() if f.node is node):
            fiber = self.fibers.get(fid)
            if fiber is None or fiber.done:
                continue
            if fiber is me:
                # The baton holder itself: it unwinds once it hands the baton on.
                fiber.abandoned = True
                continue
            for _ in range(1000):
                message = self.resume_locally(fiber, {"kill": True}, me)
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
