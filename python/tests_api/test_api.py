"""The Python API against the binary: same runs, same reports, same errors as the CLI."""

from __future__ import annotations

import json

import pytest

import trainsim
from trainsim.api import seeds_arg, sweep_arg

from conftest import SCENARIOS

# Files that between them use every part of the report: a reader, an eval pass, violations
# on a node, a failed job, a fixed twin that succeeds.
ROUND_TRIP_FILES = [
    "late_joiner_next_round.toml",
    "rank0_dies_stale_master.toml",
    "rank0_dies_stale_master_fixed.toml",
    "reader_broken_read.toml",
    "reader_worker_dies.toml",
    "eval_padding_counts_twice.toml",
    "store_host_restarts_new_rendezvous.toml",
]


def same_json(python_line: str, cli_line: str) -> bool:
    """The same JSON object: same keys in the same order and the same values (a float may
    be spelled differently: Python writes 8.3e-05 where the binary writes 0.000083)."""
    return python_line == json.dumps(json.loads(cli_line), separators=(",", ":"), ensure_ascii=False)


@pytest.mark.parametrize("name", ROUND_TRIP_FILES)
def test_reports_round_trip_the_json_contract(name, cli):
    path = SCENARIOS / name
    line = cli("run", path, "--format", "json").stdout.strip()
    report = trainsim.Report.from_json(line)
    assert report.extra == {}, f"fields this package does not know: {report.extra}"
    assert same_json(report.to_json(), line)
    assert trainsim.Report.from_dict(report.to_dict()) == report
    assert report == trainsim.run(path)


def test_unknown_fields_are_kept_where_they_came(cli):
    data = json.loads(cli("run", SCENARIOS / "worker_crash_restart.toml", "--format", "json").stdout)
    data["new_top_level"] = {"a": 1}
    data["agents"][0]["new_agent_field"] = [1, 2]
    data["goodput"]["badput_us"]["new_cause"] = 7
    report = trainsim.Report.from_dict(data)
    assert report.extra == {"new_top_level": {"a": 1}}
    assert report.agents[0].extra == {"new_agent_field": [1, 2]}
    assert report.to_dict() == data
    assert list(report.to_dict()) == list(data)


def test_run_gives_the_fields_of_the_report():
    report = trainsim.run(SCENARIOS / "rank0_dies_stale_master.toml", seed=1)
    assert (report.seed, report.outcome, report.passed) == (1, "failed", True)
    assert report.violated == ["agent.bootstrap", "job.resumes_after_heal"]
    bootstrap = report.invariant("agent.bootstrap")
    assert bootstrap.status == "violated" and bootstrap.violations[0].node == "node-1"
    assert report.repro == f"trainsim run {SCENARIOS / 'rank0_dies_stale_master.toml'} --seed 1"
    goodput = report.goodput
    assert goodput.productive_us + sum(goodput.badput_us.values()) == goodput.wall_us
    assert [a.node for a in report.agents] == ["node-0", "node-1", "node-2"]


def test_a_run_not_as_expected_is_returned_not_raised(tmp_path):
    scenario = trainsim.load_scenario(SCENARIOS / "worker_crash_restart.toml")
    scenario["expect"]["outcome"] = "failed"
    report = trainsim.run(scenario)
    assert not report.passed
    assert report.expect.failures == ["expected outcome failed, got succeeded"]


def test_a_dict_and_toml_text_run_as_the_file_does(tmp_path):
    path = SCENARIOS / "worker_crash_restart.toml"
    from_file = trainsim.run(path, seed=3)
    from_dict = trainsim.run(trainsim.load_scenario(path), seed=3)
    from_text = trainsim.run(toml=path.read_text(), seed=3)
    assert from_dict.trace_hash == from_file.trace_hash == from_text.trace_hash
    kept = tmp_path / "kept.toml"
    saved = trainsim.run(trainsim.load_scenario(path), seed=3, save_as=kept)
    assert saved.repro == f"trainsim run {kept} --seed 3" and kept.is_file()


def test_a_changed_dict_changes_the_run():
    scenario = trainsim.load_scenario(SCENARIOS / "worker_crash_restart.toml")
    before = trainsim.run(scenario, seed=0).goodput
    scenario["job"]["checkpoint_every"] = 150
    after = trainsim.run(scenario, seed=0).goodput
    assert after.badput_us["wasted_progress"] > before.badput_us["wasted_progress"]


