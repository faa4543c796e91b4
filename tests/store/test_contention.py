"""Contention inside one process, on every persistent backend: threads and asyncio tasks saving,
forking and reading one session, with and without ``expected_version``, and under the run lease.

(Across processes: ``test_processes.py`` and ``test_postgres.py``.) Each writer opens its own
ledger on the same store, as separate workers of one service would. Every attempt carries its
own message id, so the final state can be checked against every acknowledged commit: each
committed id exactly once and in its version, no conflicted attempt anywhere, every read and
every fork a prefix of the final list.

``AGENTLEDGER_CONTENTION_SAVES`` sets the commits per writer (default 10; the full reliability
run sets 100).
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from reliability import knob, record

from agentledger import AsyncLedger
from agentledger.errors import ConflictError
from agentledger.messages import Msg
from agentledger.store import Ledger
from tests.store.backends import backend_of
from tests.store.procs import REPLANNED, check_replanned, replan_saves

SAVES = knob("AGENTLEDGER_CONTENTION_SAVES", 10)
WRITERS = 4
pytestmark = pytest.mark.slow


def _in_threads(count: int, work: Callable[[int], Any]) -> list[Any]:
    """Run ``work(i)`` for i < count in threads started together; re-raise the first error."""
    results: list[Any] = [None] * count
    errors: list[BaseException] = []
    barrier = threading.Barrier(count)

    def run(i: int) -> None:
        try:
            barrier.wait(30)
            results[i] = work(i)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    if errors:
        raise errors[0]
    return results


def _check_appends(url: str, committed: list[str], conflicted: list[str]) -> list[str]:
    """The session holds each committed id once, nothing conflicted, and version v is exactly
    the first v messages (each commit appended one): no acknowledged commit lost or doubled."""
    with Ledger(url) as ledger:
        final = [m.id for m in ledger.messages("hot")]
        assert sorted(final) == sorted(committed), "the final list is not the committed ids"
        assert not set(conflicted) & set(final), "an attempt reported as a conflict committed"
        assert ledger.version("hot") == len(final)
        for v in sorted({1, len(final) // 2, len(final)}):
            assert [m.id for m in ledger.messages("hot", version=v)] == final[:v]
    return final


def test_threads_with_expected_version_readers_and_forks(persistent_url: str) -> None:
    url = persistent_url
    reads: list[tuple[int, list[str]]] = []
    forks: list[list[str]] = []
    done = threading.Event()

    def writer(i: int) -> dict[str, list[str]]:
        committed, conflicted = [], []
        with Ledger(url) as ledger:
            attempt = 0
            while len(committed) < SAVES:
                attempt += 1
                state = ledger.load("hot")
                msg_id = f"w{i}-{attempt}"
                msgs = [*state.context, Msg.user(msg_id, id=msg_id, created_at=None)]
                try:
                    ledger.save("hot", msgs, expected_version=state.version)
                except ConflictError:
                    conflicted.append(msg_id)
                else:
                    committed.append(msg_id)
        return {"committed": committed, "conflicted": conflicted}

    def reader_and_forker(i: int) -> None:
        rng = random.Random(i)
        with Ledger(url) as ledger:
            n = 0
            while not done.is_set():
                state = ledger.load("hot")
                reads.append((state.version, [m.id for m in state.context]))
                if state.version and rng.random() < 0.2:
                    n += 1
                    ledger.fork("hot", f"fork-{i}-{n}")
                    forks.append([m.id for m in ledger.messages(f"fork-{i}-{n}")])
                time.sleep(0.001)

    finished: list[int] = []

    def work(i: int) -> Any:
        if i >= WRITERS:
            return reader_and_forker(i)
        result = writer(i)
        finished.append(i)
        if len(finished) == WRITERS:
            done.set()  # the readers stop once every writer is through
        return result

    results = _in_threads(WRITERS + 2, work)[:WRITERS]
    committed = [m for r in results for m in r["committed"]]
    conflicted = [m for r in results for m in r["conflicted"]]
    final = _check_appends(url, committed, conflicted)
    for version, ids in reads:  # every read saw a committed version, whole
        assert ids == final[:version], f"a read at version {version} saw a mix"
    for ids in forks:
        assert ids == final[: len(ids)], "a fork copied something never committed"
    record(
        "contention",
        "threads with expected_version, one session, with readers and forks",
        backend=backend_of(url),
        writers=WRITERS,
        commits=len(committed),
        conflicts=len(conflicted),
        reads_checked=len(reads),
        forks_checked=len(forks),
    )


def test_threads_without_expected_version_lose_no_acknowledged_commit(persistent_url: str) -> None:
    """Each save re-plans against what the others committed: every one is acknowledged, and
    each acknowledged version holds exactly what its writer saved."""
    url = persistent_url
    results = _in_threads(WRITERS, lambda i: replan_saves(url, f"w{i}", SAVES))
    check_replanned(url, results, writers=WRITERS, count=SAVES)
    record(
        "contention",
        "threads without expected_version, one session",
        backend=backend_of(url),
        writers=WRITERS,
        commits=WRITERS * SAVES,
    )


async def _task_writer(ledger: AsyncLedger, tag: str, expected: bool) -> dict[str, Any]:
    """Append ``SAVES`` messages to "hot" with ``expected_version`` (retrying conflicts), or
    to the ``REPLANNED`` session without it."""
    session = "hot" if expected else REPLANNED
    committed: list[str] = []
    conflicted: list[str] = []
    versions: list[tuple[int, list[str]]] = []
    attempt = 0
    while len(committed) < SAVES:
        attempt += 1
        state = await ledger.load(session)
        await asyncio.sleep(0)  # let the other tasks load the same version
        msg_id = f"{tag}-{attempt}"
        msgs = [*state.context, Msg.user(msg_id, id=msg_id, created_at=None)]
        try:
            report = await ledger.save(
                session, msgs, expected_version=state.version if expected else None
            )
        except ConflictError:
            conflicted.append(msg_id)
        else:
            committed.append(msg_id)
            versions.append((report.version, [m.id for m in msgs]))
    return {"committed": committed, "conflicted": conflicted, "versions": versions}


@pytest.mark.parametrize("expected", [True, False], ids=["expected_version", "replanned"])
async def test_asyncio_tasks_lose_no_acknowledged_commit(
    persistent_url: str, expected: bool
) -> None:
    """Tasks on one event loop, each with its own ``AsyncLedger`` on the same store."""
    url = persistent_url
    ledgers = [AsyncLedger(url) for _ in range(WRITERS)]
    try:
        results = await asyncio.gather(
            *(_task_writer(led, f"t{i}", expected) for i, led in enumerate(ledgers))
        )
    finally:
        for led in ledgers:
            await led.close()
    committed = [m for r in results for m in r["committed"]]
    conflicted = [m for r in results for m in r["conflicted"]]
    if expected:
        _check_appends(url, committed, conflicted)
    else:
        assert not conflicted, "a save without expected_version gave up with a conflict"
        saved = [(v, ids) for r in results for v, ids in r["versions"]]
        check_replanned(url, [{"saved": saved, "error": None}], writers=1, count=len(saved))
    record(
        "contention",
        "asyncio tasks, one session",
        backend=backend_of(url),
        expected_version=expected,
        tasks=WRITERS,
        commits=len(committed),
        conflicts=len(conflicted),
    )


class _Exclusive:
    """Counts who is inside a leased section; fails if two ever are."""

    def __init__(self) -> None:
        self.inside = 0
        self.busy = 0
        self.lock = threading.Lock()

    def enter(self) -> None:
        with self.lock:
            self.inside += 1
            assert self.inside == 1, "two holders of one run lease at once"

    def leave(self) -> None:
        with self.lock:
            self.inside -= 1

    def refused(self) -> None:
        with self.lock:
            self.busy += 1


def _leased_save(ledger: Ledger, tag: str, guard: _Exclusive) -> None:
    """Under the lease nobody else commits: a save with ``expected_version`` never conflicts."""
    guard.enter()
    try:
        state = ledger.load("leased")
        msgs = [*state.context, Msg.user(tag, id=tag, created_at=None)]
        assert ledger.save("leased", msgs, expected_version=state.version).version == (
            state.version + 1
        )
    finally:
        guard.leave()


def _check_leased(url: str, tags: list[str]) -> None:
    with Ledger(url) as ledger:
        assert sorted(m.id for m in ledger.messages("leased")) == sorted(tags)
        assert ledger.version("leased") == len(tags)


def test_the_run_lease_excludes_threads_and_tasks(persistent_url: str) -> None:
    """Threads, then asyncio tasks, each with its own ledger, take the lease without waiting
    (a busy lease is refused typed, and retried): never two holders, no commit lost."""
    from agentledger.errors import SessionBusyError

    url, guard = persistent_url, _Exclusive()

    def thread(i: int) -> list[str]:
        done = []
        with Ledger(url) as ledger:
            while len(done) < SAVES:
                try:
                    with ledger.lease("leased"):
                        _leased_save(ledger, f"th{i}-{len(done)}", guard)
                except SessionBusyError:
                    guard.refused()
                    time.sleep(0.001)
                    continue
                done.append(f"th{i}-{len(done)}")
        return done

    tags = [t for got in _in_threads(WRITERS, thread) for t in got]

    async def task(i: int) -> list[str]:
        done = []
        async with AsyncLedger(url) as ledger:
            while len(done) < SAVES:
                try:
                    async with ledger.lease("leased"):
                        tag = f"task{i}-{len(done)}"
                        await asyncio.to_thread(_leased_save, ledger.sync, tag, guard)
                except SessionBusyError:
                    guard.refused()
                    await asyncio.sleep(0.001)
                    continue
                done.append(tag)
        return done

    async def tasks() -> list[list[str]]:
        return await asyncio.gather(*(task(i) for i in range(WRITERS)))

    tags += [t for got in asyncio.run(tasks()) for t in got]
    _check_leased(url, tags)
    record(
        "contention",
        "run lease: threads then asyncio tasks, one session",
        backend=backend_of(url),
        holders=2 * WRITERS,
        commits=len(tags),
        busy_refusals=guard.busy,
    )
