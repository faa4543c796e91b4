"""One fixture for "every backend": memory, JSONL, SQLite and (marked ``postgres``) Postgres.

``ledger_on`` opens a ``Ledger`` on a fresh store of the requested kind; the Postgres one lives in
a throwaway schema. Tests that must hold on every backend take the ``backend`` fixture::

    def test_x(backend: str, ledger_on: LedgerOn) -> None:
        with ledger_on(backend) as ledger: ...

Tests that open the store in other processes or threads take ``persistent_url`` (defined in
``conftest.py``) instead: the URL of a fresh JSONL, SQLite or Postgres store, made by
``store_url``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
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


@contextmanager
def store_url(kind: str, tmp_path: Path) -> Iterator[str]:
    """A URL for a fresh store of ``kind``: ``jsonl``, ``sqlite`` or ``postgres`` (a
    throwaway schema on the test server; skipped, or under CI failed, without one)."""
    if kind == "jsonl":
        yield f"jsonl:///{tmp_path / 'sessions'}"
    elif kind == "sqlite":
        yield f"sqlite:///{tmp_path / 'state.db'}"
    else:
        from tests.store import pg  # psycopg only when Postgres is tested

        server = pg.require_server()
        with pg.fresh_schema(server) as schema:
            sep = "&" if "?" in server else "?"
            yield f"{server}{sep}schema={schema}"


def backend_of(url: str) -> str:
    """``jsonl``, ``sqlite`` or ``postgres``: the backend a store URL names."""
    return url.split(":", 1)[0].replace("postgresql", "postgres")
