#!/usr/bin/env python3
"""Makes `tests/data/parity`-style vectors with the torch (and Bagua) installed here.

    python gen_parity_vectors.py --out DIR [--seed N] [--cases N] [--digests]
                                 [--bagua-sampler PATH/load_balancing_data_loader.py]
    trainsim parity DIR/*.jsonl

Every expected value is computed by calling the reference code itself: torch's CPU
generator (`randperm`, `randint`), `torch.utils.data.DistributedSampler`, the elastic agent's
`_assign_worker_ranks`, and the dynamic rendezvous's op classes and state sanitizing, with
their clocks pinned to fixed values. Bagua's samplers come from the user's copy of Bagua's
`load_balancing_data_loader.py` (`--bagua-sampler`); without it those kinds are skipped. The
case format is the one `trainsim parity` reads (see docs/fidelity.md, "Parity with torch
and Bagua"). `--digests` adds the slow `randperm_digest` case at n = 214,748,364 (needs numpy).

Run it with PYTHONHASHSEED=0 so sets iterate the same way on every run.
"""

import argparse
import hashlib
import importlib.util
import json
import os
import random
import sys
import threading
import types
from datetime import datetime, timedelta, timezone
from unittest import mock

import torch
from torch.distributed.elastic.agent.server.api import SimpleElasticAgent
from torch.distributed.elastic.rendezvous import dynamic_rendezvous as dr
from torch.distributed.elastic.rendezvous.api import RendezvousGracefulExitError
from torch.utils.data import DistributedSampler

ORIGIN = datetime(2026, 1, 1, tzinfo=timezone.utc)


def at_us(us):
    return ORIGIN + timedelta(microseconds=us)


def us_of(dt):
    delta = dt - ORIGIN
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def seed_choice(rng):
    return rng.choice([0, 1, 42, rng.randint(0, 2**32), rng.randint(0, 2**63 - 1)])


# ------------------------------------------------------------------------- samplers

def randperm_cases(rng, cases):
    sizes = [0, 1, 2, 5, 8, 64] + [rng.randint(0, 4000) for _ in range(cases)]
    for n in sizes:
        seed = seed_choice(rng)
        perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
        yield {"kind": "randperm", "n": n, "seed": seed, "expected": perm.tolist()}


def randperm_digest_cases(rng):
    import numpy  # only this kind needs it: the permutation is 1.7 GB as int64

    n, seed = 214_748_364, rng.randint(0, 2**32)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    digest = hashlib.sha256(perm.numpy().astype(numpy.dtype("<i8")).tobytes()).hexdigest()
    yield {"kind": "randperm_digest", "n": n, "seed": seed, "head": perm[:16].tolist(),
           "sha256_le_i64": digest}


def randint_cases(rng, cases):
    for _ in range(cases):
        high = rng.choice([1, 2, 5, 1000, rng.randint(1, 2**27), 2**28 - 1, 2**28,
                           rng.randint(2**28, 2**45)])
        size, seed = rng.randint(0, 400), seed_choice(rng)
        values = torch.randint(high, (size,), generator=torch.Generator().manual_seed(seed))
        yield {"kind": "randint", "high": high, "size": size, "seed": seed,
               "expected": values.tolist()}


