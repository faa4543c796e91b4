"""PostgresStore: the conformance suite and state machine, then what only a shared server shows:
WAL-level proof of write-nothing saves, many processes on one ledger, the run lease across
processes and crashes, a connection killed mid-save, migrations, and full-text search.

Every test gets a fresh schema on the server named by ``AGENTLEDGER_TEST_POSTGRES`` (see
``tests/store/pg.py``); without a reachable server the tests skip, except under ``CI=true``.
"""

from __future__ import annotations

import asyncio
import collections
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from reliability import knob, record

from agentledger import AsyncLedger
from agentledger.errors import (
    ConflictError,
    CorruptStoreError,
    OutcomeUnknownError,
    SessionBusyError,
    StoreError,
    StoreUnavailableError,
    UserError,
)
from agentledger.messages import Msg, decode, encode
from agentledger.store import CommitPlan, Ledger, ListWrite, SessionKey, Store, StoredMsg
from agentledger.store import open_store as open_url
from agentledger.store.postgres import PostgresStore, _lock_id
from agentledger.store.postgres_schema import MIGRATIONS
from agentledger.testing.conformance import StoreConformance
from agentledger.testing.samples import every_block_message, sample_conversation
from agentledger.testing.statemachine import run_ledger_state_machine
from tests.store import pg, procs

pytestmark = pytest.mark.postgres

OpenStore = Callable[..., PostgresStore]


@pytest.fixture(scope="module")
def pg_url() -> str:
    return pg.require_server()


@pytest.fixture
def schema(pg_url: str) -> Iterator[str]:
    with pg.fresh_schema(pg_url) as name:
        yield name


@pytest.fixture
def open_store(pg_url: str, schema: str) -> Iterator[OpenStore]:
    """Opens new stores (each with its own pool) on this test's schema; closes them all."""
    stores: list[PostgresStore] = []

    def open_(**kwargs: Any) -> PostgresStore:
        kwargs = {"schema": schema, "pool_min": 1, "pool_max": 3, **kwargs}
        stores.append(PostgresStore(pg_url, **kwargs))
        return stores[-1]

    yield open_
    for store in stores:
        store.close()


@pytest.fixture
def db(pg_url: str) -> Iterator[psycopg.Connection[Any]]:
    """An autocommit connection for looking at the server from outside the store."""
    with pg.admin(pg_url) as conn:
        yield conn


class TestPostgresConformance(StoreConformance):
    @pytest.fixture
    def open_ledger(self, open_store: OpenStore) -> Callable[[], Ledger]:
        return lambda: Ledger(open_store())


class _KeepOpen(PostgresStore):
    """One pool for the state machine's many handles (``Ledger.close`` closes its store)."""

    def close(self) -> None:
        pass


def test_state_machine(pg_url: str, schema: str) -> None:
    store = _KeepOpen(pg_url, schema=schema, pool_max=2)
    try:
        run_ledger_state_machine(lambda: Ledger(store))
    finally:
        PostgresStore.close(store)


# -- seed 000: every element compared by content, and a no-op writes no WAL -------------------
@pytest.mark.parametrize(
    ("size", "positions"), [(10, [3]), (1000, [3, 251, 749])], ids=["10", "1000"]
)
def test_seed_000_edits_anywhere_and_equal_lists_write_no_wal(
    open_store: OpenStore, db: psycopg.Connection[Any], size: int, positions: list[int]
) -> None:
    msgs = [Msg.user(f"m{i}", id=f"m{i}") for i in range(size)]
    Ledger(open_store()).save("s", msgs)
    edited = Ledger(open_store()).messages("s")
    for p in positions:
        edited[p] = edited[p].replace(content="EDITED")
    report = Ledger(open_store()).save("s", edited)
    assert report.replaced == len(positions) and report.appended == 0
    reloaded = Ledger(open_store()).messages("s")
    assert reloaded == edited and [reloaded[p].text for p in positions] == ["EDITED"] * len(
        positions
    )

    # a rebuilt-but-equal list, saved through a new ledger and through a warm one: no WAL
    warm = Ledger(open_store())
    warm.messages("s")
    rebuilt = [decode(encode(m)) for m in edited]
    for ledger in (warm, Ledger(open_store())):
        wal = pg.min_wal(db, lambda ledger=ledger: ledger.save("s", rebuilt))
        assert wal == 0
    assert Ledger(open_store()).version("s") == 2


def test_append_and_replace_write_about_the_changed_rows(
    open_store: OpenStore, db: psycopg.Connection[Any]
) -> None:
    ledger = Ledger(open_store())
    msgs = [pg.message(i) for i in range(2000)]
    ledger.save("s", msgs)
    ledger.save("s", [*msgs, pg.message(-1)])  # warm every page the next saves touch

    def append() -> None:
        msgs.append(pg.message(len(msgs)))
        ledger.save("s", msgs)

    def replace() -> None:
        msgs[1000] = pg.message(100_000 + len(msgs))
        ledger.save("s", msgs)

    # rows, FTS entries and bookkeeping: a few KB, never proportional to the 2.5 MB session
    assert pg.min_wal(db, append, below=12_000) < 12_000
    assert pg.min_wal(db, replace, below=12_000) < 12_000


