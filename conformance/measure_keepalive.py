#!/usr/bin/env python3
"""Logs what each rendezvous keep-alive of one torch agent sends the store.

    measure_keepalive.py [--seconds S] [--interval I]    run by the python of the torch to measure
    measure_keepalive.py --tail N                         time each of N keep-alives' Python tail

One agent's `DynamicRendezvousHandler` (c10d backend, a TCPStore of its own on loopback)
completes a round of one, then its keep-alive timer runs for S seconds. Each line is one
state read (`get`: TCPStore's WAIT then GET) or write (`set`: a compare-and-set), its
seconds since the round completed and the thread that made it. The state holder serves a
read from its cache while the last sync is at most 1 s old; docs/fidelity.md (the
rendezvous) quotes what this shows on torch 2.15.0: every keep-alive finds its cache stale
and reads before it writes. With `--tail N` the timer is stopped and `_keep_alive` is called
N times, 1.01 s apart; each line is the time from its last store call's return to its own
return (the Python between a keep-alive's sync and its timer's next wait).
"""

import argparse
import threading
import time
from datetime import timedelta


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=6.5)
    parser.add_argument("--interval", type=int, default=1)
    parser.add_argument("--tail", type=int, default=0)
    args = parser.parse_args()

    from torch.distributed import TCPStore
    from torch.distributed.elastic.rendezvous import RendezvousParameters
    from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import (
        C10dRendezvousBackend,
    )
    from torch.distributed.elastic.rendezvous.dynamic_rendezvous import create_handler

    store = TCPStore("127.0.0.1", 0, is_master=True, timeout=timedelta(seconds=60))
    backend = C10dRendezvousBackend(store, "probe")
    calls = []
    lock = threading.Lock()

    returned = []

    def counted(kind, method):
        def call(*a):
            with lock:
                calls.append((kind, time.monotonic(), threading.current_thread().name))
            result = method(*a)
            returned.append(time.monotonic())
            return result

        return call

    backend.get_state = counted("get", backend.get_state)
    backend.set_state = counted("set", backend.set_state)
    params = RendezvousParameters(
        backend="c10d",
        endpoint="",
        run_id="probe",
        min_nodes=1,
        max_nodes=1,
        last_call_timeout="1",
        keep_alive_interval=str(args.interval),
        heartbeat_timeout="5",
    )
    handler = create_handler(store, backend, params)
    handler.next_rendezvous()
    if args.tail:
        handler._stop_heartbeats()
        for _ in range(args.tail):
            time.sleep(1.01)  # past the keep-alive interval, so the op writes
            handler._keep_alive()
            print(f"{(time.monotonic() - returned[-1]) * 1e3:.3f} ms")
        handler.shutdown()
        return
    start = time.monotonic()
    with lock:
        calls.clear()
    time.sleep(args.seconds)
    with lock:
        seen = list(calls)
    for kind, at, thread in seen:
        print(f"{at - start:7.3f} {kind} {thread}")
    handler.shutdown()


if __name__ == "__main__":
    main()
