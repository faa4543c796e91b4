"""Fixtures shared by the ``jsonl://`` tests (``test_jsonl*.py``), and ``persistent_url``: a
fresh JSONL, SQLite or Postgres store for tests that open it from other processes or threads
(``compared``, how many messages each save's diff compared, is in ``tests/conftest.py``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agentledger.store import Ledger
from agentledger.store.jsonl import JsonlStore
from tests.store.backends import BACKENDS, store_url


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "root"


@pytest.fixture
def ledgers(root: Path) -> Iterator[Callable[..., Ledger]]:
    """Opens a new Ledger on a new JsonlStore over ``root`` (or ``at``) each call (nothing
    cached)."""
    opened: list[Ledger] = []

    def open_(at: Path | None = None, ratio: float = 1.0) -> Ledger:
        opened.append(Ledger(JsonlStore(at or root, compaction_ratio=ratio)))
        return opened[-1]

    yield open_
    for ledger in opened:
        ledger.close()


@pytest.fixture(params=BACKENDS[1:])
def persistent_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with store_url(request.param, tmp_path) as found:
        yield found
