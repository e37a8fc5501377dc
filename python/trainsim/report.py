"""The run report of contract v1 as Python objects, and the batch and comparison results.

Each class mirrors one JSON object of ``trainsim run --format json`` (docs/reports.md),
field for field and in the same order, so ``Report.from_json(line).to_json() == line``.
Keys a newer binary adds are kept in each object's ``extra`` and written back.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Dict, List, Optional

from ._record import Record, extra_field, optional_field


@dataclasses.dataclass
class Violation(Record):
    """One place an invariant broke: when, where (when a node applies), what, which way."""

    at_us: int
    message: str
    kind: str
    node: Optional[str] = optional_field()
    extra: Dict[str, Any] = extra_field()

    def to_dict(self) -> Dict[str, Any]:
        # The binary writes `node` right after `at_us`.
        out: Dict[str, Any] = {"at_us": self.at_us}
        if self.node is not None:
            out["node"] = self.node
        out.update({"message": self.message, "kind": self.kind})
        out.update(self.extra)
        return out


@dataclasses.dataclass
class Invariant(Record):
    """One invariant's verdict: ``held``, ``violated`` or ``not_applicable``."""

    name: str
    status: str
    violations: List[Violation]
    extra: Dict[str, Any] = extra_field()


@dataclasses.dataclass
class Round(Record):
    """One completed rendezvous round, participants in rank order."""

    round: int
    completed_at_us: int
    participants: List[str]
    world_size: int
    store_incarnation: Optional[int] = optional_field()
    extra: Dict[str, Any] = extra_field()

    def to_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"round": self.round}
        if self.store_incarnation is not None:
            out["store_incarnation"] = self.store_incarnation
        out.update(
            completed_at_us=self.completed_at_us,
            participants=list(self.participants),
            world_size=self.world_size,
        )
        out.update(self.extra)
        return out


@dataclasses.dataclass
class Agent(Record):
    """One node's agent over the run: counted restarts, final state and the additions."""

    node: str
    restarts: int
    final_state: str
    membership_restarts: Optional[int] = optional_field()
    processes: Optional[int] = optional_field()
    restart_count: Optional[int] = optional_field()
    worker_group_state: Optional[str] = optional_field()
    exit_reason: Optional[str] = optional_field()
    extra: Dict[str, Any] = extra_field()


@dataclasses.dataclass
class Job(Record):
    """Training progress: the last step, samples seen, epochs trained through."""

    steps_done: int
    samples_seen: int
    epochs: int
    extra: Dict[str, Any] = extra_field()


@dataclasses.dataclass
class ReaderEpoch(Record):
    """One reader epoch as node-0's collector handed it out."""

    batch_sizes: List[int]
    records_delivered: int
    records_skipped: int
    extra: Dict[str, Any] = extra_field()


@dataclasses.dataclass
class Reader(Record):
    """The reader pipeline's deliveries (present when the scenario has a ``[reader]``)."""

    epochs: List[ReaderEpoch]
    stall_us: Optional[int] = optional_field()
    extra: Dict[str, Any] = extra_field()


@dataclasses.dataclass
class Expect(Record):
    """Whether the scenario's ``[expect]`` held, one sentence per unmet item."""

    met: bool
    failures: List[str]
    extra: Dict[str, Any] = extra_field()


@dataclasses.dataclass
class Goodput(Record):
    """The job's effective training time ratio and its wall time split by cause."""

    ettr: float
    wall_us: int
    productive_us: int
    badput_us: Dict[str, int]
    training_stopped_at_us: Optional[int] = optional_field()
    fate: Optional[str] = optional_field()
    extra: Dict[str, Any] = extra_field()


@dataclasses.dataclass
class Eval(Record):
    """The evaluation pass after training (present with a ``[job.eval]``)."""

    dataset_len: int
    world_size: int
    drop_last: bool
    per_rank: int
    evaluated: int
    duplicated: int
    dropped: int
    mean_bias_max: Optional[float]
    extra: Dict[str, Any] = extra_field()


