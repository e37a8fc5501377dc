"""Fixtures of the trainsim package's tests: the repository's scenarios and the CLI itself.

These tests run against the installed wheel (``.ci/run`` installs it into a fresh venv), so
they check what a user gets: the binary in the venv, the package, the plugin's entry point.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

import trainsim

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "scenarios"


@pytest.fixture
def cli():
    """Runs the binary the API runs, as a user would at a shell, and returns its result."""

    def run(*args, cwd=None):
        return subprocess.run(
            [trainsim.find_binary(), *map(str, args)],
            cwd=cwd,
            capture_output=True,
            text=True,
            check=False,
        )

    return run
