"""A closed store or ledger refuses every call with ``ClosedError``, on every backend alike.

Before, memory://, JSONL and SQLite went on loading and saving after ``Ledger.close()`` (SQLite
reopened its file), and PostgreSQL raised ``StoreUnavailableError`` from its closed pool, which
callers retry as a server that is down: a retry loop spun on a closed ledger forever. What was
committed stays: a new ``Ledger`` on the same URL reads it.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agentledger.errors import ClosedError, StoreError
from agentledger.messages import Msg
from agentledger.store import Ledger, open_store
from agentledger.store.aio import AsyncLedger
from agentledger.store.base import CommitPlan, SessionKey, Store
from agentledger.store.postgres_lease import LeaseConnection
from tests.store.backends import backend, store_url  # noqa: F401  (fixtures)

MSGS = [Msg.user("hello", id="u1"), Msg.assistant("hi there", id="a1")]


@contextmanager
def _url(kind: str, tmp_path: Path) -> Iterator[str]:
    if kind == "memory":
        yield "memory://"
    else:
        with store_url(kind, tmp_path) as url:
            yield url


def _public(cls: type) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_") and callable(getattr(cls, n))}


def _ledger_calls(ledger: Ledger, exported: bytes) -> dict[str, Callable[[], Any]]:
    """Every public ``Ledger`` method but ``close``, called as a user would."""
    return {
        "key": lambda: ledger.key("s"),
        "load": lambda: ledger.load("s"),
        "messages": lambda: ledger.messages("s"),
        "tracked": lambda: ledger.tracked("s"),
        "load_tracked": lambda: ledger.load_tracked("s"),
        "exists": lambda: ledger.exists("s"),
        "version": lambda: ledger.version("s"),
        "list_sessions": lambda: ledger.list_sessions(),
        "history": lambda: ledger.history("s"),
        "search": lambda: ledger.search("hello"),
        "save": lambda: ledger.save("s", [*MSGS, Msg.user("more", id="u2")]),
        "save_state": lambda: ledger.save_state("s", values={"k": 2}),
        "sync": lambda: ledger.sync("s", [{"role": "user", "content": "x"}]),
        "delete": lambda: ledger.delete("s"),
        "purge_history": lambda: ledger.purge_history("s"),
        "fork": lambda: ledger.fork("s", "s2"),
        "import_openai": lambda: ledger.import_openai("s3", [{"role": "user", "content": "x"}]),
        "export": lambda: ledger.export("s", io.BytesIO()),
        "import_": lambda: ledger.import_(exported, session="s4"),
        "lease": lambda: ledger.lease("s").__enter__(),
    }


async def _entered(ledger: AsyncLedger) -> None:
    async with ledger.lease("s"):
        pass


def _async_calls(ledger: AsyncLedger) -> dict[str, Callable[[], Awaitable[Any]]]:
    """Every public ``AsyncLedger`` method but ``close``."""
    return {
        "load": lambda: ledger.load("s"),
        "messages": lambda: ledger.messages("s"),
        "tracked": lambda: ledger.tracked("s"),
        "load_tracked": lambda: ledger.load_tracked("s"),
        "exists": lambda: ledger.exists("s"),
        "version": lambda: ledger.version("s"),
        "list_sessions": lambda: ledger.list_sessions(),
        "history": lambda: ledger.history("s"),
        "search": lambda: ledger.search("hello"),
        "save": lambda: ledger.save("s", [*MSGS, Msg.user("more", id="u2")]),
        "save_state": lambda: ledger.save_state("s", values={"k": 2}),
        "sync_messages": lambda: ledger.sync_messages("s", [{"role": "user", "content": "x"}]),
        "delete": lambda: ledger.delete("s"),
        "purge_history": lambda: ledger.purge_history("s"),
        "fork": lambda: ledger.fork("s", "s2"),
        "lease": lambda: _entered(ledger),
    }


def _store_calls(store: Store) -> dict[str, Callable[[], Any]]:
    """Every primitive of the ``Store`` contract but ``close``."""
    key = SessionKey("default", "s")
    plan = CommitPlan(key, 2, datetime.now(UTC), values={"k": b"3"})
    return {
        "setup": store.setup,
        "read_version": lambda: store.read_version(key),
        "read_stamp": lambda: store.read_stamp(key),
        "read_head": lambda: store.read_head(key),
        "load": lambda: store.load(key),
        "read_media": lambda: store.read_media(key, [b"\x00" * 16]),
        "history": lambda: store.history(key),
        "list_sessions": lambda: store.list_sessions("default"),
        "search": lambda: store.search("default", "hello"),
        "commit": lambda: store.commit(plan),
        "delete": lambda: store.delete(key),
        "purge_history": lambda: store.purge_history(key, 1),
        "lease": lambda: store.lease(key).__enter__(),
    }


def _refused(call: Callable[[], Any], what: str) -> ClosedError:
    with pytest.raises(ClosedError) as info:
        call()
    assert not isinstance(info.value, StoreError), what  # never retried as a store outage
    assert isinstance(info.value, RuntimeError)
    return info.value


def _commit_some(ledger: Ledger) -> bytes:
    """Session "s" at version 2 (two messages, a value); returns its export."""
    ledger.save("s", MSGS)
    ledger.save_state("s", values={"k": 1})
    exported = io.BytesIO()
    ledger.export("s", exported)
    return exported.getvalue()


def _still_committed(url: str) -> None:
    """What was committed before the close, read by a new ledger on the same URL."""
    if url == "memory://":
        return  # a memory store ends with its object: there is nothing to reopen
    with Ledger(url) as again:
        state = again.load("s")
        assert state.version == 2 and state.lists["context"] == MSGS
        assert state.values == {"k": 1}
        assert [v.version for v in again.history("s")] == [1, 2]
        assert [i.session_id for i in again.list_sessions()] == ["s"]


def test_every_ledger_call_after_close_raises_closed_error(
    backend: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    with _url(backend, tmp_path) as url:
        ledger = Ledger(url)
        exported = _commit_some(ledger)
        ledger.close()
        calls = _ledger_calls(ledger, exported)
        assert set(calls) == _public(Ledger) - {"close"}, "a Ledger method is not tried here"
        for name, call in calls.items():
            assert "Ledger" in str(_refused(call, name))
        assert ledger.closed and ledger.store.closed
        ledger.close()  # closing again is harmless
        _still_committed(url)


def test_every_ledger_call_after_a_with_block_raises_closed_error(
    backend: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    with _url(backend, tmp_path) as url:
        with Ledger(url) as ledger:
            exported = _commit_some(ledger)
        for name, call in _ledger_calls(ledger, exported).items():
            _refused(call, name)
        _still_committed(url)


def test_every_async_ledger_call_after_close_raises_closed_error(
    backend: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    async def run(url: str) -> None:
        async with AsyncLedger(url) as ledger:
            _commit_some(ledger.sync)
        calls = _async_calls(ledger)
        assert set(calls) == _public(AsyncLedger) - {"close"}, "a method is not tried here"
        for name, call in calls.items():
            with pytest.raises(ClosedError):
                await call()
            assert name
        await ledger.close()  # closing again is harmless

    with _url(backend, tmp_path) as url:
        asyncio.run(run(url))
        _still_committed(url)


def test_a_store_closed_under_its_ledgers_refuses_them_all(
    backend: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """``store.close()`` by its owner: every ledger over it, sync or async, and every
    primitive, raise ``ClosedError`` naming the store; so does a new ledger over it."""
    with _url(backend, tmp_path) as url:
        store = open_store(url)
        ledger, other = Ledger(store), AsyncLedger(store)
        exported = _commit_some(ledger)
        store.close()
        assert store.closed and not ledger.closed  # the ledger is refused by its store
        for name, call in _ledger_calls(ledger, exported).items():
            if name != "key":  # checks an id, without the store
                assert store.location in str(_refused(call, name))
        for name, call in _store_calls(store).items():
            assert store.location in str(_refused(call, name))
        _refused(lambda: Ledger(store), "a new Ledger over it")

        async def run() -> None:
            for acall in _async_calls(other).values():
                with pytest.raises(ClosedError):
                    await acall()

        asyncio.run(run())
        store.close()
        _still_committed(url)


def test_every_public_method_of_every_backend_is_guarded(backend: str, tmp_path: Path) -> None:  # noqa: F811
    """Backends' own public methods (``SqliteStore.check_integrity``...) are refused too."""
    with _url(backend, tmp_path) as url:
        store = open_store(url)
        store.close()
        for name in _public(type(store)):
            assert getattr(getattr(type(store), name), "_closable", False), name
        assert set(_store_calls(store)) | {"close"} == _public(Store)


