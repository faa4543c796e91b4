"""``record(area, test, **figures)``: a test states what it measured, for the report.

The reliability tests already print their counts (inputs tried, outcomes by kind, kills,
commits, conflicts). They also call ``record`` with the same figures, which appends one JSON
line to the file named by ``AGENTLEDGER_RELIABILITY_OUT``. Without that variable (a plain
``pytest`` run, CI) it does nothing, so the tests need no reliability run to pass.

Each line carries the pytest node id of the test that wrote it (from ``PYTEST_CURRENT_TEST``),
so ``python -m reliability`` can put the figures beside the test's outcome. One ``write`` per
line on a file opened for appending keeps lines whole when several processes record at once.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

OUT_ENV = "AGENTLEDGER_RELIABILITY_OUT"


def _plain(value: Any) -> Any:
    """``value`` as JSON can hold it: counters and mappings as dicts, tuples and sets as lists."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_plain(v) for v in value]
        return sorted(items, key=repr) if isinstance(value, (set, frozenset)) else items
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def current_test() -> str | None:
    """The node id of the running pytest test (``tests/x.py::test_y[param]``), if any."""
    running = os.environ.get("PYTEST_CURRENT_TEST")
    return running.rsplit(" (", 1)[0] if running else None


def record(area: str, test: str, **figures: Any) -> None:
    """Append ``figures`` for ``test`` (a short title) in ``area`` (crash, damage, faults,
    contention, hostile input, load, isolation) to the report file, if one is set."""
    path = os.environ.get(OUT_ENV)
    if not path:
        return
    line = {"area": area, "test": test, "node": current_test(), "figures": _plain(figures)}
    data = (json.dumps(line) + "\n").encode()  # figures keep the order given
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def knob(name: str, quick: int) -> int:
    """A scale setting: the integer in environment variable ``name``, else ``quick`` (the CI
    size). ``python -m reliability`` sets the full sizes."""
    raw = os.environ.get(name, "").strip()
    return int(raw) if raw else quick
