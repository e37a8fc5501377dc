"""Reports as flat rows, for pandas or any table: one dict per run, one column per fact.

pandas is never required: ``rows`` returns plain dicts, and ``to_dataframe`` imports pandas
only when called.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List

from .report import Report


def row(report: Report) -> Dict[str, Any]:
    """One run as a flat dict: identity, outcome, verdict, goodput (badput by cause in
    ``badput_<cause>_us`` columns), progress, rounds, restarts and violated invariants."""
    out: Dict[str, Any] = {
        "scenario": report.scenario,
        "file": report.file,
        "seed": report.seed,
        "outcome": report.outcome,
        "passed": report.passed,
        "violated": ",".join(report.violated),
        "steps_done": report.job.steps_done,
        "samples_seen": report.job.samples_seen,
        "rounds": len(report.rounds),
        "final_world_size": report.rounds[-1].world_size if report.rounds else 0,
        "restarts": sum(a.restarts for a in report.agents),
        "sim_time_us": report.sim_time_us,
        "events": report.events,
        "trace_hash": report.trace_hash,
    }
    goodput = report.goodput
    if goodput is not None:
        out["ettr"] = goodput.ettr
        out["wall_us"] = goodput.wall_us
        out["productive_us"] = goodput.productive_us
        for cause, us in goodput.badput_us.items():
            out[f"badput_{cause}_us"] = us
    return out


def rows(reports: Iterable[Report]) -> List[Dict[str, Any]]:
    """``row`` of every report, in order."""
    return [row(r) for r in reports]


def to_dataframe(reports: Iterable[Report]):
    """The reports' rows as a ``pandas.DataFrame``; raises ImportError without pandas."""
    try:
        import pandas
    except ImportError as missing:
        raise ImportError(
            "trainsim.to_dataframe needs pandas (pip install pandas); trainsim.rows gives "
            "the same rows as plain dicts"
        ) from missing
    return pandas.DataFrame(rows(reports))