def test_a_ledger_closed_over_a_store_it_was_given_leaves_the_store_open(
    backend: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    with _url(backend, tmp_path) as url:
        store = open_store(url)
        try:
            with Ledger(store) as ledger:
                ledger.save("s", MSGS)
            _refused(lambda: ledger.messages("s"), "the closed ledger")
            assert not store.closed
            assert Ledger(store).messages("s") == MSGS  # the store's other users go on
        finally:
            store.close()


def test_a_lease_held_when_its_ledger_closes_is_given_back(
    backend: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Leaving the ``with`` of a lease taken before the close raises nothing, and the session
    is free again for a new ledger on the same URL."""
    with _url(backend, tmp_path) as url:
        ledger = Ledger(url)
        ledger.save("s", MSGS)
        with ledger.lease("s"):
            ledger.close()
        if url != "memory://":
            with Ledger(url) as again, again.lease("s"):
                assert again.messages("s") == MSGS


# -- a call already under way when the store closes ----------------------------------------------
def test_a_sqlite_call_under_way_as_its_store_closes_reopens_nothing(tmp_path: Path) -> None:
    """A call that passed the check just before ``close`` took the connections away: before,
    it opened the file again, a reference nobody would release."""
    from agentledger.store import sqlite_db
    from agentledger.store.sqlite import SqliteStore

    store = SqliteStore(tmp_path / "state.db")
    Ledger(store).save("s", MSGS)
    store.close()
    unguarded = SqliteStore.load.__wrapped__  # type: ignore[attr-defined]
    _refused(lambda: unguarded(store, SessionKey("default", "s")), "load under way")
    assert str(store.path) not in sqlite_db._registry


def test_sqlite_connections_closed_under_a_call_open_no_new_ones(tmp_path: Path) -> None:
    """A call that already holds the shared connections when the last store on the file
    closes gets ``ClosedError`` for a reader or the writer: before, the reader was a plain
    ``StoreError`` and the writer was opened again, on connections nobody would close."""
    from agentledger.store.sqlite import SqliteStore

    store = SqliteStore(tmp_path / "state.db")
    Ledger(store).save("s", MSGS)
    db = store._db()
    store.close()
    _refused(db.take_reader, "a reader")
    with db.write_lock:
        _refused(db.writer, "the writer")
        assert db._writer is None


@pytest.mark.postgres
def test_a_postgres_call_under_way_as_its_pool_closes_is_closed_error(tmp_path: Path) -> None:
    """The closed pool itself answers ``ClosedError``, not ``StoreUnavailableError``."""
    from agentledger.store.postgres import PostgresStore

    with store_url("postgres", tmp_path) as url:
        store = PostgresStore(url)
        _commit_some(Ledger(store))
        store.close()
        key = SessionKey("default", "s")
        for name in ("read_version", "load", "history", "commit"):
            unguarded = getattr(PostgresStore, name).__wrapped__
            args: tuple[Any, ...] = (CommitPlan(key, 1, datetime.now(UTC)),)
            if name != "commit":
                args = (key,)
            _refused(lambda u=unguarded, a=args: u(store, *a), name)  # type: ignore[misc]
        _still_committed(url)


def test_a_postgres_lease_waiting_as_its_store_closes_opens_no_connection() -> None:
    """The lease connection, once closed with its store, is not opened again by a lease
    still trying (it would hold the lease on a connection nobody closes)."""
    opened: list[object] = []

    def connect() -> Any:
        opened.append(object())
        raise AssertionError("opened a lease connection after the close")

    leases = LeaseConnection(connect, OSError, "postgresql://host/db#s")
    leases.close()
    _refused(lambda: leases.try_lock(1), "try_lock")
    assert leases.unlock(1) is False  # nothing held, nothing opened
    assert not opened
