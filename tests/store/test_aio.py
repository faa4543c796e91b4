"""AsyncLedger: the same contract, awaited, without blocking the event loop."""

from __future__ import annotations

import asyncio

import pytest

from agentledger.errors import ConflictError, SessionBusyError
from agentledger.messages import Msg
from agentledger.store import MemoryStore
from agentledger.store.aio import AsyncLedger
from agentledger.store.planner import diff_list as planner_diff_list


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


async def test_a_tracked_list_keeps_its_record_through_the_async_ledger(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ledger = AsyncLedger("memory://")
    await ledger.save("s", [Msg.user(f"m{i}", id=f"m{i}") for i in range(50)])
    live = await ledger.tracked("s")
    compared: list[int] = []
    real = planner_diff_list

    def spy(committed, new, known=(), *, unchanged=0):  # type: ignore[no-untyped-def]
        compared.append(len(new) - unchanged)
        return real(committed, new, known, unchanged=unchanged)

    monkeypatch.setattr("agentledger.store.ledger.diff_list", spy)
    live.append(Msg.assistant("reply", id="r"))
    assert (await ledger.save("s", live)).appended == 1
    assert compared == [1]  # the list was passed as it is, its record intact
    assert await ledger.messages("s") == list(live)
    live.append(Msg.assistant("another", id="r2"))
    await ledger.save_state("s", lists={"context": live}, values={"k": 1})
    assert compared == [1, 1]  # save_state passes it as it is too
    assert await ledger.messages("s") == list(live)
