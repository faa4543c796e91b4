"""AsyncLedger: the same contract, awaited, without blocking the event loop."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from agentledger.errors import ConflictError, SessionBusyError
from agentledger.messages import Msg
from agentledger.store import Ledger, MemoryStore
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


class _HandLeases(Ledger):
    """A ledger whose leases only ``__exit__`` gives back (no generator a collector could
    close), and whose tries, while ``slow`` is set, wait for ``go`` before they try."""

    def __init__(self) -> None:
        super().__init__("memory://")
        self.slow = False
        self.trying, self.go, self.tried = threading.Event(), threading.Event(), threading.Event()
        self.held: set[str] = set()
        self._lock = threading.Lock()

    def lease(  # type: ignore[override]
        self, session: str, *, tenant: str | None = None, wait: float = 0.0
    ) -> _HandLease:
        return _HandLease(self, session)


class _HandLease:
    def __init__(self, ledger: _HandLeases, session: str) -> None:
        self.ledger, self.session = ledger, session

    def __enter__(self) -> None:
        ledger = self.ledger
        if ledger.slow:
            ledger.trying.set()
            assert ledger.go.wait(10)
        with ledger._lock:
            ledger.tried.set()
            if self.session in ledger.held:
                raise SessionBusyError(f"{self.session} is running")
            ledger.held.add(self.session)

    def __exit__(self, *exc: object) -> None:
        with self.ledger._lock:
            self.ledger.held.remove(self.session)


async def _cancel_while_trying(ledger: _HandLeases) -> None:
    """Start a lease of session s, cancel its task while the try runs, then let the try go on
    (it takes the lease, or finds it busy, with no task awaiting it) and end."""

    async def run() -> None:
        async with AsyncLedger(ledger).lease("s"):
            await asyncio.sleep(60)

    ledger.slow = True
    task = asyncio.create_task(run())
    await asyncio.to_thread(ledger.trying.wait, 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    ledger.slow, ledger.tried = False, threading.Event()
    ledger.go.set()
    await asyncio.to_thread(ledger.tried.wait, 10)
    await asyncio.sleep(0.05)  # time for the loop to see the try end and act on it


async def _until_free(ledger: _HandLeases, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while ledger.held and time.monotonic() < deadline:
        await asyncio.sleep(0.01)


async def test_a_lease_taken_after_its_task_was_cancelled_is_given_back() -> None:
    ledger = _HandLeases()
    await _cancel_while_trying(ledger)
    await _until_free(ledger)
    assert ledger.held == set()
    async with AsyncLedger(ledger).lease("s"):
        assert ledger.held == {"s"}


async def test_a_cancelled_try_that_found_the_lease_busy_leaves_the_holder_its_lease() -> None:
    ledger = _HandLeases()
    async with AsyncLedger(ledger).lease("s"):
        await _cancel_while_trying(ledger)
        assert ledger.held == {"s"}
        with pytest.raises(SessionBusyError):
            async with AsyncLedger(ledger).lease("s"):
                pass
    assert ledger.held == set()


async def test_concurrent_saves_of_different_sessions() -> None:
    ledger = AsyncLedger("memory://")
    reports = await asyncio.gather(*(ledger.save(f"s{i}", [Msg.user(str(i))]) for i in range(20)))
    assert {r.version for r in reports} == {1}
    assert len(await ledger.list_sessions()) == 20


async def test_a_tracked_list_keeps_its_record_through_the_async_ledger(
    compared: list[int],
) -> None:
    ledger = AsyncLedger("memory://")
    await ledger.save("s", [Msg.user(f"m{i}", id=f"m{i}") for i in range(50)])
    live = await ledger.tracked("s")
    compared.clear()
    live.append(Msg.assistant("reply", id="r"))
    assert (await ledger.save("s", live)).appended == 1
    assert compared == [1]  # the list was passed as it is, its record intact
    assert await ledger.messages("s") == list(live)
    live.append(Msg.assistant("another", id="r2"))
    await ledger.save_state("s", lists={"context": live}, values={"k": 1})
    assert compared == [1, 1]  # save_state passes it as it is too
    assert await ledger.messages("s") == list(live)
