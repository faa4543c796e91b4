"""``AsyncLedger``: the ledger for asyncio code (the agent loop, the server).

Backends are synchronous and thread-safe, so each call runs in a worker thread
(``asyncio.to_thread``) and the event loop never blocks on disk or network I/O. Loaded messages
are decoded in that thread too (a ``Ledger`` defers it to the first read, which would otherwise
happen on the loop).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractContextManager, asynccontextmanager
from typing import Any

from agentledger._shield import shield_to_end, wait_done
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
        """``Ledger.close``: every later call, on this and every ``AsyncLedger`` sharing its
        ``Ledger``, raises ``ClosedError``."""
        await asyncio.to_thread(self.sync.close)

    async def load(
        self, session: str, *, tenant: str | None = None, version: int | None = None
    ) -> SessionState:
        """``Ledger.load``, every message decoded in the worker thread."""
        key = self.sync.key(session, tenant)
        version = self.sync._check_version(session, version)
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
        version = self.sync._check_version(session, version)
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
            _own_copy(messages),
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
        create: bool = False,
    ) -> SaveReport:
        # copy the caller's containers here, so later mutation cannot race the worker thread
        # (a TrackedList is passed as it is: see ``save``)
        check = self.sync._check_mapping
        lists = {n: _own_copy(m) for n, m in check("lists", lists).items()}
        values = dict(check("values", values))
        return await asyncio.to_thread(
            self.sync.save_state,
            session,
            lists=lists,
            values=values,
            tenant=tenant,
            expected_version=expected_version,
            drop_unnamed=drop_unnamed,
            create=create,
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

        A task that has ended holds nothing, so whoever awaited it may take the lease at once
        (``wait=0``). Cancelled while a try runs in its thread, the task waits for that try to
        end and gives back what it took before its ``CancelledError`` goes on: the cost is that
        the cancellation is delayed by at most one try, which never waits for a busy lease (on
        PostgreSQL one round trip, plus opening the lease connection on a store's first lease);
        a try still queued for a worker is called off instead. Cancelled while it gives the
        lease back, the task waits for that too. A cancellation received meanwhile is kept
        (``Task.cancelling`` counts it): ``asyncio.timeout`` still raises ``TimeoutError`` and
        a task cancelled twice still ends cancelled.
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
            # to its end, however often the task is cancelled meanwhile: merely shielded, the
            # task ended while the release still waited for its thread, and a caller retrying
            # at once found the session busy
            await shield_to_end(asyncio.to_thread(manager.__exit__, None, None, None))


def _own_copy(messages: Sequence[Msg]) -> Sequence[Msg]:
    """A list of messages the caller may go on changing while a worker thread saves it: a copy
    (after the check ``Ledger.save`` makes, so a bad argument is the same ``UserError``), or a
    ``TrackedList`` as it is."""
    messages = Ledger._check_messages(messages)
    return messages if isinstance(messages, TrackedList) else list(messages)


async def _enter_in_thread(manager: AbstractContextManager[None]) -> None:
    """``manager.__enter__()`` in a worker thread; a cancelled caller ends holding nothing.

    Cancelling the awaiting task cannot stop the thread: it may still take the lease after the
    task has gone. Left to a callback, the lease was given back a few milliseconds after the
    task ended, and a caller retrying at once got ``SessionBusyError`` (HTTP 409) for a session
    nobody held. So a cancelled caller calls off a try still queued for a worker, waits for one
    under way (which gives back what it takes itself), or gives back what the try took, and
    only then lets the cancellation go on.
    """
    attempt = _Attempt(manager)
    trying = asyncio.ensure_future(asyncio.to_thread(attempt))
    try:
        await asyncio.shield(trying)
    except asyncio.CancelledError:
        left = attempt.abandon()
        if left == _TAKEN:
            await shield_to_end(asyncio.to_thread(manager.__exit__, None, None, None))
        elif left == _QUEUED:
            trying.cancel()  # it never starts; if a worker has it already, it does nothing
        else:
            await wait_done(trying)
            if not trying.cancelled():
                trying.exception()  # read: a try nobody waits for fails quietly (busy, mostly)
        raise


_QUEUED, _TRYING, _TAKEN, _ABANDONED = "queued", "trying", "taken", "abandoned"


class _Attempt:
    """One ``manager.__enter__()`` to run in a worker thread, which its caller may abandon:
    a try abandoned before it starts never starts, and one abandoned while it runs gives back,
    in its thread, what it took. ``abandon`` says which it was, or that the lease is taken."""

    def __init__(self, manager: AbstractContextManager[None]) -> None:
        self._manager = manager
        self._state = _QUEUED
        self._guard = threading.Lock()

    def __call__(self) -> None:
        with self._guard:
            if self._state == _ABANDONED:
                return
            self._state = _TRYING
        self._manager.__enter__()
        with self._guard:
            if self._state == _TRYING:
                self._state = _TAKEN
                return
        self._manager.__exit__(None, None, None)  # abandoned while it tried

    def abandon(self) -> str:
        """The state the caller left the try in: ``_QUEUED`` (it will not start), ``_TRYING``
        (it gives back what it takes) or ``_TAKEN`` (the caller's to give back)."""
        with self._guard:
            left, self._state = self._state, _ABANDONED
        return left