@dataclasses.dataclass
class Torch(Record):
    """Which torch ran, when the control plane was torch's own elastic code."""

    torch_version: str
    python_version: str
    overlay_hash: Optional[str] = optional_field()
    extra: Dict[str, Any] = extra_field()


@dataclasses.dataclass
class Report(Record):
    """The report of one run (one scenario, one seed), as ``--format json`` prints it."""

    scenario: str
    file: str
    seed: int
    trace_hash: str
    sim_time_us: int
    events: int
    outcome: str
    rounds: List[Round]
    agents: List[Agent]
    job: Job
    reader: Optional[Reader] = optional_field()
    invariants: List[Invariant] = dataclasses.field(default_factory=list)
    expect: Optional[Expect] = None
    repro: str = ""
    goodput: Optional[Goodput] = optional_field()
    eval: Optional[Eval] = optional_field()
    torch: Optional[Torch] = optional_field()
    extra: Dict[str, Any] = extra_field()

    @classmethod
    def from_json(cls, line: str) -> "Report":
        """Reads one line of ``trainsim run --format json``."""
        return cls.from_dict(json.loads(line))

    def to_json(self) -> str:
        """The line the binary printed, byte for byte (compact separators)."""
        return json.dumps(self.to_dict(), separators=(",", ":"), ensure_ascii=False)

    @property
    def passed(self) -> bool:
        """Whether the run was what its scenario expects (exit code 0 for this run)."""
        return bool(self.expect and self.expect.met)

    def invariant(self, name: str) -> Invariant:
        """The verdict of the invariant named ``name`` (``rendezvous.liveness``, ...)."""
        for invariant in self.invariants:
            if invariant.name == name:
                return invariant
        raise KeyError(f"no invariant {name!r} in the report of {self.file}")

    @property
    def violated(self) -> List[str]:
        """Names of the invariants this run violated, in the report's order."""
        return [i.name for i in self.invariants if i.status == "violated"]


@dataclasses.dataclass
class GoodputSummary(Record):
    """The goodput of a batch over its seeds, as ``trainsim merge --format json`` says."""

    file: str
    seeds: int
    ettr_mean: float
    ettr_p5: float
    ettr_p50: float
    ettr_p95: float
    succeeded: int
    failed: int
    timed_out: int
    reasons: List[Any]
    extra: Dict[str, Any] = extra_field()

    def to_dict(self) -> Dict[str, Any]:
        # The binary writes this object with its keys sorted.
        return dict(sorted(super().to_dict().items()))


@dataclasses.dataclass
class Variant(Record):
    """One side of a comparison: its ETTR over the seeds and its outcomes."""

    name: str
    ettr_mean: float
    ettr_ci95_half_width: float
    succeeded: int
    failed: int
    timed_out: int
    extra: Dict[str, Any] = extra_field()

    def to_dict(self) -> Dict[str, Any]:
        return dict(sorted(super().to_dict().items()))


@dataclasses.dataclass
class Difference(Record):
    """A variant's ETTR against the base's: the mean difference and its 95 % interval."""

    base: str
    variant: str
    ettr_difference: float
    ci95_low: float
    ci95_high: float
    extra: Dict[str, Any] = extra_field()

    def to_dict(self) -> Dict[str, Any]:
        return dict(sorted(super().to_dict().items()))


@dataclasses.dataclass
class Comparison(Record):
    """``trainsim compare --format json``: every variant over the same seeds."""

    seeds: int
    variants: List[Variant]
    differences: List[Difference]
    extra: Dict[str, Any] = extra_field()

    def to_dict(self) -> Dict[str, Any]:
        return dict(sorted(super().to_dict().items()))

    def variant(self, name: str) -> Variant:
        """The variant called ``name`` (its file, or ``KEY=VALUE`` in a sweep)."""
        for variant in self.variants:
            if variant.name == name:
                return variant
        raise KeyError(f"no variant {name!r}; there are {[v.name for v in self.variants]}")
