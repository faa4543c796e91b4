"""Fixtures for every test package: ``compared``, how many messages each save's diff compared."""

from __future__ import annotations

import pytest

from agentledger.store import ledger as ledger_module


@pytest.fixture
def compared(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Fills with the number of messages each save compares with the committed list (the
    ones its diff did not take as unchanged)."""
    counts: list[int] = []
    real = ledger_module.diff_list

    def spy(committed, new, known=(), *, unchanged=0, kept=None):  # type: ignore[no-untyped-def]
        known_kept = unchanged if kept is None else sum(count for _, _, count in kept)
        counts.append(len(new) - known_kept)
        return real(committed, new, known, unchanged=unchanged, kept=kept)

    monkeypatch.setattr(ledger_module, "diff_list", spy)
    return counts
