#!/usr/bin/env python3
"""Logs what each rendezvous keep-alive of one torch agent sends the store.

    measure_keepalive.py [--seconds S] [--interval I]    run by the python of the torch to measure

One agent's `DynamicRendezvousHandler` (c10d backend, a TCPStore of its own on loopback)
completes a round of one, then its keep-alive timer runs for S seconds. Each line is one
state read (`get`: TCPStore's WAIT then GET) or write (`set`: a compare-and-set), its
seconds since the round completed and the thread that made it. The state holder serves a
read from its cache while the last sync is at most 1 s old; docs/fidelity.md (the
rendezvous) quotes what this shows on torch 2.15.0: every keep-alive finds its cache stale
and reads before it writes.
"""

import argparse
import threading
import time
from datetime import timedelta


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=6.5)
    parser.add_argument("--interval", type=int, default=1)
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

    def counted(kind, method):
        def call(*a):
            with lock:
                calls.append((kind, time.monotonic(), threading.current_thread().name))
            return method(*a)

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
