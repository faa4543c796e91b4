"""A pytest plugin (``-p reliability.plugin``) that writes each test's outcome as a JSON line.

``python -m reliability`` loads it in the pytest process it starts, and reads the lines back
to put each test's outcome, duration and failure beside the figures the test recorded. Lines
go to the file named by ``AGENTLEDGER_RELIABILITY_RESULTS``; without it the plugin is idle.
"""

from __future__ import annotations

import json
import os

import pytest

RESULTS_ENV = "AGENTLEDGER_RELIABILITY_RESULTS"


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = os.environ.get(RESULTS_ENV)
    if not path:
        return
    if report.when == "call" or report.outcome != "passed":
        line = {
            "node": report.nodeid,
            "when": report.when,
            "outcome": report.outcome,
            "seconds": round(report.duration, 3),
            "message": _message(report),
        }
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")


def _message(report: pytest.TestReport) -> str | None:
    """The skip reason, or the last line of a failure (the assertion or the exception)."""
    if report.outcome == "passed":
        return None
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2])
    text = report.longreprtext.strip().splitlines()
    errors = [line for line in text if line.startswith("E ")]
    return (errors[0] if errors else text[-1] if text else "").removeprefix("E").strip()[:300]
