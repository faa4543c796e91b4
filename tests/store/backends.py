"""One fixture for "every backend": memory, JSONL, SQLite and (marked ``postgres``) Postgres.

``ledger_on`` opens a ``Ledger`` on a fresh store of the requested kind; the Postgres one lives in
a throwaway schema. Tests that must hold on every backend take the ``backend`` fixture::

    def test_x(backend: str, ledger_on: LedgerOn) -> None:
        with ledger_on(backend) as ledger: ...
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from agentledger import Ledger

LedgerOn = Callable[[str], Ledger]

BACKENDS = [
    "memory",
    "jsonl",
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def ledger_on(tmp_path: Path) -> Iterator[LedgerOn]:
    with ExitStack() as stack:

        def open_(kind: str) -> Ledger:
            if kind == "memory":
                return Ledger("memory://")
            if kind == "jsonl":
                return Ledger(f"jsonl:///{tmp_path}/jsonl")
            if kind == "sqlite":
                return Ledger(f"sqlite:///{tmp_path}/s.db")
            from agentledger.store.postgres import PostgresStore
            from tests.store import pg

            url = pg.require_server()
            schema = stack.enter_context(pg.fresh_schema(url))
            store = PostgresStore(url, schema=schema, pool_min=1, pool_max=2)
            stack.callback(store.close)
            return Ledger(store)

        yield open_
