"""The pytest plugin: scenario files as test items, one per file and seed.

Configure which files are scenarios in the ini file (several globs, one a line, relative to
the rootdir)::

    [pytest]
    trainsim_scenarios = scenarios/*.toml

Each matching file gives one item per seed, ``FILE::seed_N`` (``--trainsim-seeds 0..5``,
else the file's own ``seed``). An item runs ``trainsim run FILE --seed N`` and passes when the run is what the
scenario expects; a failure shows the verdict, the why line, the violated invariants and
the replay command. ``--trainsim-html DIR`` writes each run's page and an index for a CI
artefact. Scenarios with a ``[torch]`` table run on the torch of the Python running pytest
unless ``--trainsim-torch PYTHON`` (or ``scenario``, to keep the table's) says otherwise.
"""

from __future__ import annotations

import glob
import html
import os
import sys
from pathlib import Path
from typing import FrozenSet, List, Optional, Tuple

import pytest

from ._binary import find_binary, run_binary
from .errors import error_for
from .report import Report
from .scenario import asks_for_torch, file_seed, peek

_MATCHED = pytest.StashKey[FrozenSet[Path]]()
_SEEDS = pytest.StashKey[Optional[List[int]]]()
_PAGES = pytest.StashKey[List[Tuple[str, str, str]]]()
KEEP_SCENARIO_TORCH = "scenario"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("trainsim", "trainsim scenarios as tests")
    group.addoption(
        "--trainsim-seeds",
        metavar="A..B",
        help="run every scenario with seeds A to B-1 (A..=B includes B); default: each file's seed",
    )
    group.addoption(
        "--trainsim-html",
        metavar="DIR",
        help="write each run's page (one self-contained HTML file) and an index.html to DIR",
    )
    group.addoption(
        "--trainsim-torch",
        metavar="PYTHON",
        help="the Python whose torch runs scenarios with a [torch] table (default: the one "
        f"running pytest; '{KEEP_SCENARIO_TORCH}' keeps the table's own)",
    )
    parser.addini("trainsim_scenarios", "globs of scenario files, relative to the rootdir", type="linelist")
    parser.addini("trainsim_seeds", "default for --trainsim-seeds", default="")


def pytest_configure(config: pytest.Config) -> None:
    matched = set()
    for pattern in config.getini("trainsim_scenarios"):
        found = glob.glob(os.path.join(str(config.rootpath), pattern), recursive=True)
        matched.update(Path(p).resolve() for p in found if os.path.isfile(p))
    config.stash[_MATCHED] = frozenset(matched)
    config.stash[_SEEDS] = seed_range(config.getoption("trainsim_seeds") or config.getini("trainsim_seeds"))
    config.stash[_PAGES] = []


def pytest_report_header(config: pytest.Config) -> Optional[str]:
    if not config.getini("trainsim_scenarios"):
        return None
    try:
        binary = find_binary()
    except Exception as missing:  # shown, not raised: the items will say it again
        binary = str(missing)
    return f"trainsim: {binary}; scenarios {' '.join(config.getini('trainsim_scenarios'))}"


def pytest_collect_file(file_path: Path, parent: pytest.Collector):
    if file_path.resolve() in parent.config.stash.get(_MATCHED, frozenset()):
        return ScenarioFile.from_parent(parent, path=file_path)
    return None


def seed_range(spec: str) -> Optional[List[int]]:
    """The seeds of ``A..B`` (B excluded) or ``A..=B`` (B included); None for no range."""
    if not spec:
        return None
    start, sep, end = spec.partition("..")
    inclusive = end.startswith("=")
    try:
        first, last = int(start), int(end[1:] if inclusive else end)
    except ValueError:
        raise pytest.UsageError(f"--trainsim-seeds {spec!r}: expected A..B or A..=B") from None
    seeds = list(range(first, last + 1 if inclusive else last))
    if not sep or not seeds:
        raise pytest.UsageError(f"--trainsim-seeds {spec!r}: the seed range is empty")
    return seeds


class ScenarioFile(pytest.File):
    """A scenario file: one item per seed."""

    def collect(self):
        scenario = peek(self.path)
        for seed in self.config.stash[_SEEDS] or [file_seed(scenario)]:
            # No brackets: pytest reads `name[...]` in a node id as a parametrization.
            name = "unreadable" if seed is None else f"seed_{seed}"
            yield ScenarioItem.from_parent(self, name=name, seed=seed, wants_torch=asks_for_torch(scenario))


class ScenarioNotAsExpected(Exception):
    """The run was not what its scenario expects (exit code 1); carries the report."""

    def __init__(self, report: Report, text: str):
        super().__init__(report.repro)
        self.report = report
        self.text = text


