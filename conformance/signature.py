"""The run signature of a saved real-torch run: what `trainsim conform` compares.

A run directory (written by `driver.py run`) holds the driver's event log `driver.jsonl`,
one output file per agent process (`agent-node-N-K.log`) and the workers' JSON lines
(`workers-node-N.jsonl`). From them:

- `rounds`: every round some agent joined, in the order of its first join, with its world
  size and the nodes that logged joining it (torch's dynamic_rendezvous logs "The node
  '<addr>_<pid>_<id>' has joined round R of the rendezvous '<id>' as rank K in a world of
  size W."). A round is keyed by its store incarnation and its number: a store that comes
  back starts a new rendezvous at round 0.
- `nodes`: per node that ran an agent, the final state of its last agent process
  (`SUCCEEDED`, `FAILED`, `STOPPED`, `KILLED`, `RUNNING`), its exit code and the restarts
  its agents counted ("Worker group FAILED. n/m attempts left; will restart worker group").
- `finished`: some worker logged finishing the job's last step.
- `observed`: the invariants the join lines themselves show violated (see
  `observed_violations`); not part of what `trainsim conform` compares, but what `trainsim
  fuzz --confirm` asks a real run to show.

Consecutive rounds of the same world size and members are one entry with `repeated` (see
`collapse_repeats`), as the simulator side collapses them.

Standard library only, so the tests run it with any Python 3.
"""

import calendar
import json
import os
import re
import time

GLOG = re.compile(r"^[IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d+) +\d+ [^\]]*\] (.*)$")
JOINED = re.compile(
    r"The node '([0-9.]+)_(\d+)_(\d+)' has joined round (\d+) of the rendezvous "
    r"'[^']*' as rank (\d+) in a world of size (\d+)\."
)
COUNTED_RESTART = re.compile(
    r"\] Worker group (FAILED|UNHEALTHY)\. \d+/\d+ attempts left; will restart worker group"
)
SIGNALLED = re.compile(r"Received \d+ death signal, shutting down workers")
GRACEFUL = re.compile(r"Rendezvous gracefully exited")


def node_of_addr(addr):
    """127.0.0.(N+1) is node-N."""
    last = int(addr.rsplit(".", 1)[1])
    return f"node-{last - 1}"


def node_key(name):
    return int(name.split("-", 1)[1])


def glog_time(match, t0, utc_offset):
    """A glog line's local time as epoch seconds, taking the year from the run's start and
    the run machine's UTC offset from the driver (not this machine's time zone)."""
    month, day, hour, minute, sec, frac = (match.group(i) for i in range(1, 7))
    year = time.gmtime(t0 + utc_offset).tm_year
    local = (year, int(month), int(day), int(hour), int(minute), int(sec), 0, 0, 0)
    return calendar.timegm(local) - utc_offset + float("0." + frac)


