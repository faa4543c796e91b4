"""The PostgreSQL run lease ending under its holder (``postgres_lease``): its connection killed
by an administrator, or closed by a server timeout while its run waits on a model.

The server then frees the advisory lock, and another run may take the session. The holder
learns it at its next save that writes (``LeaseLostError``, nothing applied), at no cost to
saves while the lease lives; ``idle_session_timeout`` never ends a lease. The agent's fenced
saves (``tests/agent/test_fenced_saves.py``) keep another run's turn whatever the holder knows.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from agentledger import Msg
from agentledger.agent.context import RunError
from agentledger.agent.react import ReActAgent
from agentledger.errors import LeaseLostError, SessionBusyError
from agentledger.store import Ledger
from agentledger.store.aio import AsyncLedger
from agentledger.store.postgres import PostgresStore, _lock_id
from agentledger.testing.scripted import ScriptedModel
from tests.store import pg
from tests.store.test_postgres import pg_url, schema

pytestmark = pytest.mark.postgres

__all__ = ["pg_url", "schema"]  # fixtures, shared with test_postgres.py

OpenStore = Callable[..., PostgresStore]
TURN = [Msg.user(f"message {i}", id=f"m{i}") for i in range(6)]


@pytest.fixture
def open_store(pg_url: str, schema: str) -> Iterator[OpenStore]:
    stores: list[PostgresStore] = []

    def open_(url: str = pg_url, **kwargs: Any) -> PostgresStore:
        stores.append(PostgresStore(url, schema=schema, pool_min=1, pool_max=2, **kwargs))
        return stores[-1]

    yield open_
    for store in stores:
        store.close()


def lease_connection(store: PostgresStore) -> psycopg.Connection[Any]:
    conn = store._leases._conn
    assert conn is not None, "no lease taken yet"
    return conn


def kill_lease_connection(store: PostgresStore, pg_url: str) -> None:
    """End the lease connection from outside, and check that the server freed the session's
    lease (so a run in another process may take it)."""
    pg.terminate(pg_url, lease_connection(store).info.backend_pid)
    lock = _lock_id("lease", store.schema, "default", "s")
    with pg.admin(pg_url) as conn:
        row = conn.execute("SELECT pg_try_advisory_lock(%s)", [lock]).fetchone()
        assert row is not None and row[0], "the lease is still held on the server"


def test_a_holder_whose_lease_connection_was_killed_is_refused_at_its_next_save(
    open_store: OpenStore, pg_url: str
) -> None:
    """Its saves used to go on succeeding while another run held the session."""
    store = open_store()
    ledger = Ledger(store)
    ledger.save("s", TURN[:1])
    with ledger.lease("s"):
        ledger.save("s", TURN[:2])
        kill_lease_connection(store, pg_url)
        for _ in range(2):  # and every save while the holder goes on
            with pytest.raises(LeaseLostError, match="not applied") as lost:
                ledger.save("s", TURN[:3])
            assert isinstance(lost.value, SessionBusyError)
    assert Ledger(open_store()).messages("s") == TURN[:2]
    with ledger.lease("s"):  # a lease taken anew holds, on a new connection
        assert ledger.save("s", TURN[:3]).version == 3


def test_a_lease_lost_with_its_connection_is_not_taken_for_one_held_on_the_next(
    open_store: OpenStore, pg_url: str
) -> None:
    """Another session's lease opens a new lease connection: the first lease is still lost."""
    store = open_store()
    ledger = Ledger(store)
    with ledger.lease("s"):
        ledger.save("s", TURN[:1])
        kill_lease_connection(store, pg_url)
        with ledger.lease("b"):
            ledger.save("b", TURN[:1])
            with pytest.raises(LeaseLostError):
                ledger.save("s", TURN[:2])
    assert Ledger(open_store()).version("s") == 1


def test_saves_under_a_lease_that_lives_send_nothing_on_its_connection(
    open_store: OpenStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checking the lease costs a save no round trip while its connection has nothing to read."""
    store = open_store()
    ledger = Ledger(store)
    with ledger.lease("s"):
        held = lease_connection(store)
        sent: list[str] = []
        execute = psycopg.Connection.execute

        def counted(self: psycopg.Connection[Any], query: Any, *args: Any, **kwargs: Any) -> Any:
            if self is held:
                sent.append(str(query))
            return execute(self, query, *args, **kwargs)

        monkeypatch.setattr(psycopg.Connection, "execute", counted)
        for n in range(1, len(TURN) + 1):
            assert ledger.save("s", TURN[:n]).version == n
        assert sent == []


def test_an_idle_session_timeout_in_the_url_does_not_apply_to_the_lease_connection(
    open_store: OpenStore, pg_url: str
) -> None:
    """Managed servers often set ``idle_session_timeout``: it closed the lease connection while
    a run waited on its model, and another process took the lease the run still relied on."""
    sep = "&" if "?" in pg_url else "?"
    store = open_store(f"{pg_url}{sep}options=-c%20idle_session_timeout%3D1000")
    ledger = Ledger(store)
    with ledger.lease("s"):
        row = lease_connection(store).execute("SHOW idle_session_timeout").fetchone()
        assert row is not None and row[0] == "0"
    with store._pool.connection() as pooled:  # the URL's setting holds elsewhere
        row = pooled.execute("SHOW idle_session_timeout").fetchone()
        assert row is not None and row[0] == "1s"


@pytest.mark.parametrize("overtaken", [True, False], ids=["another run commits", "no other run"])
async def test_an_agent_whose_lease_was_lost_fails_at_its_next_save(
    open_store: OpenStore, pg_url: str, overtaken: bool
) -> None:
    """The agent waits on its model when its lease connection dies; another run may take the
    session and commit a turn meanwhile. The agent's answer used to be saved over that turn."""
    store = open_store()
    ledger = AsyncLedger(Ledger(store))
    await ledger.save("s", TURN[:1])
    reached, release = asyncio.Event(), asyncio.Event()

    async def slow(*_: Any) -> str:
        reached.set()
        await release.wait()
        return "A's answer"

    agent = ReActAgent(ScriptedModel([slow]), store=ledger)
    events: list[object] = []

    async def run() -> None:
        async for event in agent.stream("A's question", "s"):
            events.append(event)

    task = asyncio.create_task(run())
    await asyncio.wait_for(reached.wait(), 10)
    kill_lease_connection(store, pg_url)
    other = Ledger(open_store())
    if overtaken:  # as a run in another process would, having taken the lease
        other.save("s", [*other.messages("s"), *TURN[1:3]])
    before = other.load("s")
    release.set()
    with pytest.raises(LeaseLostError):
        await task
    assert isinstance(events[-1], RunError) and events[-1].kind == "LeaseLostError"
    after = Ledger(open_store()).load("s")
    assert (after.version, after.context) == (before.version, before.context)