def test_a_batch_gives_every_seed_and_the_binarys_summary(cli, tmp_path):
    path = SCENARIOS / "worker_crash_restart.toml"
    runs = trainsim.batch(path, range(3, 7))
    assert [r.seed for r in runs] == [3, 4, 5, 6] and runs.passed and not runs.failures
    part = tmp_path / "part.json"
    cli("run", path, "--seeds", "3..7", "--out", part)
    merged = json.loads(cli("merge", part, "--format", "json").stdout)
    assert runs.summary.to_dict() == merged
    assert runs.summary.seeds == 4
    assert runs.summary.ettr_mean == pytest.approx(sum(r.goodput.ettr for r in runs) / 4)


def test_a_failing_batch_counts_its_failures():
    runs = trainsim.batch(SCENARIOS / "rank0_dies_stale_master.toml", "0..=2")
    assert len(runs) == 3 and runs.summary.failed == 3 and runs.passed
    assert runs.summary.reasons and runs.summary.reasons[0]["runs"] == 3


def test_compare_reads_the_comparison(cli):
    base = SCENARIOS / "rank0_dies_stale_master.toml"
    fixed = SCENARIOS / "rank0_dies_stale_master_fixed.toml"
    comparison = trainsim.compare([base, fixed], seeds=range(0, 3))
    line = cli("compare", base, fixed, "--seeds", "0..3", "--format", "json").stdout
    assert comparison.to_dict() == json.loads(line)
    assert comparison.variant(str(fixed)).ettr_mean > comparison.variant(str(base)).ettr_mean
    swept = trainsim.compare(
        SCENARIOS / "worker_crash_restart.toml", sweep=("job.checkpoint_every", [40, 120]), seeds=range(0, 2)
    )
    assert [v.name for v in swept.variants] == ["job.checkpoint_every=40", "job.checkpoint_every=120"]
    assert swept.differences[0].ettr_difference < 0


def test_bad_input_raises_the_clis_located_message(cli, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\n[cluster]\nnodes = 0\n')
    with pytest.raises(trainsim.ScenarioError) as raised:
        trainsim.run(bad)
    printed = cli("run", bad, "--format", "json")
    assert printed.returncode == 2 and raised.value.exit_code == 2
    assert str(raised.value) == printed.stderr.strip()
    assert f"{bad}:3:9: cluster.nodes:" in str(raised.value)


def test_bad_input_in_a_dict_or_text_names_its_line():
    with pytest.raises(trainsim.ScenarioError, match=r"scenario\.toml:2:2: clustr: unknown field"):
        trainsim.run(toml='name = "x"\n[clustr]\n')
    with pytest.raises(trainsim.ScenarioError, match=r"rendezvous\.min_nodes"):
        trainsim.run({"name": "x", "cluster": {"nodes": 2}, "rendezvous": {"min_nodes": 3, "max_nodes": 2}})


def test_a_missing_file_and_a_bad_seed_range_raise_with_exit_code_2(tmp_path, cli):
    missing = tmp_path / "missing.toml"
    with pytest.raises(trainsim.ScenarioError) as raised:
        trainsim.run(missing)
    assert str(raised.value) == cli("run", missing, "--format", "json").stderr.strip()
    with pytest.raises(trainsim.ScenarioError, match="the seed range '5..2' is empty"):
        trainsim.batch(SCENARIOS / "worker_crash_restart.toml", "5..2")


def test_arguments_the_cli_would_refuse_are_refused_before_it_runs():
    assert seeds_arg(range(3, 7)) == "3..7" and seeds_arg("0..=4") == "0..=4"
    with pytest.raises(ValueError):
        seeds_arg(range(0, 10, 2))
    assert sweep_arg(("agent.max_restarts", [0, 3])) == "agent.max_restarts=0,3"
    with pytest.raises(TypeError):
        trainsim.run(SCENARIOS / "worker_crash_restart.toml", toml="name = 'x'")


def test_rows_are_flat_and_pandas_is_optional():
    runs = trainsim.batch(SCENARIOS / "worker_crash_restart.toml", range(0, 3))
    rows = runs.rows()
    assert [r["seed"] for r in rows] == [0, 1, 2]
    first = rows[0]
    badput = sum(v for k, v in first.items() if k.startswith("badput_"))
    assert first["productive_us"] + badput == first["wall_us"]
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="needs pandas"):
            runs.to_dataframe()
    else:
        frame = runs.to_dataframe()
        assert list(frame["seed"]) == [0, 1, 2] and frame["ettr"].between(0, 1).all()