# -- search ---------------------------------------------------------------------------------
def test_search_matches_the_generic_scan(open_store: OpenStore) -> None:
    store = open_store()
    ledger = Ledger(store)
    ledger.save("a", [Msg.user("The quick brown fox", id="1"), Msg.user("lazy dog naps", id="2")])
    ledger.save("b", sample_conversation(3, result_size=300))
    ledger.save_state(
        "c",
        lists={
            "context": [Msg.user("Quick: the FOX jumps", id="3")],
            "notes": [Msg.user("a lazy fox", id="4")],
        },
    )
    ledger.save("d", [Msg.user("quick fox elsewhere", id="5")], tenant="other")
    ledger.save("a", [Msg.user("The quick brown fox", id="1"), Msg.user("replaced", id="6")])
    queries = ["quick fox", "FOX", "lazy", "lazy dog", "ledger agent", "replaced", "nothing here"]
    for query in queries:
        assert store.search("default", query) == Store.search(store, "default", query), query
    assert store.search("default", "fox", limit=2) == Store.search(store, "default", "fox", limit=2)


def test_search_is_by_word_prefix_and_tolerates_any_query(open_store: OpenStore) -> None:
    ledger = Ledger(open_store())
    ledger.save("s", [Msg.user("Foxes and dogs\x00 with a NUL", id="n\x00ul")])
    hits = ledger.search("fox nu")  # word prefixes, as in SQLite FTS5
    assert [(h.session_id, h.msg_id, h.position) for h in hits] == [("s", "n\x00ul", 0)]
    assert ledger.search("oxes") == []  # not inside words, on every store
    queries = ['"(*") AND NEAR', "' OR 1=1 --", "!!!", "x & | ! <-> y:*", "  ", "\x00", "\\'"]
    for query in queries:
        assert ledger.search(query) == []
    # operators are plain text: "!with" requires the word "with", it does not exclude it
    assert [h.msg_id for h in ledger.search("dogs & !with")] == ["n\x00ul"]
    assert ledger.search("dogs", limit=0) == []
    assert Ledger(open_store()).messages("s")[0].text == "Foxes and dogs\x00 with a NUL"


def test_a_snippet_is_centred_on_the_word_found_whatever_the_query_spells(
    open_store: OpenStore,
) -> None:
    """The words match without case, accents or punctuation; the snippet is cut around the
    word that matched, not around the query's raw first token (which "creme" or '"fox' never
    equal), as SQLite's snippet is."""
    ledger = Ledger(open_store())
    text = "x " * 100 + "Un café crème, and a fox that jumps" + " y" * 100
    ledger.save("s", [Msg.user(text, id="m")])
    for query in ("creme", "CRÈME fox", '"crème"', "crème!"):
        (hit,) = ledger.search(query)
        assert "crème" in hit.snippet and hit.snippet.startswith("…"), (query, hit.snippet)
    (hit,) = ledger.search('"fox')
    assert "fox that jumps" in hit.snippet and hit.snippet.startswith("…")


def test_search_takes_its_matches_from_the_index_before_ordering_by_session(
    open_store: OpenStore, db: psycopg.Connection[Any]
) -> None:
    """The matches are a CTE of their own, so the planner cannot walk the sessions in
    ``updated_at`` order and match the words of each of their messages (at 100,000 sessions
    that plan took 13 s for a word held by 30 messages)."""
    store = open_store()
    Ledger(store).save("s", [Msg.user("needle in a haystack", id="n")])
    args = {"tenant": "default", "query": "needle:*", "limit": 20}
    plan = [r[0] for r in db.execute("EXPLAIN (COSTS OFF) " + store._q.search, args)]

    def indent(line: str) -> int:
        return len(line) - len(line.lstrip())

    cte = next(i for i, line in enumerate(plan) if line.strip() == "CTE hits")
    end = next(j for j in range(cte + 1, len(plan)) if indent(plan[j]) <= indent(plan[cte]))
    assert any("words @@" in line for line in plan[cte:end])
    assert not any("words @@" in line for line in plan[:cte] + plan[end:]), plan
    assert [h.msg_id for h in store.search("default", "needle")] == ["n"]


# -- media blobs -----------------------------------------------------------------------------
def test_blobs_are_shared_and_collected_when_unreferenced(
    open_store: OpenStore, db: psycopg.Connection[Any], schema: str
) -> None:
    def blob_count() -> int:
        row = db.execute(f'SELECT count(*) FROM "{schema}".blobs').fetchone()
        return int(row[0]) if row else -1

    ledger = Ledger(open_store())
    msgs = every_block_message()
    ledger.save("s", msgs)
    ledger.fork("s", "copy")
    assert blob_count() == 2  # two images, stored once for both sessions
    ledger.save("s", msgs[:1])  # truncated away, still in history
    ledger.purge_history("s", keep_last=1)
    assert blob_count() == 2  # "copy" still uses them
    assert ledger.delete("copy")
    assert blob_count() == 0
    assert ledger.messages("s") == msgs[:1]


def test_a_blob_that_does_not_match_its_digest_is_corrupt(
    open_store: OpenStore, db: psycopg.Connection[Any], schema: str
) -> None:
    Ledger(open_store()).save("s", every_block_message())
    db.execute(f'UPDATE "{schema}".blobs SET data = %s', [b"\x00" * 10_000])
    with pytest.raises(CorruptStoreError, match="does not match its digest"):
        Ledger(open_store()).messages("s")


@pytest.mark.parametrize("title", [{"a": 1}, ["x"], 7, 2.5, True, b"t"])
def test_a_title_that_is_not_text_is_refused_before_writing(
    open_store: OpenStore, title: Any
) -> None:
    store = open_store()
    store.setup()
    key = SessionKey("t", "s")
    row = StoredMsg("m", b"\x01" * 16, encode(Msg.user("x", id="m")), "x")

    def plan(base: int, title: Any) -> CommitPlan:
        lists = [ListWrite("context", [(base, row)], base + 1)]
        return CommitPlan(key, base, datetime.now(UTC), lists=lists, title=title)

    store.commit(plan(0, "kept"))
    with pytest.raises(UserError, match="title must be text"):
        store.commit(plan(1, title))
    assert store.read_version(key) == 1
    assert [i.title for i in store.list_sessions("t")] == ["kept"]


