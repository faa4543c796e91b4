"""The reference backend against the conformance suite and the state machine."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agentledger.store import Ledger, MemoryStore
from agentledger.testing.conformance import StoreConformance
from agentledger.testing.statemachine import run_ledger_state_machine


class TestMemoryConformance(StoreConformance):
    @pytest.fixture
    def open_ledger(self) -> Callable[[], Ledger]:
        store = MemoryStore()
        return lambda: Ledger(store)


def test_state_machine() -> None:
    store = MemoryStore()
    run_ledger_state_machine(lambda: Ledger(store))
