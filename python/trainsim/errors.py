"""The exceptions the API raises, each carrying the binary's message and exit code.

Exit codes are contract v1's: 1 a run failed (not an error: the reports say which), 2 bad
input (the message names file, line and column, as the command line prints it), 3 the
harness itself failed.
"""

from __future__ import annotations

from typing import List, Optional, Sequence


class TrainsimError(Exception):
    """A ``trainsim`` command that did not give reports.

    ``message`` is what the command printed on stderr, as the command line shows it;
    ``exit_code`` its exit code; ``command`` the argument list that ran.
    """

    def __init__(self, message: str, exit_code: Optional[int], command: Sequence[str]):
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
        self.command: List[str] = list(command)

    def __str__(self) -> str:
        return self.message


class ScenarioError(TrainsimError):
    """Exit code 2: a scenario that cannot be read or a usage error, located in the message
    (``scenarios/x.toml:4:13: rendezvous.min_nodes: ...``)."""


class HarnessError(TrainsimError):
    """Exit code 3: the harness itself failed (a caught panic, a bound exceeded); the
    message names the seed. ``reports`` holds the runs that did finish."""

    def __init__(self, message: str, exit_code: Optional[int], command: Sequence[str], reports=()):
        super().__init__(message, exit_code, command)
        self.reports = list(reports)


class BinaryNotFound(TrainsimError):
    """No ``trainsim`` binary: neither ``TRAINSIM_BIN``, the wheel's, nor one on ``PATH``."""


def error_for(message: str, exit_code: Optional[int], command: Sequence[str], reports=()) -> TrainsimError:
    """The exception for a command that exited with ``exit_code`` and printed ``message``."""
    if exit_code == 2:
        return ScenarioError(message, exit_code, command)
    if exit_code == 3:
        return HarnessError(message, exit_code, command, reports)
    return TrainsimError(message, exit_code, command)
