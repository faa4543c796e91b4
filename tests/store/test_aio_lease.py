"""AsyncLedger's run lease: exclusive across tasks, and a task that has ended holds nothing.

A lease is tried in a worker thread, which the awaiting task cannot stop; a task cancelled while
its try ran used to end at once and leave the try's lease to be given back later, so a caller
retrying the moment the task ended got ``SessionBusyError`` (HTTP 409 from the server) for a
session nobody held. Here every cancelled task, at whatever step, is awaited and the lease at
once taken again with ``wait=0``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from agentledger.errors import SessionBusyError
from agentledger.store import Ledger, MemoryStore
from agentledger.store.aio import AsyncLedger
from tests.store.backends import LedgerOn, backend, ledger_on  # noqa: F401  (fixtures)


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
    (it takes the lease, or finds it busy) and wait for the task to end."""

    async def run() -> None:
        async with AsyncLedger(ledger).lease("s"):
            await asyncio.sleep(60)

    ledger.slow = True
    task = asyncio.create_task(run())
    await asyncio.to_thread(ledger.trying.wait, 10)
    task.cancel()
    ledger.slow = False
    ledger.go.set()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_lease_taken_after_its_task_was_cancelled_is_given_back_before_it_ends() -> None:
    ledger = _HandLeases()
    await _cancel_while_trying(ledger)
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


def _one_busy_worker(loop: asyncio.AbstractEventLoop) -> tuple[threading.Event, asyncio.Future]:
    """The loop's default executor cut to one worker, kept busy until the event is set."""
    from concurrent.futures import ThreadPoolExecutor

    loop.set_default_executor(ThreadPoolExecutor(1))
    worker_free = threading.Event()
    return worker_free, loop.run_in_executor(None, worker_free.wait, 10)


async def test_a_task_cancelled_while_it_gives_its_lease_back_gives_it_back_before_it_ends() -> (
    None
):
    """The release waits for a worker thread; a second cancel (as a cancel scope delivers)
    while it waited ended the task before it (merely shielded, the release went on without
    it), and a caller acting on the task's end found the session busy."""
    ledger = _HandLeases()
    holding = asyncio.Event()

    async def run() -> None:
        async with AsyncLedger(ledger).lease("s"):
            holding.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(run())
    await holding.wait()
    worker_free, busy = _one_busy_worker(asyncio.get_running_loop())
    task.cancel()
    await asyncio.sleep(0)  # the body ends; the release waits for the worker
    for _ in range(5):
        task.cancel()
        await asyncio.sleep(0)
    assert not task.done()  # it waits for its release
    worker_free.set()
    await busy
    with pytest.raises(asyncio.CancelledError):
        await task
    assert ledger.held == set()


async def test_a_task_cancelled_while_its_try_waits_for_a_worker_ends_at_once_holding_nothing() -> (
    None
):
    """A try still queued for a worker is called off: the task need not wait for a worker, and
    the try, when a worker reaches it, takes nothing."""
    ledger = _HandLeases()
    worker_free, busy = _one_busy_worker(asyncio.get_running_loop())

    async def run() -> None:
        async with AsyncLedger(ledger).lease("s"):
            await asyncio.Event().wait()

    task = asyncio.create_task(run())
    for _ in range(5):
        await asyncio.sleep(0)  # the try is queued behind the busy worker
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not busy.done()  # it did not wait for a worker
    worker_free.set()
    await busy
    await asyncio.to_thread(lambda: None)  # the one worker has reached the try, if it still ran
    assert not ledger.tried.is_set()  # it never tried
    async with AsyncLedger(ledger).lease("s"):
        assert ledger.held == {"s"}
    assert ledger.held == set()


# -- on every backend: the lease is free the moment a cancelled task has ended ------------------
async def _hold(ledger: AsyncLedger) -> None:
    async with ledger.lease("s"):
        await asyncio.Event().wait()


async def _cancelled(task: asyncio.Task[None]) -> None:
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_task_cancelled_at_any_step_of_taking_the_lease_has_let_it_go_when_it_ends(
    backend: str,  # noqa: F811
    ledger_on: LedgerOn,  # noqa: F811
) -> None:
    """Cancelled after 0, 1, 2 ... turns of the loop: before its try, while the try runs in
    its thread, as it returns, or holding the lease; then taken again at once."""
    ledger = AsyncLedger(ledger_on(backend))
    for turns in range(60):
        task = asyncio.create_task(_hold(ledger))
        for _ in range(turns):
            await asyncio.sleep(0)
        task.cancel()
        await _cancelled(task)
        async with ledger.lease("s", wait=0):  # SessionBusyError: the lease outlived the task
            pass


