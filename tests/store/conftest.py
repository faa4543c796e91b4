"""Fixtures shared by the ``jsonl://`` tests (``test_jsonl*.py``); ``persistent_url``: a
fresh JSONL, SQLite or Postgres store for tests that open it from other processes or threads;
and ``compared``: how many messages each save's diff compared."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agentledger.store import Ledger
from agentledger.store import ledger as ledger_module
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


@pytest.fixture
def compared(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Fills with the number of messages each save compares with the committed list (the
    ones its diff did not take as unchanged)."""
    counts: list[int] = []
    real = ledger_module.diff_list

    def spy(committed, new, known=(), *, unchanged=0):  # type: ignore[no-untyped-def]
        counts.append(len(new) - unchanged)
        return real(committed, new, known, unchanged=unchanged)

    monkeypatch.setattr(ledger_module, "diff_list", spy)
    return counts
