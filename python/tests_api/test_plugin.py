"""The pytest plugin, through pytest's own results: items, outcomes, failure text, pages."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import trainsim

from conftest import SCENARIOS

PASSES = SCENARIOS / "worker_crash_restart.toml"


def write_suite(pytester: pytest.Pytester, ini: str = "trainsim_scenarios = scenarios/*.toml") -> Path:
    """A small suite: one scenario that passes and one that fails on purpose (it expects a
    failure the job does not have)."""
    pytester.makeini(f"[pytest]\n{ini}\n")
    scenarios = pytester.mkdir("scenarios")
    text = PASSES.read_text()
    (scenarios / "passes.toml").write_text(text)
    wrong = text.replace('[expect]\noutcome = "succeeded"', '[expect]\noutcome = "failed"')
    assert wrong != text
    (scenarios / "fails_on_purpose.toml").write_text(wrong)
    return scenarios


def test_one_item_per_file_passing_and_failing(pytester):
    write_suite(pytester)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*_ trainsim fails_on_purpose.toml seed 13 _*",
            "verdict  UNEXPECTED (job finished, no violations; 1 expectation not met)",
            "  - expected outcome failed, got succeeded",
            "job      finished: *",
            "replay with:",
            "trainsim run scenarios/fails_on_purpose.toml --seed 13",
            "FAILED scenarios/fails_on_purpose.toml::seed_13*",
        ]
    )


def test_the_why_line_and_violations_of_a_failed_job(pytester):
    pytester.makeini("[pytest]\ntrainsim_scenarios = *.toml\n")
    text = (SCENARIOS / "rank0_dies_stale_master.toml").read_text()
    pytester.path.joinpath("stale.toml").write_text(
        text.replace(
            'violations = ["agent.bootstrap", "job.resumes_after_heal"]', "violations = []"
        )
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "verdict  UNEXPECTED (job failed, 2 violations; 2 expectations not met)",
            "why      node-1's agent failed: *",
            "  VIOLATED  agent.bootstrap",
            "              at * on node-1: round 1: *",
            "replay with:",
            "trainsim run stale.toml --seed 1",
        ]
    )


def test_seeds_option_gives_an_item_per_file_and_seed(pytester):
    write_suite(pytester)
    result = pytester.runpytest("-p", "no:cacheprovider", "--trainsim-seeds", "0..3", "--collect-only", "-q")
    result.stdout.fnmatch_lines(
        [
            "scenarios/fails_on_purpose.toml::seed_0",
            "scenarios/fails_on_purpose.toml::seed_2",
            "scenarios/passes.toml::seed_0",
            "scenarios/passes.toml::seed_2",
            "6 tests collected*",
        ]
    )
    run = pytester.runpytest("-p", "no:cacheprovider", "--trainsim-seeds", "0..=1")
    run.assert_outcomes(passed=2, failed=2)


def test_junit_xml_and_html_pages_for_ci(pytester):
    write_suite(pytester)
    result = pytester.runpytest("-p", "no:cacheprovider", "--junitxml=junit.xml", "--trainsim-html", "pages")
    result.assert_outcomes(passed=1, failed=1)
    suite = ET.parse(pytester.path / "junit.xml").getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("failures")) == ("2", "1")
    failure = suite.find("testcase[@name='seed_13'][@classname='scenarios.fails_on_purpose.toml']/failure")
    assert "replay with:" in failure.text
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["trainsim_repro"].startswith("trainsim run scenarios/")
    pages = sorted(p.name for p in (pytester.path / "pages").iterdir())
    assert pages == ["index.html", "scenarios.fails_on_purpose-seed13.html", "scenarios.passes-seed13.html"]
    index = (pytester.path / "pages" / "index.html").read_text()
    assert 'href="scenarios.fails_on_purpose-seed13.html"' in index and "FAIL" in index
    assert "<svg" in (pytester.path / "pages" / "scenarios.passes-seed13.html").read_text()


def test_an_unreadable_scenario_fails_with_the_located_message(pytester):
    pytester.makeini("[pytest]\ntrainsim_scenarios = *.toml\n")
    pytester.path.joinpath("broken.toml").write_text('name = "x"\n[cluster]\nnodes = 0\n')
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["error: broken.toml:3:9: cluster.nodes: must be at least 1 (got 0)", "(exit code 2: *"]
    )


def test_a_seed_the_binary_refuses_is_left_to_it(pytester):
    pytester.makeini("[pytest]\ntrainsim_scenarios = *.toml\n")
    pytester.path.joinpath("negative.toml").write_text(PASSES.read_text().replace("seed = 13", "seed = -1"))
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["error: negative.toml:*: seed: *", "FAILED negative.toml::unreadable*"])


def test_without_the_ini_option_nothing_is_collected(pytester):
    pytester.makeini("[pytest]\n")
    pytester.path.joinpath("passes.toml").write_text(PASSES.read_text())
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED


def test_torch_scenarios_default_to_the_python_running_pytest(pytester):
    pytester.makeini("[pytest]\ntrainsim_scenarios = *.toml\n")
    table = '\n[torch]\npython = "/nonexistent/python"\n'
    pytester.path.joinpath("on_torch.toml").write_text(PASSES.read_text() + table)
    items, _ = pytester.inline_genitems("-p", "no:cacheprovider")
    assert items[0].torch_python() == sys.executable
    assert items[0].run_args()[-2:] == ["--torch", sys.executable]
    # Run: sys.executable is this test's venv; the binary names it, whether or not it has torch.
    result = pytester.runpytest("-p", "no:cacheprovider")
    if result.ret != pytest.ExitCode.OK:
        result.stdout.fnmatch_lines([f"error: {sys.executable}: cannot import torch*"])
    kept = pytester.runpytest("-p", "no:cacheprovider", "--trainsim-torch", "scenario")
    kept.assert_outcomes(failed=1)
    kept.stdout.fnmatch_lines(["error: /nonexistent/python: no such Python interpreter"])
    chosen = pytester.runpytest("-p", "no:cacheprovider", "--trainsim-torch", "/nonexistent/other")
    chosen.stdout.fnmatch_lines(["error: /nonexistent/other: no such Python interpreter"])


@pytest.mark.skipif(
    not os.environ.get("TRAINSIM_TORCH_PYTHON"), reason="needs TRAINSIM_TORCH_PYTHON (a Python with torch)"
)
def test_a_torch_scenario_runs_on_the_torch_of_pytests_python(tmp_path):
    """pytest run by a Python with torch: the plugin (found by its entry point) runs the
    scenario's [torch] table on that torch, and the report says which torch ran."""
    (tmp_path / "pytest.ini").write_text("[pytest]\ntrainsim_scenarios = *.toml\n")
    small = (SCENARIOS / "min_nodes_then_last_call.toml").read_text()
    (tmp_path / "small.toml").write_text(small + '\n[torch]\npython = "/nonexistent/python"\n')
    installed = Path(trainsim.__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(installed), TRAINSIM_BIN=trainsim.find_binary())
    python = os.environ["TRAINSIM_TORCH_PYTHON"]
    done = subprocess.run(
        [python, "-m", "pytest", "-p", "no:cacheprovider", "--junitxml=junit.xml", "-q"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    properties = {p.get("name"): p.get("value") for p in ET.parse(tmp_path / "junit.xml").iter("property")}
    torch_version = subprocess.run(
        [python, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert properties["trainsim_torch"] == torch_version
    assert properties["trainsim_outcome"] == "succeeded"


def test_last_failed_reruns_the_failed_item_alone(pytester):
    write_suite(pytester)
    pytester.runpytest().assert_outcomes(passed=1, failed=1)
    again = pytester.runpytest("--lf")
    again.assert_outcomes(failed=1)  # passes.toml is not even collected
    again.stdout.fnmatch_lines(["FAILED scenarios/fails_on_purpose.toml::seed_13*"])


def test_a_bad_seed_range_is_a_usage_error(pytester):
    write_suite(pytester)
    result = pytester.runpytest("-p", "no:cacheprovider", "--trainsim-seeds", "3..1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--trainsim-seeds '3..1': the seed range is empty*"])


def test_globs_reach_into_subdirectories(pytester):
    pytester.makeini("[pytest]\ntrainsim_scenarios = suite/**/*.toml\n")
    nested = pytester.mkdir("suite").joinpath("nested")
    nested.mkdir()
    nested.joinpath("passes.toml").write_text(PASSES.read_text())
    pytester.path.joinpath("outside.toml").write_text(PASSES.read_text())
    result = pytester.runpytest("-p", "no:cacheprovider", "--collect-only", "-q")
    result.stdout.fnmatch_lines(["suite/nested/passes.toml::seed_13", "1 test collected*"])