class Sized:
    """A dataset the samplers only ask the length of."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n


def distributed_sampler_cases(rng, cases):
    for _ in range(cases):
        n, replicas = rng.randint(0, 300), rng.randint(1, 9)
        seed, epoch = rng.choice([0, rng.randint(0, 2**31)]), rng.randint(0, 5)
        shuffle, drop_last = rng.random() < 0.7, rng.random() < 0.4
        if n == 0 and not drop_last:
            n = 1  # torch divides by zero padding an empty dataset
        expected = []
        for rank in range(replicas):
            s = DistributedSampler(Sized(n), num_replicas=replicas, rank=rank,
                                   shuffle=shuffle, seed=seed, drop_last=drop_last)
            s.set_epoch(epoch)
            expected.append(list(s))
        yield {"kind": "distributed_sampler", "dataset_len": n, "num_replicas": replicas,
               "seed": seed, "epoch": epoch, "shuffle": shuffle, "drop_last": drop_last,
               "expected": expected}


def bagua_cases(rng, cases, path):
    spec = importlib.util.spec_from_file_location("bagua_load_balancing", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for i in range(cases):
        n, replicas = rng.randint(1, 120), rng.randint(1, 6)
        complexities = [rng.randint(0, 60) for _ in range(n)]
        case = {"complexities": complexities, "num_replicas": replicas,
                "seed": rng.randint(0, 1000), "epoch": rng.randint(0, 4),
                "shuffle": rng.random() < 0.8, "drop_last": rng.random() < 0.3,
                "random_level": rng.choice([0.0, 0.3, 0.5, 1.0])}
        batched = i % 2 == 1
        if batched:
            case["batch_size"] = rng.randint(1, 6)
            case["drop_last_batches"] = rng.random() < 0.3
        expected = []
        for rank in range(replicas):
            sampler = module.LoadBalancingDistributedSampler(
                complexities, complexity_fn=lambda x: x, num_replicas=replicas, rank=rank,
                shuffle=case["shuffle"], seed=case["seed"], drop_last=case["drop_last"],
                random_level=case["random_level"])
            sampler.set_epoch(case["epoch"])
            if batched:
                size = case["batch_size"]
                batch_fn = lambda idx, size=size: [idx[j:j + size] for j in range(0, len(idx), size)]
                batches = module.LoadBalancingDistributedBatchSampler(
                    sampler, batch_fn=batch_fn, drop_last=case["drop_last_batches"])
                expected.append([list(b) for b in batches])
            else:
                expected.append(list(sampler))
        kind = "load_balancing_batch_sampler" if batched else "load_balancing_sampler"
        yield {"kind": kind, **case, "expected": expected}


# ------------------------------------------------------------------------- agent

class BlockingStore:
    """The few store calls rank assignment makes, over a dict, with `get` blocking."""

    def __init__(self):
        self.data, self.cv = {}, threading.Condition()

    def set(self, key, value):
        with self.cv:
            self.data[key] = value if isinstance(value, bytes) else str(value).encode()
            self.cv.notify_all()

    def multi_set(self, keys, values):
        for k, v in zip(keys, values):
            self.set(k, v)

    def get(self, key):
        with self.cv:
            if not self.cv.wait_for(lambda: key in self.data, timeout=30):
                raise TimeoutError(key)
            return self.data[key]

    def multi_get(self, keys):
        return [self.get(k) for k in keys]


def assign_ranks_cases(rng, cases):
    for _ in range(cases):
        groups = rng.randint(1, 6)
        roles = [{"role": rng.choice(["trainer", "ps", "eval"]),
                  "local_world_size": rng.randint(1, 5)} for _ in range(groups)]
        store, results = BlockingStore(), [None] * groups

        def agent(g):
            spec = types.SimpleNamespace(role=roles[g]["role"],
                                         local_world_size=roles[g]["local_world_size"])
            workers = SimpleElasticAgent._assign_worker_ranks(None, store, g, groups, spec)
            results[g] = [{"local_rank": w.local_rank, "global_rank": w.global_rank,
                           "role_rank": w.role_rank, "world_size": w.world_size,
                           "role_world_size": w.role_world_size} for w in workers]

        threads = [threading.Thread(target=agent, args=(g,)) for g in range(groups)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        yield {"kind": "assign_ranks", "roles": roles, "expected": results}


# ------------------------------------------------------------------------- rendezvous

ADDRS = ["host-a", "host-b", "host-c", "host-d", "host-e"]


def node_json(n):
    return {"addr": n.addr, "pid": n.pid, "local_id": n.local_id}


def by_node(n):
    return (n.addr, n.pid, n.local_id)


def random_settings(rng):
    interval = rng.choice([1, 2, 5])
    return dr.RendezvousSettings(
        "run", min_nodes := rng.randint(1, 3), min_nodes + rng.randint(0, 3),
        dr.RendezvousTimeout(timedelta(seconds=rng.choice([60, 600])),
                             timedelta(seconds=rng.choice([5, 30])),
                             timedelta(seconds=30), timedelta(seconds=5)),
        keep_alive_interval=timedelta(seconds=interval),
        keep_alive_max_attempt=rng.randint(1, 4))


def settings_json(s):
    us = lambda td: int(td / timedelta(microseconds=1))
    return {"run_id": s.run_id, "min_nodes": s.min_nodes, "max_nodes": s.max_nodes,
            "join_timeout_us": us(s.timeout.join), "last_call_timeout_us": us(s.timeout.last_call),
            "close_timeout_us": us(s.timeout.close), "heartbeat_timeout_us": us(s.timeout.heartbeat),
            "keep_alive_interval_us": us(s.keep_alive_interval),
            "keep_alive_max_attempt": s.keep_alive_max_attempt}


def random_state(rng, nodes, settings, now_us):
    state = dr._RendezvousState()
    state.round = rng.randint(0, 4)
    state.complete = rng.random() < 0.4
    state.closed = rng.random() < 0.1
    chosen = rng.sample(nodes, rng.randint(0, len(nodes)))
    k = rng.randint(0, len(chosen))
    participants, rest = chosen[:k], chosen[k:]
    for rank, n in enumerate(sorted(participants, key=by_node)):
        state.participants[n] = rank if state.complete else 0
    for n in rest:
        (state.wait_list if rng.random() < 0.6 else state.redundancy_list).add(n)
    expiry_us = int(settings.keep_alive_interval / timedelta(microseconds=1)) * settings.keep_alive_max_attempt
    for n in chosen:
        state.last_heartbeats[n] = at_us(now_us - rng.randint(0, 2 * expiry_us))
    if participants and not state.complete and rng.random() < 0.6:
        state.deadline = at_us(now_us + rng.randint(-10_000_000, 30_000_000))
    return state


def state_json(state):
    return {
        "round": state.round, "complete": state.complete, "closed": state.closed,
        "deadline_utc_us": None if state.deadline is None else us_of(state.deadline),
        "participants": [[node_json(n), r] for n, r in sorted(state.participants.items(),
                                                               key=lambda kv: by_node(kv[0]))],
        "wait_list": [node_json(n) for n in sorted(state.wait_list, key=by_node)],
        "redundancy_list": [node_json(n) for n in sorted(state.redundancy_list, key=by_node)],
        "last_heartbeats": [[node_json(n), us_of(t)] for n, t in
                            sorted(state.last_heartbeats.items(), key=lambda kv: by_node(kv[0]))],
    }


def pinned_clocks(now_utc_us, now_mono_us):
    """Patches the module's wall clock and monotonic clock to fixed readings."""
    class FixedDatetime(datetime):
        @classmethod
        def now(cls, tz=None):
            return at_us(now_utc_us)

    clock = types.SimpleNamespace(monotonic=lambda: now_mono_us / 1e6)
    return mock.patch.multiple(dr, datetime=FixedDatetime, time=clock)