def read_events(run_dir):
    with open(os.path.join(run_dir, "driver.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def parse_agent_log(path, t0, utc_offset):
    """The joins, counted restarts and exit kind one agent process logged."""
    joins, restarts, stopped, graceful = [], 0, False, False
    try:
        with open(path, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        lines = []
    for line in lines:
        m = GLOG.match(line)
        if m is None:
            continue
        message = m.group(7)
        j = JOINED.search(message)
        if j:
            joins.append({
                "t": glog_time(m, t0, utc_offset),
                "node": node_of_addr(j.group(1)),
                "round": int(j.group(4)),
                "rank": int(j.group(5)),
                "world_size": int(j.group(6)),
            })
        elif COUNTED_RESTART.search(line):
            restarts += 1
        elif SIGNALLED.search(message):
            stopped = True
        elif GRACEFUL.search(message):
            graceful = True
    return {"joins": joins, "restarts": restarts, "stopped": stopped, "graceful": graceful}


def incarnation_starts(events, plan):
    """When each store incarnation began: the dedicated store's starts, or the store
    node's agent starts (the store lives in that agent)."""
    if plan["store_node"] is None:
        return [e["t"] for e in events if e["event"] == "store_started"]
    host = f"node-{plan['store_node']}"
    return [e["t"] for e in events if e["event"] == "agent_started" and e["node"] == host]


def round_key(join, starts):
    """A join's round: its store incarnation and its number."""
    incarnation = sum(1 for s in starts if s <= join["t"] + 0.01)
    return (incarnation, join["round"])


def build_rounds(joins, starts):
    rounds = {}
    for j in joins:
        key = round_key(j, starts)
        r = rounds.setdefault(key, {"first": j["t"], "world_size": 0, "members": set()})
        r["first"] = min(r["first"], j["t"])
        r["world_size"] = max(r["world_size"], j["world_size"])
        r["members"].add(j["node"])
    ordered = sorted(rounds.items(), key=lambda kv: (kv[1]["first"], kv[0]))
    return collapse_repeats([
        {"world_size": r["world_size"], "members": sorted(r["members"], key=node_key)}
        for _, r in ordered
    ])


def collapse_repeats(rounds):
    """Consecutive rounds of the same world size and members as one entry, `repeated` when it
    came two or more times in a row (how many times is left out, so two restart loops of
    different lengths compare equal). As `collapse_repeats` in src/conform/signature.rs."""
    out = []
    for r in rounds:
        if out and (out[-1]["world_size"], out[-1]["members"]) == (r["world_size"], r["members"]):
            out[-1]["repeated"] = True
        else:
            out.append(dict(r, repeated=bool(r.get("repeated", False))))
    return out


def observed_violations(joins, starts, plan):
    """The invariants the agents' own join lines show violated, sorted:
    `rendezvous.agreement` when two nodes report one round (incarnation and number) with
    different world sizes or the same rank, or a node reports a rank outside its world;
    `rendezvous.bounds` when a node reports a world outside min_nodes..max_nodes."""
    found = set()
    by_round = {}
    for j in joins:
        by_round.setdefault(round_key(j, starts), []).append(j)
        if not 0 <= j["rank"] < j["world_size"]:
            found.add("rendezvous.agreement")
        if not plan["min_nodes"] <= j["world_size"] <= plan["max_nodes"]:
            found.add("rendezvous.bounds")
    for same in by_round.values():
        ranks = [j["rank"] for j in same]
        if len({j["world_size"] for j in same}) > 1 or len(set(ranks)) < len(ranks):
            found.add("rendezvous.agreement")
    return sorted(found)


def final_state(last, log, end_t):
    """The state and exit code of a node's last agent process."""
    if last.get("killed"):
        return "KILLED", last.get("returncode")
    exited_at, code = last.get("exited_at"), last.get("returncode")
    if code is None or (end_t is not None and exited_at is not None and exited_at > end_t):
        return "RUNNING", None
    if log["stopped"] or log["graceful"]:
        return "STOPPED", code
    return ("SUCCEEDED" if code == 0 else "FAILED"), code


def job_finished(run_dir, steps):
    for name in sorted(os.listdir(run_dir)):
        if not (name.startswith("workers-") and name.endswith(".jsonl")):
            continue
        with open(os.path.join(run_dir, name), errors="replace") as f:
            for line in f:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if record.get("event") == "finish" and record.get("step", 0) >= steps:
                    return True
    return False


def parse_dir(run_dir):
    events = read_events(run_dir)
    run = next(e for e in events if e["event"] == "run")
    plan, t0 = run["plan"], run["t0"]
    utc_offset = run.get("utc_offset", 0)
    end = next((e for e in events if e["event"] == "end"), None)
    end_t = end["t"] if end is not None and end["reason"] != "every agent exited" else None
    procs = {}  # (node, proc) -> what the driver saw of it
    for e in events:
        if e["event"] == "agent_started":
            procs[(e["node"], e["proc"])] = {"log": e["log"]}
        elif e["event"] == "agent_killed":
            procs[(e["node"], e["proc"])]["killed"] = True
        elif e["event"] == "agent_exited":
            procs[(e["node"], e["proc"])].update(returncode=e["returncode"], exited_at=e["t"])
    joins, nodes = [], {}
    for (node, index) in sorted(procs, key=lambda k: (node_key(k[0]), k[1])):
        info = procs[(node, index)]
        log = parse_agent_log(os.path.join(run_dir, info["log"]), t0, utc_offset)
        joins.extend(log["joins"])
        entry = nodes.setdefault(node, {"restarts": 0})
        entry["restarts"] += log["restarts"]
        entry["final_state"], entry["exit_code"] = final_state(info, log, end_t)
    starts = incarnation_starts(events, plan)
    return {
        "rounds": build_rounds(joins, starts),
        "nodes": {k: nodes[k] for k in sorted(nodes, key=node_key)},
        "finished": job_finished(run_dir, plan["steps"]),
        "observed": observed_violations(joins, starts, plan),
    }
