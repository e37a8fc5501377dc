"""Scenario files as dicts: read one to change it from code, write a dict back as TOML.

The binary validates what it runs; these helpers only move TOML in and out of Python (a
sweep in a notebook loads a file, changes a key and runs the dict). A file that is not TOML
is left for the binary to refuse, with its located message.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Dict, Mapping, Optional, Union

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the standard library has tomllib from 3.11
    import tomli as tomllib

import tomli_w


def load_scenario(path: Union[str, "os.PathLike[str]"]) -> Dict[str, Any]:
    """The scenario file at ``path`` as a dict of its tables (``tomllib.TOMLDecodeError`` if
    it is not TOML)."""
    with open(path, "rb") as f:
        return tomllib.load(f)


def dump_scenario(scenario: Mapping[str, Any]) -> str:
    """A scenario dict as TOML text the binary reads."""
    return tomli_w.dumps(dict(scenario))


def peek(path: Union[str, "os.PathLike[str]"]) -> Optional[Dict[str, Any]]:
    """The file as a dict, or None when it is not readable TOML (the binary will say why)."""
    try:
        return load_scenario(path)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None


def file_seed(scenario: Optional[Mapping[str, Any]]) -> Optional[int]:
    """The seed a scenario runs with when none is given: its ``seed``, else 0 (the
    binary's default), or None when the file could not be read."""
    if scenario is None:
        return None
    seed = scenario.get("seed", 0)
    # Anything else the binary refuses with its located message, which a run without
    # `--seed` shows.
    return seed if isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0 else None


def asks_for_torch(scenario: Optional[Mapping[str, Any]]) -> bool:
    """Whether the scenario has a ``[torch]`` table: it runs torch's own elastic code."""
    return scenario is not None and isinstance(scenario.get("torch"), dict)