OPS = {"join": dr._RendezvousJoinOp, "exit": dr._RendezvousExitOp,
       "close": dr._RendezvousCloseOp, "keep_alive": dr._RendezvousKeepAliveOp}


def rendezvous_cases(rng, cases):
    for i in range(cases):
        nodes = [dr._NodeDesc(rng.choice(ADDRS), rng.randint(1, 3), 0) for _ in range(6)]
        nodes = sorted(set(nodes), key=by_node)
        settings = random_settings(rng)
        now_us, mono_us = rng.randint(10**9, 2 * 10**9), rng.randint(10**8, 10**9)
        state = random_state(rng, nodes, settings, now_us)
        node = rng.choice(nodes)
        snapshot = state_json(state)
        if i % 3 == 2:
            holder = dr._BackendRendezvousStateHolder.__new__(dr._BackendRendezvousStateHolder)
            holder._state, holder._settings = state, settings
            with pinned_clocks(now_us, mono_us):
                holder._sanitize()
            yield {"kind": "rdzv_sanitize", "settings": settings_json(settings),
                   "state": snapshot, "now_utc_us": now_us, "expected_state": state_json(state)}
            continue
        op = rng.choice(["join", "join", "join", "exit", "close", "keep_alive"])
        deadline_us = mono_us + rng.randint(-2_000_000, 60_000_000)
        with pinned_clocks(now_us, mono_us):
            try:
                action = OPS[op]()(dr._RendezvousContext(node, state, settings), deadline_us / 1e6)
                expected = action.name
            except RendezvousGracefulExitError:
                action, expected = None, "GRACEFUL_EXIT"
        yield {"kind": "rdzv_op", "op": op, "settings": settings_json(settings),
               "node": node_json(node), "state": snapshot, "now_utc_us": now_us,
               "now_mono_us": mono_us, "deadline_mono_us": deadline_us, "expected": expected}
        method = None if action is None else f"_{action.name.lower()}"
        if method and hasattr(dr._DistributedRendezvousOpExecutor, method):
            executor = dr._DistributedRendezvousOpExecutor(node, mock.Mock(), settings)
            executor._state = state
            with pinned_clocks(now_us, mono_us):
                getattr(executor, method)()
            yield {"kind": "rdzv_apply", "action": action.name, "settings": settings_json(settings),
                   "node": node_json(node), "state": snapshot, "now_utc_us": now_us,
                   "expected_state": state_json(state)}