class ScenarioItem(pytest.Item):
    """One run of one scenario file with one seed."""

    def __init__(self, *, seed: Optional[int], wants_torch: bool, **kwargs):
        super().__init__(**kwargs)
        self.seed = seed
        self.wants_torch = wants_torch

    def reportinfo(self):
        seed = "" if self.seed is None else f" seed {self.seed}"
        return self.path, None, f"trainsim {self.path.name}{seed}"

    def run_args(self) -> List[str]:
        """The command's arguments, without the output format: the file as the user would
        name it from where pytest runs, the seed and the control plane."""
        file = os.path.relpath(self.path, self.config.invocation_params.dir)
        args = ["run", file]
        if self.seed is not None:
            args += ["--seed", str(self.seed)]
        torch = self.torch_python()
        if torch is not None:
            args += ["--torch", torch]
        return args

    def torch_python(self) -> Optional[str]:
        """The Python whose torch runs this scenario, or None for the file's own choice."""
        if not self.wants_torch:
            return None
        chosen = self.config.getoption("trainsim_torch") or sys.executable
        return None if chosen == KEEP_SCENARIO_TORCH else chosen

    def runtest(self) -> None:
        args = self.run_args() + ["--format", "json"]
        page = self.page_path()
        if page is not None:
            args += ["--html", str(page)]
        done = run_binary(args, cwd=str(self.config.invocation_params.dir))
        reports = [Report.from_json(l) for l in done.stdout.splitlines() if l.startswith("{")]
        if done.exit_code not in (0, 1) or len(reports) != 1:
            message = done.stderr.strip() or f"trainsim exited with code {done.exit_code}"
            raise error_for(message, done.exit_code, done.command, reports)
        report = reports[0]
        self.user_properties += [
            ("trainsim_outcome", report.outcome),
            ("trainsim_trace_hash", report.trace_hash),
            ("trainsim_repro", report.repro),
        ]
        if report.torch is not None:
            self.user_properties.append(("trainsim_torch", report.torch.torch_version))
        if page is not None:
            self.config.stash[_PAGES].append((self.nodeid, page.name, "pass" if report.passed else "FAIL"))
        if not report.passed:
            text = run_binary(self.run_args(), cwd=str(self.config.invocation_params.dir)).stdout
            raise ScenarioNotAsExpected(report, text)

    def page_path(self) -> Optional[Path]:
        directory = self.config.getoption("trainsim_html")
        if not directory:
            return None
        root = Path(self.config.invocation_params.dir, directory)
        root.mkdir(parents=True, exist_ok=True)
        # Named by the file's path under the rootdir, so equal names in two folders differ.
        stem = Path(os.path.relpath(self.path.with_suffix(""), self.config.rootpath)).as_posix()
        seed = "" if self.seed is None else f"-seed{self.seed}"
        return root / f"{stem.replace('/', '.')}{seed}.html"

    def repr_failure(self, excinfo, style=None):
        error = excinfo.value
        if isinstance(error, ScenarioNotAsExpected):
            return failure_text(error.report, error.text)
        message = getattr(error, "message", None)
        if message is not None:
            return f"{message}\n(exit code {getattr(error, 'exit_code', None)}: {' '.join(error.command)})"
        return super().repr_failure(excinfo, style=style)


def failure_text(report: Report, text: str) -> str:
    """What a failing item shows: the text report's verdict, then its story (job, why,
    ends, goodput), its violated invariants and the replay command."""
    lines = text.splitlines()
    head: List[str] = []
    for line in lines:
        if line == "details":
            break
        head.append(line)
    # The verdict and its unmet expectations first: pytest's summary line shows the first.
    at = next((i for i, line in enumerate(head) if line.startswith("verdict")), len(head))
    end = next((i for i in range(at + 1, len(head)) if not head[i].startswith("  ")), len(head))
    ordered = head[at:end] + head[:at] + head[end:]
    violated = _violated_blocks(lines)
    replay = ["replay with:", report.repro]
    return "\n".join(ordered + violated + replay)


def _violated_blocks(lines: List[str]) -> List[str]:
    """The text report's ``VIOLATED`` lines, each with the indented lines under it."""
    out: List[str] = []
    inside = False
    for line in lines:
        if line.startswith("  VIOLATED"):
            inside = True
        elif inside and not line.startswith("      "):
            inside = False
        if inside:
            out.append(line)
    return out


def pytest_sessionfinish(session: pytest.Session) -> None:
    directory = session.config.getoption("trainsim_html", None)
    pages = session.config.stash.get(_PAGES, [])
    if not directory or not pages:
        return
    rows = "\n".join(
        f'<tr><td>{html.escape(result)}</td><td><a href="{html.escape(page)}">{html.escape(nodeid)}</a></td></tr>'
        for nodeid, page, result in sorted(pages)
    )
    index = Path(session.config.invocation_params.dir, directory, "index.html")
    index.write_text(
        "<!doctype html><meta charset=utf-8><title>trainsim scenarios</title>"
        f"<table><tr><th>result</th><th>run</th></tr>\n{rows}\n</table>\n",
        encoding="utf-8",
    )