@contextmanager
def _next_try_stops(ledger: AsyncLedger, where: str) -> Iterator[tuple[threading.Event, ...]]:
    """The next try of the store's lease stops in its worker thread, ``before`` it takes the
    lease or ``after`` it took it, sets the first event and goes on once the second is set."""
    store, reached, go = ledger.store, threading.Event(), threading.Event()
    real = store.lease
    tries = 0

    @contextmanager
    def stopping(key, *, wait=0.0):  # type: ignore[no-untyped-def]
        nonlocal tries
        tries += 1
        if tries == 1 and where == "before":
            reached.set()
            assert go.wait(10)
        with real(key, wait=wait):
            if tries == 1 and where == "after":
                reached.set()
                assert go.wait(10)
            yield

    store.lease = stopping  # type: ignore[method-assign]
    try:
        yield reached, go
    finally:
        del store.lease  # the class's method again


@pytest.mark.parametrize("where", ["before", "after"])
async def test_a_task_cancelled_while_its_try_runs_has_let_the_lease_go_when_it_ends(
    backend: str,  # noqa: F811
    ledger_on: LedgerOn,  # noqa: F811
    where: str,
) -> None:
    ledger = AsyncLedger(ledger_on(backend))
    with _next_try_stops(ledger, where) as (reached, go):
        task = asyncio.create_task(_hold(ledger))
        await asyncio.to_thread(reached.wait, 10)
        task.cancel()
        go.set()
        await _cancelled(task)
        async with ledger.lease("s", wait=0):
            pass


# -- cancellations the caller did not issue itself: asyncio.timeout and a second cancel ----------
async def test_a_timeout_around_a_lease_wait_raises_timeout_error_and_leaves_the_holder_its_lease(
    backend: str,  # noqa: F811
    ledger_on: LedgerOn,  # noqa: F811
) -> None:
    holder = AsyncLedger(ledger_on(backend))
    waiter = AsyncLedger(holder.sync)
    async with holder.lease("s"):
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):
                async with waiter.lease("s", wait=float("inf")):
                    pass
        with pytest.raises(SessionBusyError):
            async with waiter.lease("s"):
                pass
    async with waiter.lease("s", wait=0):
        pass


async def test_a_timeout_expiring_while_a_try_runs_raises_timeout_error_after_it() -> None:
    ledger = _HandLeases()
    ledger.slow = True

    async def run() -> None:
        async with asyncio.timeout(None) as deadline:
            loop = asyncio.get_running_loop()
            loop.call_soon(_expire_when, ledger.trying, deadline, loop)
            async with AsyncLedger(ledger).lease("s"):
                pass

    task = asyncio.create_task(run())
    await asyncio.to_thread(ledger.trying.wait, 10)
    for _ in range(5):
        await asyncio.sleep(0)  # the timeout cancels the task while its try runs
    ledger.slow = False
    ledger.go.set()
    with pytest.raises(TimeoutError):
        await task
    assert ledger.held == set()


async def test_a_task_cancelled_again_while_its_try_runs_ends_cancelled_not_timed_out() -> None:
    """The timeout's cancellation and one from outside, both while the try runs: the timeout
    must not take the outside one for its own (``Task.uncancel`` counts both)."""
    ledger = _HandLeases()
    ledger.slow = True

    async def run() -> None:
        async with asyncio.timeout(None) as deadline:
            loop = asyncio.get_running_loop()
            loop.call_soon(_expire_when, ledger.trying, deadline, loop)
            async with AsyncLedger(ledger).lease("s"):
                pass

    task = asyncio.create_task(run())
    await asyncio.to_thread(ledger.trying.wait, 10)
    for _ in range(5):
        await asyncio.sleep(0)
    task.cancel()
    await asyncio.sleep(0)
    ledger.slow = False
    ledger.go.set()
    await _cancelled(task)
    assert ledger.held == set()


def _expire_when(
    event: threading.Event, deadline: asyncio.Timeout, loop: asyncio.AbstractEventLoop
) -> None:
    """Move ``deadline`` to now once ``event`` is set (checked on every turn of the loop)."""
    if event.is_set():
        deadline.reschedule(loop.time())
    else:
        loop.call_soon(_expire_when, event, deadline, loop)
