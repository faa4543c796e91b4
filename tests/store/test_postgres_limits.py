"""What a PostgreSQL save too large for one statement does: a statement's bind parameters number
at most 65,535 and travel in one protocol message of at most 1 GiB, limits the client meets
before the server does. A save within the store's limits commits, however many lists or bytes it
holds; one past them fails the same way every time, so it is refused as ``UserError``, never
reported as a store that might take it later (``StoreUnavailableError``)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from agentledger.messages import Msg
from agentledger.store import Ledger
from tests.store.test_postgres import OpenStore, db, open_store, pg_url, schema

pytestmark = pytest.mark.postgres
__all__ = ["db", "open_store", "pg_url", "schema"]  # fixtures, shared with test_postgres.py


def test_a_save_that_edits_a_message_in_each_of_22000_lists_commits(
    open_store: OpenStore, db: psycopg.Connection[Any], schema: str
) -> None:
    """The rows a save closes once took three parameters per list: a save closing rows of
    more than about 21,800 lists passed the protocol's 65,535 and failed every time, reported
    as StoreUnavailableError ("retrying later is safe"). Now they are two arrays."""
    ledger = Ledger(open_store())
    lists = {
        f"l{i}": [Msg.user(f"{i} {j}", id=f"m{i}-{j}") for j in range(2)] for i in range(22_000)
    }
    ledger.save_state("s", lists=lists)
    edited = {name: [a, b.replace(content="edited")] for name, (a, b) in lists.items()}
    report = ledger.save_state("s", lists=edited)
    assert (report.version, report.replaced) == (2, 22_000)
    # counted on the server: loading 22,000 lists takes seconds
    rows = db.execute(
        f'SELECT version_from, version_to, count(*) FROM "{schema}".messages '
        "GROUP BY version_from, version_to ORDER BY version_from, version_to"
    ).fetchall()
    assert rows == [(1, 2, 22_000), (1, None, 22_000), (2, None, 22_000)]
    live = (
        f'SELECT digest FROM "{schema}".messages WHERE version_to IS NULL AND list = %s '
        "ORDER BY rank"
    )
    digests = [row[0] for row in db.execute(live, ["l21999"]).fetchall()]
    assert digests == [m.digest for m in edited["l21999"]]
