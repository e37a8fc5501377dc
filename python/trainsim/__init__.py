"""trainsim from Python: run scenarios and get reports as objects, and a pytest plugin.

    import trainsim
    report = trainsim.run("scenarios/late_joiner_next_round.toml", seed=5)
    report.outcome, report.goodput.ettr, report.violated
    runs = trainsim.batch("scenarios/worker_crash_restart.toml", seeds=range(0, 20))
    runs.summary.ettr_mean, runs.to_dataframe()

The functions run the ``trainsim`` binary the wheel installs and read its JSON reports
(contract v1); see docs/python.md.
"""

from .api import Batch, batch, compare, run
from .errors import BinaryNotFound, HarnessError, ScenarioError, TrainsimError
from .frames import row, rows, to_dataframe
from .report import (
    Agent,
    Comparison,
    Difference,
    Eval,
    Expect,
    GoodputSummary,
    Goodput,
    Invariant,
    Job,
    Reader,
    ReaderEpoch,
    Report,
    Round,
    Torch,
    Variant,
    Violation,
)
from ._binary import find_binary
from .scenario import dump_scenario, load_scenario

__all__ = [
    "Agent",
    "Batch",
    "BinaryNotFound",
    "Comparison",
    "Difference",
    "Eval",
    "Expect",
    "Goodput",
    "GoodputSummary",
    "HarnessError",
    "Invariant",
    "Job",
    "Reader",
    "ReaderEpoch",
    "Report",
    "Round",
    "ScenarioError",
    "Torch",
    "TrainsimError",
    "Variant",
    "Violation",
    "batch",
    "compare",
    "dump_scenario",
    "find_binary",
    "load_scenario",
    "row",
    "rows",
    "run",
    "to_dataframe",
]