def test_a_title_an_older_worker_changed_is_not_taken_from_exact_title(
    open_store: OpenStore, db: psycopg.Connection[Any], schema: str
) -> None:
    """A title holding NUL is kept in ``exact_title`` (text cannot hold it). A worker older than
    migration 7 changes ``title`` and leaves ``exact_title`` as it was: the title it set is the
    one listed, not the stale exact one."""
    ledger = Ledger(open_store())
    ledger.save_state("s", lists={"context": [Msg.user("q", id="q")]}, values={"title": "a\x00b"})
    assert [i.title for i in Ledger(open_store()).list_sessions()] == ["a\x00b"]
    db.execute(f"UPDATE \"{schema}\".sessions SET title = 'set by an older worker'")
    assert [i.title for i in Ledger(open_store()).list_sessions()] == ["set by an older worker"]


# -- a connection killed mid-save --------------------------------------------------------------
@pytest.mark.parametrize("path", ["one statement", "pipeline"])
def test_connection_killed_mid_save_fails_cleanly(
    open_store: OpenStore, pg_url: str, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    """A save the ledger planned is one statement (here the connection dies just before it is
    sent); one that adds media is a pipeline (it dies once every write ran, before COMMIT).
    Either way: not committed, said so, and nothing of it is stored."""
    store = open_store()
    ledger = Ledger(store)
    before = sample_conversation(4, result_size=100)
    ledger.save("s", before)
    after = [*before, *sample_conversation(6, result_size=100)[len(before) :]]
    after[1] = after[1].replace(content="edited")
    if path == "one statement":
        commit_known = PostgresStore._commit_known

        def die_then_commit(self: PostgresStore, conn: psycopg.Connection[Any], *args: Any) -> Any:
            pg.terminate(pg_url, conn.info.backend_pid)
            return commit_known(self, conn, *args)

        monkeypatch.setattr(PostgresStore, "_commit_known", die_then_commit)
    else:
        after.append(every_block_message()[1])  # an image: media go through the pipeline
        write = PostgresStore._write

        def write_then_die(self: PostgresStore, conn: psycopg.Connection[Any], *args: Any) -> None:
            write(self, conn, *args)
            conn.execute("SELECT 1").fetchone()  # flush the pipeline: the writes ran on the server
            pg.terminate(pg_url, conn.info.backend_pid)

        monkeypatch.setattr(PostgresStore, "_write", write_then_die)
    with pytest.raises(StoreUnavailableError, match="not committed") as info:
        ledger.save("s", after)
    assert not isinstance(info.value, ConflictError)
    monkeypatch.undo()

    fresh = Ledger(open_store())
    assert fresh.version("s") == 1 and fresh.messages("s") == before
    assert ledger.save("s", after).version == 2  # the same handle carries on
    assert Ledger(open_store()).messages("s") == after


def _statements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The text of every statement psycopg sends from now on (a list that fills)."""
    sent: list[str] = []
    execute = psycopg.Connection.execute

    def counted(self: psycopg.Connection[Any], query: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(str(query))
        return execute(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Connection, "execute", counted)
    return sent


def test_a_save_that_closes_rows_is_not_planned_anew_every_time(open_store: OpenStore) -> None:
    """PostgreSQL plans a prepared statement with its parameters for its first five runs, then
    keeps the plan made without them unless that looks dearer. A save that closes rows (an
    edit, a deletion) once gave the planner no row count for the ranks it closes, so the kept
    plan looked ten times dearer and every such save was planned anew (0.3-0.6 ms, more than
    running it). Now its sixth run on a connection uses the kept plan."""
    store = open_store(pool_min=1, pool_max=1)  # one connection: its statements are counted
    ledger = Ledger(store)
    msgs = sample_conversation(1000, result_size=1000)  # 4,000 messages: scans cost
    ledger.save("s", msgs)
    for i in range(8):
        msgs[2000] = msgs[2000].replace(content=f"edited {i}")  # closes one row, puts one
        ledger.save("s", msgs)
        msgs = msgs[:1000] + msgs[1001:]  # closes one row
        ledger.save("s", msgs)
    with store._pool.connection() as conn:
        plans = conn.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
            "WHERE statement LIKE 'WITH moved AS%%' AND statement LIKE '%%closed_rows AS%%'"
        ).fetchall()
    assert plans and all(generic >= 3 and custom <= 5 for generic, custom in plans), plans
    assert Ledger(open_store()).messages("s") == msgs


def test_every_save_the_ledger_plans_is_one_statement(
    open_store: OpenStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a known session, an append, an edit, a shift of each kind, a change of named values
    and of several lists at once each send one statement, and store exactly what was saved."""
    ledger = Ledger(open_store())
    msgs = [Msg.user(f"m{i}", id=f"m{i}") for i in range(20)]
    ledger.save_state("s", lists={"context": msgs, "notes": msgs[:3]}, values={"k": 1})
    made = iter(range(1000))

    def new() -> Msg:
        return Msg.assistant(f"new {(n := next(made))}", id=f"n{n}")

    changes: list[Any] = [
        lambda c, o: ([*c, new()], o, None),  # append
        lambda c, o: ([*c[:5], c[5].replace(content="edited"), *c[6:]], o, None),  # edit
        lambda c, o: ([*c[1:], new()], o, None),  # sliding window
        lambda c, o: ([new(), *c], o, None),  # insert at the front
        lambda c, o: ([*c[:8], *c[9:]], o, None),  # delete in the middle
        lambda c, o: ([c[3], *c[:3], *c[4:]], o, None),  # move one
        lambda c, o: ([new(), *c[-4:]], o, None),  # summary over a prefix
        lambda c, o: (c, o, {"k": 2, "j": [1]}),  # named values
        lambda c, o: (c[:-1], [*o, new()], {"k": None}),  # two lists and a value deleted
        lambda c, o: ([*c[:2], new(), *c[4:]], o[1:], None),  # replace two, slide the other
    ]
    context, notes = msgs, msgs[:3]
    values: dict[str, Any] = {"k": 1}
    for change in changes:
        context, notes, set_values = change(context, notes)
        sent = _statements(monkeypatch)
        ledger.save_state("s", lists={"context": context, "notes": notes}, values=set_values)
        monkeypatch.undo()
        assert len(sent) == 1 and sent[0].startswith("WITH moved AS (UPDATE"), sent
        for name, value in (set_values or {}).items():
            if value is None:
                values.pop(name)
            else:
                values[name] = value
        state = Ledger(open_store()).load("s")
        assert state.lists == {"context": context, "notes": notes}
        assert state.values == values
    versions = Ledger(open_store()).history("s")
    assert len(versions) == len(changes) + 1
    first = Ledger(open_store()).load("s", version=1)
    assert first.lists == {"context": msgs, "notes": msgs[:3]} and first.values == {"k": 1}


def test_a_stale_one_statement_save_writes_nothing(open_store: OpenStore) -> None:
    """The bump runs before any write of the statement: a save planned on a version that is no
    longer the session's fails as a whole, as a conflict."""
    first, second = Ledger(open_store()), Ledger(open_store())
    turn = [Msg.user("one", id="1"), Msg.assistant("two", id="2")]
    first.save("s", turn)
    assert second.version("s") == 1  # second now knows the session's row
    first.save("s", [*turn, Msg.user("three", id="3")])
    for stale in (
        [*turn, Msg.user("late", id="late")],  # an append
        [turn[0].replace(content="edited"), turn[1]],  # an edit
        [turn[1]],  # a dropped prefix
    ):
        with pytest.raises(ConflictError, match="at version 2") as info:
            second.save("s", stale, expected_version=1)
        assert (info.value.expected, info.value.actual) == (1, 2)
    fresh = Ledger(open_store())
    assert [m.id for m in fresh.messages("s")] == ["1", "2", "3"]
    assert [v.version for v in fresh.history("s")] == [1, 2]
    assert second.save("s", [*turn, Msg.user("late", id="late")]).version == 3  # re-planned
    assert [m.id for m in Ledger(open_store()).messages("s")] == ["1", "2", "late"]


def test_reads_replace_a_pooled_connection_that_died_while_idle(
    open_store: OpenStore, pg_url: str
) -> None:
    store = open_store(pool_min=1, pool_max=1)
    ledger = Ledger(store)
    ledger.save("s", [Msg.user("x", id="x")])
    with store._pool.connection() as conn:
        pid = conn.info.backend_pid
    pg.terminate(pg_url, pid)  # e.g. a server restart or an idle timeout
    assert [m.text for m in Ledger(store).messages("s")] == ["x"]  # retried on a new one
    assert Ledger(store).version("s") == 1


def test_connection_lost_after_the_server_committed_counts_as_saved(
    open_store: OpenStore, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = Ledger(open_store())
    ledger.save("s", [Msg.user("one", id="1")])
    commit = PostgresStore._commit

    def commit_then_lose_reply(
        self: PostgresStore, conn: psycopg.Connection[Any], *args: Any
    ) -> None:
        commit(self, conn, *args)  # COMMIT done; now the connection dies before we return
        pg.terminate(pg_url, conn.info.backend_pid)
        conn.execute("SELECT 1")  # raises OperationalError on a broken connection

    monkeypatch.setattr(PostgresStore, "_commit", commit_then_lose_reply)
    report = ledger.save("s", [Msg.user("one", id="1"), Msg.user("two", id="2")])
    monkeypatch.undo()
    assert report.version == 2
    assert [m.text for m in Ledger(open_store()).messages("s")] == ["one", "two"]


def test_a_save_against_a_session_that_moved_is_refused_and_writes_nothing(
    open_store: OpenStore,
) -> None:
    """The one-round-trip save: its guarded bump fails the pipeline, so none of the writes
    queued behind it run, and the conflict names what happened (another commit, or the session
    deleted and created again)."""
    first, second = Ledger(open_store()), Ledger(open_store())
    first.save("s", [Msg.user("one", id="1")])
    assert second.version("s") == 1  # second now knows the session's row
    first.save("s", [Msg.user("one", id="1"), Msg.user("two", id="2")])
    with pytest.raises(ConflictError, match="at version 2") as info:
        second.save("s", [Msg.user("other", id="x")], expected_version=1)
    assert (info.value.expected, info.value.actual) == (1, 2)
    assert [m.id for m in Ledger(open_store()).messages("s")] == ["1", "2"]
    assert second.save("s", [Msg.user("other", id="x")]).version == 3  # re-planned

    third = Ledger(open_store())
    assert third.version("s") == 3
    first.delete("s")
    first.save("s", [Msg.user("new", id="n")])  # version 1 of a new session row
    with pytest.raises(ConflictError):
        third.save("s", [Msg.user("late", id="l")], expected_version=3)
    assert [m.id for m in Ledger(open_store()).messages("s")] == ["n"]


def test_a_ledger_planning_from_its_cache_never_trusts_it_for_a_no_op_or_a_refusal(
    open_store: OpenStore,
) -> None:
    """Postgres saves plan from the ledger's cache without reading the version first; a save
    that looks like a no-op, or like a conflict with ``expected_version``, is decided only after
    the version is read."""
    mine, other = Ledger(open_store()), Ledger(open_store())
    original = [Msg.user("one", id="1")]
    mine.save("s", original)
    other.save("s", [Msg.user("changed", id="1")])  # mine's cache still holds version 1
    report = mine.save("s", original)  # equal to the stale cache, not to what is stored
    assert not report.noop and report.version == 3
    assert Ledger(open_store()).messages("s") == original

    other.save("s", [*original, Msg.user("two", id="2")])  # version 4; mine cached 3
    assert mine.save("s", original, expected_version=4).version == 5


def test_a_commit_whose_outcome_cannot_be_learned_is_outcome_unknown(
    open_store: OpenStore, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reply to COMMIT is lost and the server cannot be asked: neither success nor "not
    committed" would be true, so the error says the outcome is unknown, and the ledger reads
    the session again before its next save."""
    store = open_store(timeout=0.5)
    ledger = Ledger(store)
    ledger.save("s", [Msg.user("one", id="1")])
    commit = PostgresStore._commit

    def commit_then_lose_reply(
        self: PostgresStore, conn: psycopg.Connection[Any], *args: Any
    ) -> None:
        commit(self, conn, *args)
        pg.terminate(pg_url, conn.info.backend_pid)
        conn.execute("SELECT 1")

    def unreachable(*args: Any, **kwargs: Any) -> Any:
        raise psycopg.OperationalError("connection refused")

    monkeypatch.setattr(PostgresStore, "_commit", commit_then_lose_reply)
    monkeypatch.setattr(store._pg, "connect", unreachable)
    two = [Msg.user("one", id="1"), Msg.user("two", id="2")]
    with pytest.raises(OutcomeUnknownError, match="unknown") as info:
        ledger.save("s", two)
    assert not isinstance(info.value, StoreUnavailableError)  # that one promises "not applied"
    monkeypatch.undo()
    assert ledger.version("s") == 2  # it had committed; the ledger asks instead of guessing
    assert ledger.save("s", [*two, Msg.user("three", id="3")]).version == 3


def test_a_server_side_timeout_is_a_store_error_and_changes_nothing(
    pg_url: str, schema: str, db: psycopg.Connection[Any]
) -> None:
    sep = "&" if "?" in pg_url else "?"  # ?schema= is taken out, the rest goes to libpq as is
    url = f"{pg_url}{sep}options=-c%20lock_timeout%3D200&schema={schema}"
    store = PostgresStore(url)
    try:
        ledger = Ledger(store)
        ledger.save("s", [Msg.user("one", id="1")])
        with db.transaction():  # another client holds the session row
            db.execute(f'SELECT 1 FROM "{schema}".sessions WHERE session = %s FOR UPDATE', ["s"])
            with pytest.raises(StoreError, match="lock timeout") as info:
                ledger.save("s", [Msg.user("one", id="1"), Msg.user("two", id="2")])
            assert "lost" not in str(info.value)
        assert ledger.save("s", [Msg.user("one", id="1"), Msg.user("2", id="2")]).version == 2
    finally:
        store.close()


# -- many processes on one ledger --------------------------------------------------------------
@pytest.mark.slow
def test_eight_processes_append_to_eight_sessions(
    pg_url: str, schema: str, open_store: OpenStore
) -> None:
    open_store().setup()
    at = time.time() + 2.0  # all start together, once connected
    procs = [
        pg.spawn("appender", url=pg_url, schema=schema, session=f"p{i}", count=40, start_at=at)
        for i in range(8)
    ]
    try:
        reports = [pg.read_line(proc, timeout=120) for proc in procs]
        assert all(r is not None and r["saves"] == 40 for r in reports), reports
    finally:
        pg.reap(procs)
    ledger = Ledger(open_store())
    for i in range(8):
        assert ledger.messages(f"p{i}") == [pg.message(n) for n in range(40)]
        assert [v.appended for v in ledger.history(f"p{i}")] == [1] * 40


def _race(worker: str, pg_url: str, schema: str, *, saves: int) -> list[dict[str, Any]]:
    """Four processes running ``pg.<worker>`` on session "hot" at once; their reports."""
    procs = [
        pg.spawn(worker, url=pg_url, schema=schema, session="hot", tag=f"w{i}", saves=saves)
        for i in range(4)
    ]
    try:
        reports = [pg.read_line(proc, timeout=120) for proc in procs]
    finally:
        pg.reap(procs)
    assert all(r is not None for r in reports), reports
    return [r for r in reports if r is not None]


@pytest.mark.slow
def test_four_processes_contending_for_one_session_lose_nothing(
    pg_url: str, schema: str, open_store: OpenStore
) -> None:
    Ledger(open_store()).save("hot", [Msg.user("start", id="start")])
    reports = _race("contender", pg_url, schema, saves=15)
    committed = [m for r in reports if r for m in r["committed"]]
    conflicted = {m for r in reports if r for m in r["conflicted"]}
    ledger = Ledger(open_store())
    final = [m.id for m in ledger.messages("hot")]
    # the final list is exactly the sum of the committed saves, each once, nothing else
    assert final[0] == "start" and sorted(final[1:]) == sorted(committed)
    record(
        "contention",
        "processes with expected_version, one session",
        backend="postgres",
        writers=4,
        commits=len(committed),
        conflicts=len(conflicted),
        attempts=len(committed) + len(conflicted),
    )
    assert len(committed) == 60 and not conflicted & set(final)
    assert ledger.version("hot") == 1 + len(committed)
    assert all(v.appended == 1 and v.replaced == 0 for v in ledger.history("hot")[1:])
    for r in reports:  # each writer's own commits stay in its order
        assert r is not None
        tag = r["committed"][0].split("-")[0]
        assert [m for m in final if m.startswith(f"{tag}-")] == r["committed"]


@pytest.mark.slow
def test_four_processes_shifting_one_session_commit_exactly_what_each_saved(
    pg_url: str, schema: str, open_store: OpenStore
) -> None:
    """Edits, deletions, slides and inserts at the front, each one statement, racing on one
    session: every commit holds exactly the list its writer saved, a lost race is a conflict
    (never a corrupt-store error or a unique violation), and nothing else is stored."""
    start = [Msg.user(f"start {i}", id=f"start-{i}") for i in range(12)]
    Ledger(open_store()).save("hot", start)
    reports = _race("shifter", pg_url, schema, saves=10)
    saved = {version: ids for r in reports if r for version, ids in r["committed"]}
    assert sorted(saved) == list(range(2, 42))  # 40 commits, one version each
    record(
        "contention",
        "processes shifting one session with expected_version",
        backend="postgres",
        writers=4,
        commits=len(saved),
        conflicts=sum(r["conflicts"] for r in reports if r),
    )
    ledger = Ledger(open_store())
    for version, ids in saved.items():
        assert [m.id for m in ledger.messages("hot", version=version)] == ids
    assert [m.id for m in ledger.messages("hot")] == saved[41]
    assert ledger.version("hot") == 41


@pytest.mark.slow
def test_eight_processes_without_expected_version_lose_no_acknowledged_commit(
    pg_url: str, schema: str, open_store: OpenStore
) -> None:
    """8 processes x 40 saves to one session, no ``expected_version``: every save re-plans
    until it commits (none gives up with ``ConflictError``), and each acknowledged version
    holds exactly what its writer saved."""
    open_store().setup()
    sep = "&" if "?" in pg_url else "?"
    url = f"{pg_url}{sep}schema={schema}"
    names = [f"w{i}" for i in range(8)]
    procs.check_replanned(url, procs.run_children("replan", url, names, 40), writers=8, count=40)
    record(
        "contention",
        "processes without expected_version, one session",
        backend="postgres",
        writers=8,
        commits=320,
    )


# -- the run lease across processes -----------------------------------------------------------
@pytest.mark.slow
def test_lease_is_exclusive_across_processes_and_sigkill_frees_it(
    pg_url: str, schema: str, open_store: OpenStore
) -> None:
    open_store().setup()
    args = {"url": pg_url, "schema": schema, "session": "run"}
    first = [pg.spawn("lease_holder", wait=0.0, hold=600, **args) for _ in range(2)]
    waiter = None
    try:
        said = [pg.read_line(proc, timeout=60) for proc in first]
        assert all(s is not None for s in said), said
        held = [s for s in said if s and s["held"]]
        assert len(held) == 1, said  # exactly one of the two runs got it
        busy = next(s for s in said if s and not s["held"])
        assert "busy" in busy["error"]

        waiter = pg.spawn("lease_holder", wait=60.0, hold=0.0, **args)
        assert pg.read_line(waiter, timeout=1.0) is None  # still waiting: the holder is alive
        with pytest.raises(SessionBusyError), Ledger(open_store()).lease("run"):
            pass
        killed_at = time.monotonic()
        os.kill(held[0]["pid"], signal.SIGKILL)
        got = pg.read_line(waiter, timeout=30)
        assert got is not None and got["held"], got
        assert time.monotonic() - killed_at < 10
    finally:
        pg.reap([*first, *([waiter] if waiter else [])])
    with Ledger(open_store()).lease("run"):
        pass  # the waiter exited, and its lease went with it


def test_lease_wait_times_out_then_succeeds_after_release(open_store: OpenStore) -> None:
    holder, other = Ledger(open_store()), Ledger(open_store())
    released = threading.Event()

    def hold() -> None:
        with holder.lease("s"):
            released.wait(10)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        time.sleep(0.2)
        began = time.monotonic()
        with pytest.raises(SessionBusyError, match="busy"), other.lease("s", wait=0.3):
            pass
        assert 0.25 < time.monotonic() - began < 3
        threading.Timer(0.3, released.set).start()
        with other.lease("s", wait=10):
            pass
    finally:
        released.set()
        thread.join(10)


async def test_async_ledger_runs_the_store_in_threads(open_store: OpenStore) -> None:
    ledger = AsyncLedger(Ledger(open_store()))
    async with ledger.lease("s"):  # entered and left on different worker threads
        with pytest.raises(SessionBusyError):
            async with AsyncLedger(Ledger(open_store())).lease("s"):
                pass
        saves = [ledger.save(f"c{i}", [Msg.user(f"m{i}", id="m")]) for i in range(8)]
        assert [r.version for r in await asyncio.gather(*saves)] == [1] * 8
    async with AsyncLedger(Ledger(open_store())).lease("s", wait=1):
        assert len(await ledger.list_sessions()) == 8


def test_lease_survives_a_dropped_lease_connection(
    open_store: OpenStore, pg_url: str, db: psycopg.Connection[Any], schema: str
) -> None:
    store = open_store()
    key = SessionKey("t", "a")
    lock = _lock_id("lease", schema, key.tenant, key.session)

    def free() -> bool:
        row = db.execute("SELECT pg_try_advisory_lock(%s)", [lock]).fetchone()
        if row and row[0]:
            db.execute("SELECT pg_advisory_unlock(%s)", [lock])
        return bool(row and row[0])

    with store.lease(key):
        assert not free()
    assert free()
    held = store._leases._conn
    assert held is not None
    pg.terminate(pg_url, held.info.backend_pid)
    with store.lease(key):  # reconnects
        assert not free()
    assert free()


# -- migrations -------------------------------------------------------------------------------
def _applied(db: psycopg.Connection[Any], schema: str) -> list[int]:
    rows = db.execute(f'SELECT version FROM "{schema}".schema_migrations ORDER BY version')
    return [r[0] for r in rows.fetchall()]


def test_migrations_are_recorded_and_idempotent(
    open_store: OpenStore, db: psycopg.Connection[Any], schema: str
) -> None:
    open_store().setup()
    assert _applied(db, schema) == [m[0] for m in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))
    open_store().setup()
    assert _applied(db, schema) == [m[0] for m in MIGRATIONS]
    # a schema left at an older migration is brought up to date, keeping its data
    Ledger(open_store()).save("s", [Msg.user("kept", id="k")])
    db.execute(f'DROP INDEX "{schema}".messages_words')
    db.execute(f'DELETE FROM "{schema}".schema_migrations WHERE version >= 5')
    db.execute(f'ALTER TABLE "{schema}".messages DROP COLUMN words')
    db.execute(f"UPDATE \"{schema}\".messages SET text = 'kept'")  # as written before 5
    db.execute(MIGRATIONS[2][2].format(schema=f'"{schema}"'))
    ledger = Ledger(open_store())
    assert _applied(db, schema) == [m[0] for m in MIGRATIONS]
    assert ledger.search("kept")[0].msg_id == "k"


def test_migration_5_keeps_old_rows_found_by_the_words_the_server_cut(
    open_store: OpenStore, db: psycopg.Connection[Any], schema: str
) -> None:
    """Rows written before migration 5 kept their text for the server's parser: the migration
    turns that text into their words, so they are found as before, snippets included."""
    ledger = Ledger(open_store())
    ledger.save("s", [Msg.user("Foxes jump", id="a"), Msg.user("the e-mail of bob", id="b")])
    ledger.save("s", [Msg.user("Foxes jump", id="a"), Msg.user("gone", id="c")])
    db.execute(f'DROP INDEX "{schema}".messages_words')
    db.execute(f'ALTER TABLE "{schema}".messages DROP COLUMN words')
    db.execute(f'DELETE FROM "{schema}".schema_migrations WHERE version >= 5')
    for msg_id, text in [("a", "Foxes jump"), ("b", "the e-mail of bob"), ("c", "gone")]:
        db.execute(f'UPDATE "{schema}".messages SET text = %s WHERE msg_id = %s', [text, msg_id])
    db.execute(MIGRATIONS[2][2].format(schema=f'"{schema}"'))  # the old index, as it was

    ledger = Ledger(open_store())
    assert [(h.msg_id, h.position, h.snippet) for h in ledger.search("fox JU")] == [
        ("a", 0, "Foxes jump")
    ]
    assert ledger.search("bob") == ledger.search("e-mail") == []  # closed at version 2
    assert [h.msg_id for h in ledger.search("gon")] == ["c"]
    dead = f'SELECT count(*) FROM "{schema}".messages WHERE words IS NOT NULL AND version_to > 0'
    assert db.execute(dead).fetchone() == (0,)  # only live rows are searched, and given words
    ledger.save("s", [Msg.user("Foxes jump", id="a"), Msg.user("Café crème", id="d")])
    assert [h.msg_id for h in ledger.search("creme")] == ["d"]


def test_rows_an_older_worker_writes_after_migration_5_are_found(
    open_store: OpenStore, db: psycopg.Connection[Any], schema: str
) -> None:
    """In a rolling upgrade an older worker keeps inserting text without words: search finds
    those rows by their text, on an index (migration 6) that newer rows never enter."""
    ledger = Ledger(open_store())
    ledger.save("s", [Msg.user("newer words", id="new"), Msg.user("older words", id="old")])
    # what an older worker's insert leaves: the text, no words
    older = (
        f"UPDATE \"{schema}\".messages SET words = NULL, text = 'older Words' WHERE msg_id = 'old'"
    )
    db.execute(older)
    assert [h.msg_id for h in ledger.search("word")] == ["new", "old"]
    assert [(h.msg_id, h.snippet) for h in ledger.search("olde wor")] == [("old", "older words")]
    unworded = f'SELECT count(*) FROM "{schema}".messages WHERE words IS NULL'
    assert db.execute(unworded).fetchone() == (1,)  # a newer insert always has its words
    ledger.save("big", sample_conversation(500))  # a table worth an index to the planner
    db.execute(f'ANALYZE "{schema}".messages')
    plan = "\n".join(r[0] for r in db.execute("EXPLAIN " + ledger.store._q.search, _args("old:*")))
    assert "messages_unworded" in plan and "messages_words" in plan, plan


def _args(query: str) -> dict[str, Any]:
    return {"tenant": "default", "query": query, "limit": 20}


def test_concurrent_setup_from_four_workers(
    open_store: OpenStore, db: psycopg.Connection[Any], schema: str
) -> None:
    stores = [open_store() for _ in range(4)]
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def run(store: PostgresStore) -> None:
        try:
            barrier.wait(10)
            Ledger(store).save(f"s{id(store)}", [Msg.user("hi", id="h")])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert _applied(db, schema) == [m[0] for m in MIGRATIONS]
    assert len(Ledger(open_store()).list_sessions()) == 4


# -- configuration and failures -------------------------------------------------------------------
def test_url_picks_schema_and_location_hides_the_password(pg_url: str, schema: str) -> None:
    parts = urlsplit(pg_url)
    secret = parts.password or "s3cret"
    if parts.password is None:  # trust auth ignores it; the point is that it never shows
        host = parts.netloc.rpartition("@")[2]
        parts = parts._replace(netloc=f"{parts.username or 'postgres'}:{secret}@{host}")
    store = open_url(f"{urlunsplit(parts)}?schema={schema}&connect_timeout=5")
    try:
        assert isinstance(store, PostgresStore) and store.schema == schema
        assert secret not in store.location and schema in store.location
        assert secret not in PostgresStore(f"password={secret} dbname=x", schema=schema).location
        Ledger(store).save("s", [Msg.user("x", id="x")])
    finally:
        store.close()
    with pytest.raises(UserError, match="schema name"):
        PostgresStore(pg_url, schema="Robert'); DROP TABLE students;--")


def test_unreachable_server_is_a_clear_store_error() -> None:
    store = PostgresStore("postgresql://nobody@127.0.0.1:9/none", timeout=0.5)
    try:
        began = time.monotonic()
        with pytest.raises(StoreError, match=r"no PostgreSQL connection for setup within 0.5 s"):
            Ledger(store)
        assert time.monotonic() - began < 5
    finally:
        store.close()


def test_core_imports_without_psycopg_and_the_store_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['psycopg'] = None; sys.modules['psycopg_pool'] = None\n"
        "import agentledger, agentledger.store\n"
        "from agentledger.errors import MissingDependencyError\n"
        "try:\n    agentledger.store.open_store('postgresql://x@localhost/db')\n"
        "except MissingDependencyError as exc:\n    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert 'pip install "agentledger[postgres]"' in out.stdout


# -- measurement (figures for the issue; run with -s to see them) -----------------------------
@pytest.mark.slow
def test_save_costs_at_12000_messages(pg_url: str, schema: str) -> None:
    costs = pg.measure_save_costs(pg_url, schema, repeats=15)
    print("\nsave costs at 12,000 messages:", costs)
    # figures only: the WAL bounds are asserted, noise-tolerantly, by the tests further up
    assert costs["noop"]["body_bytes"] == 0 and costs["append"]["body_bytes"] < 1400


# -- the reported outcome of a save equals the durable state ---------------------------------
def _kill_repeatedly(url: str, app: str, stop: threading.Event, seed: int) -> int:
    """Terminate the backends named ``app`` at random moments until ``stop``; return how many."""
    rng = random.Random(seed)
    kills = 0
    with pg.admin(url) as conn:
        while not stop.is_set():
            time.sleep(rng.uniform(0, 0.03))
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s AND pid <> pg_backend_pid()",
                [app],
            ).fetchall()
            kills += sum(1 for (done,) in rows if done)
    return kills


def test_saves_under_killed_connections_report_what_is_durable(
    pg_url: str, schema: str, open_store: OpenStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every save either succeeds, and a fresh ledger reads its version and content, or fails
    with a ``StoreError``, and a fresh ledger reads the previous commit unchanged. Kills land
    anywhere: in reads, before COMMIT, after it, while the pipeline still has results."""
    resolved: collections.Counter[str] = collections.Counter()
    resolve = PostgresStore._resolve

    def counted(self: PostgresStore, *args: Any) -> str | None:
        found = resolve(self, *args)
        resolved["committed" if found is not None else "not committed"] += 1
        return found

    monkeypatch.setattr(PostgresStore, "_resolve", counted)
    app = f"kill-{schema}"
    ledger = Ledger(open_store(application_name=app, pool_min=1, pool_max=2, timeout=10))
    observer = Ledger(open_store())
    stop = threading.Event()
    kills: list[int] = []
    killer = threading.Thread(target=lambda: kills.append(_kill_repeatedly(pg_url, app, stop, 5)))
    killer.start()
    outcomes: collections.Counter[str] = collections.Counter()
    committed: list[str] = []
    saves = knob("AGENTLEDGER_PG_FAULT_SAVES", 80)
    try:
        for i in range(saves):
            wanted = [*committed, f"m{i}"]
            msgs = [Msg.user(f"message {m}", id=m) for m in wanted]
            before = observer.version("s")
            try:
                report = ledger.save("s", msgs)
            except StoreError as exc:
                outcomes[type(exc).__name__] += 1
                assert not isinstance(exc, ConflictError), exc
                state = observer.load("s")
                assert (state.version, [m.id for m in state.context]) == (before, committed), (
                    f"save {i} raised {exc!r} but the durable state changed"
                )
                continue
            outcomes["saved"] += 1
            state = observer.load("s")
            assert state.version == report.version == before + 1, f"save {i}"
            assert [m.id for m in state.context] == wanted, f"save {i}"
            committed = wanted
    finally:
        stop.set()
        killer.join()
    print(f"\n{kills[0]} kills; outcomes {dict(outcomes)}; failed commits {dict(resolved)}")
    record(
        "faults",
        "pg_terminate_backend during saves",
        backend="postgres",
        saves=saves,
        connections_terminated=kills[0],
        outcomes=outcomes,
        failed_commits_resolved=resolved,
    )
    assert outcomes["saved"] > 0 and kills[0] > 0
