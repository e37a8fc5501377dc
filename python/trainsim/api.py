"""Running scenarios from Python: one seed, a batch of seeds, or a comparison.

Every function runs the ``trainsim`` binary with ``--format json`` and reads contract v1
(docs/reports.md) back into the objects of ``trainsim.report``. A scenario is a file path,
a dict (the TOML file's tables), or TOML text (``toml=``); a dict or text is written to a
temporary file for the run (or to ``save_as``, kept, so the report's ``repro`` replays it).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from ._binary import Completed, run_binary
from .errors import TrainsimError, error_for
from .report import Comparison, GoodputSummary, Report
from .scenario import dump_scenario

ScenarioLike = Union[str, "os.PathLike[str]", Mapping[str, Any]]
Seeds = Union[range, str]


def run(
    scenario: Optional[ScenarioLike] = None,
    *,
    seed: Optional[int] = None,
    toml: Optional[str] = None,
    save_as: Optional[Union[str, "os.PathLike[str]"]] = None,
    torch: Optional[str] = None,
    torch_elastic_src: Optional[str] = None,
    mutants: Sequence[str] = (),
    exact_control_plane: bool = False,
    check_determinism: bool = False,
    html: Optional[Union[str, "os.PathLike[str]"]] = None,
    trace: Optional[Union[str, "os.PathLike[str]"]] = None,
) -> Report:
    """Runs one scenario with one seed (``seed``, else the file's) and returns its report.

    A run that fails its scenario's expectations is returned, not raised (``report.passed``
    is False). Bad input raises ``ScenarioError``, a harness failure ``HarnessError``.
    """
    args: List[str] = []
    if seed is not None:
        args += ["--seed", str(int(seed))]
    args += _plane_args(torch, torch_elastic_src)
    args += _run_flags(mutants, exact_control_plane, check_determinism)
    if html is not None:
        args += ["--html", os.fspath(html)]
    if trace is not None:
        args += ["--trace", os.fspath(trace)]
    with scenario_file(scenario, toml, save_as) as path:
        done = run_binary(["run", path, "--format", "json", *args])
    reports = _reports_or_raise(done)
    if len(reports) != 1:
        raise TrainsimError(f"expected one report, got {len(reports)}", done.exit_code, done.command)
    return reports[0]


class Batch:
    """The reports of one scenario over a range of seeds, and their goodput summary."""

    def __init__(self, reports: List[Report], summary: GoodputSummary):
        self.reports = reports
        self.summary = summary

    def __iter__(self) -> Iterator[Report]:
        return iter(self.reports)

    def __len__(self) -> int:
        return len(self.reports)

    def __repr__(self) -> str:
        s = self.summary
        return (
            f"Batch({s.file!r}, {s.seeds} seeds, ETTR mean {s.ettr_mean:.3f}, "
            f"{len(self.failures)} not as expected)"
        )

    @property
    def passed(self) -> bool:
        """Whether every seed's run was what the scenario expects."""
        return all(r.passed for r in self.reports)

    @property
    def failures(self) -> List[Report]:
        """The runs that were not what the scenario expects."""
        return [r for r in self.reports if not r.passed]

    def rows(self) -> List[Dict[str, Any]]:
        """One flat dict per run (see ``trainsim.frames.rows``)."""
        from .frames import rows

        return rows(self.reports)

    def to_dataframe(self):
        """The rows as a pandas DataFrame (needs pandas)."""
        from .frames import to_dataframe

        return to_dataframe(self.reports)


def batch(
    scenario: Optional[ScenarioLike] = None,
    seeds: Seeds = range(0, 20),
    *,
    toml: Optional[str] = None,
    save_as: Optional[Union[str, "os.PathLike[str]"]] = None,
    torch: Optional[str] = None,
    torch_elastic_src: Optional[str] = None,
    mutants: Sequence[str] = (),
    exact_control_plane: bool = False,
    check_determinism: bool = False,
    jobs: Optional[int] = None,
) -> Batch:
    """Runs one scenario over ``seeds`` (``range(0, 20)`` or ``"0..20"``, ``"0..=19"``) and
    returns every seed's report and the batch's goodput summary, as ``trainsim merge``
    computes it."""
    args = ["--seeds", seeds_arg(seeds)]
    args += _plane_args(torch, torch_elastic_src)
    args += _run_flags(mutants, exact_control_plane, check_determinism)
    if jobs is not None:
        args += ["--jobs", str(int(jobs))]
    with tempfile.TemporaryDirectory(prefix="trainsim-batch-") as scratch:
        part = os.path.join(scratch, "part.json")
        with scenario_file(scenario, toml, save_as) as path:
            done = run_binary(["run", path, "--format", "json", "--out", part, *args])
        reports = _reports_or_raise(done)
        merged = run_binary(["merge", part, "--format", "json"])
    if merged.exit_code not in (0, 1):
        raise error_for(merged.stderr.strip(), merged.exit_code, merged.command)
    return Batch(reports, GoodputSummary.from_dict(json.loads(merged.stdout)))


