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

    def spy(committed, new, known=(), *, kept=()):  # type: ignore[no-untyped-def]
        known_kept = sum(count for _, _, count in kept)
        counts.append(len(new) - known_kept)
        return real(committed, new, known, kept=kept)

    monkeypatch.setattr(ledger_module, "diff_list", spy)
    return counts
