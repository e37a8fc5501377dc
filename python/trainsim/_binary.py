"""Finding the ``trainsim`` binary and running it: the one place the API starts a process.

The wheel installs the binary in the environment's scripts directory (``bin/`` of a
venv), beside ``python``. ``TRAINSIM_BIN`` names another one (a ``cargo build`` of a
checkout, for instance); without either, ``trainsim`` on ``PATH`` is used.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import List, Optional, Sequence

from .errors import BinaryNotFound

_EXE = "trainsim.exe" if os.name == "nt" else "trainsim"


def find_binary() -> str:
    """The path of the binary the API runs (see the module docstring for the order)."""
    explicit = os.environ.get("TRAINSIM_BIN")
    if explicit:
        if not Path(explicit).is_file():
            raise BinaryNotFound(f"TRAINSIM_BIN names {explicit}, which is not a file", None, [])
        return explicit
    candidates = [Path(sys.executable).parent / _EXE]
    for scheme in (None, f"{os.name}_user"):
        try:
            scripts = sysconfig.get_path("scripts", scheme) if scheme else sysconfig.get_path("scripts")
        except KeyError:
            continue
        candidates.append(Path(scripts) / _EXE)
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    on_path = shutil.which("trainsim")
    if on_path:
        return on_path
    raise BinaryNotFound(
        "no trainsim binary: install the wheel (pip install trainsim, or pip install . in a "
        "clone), or set TRAINSIM_BIN to a built one (target/release/trainsim)",
        None,
        [],
    )


class Completed:
    """What a command printed and how it exited."""

    def __init__(self, command: List[str], exit_code: int, stdout: str, stderr: str):
        self.command = command
        self.exit_code = exit_code
        self.stdout = stdout
        self.stderr = stderr


def run_binary(args: Sequence[str], cwd: Optional[str] = None) -> Completed:
    """Runs ``trainsim ARGS`` to its end and returns its output and exit code."""
    command = [find_binary(), *[str(a) for a in args]]
    done = subprocess.run(
        command,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        errors="replace",
        check=False,
    )
    return Completed(command, done.returncode, done.stdout, done.stderr)