# ------------------------------------------------------------------------- main

def write(path, cases):
    count = 0
    with open(path, "w") as f:
        for case in cases:
            f.write(json.dumps(case, separators=(",", ":")) + "\n")
            count += 1
    return count


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=1, help="seed of the case generator")
    p.add_argument("--cases", type=int, default=60, help="cases per kind (roughly)")
    p.add_argument("--digests", action="store_true", help="add the slow randperm_digest case")
    p.add_argument("--bagua-sampler", help="Bagua's load_balancing_data_loader.py")
    a = p.parse_args()
    if os.environ.get("PYTHONHASHSEED") != "0":
        print("note: set PYTHONHASHSEED=0 for the same vectors on every run", file=sys.stderr)
    os.makedirs(a.out, exist_ok=True)
    rng = random.Random(a.seed)
    files = {
        "randperm.jsonl": randperm_cases(rng, a.cases),
        "randint.jsonl": randint_cases(rng, a.cases),
        "distributed_sampler.jsonl": distributed_sampler_cases(rng, a.cases),
        "assign_ranks.jsonl": assign_ranks_cases(rng, a.cases // 3),
        "rendezvous.jsonl": rendezvous_cases(rng, a.cases * 6),
    }
    if a.digests:
        files["randperm_digest.jsonl"] = randperm_digest_cases(rng)
    if a.bagua_sampler:
        files["load_balancing_sampler.jsonl"] = bagua_cases(rng, a.cases, a.bagua_sampler)
    total = 0
    for name, cases in files.items():
        n = write(os.path.join(a.out, name), cases)
        total += n
        print(f"{name}: {n} cases", file=sys.stderr)
    with open(os.path.join(a.out, "SOURCE"), "w") as f:
        f.write(f"torch {torch.__version__}; generator seed {a.seed}; cases {a.cases}; "
                f"made by conformance/gen_parity_vectors.py\n")
    print(f"{total} cases in {a.out}; check them with: trainsim parity {a.out}/*.jsonl")


if __name__ == "__main__":
    main()
