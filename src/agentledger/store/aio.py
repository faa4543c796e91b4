"""``AsyncLedger``: the ledger for asyncio code (the agent loop, the server).

Backends are synchronous and thread-safe, so each call runs in a worker thread
(``asyncio.to_thread``) and the event loop never blocks on disk or network I/O. Loaded messages
are decoded in that thread too (a ``Ledger`` defers it to the first read, which would otherwise
happen on the loop).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractContextManager, asynccontextmanager
from typing import Any

from agentledger.errors import SessionBusyError, UserError
from agentledger.messages import Msg
from agentledger.store.base import SearchHit, SessionInfo, Store, VersionInfo, check_wait
from agentledger.store.head_cache import DEFAULT_BYTES, DEFAULT_SESSIONS
from agentledger.store.ids import DEFAULT_TENANT, check_list_name
from agentledger.store.ledger import Ledger
from agentledger.store.state import CONTEXT, SaveReport, SessionState
from agentledger.store.tracked import TrackedList

__all__ = ["AsyncLedger"]


class AsyncLedger:
    """The async twin of ``Ledger``: the same methods, awaited. ``.sync`` is the sync ledger."""

    def __init__(
        self,
        url: str | Store | Ledger | None = None,
        *,
        tenant: str = DEFAULT_TENANT,
        cached_sessions: int = DEFAULT_SESSIONS,
        cached_bytes: int = DEFAULT_BYTES,
    ):
        """``url`` and the other arguments as for ``Ledger``; or a ``Ledger`` to share, used
        as it was made (the other arguments must then be left as they are)."""
        if isinstance(url, Ledger):
            given = (tenant, cached_sessions, cached_bytes)
            if given != (DEFAULT_TENANT, DEFAULT_SESSIONS, DEFAULT_BYTES):
                raise UserError("an AsyncLedger over a Ledger uses that Ledger's settings")
            self.sync = url
        else:
            self.sync = Ledger(
                url, tenant=tenant, cached_sessions=cached_sessions, cached_bytes=cached_bytes
            )

    @property
    def store(self) -> Store:
        return self.sync.store

    async def __aenter__(self) -> AsyncLedger:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await asyncio.to_thread(self.sync.close)

    async def load(
        self, session: str, *, tenant: str | None = None, version: int | None = None
    ) -> SessionState:
        """``Ledger.load``, every message decoded in the worker thread."""
        key = self.sync.key(session, tenant)
        return await asyncio.to_thread(self.sync._load, key, version, decode=True)

    async def messages(
        self,
        session: str,
        name: str = CONTEXT,
        *,
        tenant: str | None = None,
        version: int | None = None,
    ) -> list[Msg]:
        """``Ledger.messages``, decoded in the worker thread."""
        key, name = self.sync.key(session, tenant), check_list_name(name)
        state = await asyncio.to_thread(self.sync._load, key, version, decode=name)
        return state.lists.get(name, [])

    async def tracked(
        self, session: str, name: str = CONTEXT, *, tenant: str | None = None
    ) -> TrackedList:
        """``Ledger.tracked``, decoded in the worker thread."""
        return (await self._load_tracked(session, name, tenant, decode=name))[1]

    async def load_tracked(
        self, session: str, name: str = CONTEXT, *, tenant: str | None = None
    ) -> tuple[SessionState, TrackedList]:
        """``Ledger.load_tracked``, every message decoded in the worker thread (the tracked
        list holds the same messages as the state)."""
        return await self._load_tracked(session, name, tenant, decode=True)

    async def _load_tracked(
        self, session: str, name: str, tenant: str | None, *, decode: bool | str
    ) -> tuple[SessionState, TrackedList]:
        key, name = self.sync.key(session, tenant), check_list_name(name)
        return await asyncio.to_thread(self.sync._load_tracked, key, name, decode=decode)

    async def save(
        self,
        session: str,
        messages: Sequence[Msg],
        *,
        name: str = CONTEXT,
        tenant: str | None = None,
        expected_version: int | None = None,
    ) -> SaveReport:
        # A copy, so the event loop may go on changing its list; a TrackedList is passed as it
        # is (a change made while the save reads it makes that save's record void).
        return await asyncio.to_thread(
            self.sync.save,
            session,
            messages if isinstance(messages, TrackedList) else list(messages),
            name=name,
            tenant=tenant,
            expected_version=expected_version,
        )

    async def save_state(
        self,
        session: str,
        *,
        lists: Mapping[str, Sequence[Msg]] | None = None,
        values: Mapping[str, Any] | None = None,
        tenant: str | None = None,
        expected_version: int | None = None,
        drop_unnamed: bool = False,
    ) -> SaveReport:
        # copy the caller's containers here, so later mutation cannot race the worker thread
        # (a TrackedList is passed as it is: see ``save``)
        lists = {n: m if isinstance(m, TrackedList) else list(m) for n, m in (lists or {}).items()}
        values = dict(values or {})
        return await asyncio.to_thread(
            self.sync.save_state,
            session,
            lists=lists,
            values=values,
            tenant=tenant,
            expected_version=expected_version,
            drop_unnamed=drop_unnamed,
        )

    async def sync_messages(
        self,
        session: str,
        messages: Sequence[Any],
        *,
        name: str = CONTEXT,
        tenant: str | None = None,
    ) -> SaveReport:
        """``Ledger.sync`` (named so because ``sync`` is the sync ledger here)."""
        return await asyncio.to_thread(
            self.sync.sync, session, list(messages), name=name, tenant=tenant
        )

    async def exists(self, session: str, *, tenant: str | None = None) -> bool:
        return await asyncio.to_thread(self.sync.exists, session, tenant=tenant)

    async def version(self, session: str, *, tenant: str | None = None) -> int:
        return await asyncio.to_thread(self.sync.version, session, tenant=tenant)

    async def delete(self, session: str, *, tenant: str | None = None) -> bool:
        return await asyncio.to_thread(self.sync.delete, session, tenant=tenant)

    async def list_sessions(
        self,
        *,
        tenant: str | None = None,
        limit: int | None = None,
        offset: int = 0,
        after: SessionInfo | str | None = None,
    ) -> list[SessionInfo]:
        """See ``Ledger.list_sessions``: page with ``after`` (a row or its ``cursor``)."""
        return await asyncio.to_thread(
            self.sync.list_sessions, tenant=tenant, limit=limit, offset=offset, after=after
        )

    async def history(self, session: str, *, tenant: str | None = None) -> list[VersionInfo]:
        return await asyncio.to_thread(self.sync.history, session, tenant=tenant)

    async def fork(
        self,
        session: str,
        new_session: str,
        *,
        at_version: int | None = None,
        tenant: str | None = None,
        new_tenant: str | None = None,
    ) -> SaveReport:
        return await asyncio.to_thread(
            self.sync.fork,
            session,
            new_session,
            at_version=at_version,
            tenant=tenant,
            new_tenant=new_tenant,
        )

    async def purge_history(
        self, session: str, *, keep_last: int = 1, tenant: str | None = None
    ) -> int:
        return await asyncio.to_thread(
            self.sync.purge_history, session, keep_last=keep_last, tenant=tenant
        )

    async def search(
        self, query: str, *, tenant: str | None = None, limit: int = 20
    ) -> list[SearchHit]:
        return await asyncio.to_thread(self.sync.search, query, tenant=tenant, limit=limit)

    @asynccontextmanager
    async def lease(
        self, session: str, *, tenant: str | None = None, wait: float = 0.0
    ) -> AsyncIterator[None]:
        """Hold the session's run lease for the body of an ``async with``.

        Waiting for a busy lease happens on the event loop (a try in a worker thread, then an
        ``asyncio.sleep``), never inside a worker thread: runs queued on one busy thread would
        otherwise fill the default executor and starve the holder's own loads and saves, so
        every waiter ran into its deadline (HTTP 409) while the run it waited for stood still.
        A task cancelled while a try runs does not leak the lease that try may still take, nor
        does one cancelled while the lease is given back.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + check_wait(wait)
        pause = 0.005
        while True:
            manager = self.sync.lease(session, tenant=tenant, wait=0.0)
            try:
                await _enter_in_thread(manager)
                break
            except SessionBusyError:
                left = deadline - loop.time()
                if left <= 0:
                    raise
                await asyncio.sleep(min(pause, left))
                pause = min(pause * 2, 0.05)
        try:
            yield
        finally:
            # shielded: a caller cancelled while the release waits for a worker thread still
            # gives the lease back (unshielded, the queued release was dropped, and the session
            # stayed busy for as long as the cancellation's traceback kept the manager alive)
            await asyncio.shield(asyncio.to_thread(manager.__exit__, None, None, None))


async def _enter_in_thread(manager: AbstractContextManager[None]) -> None:
    """``manager.__enter__()`` in a worker thread, given back if the caller stops waiting.

    Cancelling the awaiting task cannot stop the thread: it may still take the lease after the
    task has gone, and nothing but the garbage collector, if it ever closed the context manager,
    would release it: the session stayed busy (every later run a ``SessionBusyError``, HTTP
    409) for as long as an error's traceback kept the manager alive. So the try is shielded, and
    a cancelled caller leaves a callback that releases whatever the try took when it ends.
    """
    trying = asyncio.ensure_future(asyncio.to_thread(manager.__enter__))
    try:
        await asyncio.shield(trying)
    except asyncio.CancelledError:
        trying.add_done_callback(functools.partial(_give_back, manager))
        raise


def _give_back(manager: AbstractContextManager[None], trying: asyncio.Future[None]) -> None:
    """Release the lease ``trying`` took, if it took it (for a cancelled ``_enter_in_thread``)."""
    if trying.cancelled() or trying.exception() is not None:  # reads the error: none is logged
        return
    asyncio.get_running_loop().run_in_executor(None, manager.__exit__, None, None, None)
