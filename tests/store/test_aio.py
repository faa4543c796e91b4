"""AsyncLedger: the same contract, awaited, without blocking the event loop."""

from __future__ import annotations

import asyncio

import pytest

from agentledger.errors import ConflictError, SessionBusyError
from agentledger.messages import Msg
from agentledger.store import MemoryStore
from agentledger.store.aio import AsyncLedger


async def test_async_round_trip_and_conflict() -> None:
    async with AsyncLedger("memory://") as ledger:
        msgs = [Msg.user("a", id="a")]
        report = await ledger.save("s", msgs)
        assert report.version == 1
        assert await ledger.messages("s") == msgs
        assert (await ledger.save("s", msgs)).noop
        with pytest.raises(ConflictError):
            await ledger.save("s", [*msgs, Msg.user("b")], expected_version=0)
        assert [i.session_id for i in await ledger.list_sessions()] == ["s"]
        sync_report = await ledger.sync_messages("s", [{"role": "user", "content": "x"}])
        assert sync_report.replaced == 1


async def test_async_lease_is_exclusive_across_tasks() -> None:
    store = MemoryStore()
    a, b = AsyncLedger(store), AsyncLedger(store)
    async with a.lease("s"):
        with pytest.raises(SessionBusyError):
            async with b.lease("s"):
                pass
    async with b.lease("s", wait=0.1):
        pass


async def test_concurrent_saves_of_different_sessions() -> None:
    ledger = AsyncLedger("memory://")
    reports = await asyncio.gather(*(ledger.save(f"s{i}", [Msg.user(str(i))]) for i in range(20)))
    assert {r.version for r in reports} == {1}
    assert len(await ledger.list_sessions()) == 20
