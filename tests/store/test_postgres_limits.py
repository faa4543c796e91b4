"""What a PostgreSQL save too large for one statement does: a statement's bind parameters number
at most 65,535 and travel in one protocol message of at most 1 GiB, limits the client meets
before the server does. A save within the store's limits commits, however many lists or bytes it
holds; one past them fails the same way every time, so it is refused as ``UserError``, never
reported as a store that might take it later (``StoreUnavailableError``)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from agentledger.errors import UserError
from agentledger.messages import ImageBlock, Msg
from agentledger.store import Ledger
from agentledger.store import postgres as pg_store
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


def _bytes_sent(monkeypatch: pytest.MonkeyPatch, column: str) -> list[int]:
    """The bytes of ``column`` (a bind parameter holding an array of ``bytes``) in each
    statement psycopg sends from now on that uses it (a list that fills)."""
    sent: list[int] = []
    execute = psycopg.Connection.execute

    def counted(self: psycopg.Connection[Any], query: Any, params: Any = None, **kw: Any) -> Any:
        if f"%({column})" in str(query):
            sent.append(sum(len(value) for value in params[column]))
        return execute(self, query, params, **kw)

    monkeypatch.setattr(psycopg.Connection, "execute", counted)
    return sent


def _text(i: int) -> str:
    return f"message {i} " + "lorem ipsum " * 100  # about 1.2 KB, a few distinct words


def test_a_save_larger_than_one_statement_carries_is_written_in_batches(
    open_store: OpenStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """All the rows of a save once travelled as one array in one statement: a save holding
    more than 1 GiB (PostgreSQL's limit for one protocol message) could never commit, and was
    reported as StoreUnavailableError ("retrying later is safe"). Now a save holding more than
    ``BATCH_BYTES`` is inserted that much at a time, in its transaction (the limit is lowered
    here to a few messages' worth, instead of allocating gigabytes)."""
    monkeypatch.setattr(pg_store, "BATCH_BYTES", 8_000, raising=False)
    ledger = Ledger(open_store())
    msgs = [Msg.user(_text(i), id=f"m{i}") for i in range(12)]
    bodies = _bytes_sent(monkeypatch, "bodies")
    ledger.save("s", msgs)  # a new session: the pipelined save
    assert len(bodies) > 1 and max(bodies) <= 8_000, bodies
    bodies.clear()
    msgs += [Msg.assistant(_text(i), id=f"m{i}") for i in range(12, 24)]
    ledger.save("s", msgs)  # a known session: one statement, unless it holds too much
    assert len(bodies) > 1 and max(bodies) <= 8_000, bodies
    raws = _bytes_sent(monkeypatch, "raws")
    values = {f"v{i}": "x" * 3_000 for i in range(5)}
    ledger.save_state("s", values=values)
    assert len(raws) > 1 and max(raws) <= 8_000, raws
    datas = _bytes_sent(monkeypatch, "datas")
    images = [bytes([i]) * 5_000 for i in range(4)]  # blobs: each over MEDIA_THRESHOLD
    msgs.append(Msg.user([ImageBlock(media_type="image/png", data=d) for d in images], id="i"))
    ledger.save("s", msgs)
    assert len(datas) > 1 and max(datas) <= 8_000, datas
    monkeypatch.undo()
    state = Ledger(open_store()).load("s")
    assert (state.version, state.context, state.values) == (4, msgs, values)
    assert [h.msg_id for h in Ledger(open_store()).search("message 23")] == ["m23"]


def test_a_row_larger_than_a_statement_can_carry_is_refused_as_a_user_error(
    open_store: OpenStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A message, value or blob too large for any statement can never be stored: the save is
    refused before anything is sent, as UserError naming the limit, and nothing changes (the
    limit, about 1 GiB, is lowered here)."""
    monkeypatch.setattr(pg_store, "MAX_ROW_BYTES", 20_000, raising=False)
    ledger = Ledger(open_store())
    first = [Msg.user("first", id="a")]
    ledger.save("s", first)
    too_large = [
        (lambda: ledger.save("s", [*first, Msg.user("x" * 30_000, id="big")]), "message 'big'"),
        (lambda: ledger.save("new", [Msg.user("x" * 30_000, id="big")]), "message 'big'"),
        (lambda: ledger.save_state("s", values={"v": "x" * 30_000}), "the value 'v'"),
        (
            lambda: ledger.save(
                "s", [*first, Msg.user(ImageBlock(media_type="image/png", data=b"x" * 30_000))]
            ),
            "the media blob",
        ),
    ]
    for save, what in too_large:
        with pytest.raises(UserError, match=f"{what}.* at most 20,000 "):
            save()
    reopened = Ledger(open_store())
    assert reopened.load("s").context == first and reopened.version("s") == 1
    assert reopened.version("new") == 0
    assert ledger.save("s", [*first, Msg.user("y" * 10_000, id="fits")]).version == 2
