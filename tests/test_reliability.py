"""The reliability report: rendering from made-up records, and one real run of a tiny selection
(``python -m reliability --select``) whose failing test makes the exit status non-zero."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from reliability import record
from reliability.record import OUT_ENV
from reliability.report import Outcome, Run, merge_outcomes, render
from reliability.suite import AREAS, MODES, area_of

ROOT = Path(__file__).resolve().parents[1]
NODE = "tests/store/test_processes.py::test_sigkill_mid_save_leaves_a_committed_version[jsonl]"


def _run(**changes: object) -> Run:
    fields: dict = {
        "command": "python -m reliability --quick",
        "mode": "quick",
        "started": "2026-12-03 14:00 UTC",
        "seconds": 90.0,
        "environment": {},
        "machine": {"cpu": "test cpu", "load_average": (1.0, 0.5, 0.25)},
        "versions": {"python": "3.11"},
        "outcomes": [Outcome(NODE, seconds=12.0)],
        "records": [
            {
                "area": "crash",
                "test": "SIGKILL mid-save, one writer",
                "node": NODE,
                "figures": {"backend": "jsonl", "kills": 1200, "outcomes": {"exact": 3}},
            }
        ],
    }
    fields.update(changes)
    return Run(**fields)


def test_a_report_shows_each_figure_with_its_result_the_machine_and_the_command() -> None:
    text = render(_run())
    assert "**PASSED" in text
    assert "| backend | kills | outcomes | result |" in text
    assert "| jsonl | 1,200 | exact: 3 | passed |" in text
    assert "`python -m reliability --quick` (quick mode) on 2026-12-03 14:00 UTC" in text
    assert "SIGKILLs by backend: jsonl 1,200" in text
    assert "| Crash: SIGKILL at random points | 1 | 1 | 0 | 0 | 0.2 |" in text  # the summary
    assert "| cpu | test cpu |" in text and "| load_average | 1, 0.5, 0.25 |" in text


def test_a_failure_in_any_phase_fails_the_run_and_is_listed() -> None:
    lines = [
        {"node": NODE, "when": "call", "outcome": "passed", "seconds": 1.0, "message": None},
        {"node": NODE, "when": "teardown", "outcome": "failed", "seconds": 0.5, "message": "E"},
        {"node": "b", "when": "setup", "outcome": "skipped", "seconds": 0, "message": "no pg"},
    ]
    outcomes = merge_outcomes(lines)
    assert [(o.node, o.outcome, o.seconds) for o in outcomes] == [
        (NODE, "error", 1.5),
        ("b", "skipped", 0),
    ]
    run = _run(outcomes=outcomes)
    assert not run.ok and "**FAILED**" in render(run) and "## Failures" in render(run)
    cases = [Outcome(f"{NODE}[{i}]") for i in range(3)] + [Outcome("tests/x.py::t[a]", "failed")]
    text = render(_run(outcomes=cases, records=[]))
    assert f"| `{NODE.split('[')[0]}` | 3 | 3 passed |" in text
    assert "| `tests/x.py::t` | 1 | failed |" in text
    assert not _run(outcomes=[]).ok  # a run that tested nothing proves nothing


def test_every_selected_node_is_in_one_area_and_full_mode_scales_the_kills() -> None:
    nodes = [node for area in AREAS for node in area.nodes]
    assert len(nodes) == len(set(nodes))
    assert all((ROOT / node.split("::")[0]).exists() for node in nodes), "a selection is stale"
    assert area_of(NODE) == "crash" and area_of("tests/elsewhere.py::t") == "other"
    assert int(MODES["full"]["AGENTLEDGER_KILLS"]) >= 200 and MODES["quick"] == {}


def test_record_is_silent_without_a_file_and_appends_lines_with_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(OUT_ENV, raising=False)
    record("crash", "nothing", kills=1)  # no file named: nothing to write, no error
    out = tmp_path / "records.jsonl"
    monkeypatch.setenv(OUT_ENV, str(out))
    record("crash", "one", kills=2, seen={3, 1})
    record("crash", "two", kills=3)
    lines = out.read_text().splitlines()
    assert len(lines) == 2 and '"seen": [1, 3]' in lines[0]
    assert "tests/test_reliability.py::test_record_is_silent" in lines[0]


_TINY = """
from reliability import record


def test_that_records_and_passes():
    record("crash", "tiny figure", kills=7)


def test_that_fails():
    assert 1 + 1 == 3, "something was lost"
"""


def test_a_failing_selection_makes_the_exit_status_non_zero(tmp_path: Path) -> None:
    tiny = tmp_path / "test_tiny.py"
    tiny.write_text(_TINY)
    out = tmp_path / "report.md"
    done = subprocess.run(
        [sys.executable, "-m", "reliability", "--quick", "--out", str(out), "--select", str(tiny)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])},
    )
    assert done.returncode == 1, done.stdout + done.stderr
    text = out.read_text()
    assert "**FAILED**" in text and "something was lost" in text
    assert "| 7 | passed |" in text  # the passing test's figure is still reported
