"""The training worker torchrun starts on every local rank during a conformance run.

It joins a gloo process group through the MASTER_ADDR/MASTER_PORT its agent published,
all-reduces one small tensor per step for the job's steps, sleeping the step time before
each, and logs one JSON line per event (start, group_ready, step, finish, error) to its
node's log. Group rank 0 checkpoints the global step every `--checkpoint-every` steps to a
file shared by the run; every group resumes from it, as the simulated job does.

A fault `worker_crash` reaches a worker through a control file the driver writes
(`crash-<node>-<local rank>`, holding the exit code): a thread polls for it, so the crash
lands even while the main thread blocks inside gloo.
"""

import argparse
import datetime
import json
import os
import sys
import threading
import time


def log(path, event, **fields):
    """Appends one JSON line; one write per line keeps lines of sibling workers whole."""
    record = {"t": time.time(), "event": event, "pid": os.getpid()}
    for key in ("LOCAL_RANK", "RANK", "WORLD_SIZE", "GROUP_RANK", "TORCHELASTIC_RESTART_COUNT"):
        if key in os.environ:
            record[key.lower()] = int(os.environ[key])
    record.update(fields)
    line = (json.dumps(record, sort_keys=True) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def watch_for_crash(control, log_path):
    """Exits the process with the code the driver writes to `control`, once it appears."""
    while True:
        try:
            with open(control) as f:
                text = f.read().strip()
        except OSError:
            time.sleep(0.05)
            continue
        if not text:
            time.sleep(0.05)
            continue
        code = int(text)
        try:
            os.remove(control)
        except OSError:
            pass
        log(log_path, "crash", exit_code=code)
        os._exit(code)


def read_checkpoint(path):
    try:
        with open(path) as f:
            return int(json.load(f)["step"])
    except (OSError, ValueError, KeyError):
        return 0


def write_checkpoint(path, step):
    temp = f"{path}.{os.getpid()}.tmp"
    with open(temp, "w") as f:
        json.dump({"step": step}, f)
    os.replace(temp, path)


def init_args(a):
    """What the script adds to init_process_group for the job's `init_method` and
    `script_master_port`: a port of its own, set in MASTER_PORT for env:// (as torch's DDP
    tutorial does) or written in a tcp:// address."""
    port = getattr(a, "script_master_port", None)
    if port is None:
        return {}
    if getattr(a, "init_method", "env") == "tcp":
        return {
            "init_method": f"tcp://{os.environ['MASTER_ADDR']}:{port}",
            "rank": int(os.environ["RANK"]),
            "world_size": int(os.environ["WORLD_SIZE"]),
        }
    os.environ["MASTER_PORT"] = str(port)
    return {}


def main():
    # One positional argument, a JSON file: torchrun's own parser would take options
    # such as --node or --log after the script for prefixes of its own.
    with open(sys.argv[1]) as f:
        a = argparse.Namespace(**json.load(f))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    control = os.path.join(a.control_dir, f"crash-{a.node}-{local_rank}")
    threading.Thread(target=watch_for_crash, args=(control, a.log), daemon=True).start()
    log(a.log, "start", node=a.node)
    try:
        import torch
        import torch.distributed as dist

        dist.init_process_group(
            "gloo", timeout=datetime.timedelta(seconds=a.collective_timeout), **init_args(a)
        )
        step = read_checkpoint(a.checkpoint)
        log(a.log, "group_ready", node=a.node, step=step)
        tensor = torch.ones(1)
        while step < a.steps:
            time.sleep(a.step_time)
            dist.all_reduce(tensor)
            step += 1
            if dist.get_rank() == 0 and step % a.checkpoint_every == 0:
                write_checkpoint(a.checkpoint, step)
            log(a.log, "step", node=a.node, step=step)
        log(a.log, "finish", node=a.node, step=step)
        dist.destroy_process_group()
    except Exception as e:  # the agent sees the exit code; the log keeps the reason
        log(a.log, "error", node=a.node, error=f"{type(e).__name__}: {e}"[:500])
        sys.stdout.flush()
        os._exit(1)


if __name__ == "__main__":
    main()