def compare(
    scenarios: Union[ScenarioLike, Sequence[ScenarioLike]],
    *,
    sweep: Optional[Union[str, Tuple[str, Sequence[Any]]]] = None,
    seeds: Seeds = range(0, 20),
    torch: Optional[str] = None,
    torch_elastic_src: Optional[str] = None,
    html: Optional[Union[str, "os.PathLike[str]"]] = None,
) -> Comparison:
    """Compares goodput over the same seeds: two or more scenarios, or one with a key swept
    (``sweep=("job.checkpoint_every", [100, 300])`` or ``"job.checkpoint_every=100,300"``)."""
    if isinstance(scenarios, (str, os.PathLike, Mapping)):
        scenarios = [scenarios]
    args = ["--seeds", seeds_arg(seeds), "--format", "json"]
    if sweep is not None:
        args += ["--set", sweep_arg(sweep)]
    args += _plane_args(torch, torch_elastic_src)
    if html is not None:
        args += ["--html", os.fspath(html)]
    with contextlib.ExitStack() as stack:
        paths = [stack.enter_context(scenario_file(s, None, None, i)) for i, s in enumerate(scenarios)]
        done = run_binary(["compare", *paths, *args])
    if done.exit_code not in (0, 1):
        raise error_for(done.stderr.strip(), done.exit_code, done.command)
    return Comparison.from_dict(json.loads(done.stdout))


def seeds_arg(seeds: Seeds) -> str:
    """``--seeds``'s argument for a range with step 1, or a string as the CLI takes it."""
    if isinstance(seeds, range):
        if seeds.step != 1 or len(seeds) == 0:
            raise ValueError(f"seeds must be a non-empty range with step 1, got {seeds!r}")
        return f"{seeds.start}..{seeds.stop}"
    if isinstance(seeds, str):
        return seeds
    raise TypeError(f"seeds is a range or a string like '0..20', not {type(seeds).__name__}")


def sweep_arg(sweep: Union[str, Tuple[str, Sequence[Any]]]) -> str:
    """``--set``'s argument: ``KEY=V1,V2`` from a string or a (key, values) pair."""
    if isinstance(sweep, str):
        return sweep
    key, values = sweep
    return f"{key}=" + ",".join(str(v).lower() if isinstance(v, bool) else str(v) for v in values)


@contextlib.contextmanager
def scenario_file(
    scenario: Optional[ScenarioLike],
    toml: Optional[str],
    save_as: Optional[Union[str, "os.PathLike[str]"]],
    index: int = 0,
) -> Iterator[str]:
    """The path to give the binary: the file itself, or a file written from a dict or text."""
    if (scenario is None) == (toml is None):
        raise TypeError("give either a scenario (a path or a dict) or toml= text, not both")
    if isinstance(scenario, (str, os.PathLike)):
        if save_as is not None:
            raise TypeError("save_as is for a dict or toml= text; a file already is one")
        yield os.fspath(scenario)
        return
    text = toml if toml is not None else dump_scenario(scenario)
    if save_as is not None:
        Path(save_as).write_text(text, encoding="utf-8")
        yield os.fspath(save_as)
        return
    with tempfile.TemporaryDirectory(prefix="trainsim-scenario-") as scratch:
        path = os.path.join(scratch, f"scenario-{index}.toml" if index else "scenario.toml")
        Path(path).write_text(text, encoding="utf-8")
        yield path


def _plane_args(torch: Optional[str], torch_elastic_src: Optional[str]) -> List[str]:
    args: List[str] = []
    if torch is not None:
        args += ["--torch", os.fspath(torch)]
    if torch_elastic_src is not None:
        args += ["--torch-elastic-src", os.fspath(torch_elastic_src)]
    return args


def _run_flags(mutants: Sequence[str], exact_control_plane: bool, check_determinism: bool) -> List[str]:
    if isinstance(mutants, str):
        mutants = [mutants]
    args: List[str] = []
    for mutant in mutants:
        args += ["--mutant", mutant]
    if exact_control_plane:
        args.append("--exact-control-plane")
    if check_determinism:
        args.append("--check-determinism")
    return args


def _reports_or_raise(done: Completed) -> List[Report]:
    """The reports a ``run --format json`` printed; raises for exit codes 2, 3 and others."""
    reports = [Report.from_json(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if done.exit_code in (0, 1) and reports:
        return reports
    message = done.stderr.strip() or f"trainsim exited with code {done.exit_code} and no report"
    raise error_for(message, done.exit_code, done.command, reports)
