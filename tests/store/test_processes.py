"""Reliability across processes, for every persistent backend: SIGKILL mid-save and contention.

A writer killed at a random moment must leave a store that opens and loads exactly some
committed version, never a mix; two processes racing with ``expected_version`` must each either
win a version or get a conflict, and no committed message may be lost.

``AGENTLEDGER_KILLS`` sets the number of SIGKILLs of the lone writer per backend (default 50),
``AGENTLEDGER_CONCURRENT_KILLS`` those of the concurrent writers (default 12); the full
reliability run, ``python -m reliability``, sets 200 each.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from reliability import knob, record

from agentledger.store import Ledger
from tests.store.backends import backend_of, store_url
from tests.store.procs import SESSION, check_replanned, expected_list, run_children, spawn

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


KILLS = knob("AGENTLEDGER_KILLS", 50)
CONCURRENT_KILLS = knob("AGENTLEDGER_CONCURRENT_KILLS", 12)


def _backends() -> list[str]:
    found = []
    for name in ("jsonl", "sqlite"):
        if (ROOT / "src" / "agentledger" / "store" / f"{name}.py").exists():
            found.append(name)
    return found


@pytest.fixture(params=_backends())
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with store_url(request.param, tmp_path) as found:
        yield found


def _wait_for_progress(
    url: str, above: int, deadline: float, sessions: tuple[str, ...] = (SESSION,)
) -> None:
    # One ledger for the whole wait: a JSONL store then reads only what the writer appended
    # since its last look. A fresh one per poll would replay the whole log every 20 ms, and a
    # slow replay lets the writer grow the log further (the log keeps every version).
    with Ledger(url) as ledger:
        while time.monotonic() < deadline:
            if all(ledger.version(s) > above for s in sessions):
                return
            time.sleep(0.02)


def _kill(child: subprocess.Popen[str]) -> None:
    try:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()  # type: ignore[union-attr]
        child.stderr.close()  # type: ignore[union-attr]


def test_sigkill_mid_save_leaves_a_committed_version(persistent_url: str) -> None:
    url = persistent_url
    rng = random.Random(7)
    seen = 0
    kills = KILLS
    for _ in range(kills):
        child = spawn("crash", url)
        try:
            # let it commit at least once more, then kill it at a random moment
            _wait_for_progress(url, seen, time.monotonic() + 20)
            time.sleep(rng.uniform(0, 0.05))
        finally:
            _kill(child)
        with Ledger(url) as ledger:
            state = ledger.load(SESSION)
            assert state.version >= seen, "a committed version was lost"
            assert state.context == expected_list(state.version), (
                f"version {state.version} loaded a mix of versions"
            )
            seen = state.version
    print(f"\n{kills} kills, {seen} versions committed, every reopen a committed version")
    record(
        "crash",
        "SIGKILL mid-save, one writer",
        backend=backend_of(url),
        kills=kills,
        versions_committed=seen,
    )
    assert seen > kills  # the writer made progress between kills


def test_sigkill_of_concurrent_writers_leaves_committed_versions(persistent_url: str) -> None:
    """Four writers, two on each of two sessions (so they also conflict), killed one by one at
    random moments: each session loads a committed version no older than before, never a mix,
    and the survivors and the next writers go on saving."""
    url, rng = persistent_url, random.Random(11)
    sessions = ("crash-a", "crash-b")
    seen = dict.fromkeys(sessions, 0)
    rounds = max(1, CONCURRENT_KILLS // 4)
    for _ in range(rounds):
        children = [spawn("crash", url, sessions[i % 2]) for i in range(4)]
        try:
            _wait_for_progress(url, min(seen.values()), time.monotonic() + 30, sessions)
            for child in children:
                time.sleep(rng.uniform(0, 0.03))
                _kill(child)
        finally:
            for child in children:
                if child.stdout is not None and not child.stdout.closed:
                    _kill(child)
        with Ledger(url) as ledger:
            for session in sessions:
                state = ledger.load(session)
                assert state.version >= seen[session], f"{session}: a committed version was lost"
                assert state.context == expected_list(state.version), (
                    f"{session}: version {state.version} loaded a mix of versions"
                )
                seen[session] = state.version
    kills = rounds * 4
    print(f"\n{kills} kills of 4 concurrent writers, versions committed {seen}")
    record(
        "crash",
        "SIGKILL mid-save, 4 concurrent writers on 2 sessions",
        backend=backend_of(url),
        kills=kills,
        versions_committed=sum(seen.values()),
    )
    assert all(v > rounds for v in seen.values())  # every session made progress


@pytest.mark.parametrize("writers", [2, 4])
def test_contending_writers_lose_nothing(url: str, writers: int) -> None:
    names = [f"w{i}" for i in range(writers)]
    count = 40
    results = run_children("contend", url, names, count)
    won: list[int] = sorted(v for r in results for v in r["won"])  # type: ignore[union-attr]
    assert won == list(range(1, writers * count + 1)), "each version is won by exactly one writer"
    for r in results:
        assert r["attempts"] == count + r["conflicts"]  # every failed attempt was reported
    record(
        "contention",
        "processes with expected_version, one session",
        backend=backend_of(url),
        writers=writers,
        commits=len(won),
        conflicts=sum(r["conflicts"] for r in results),
        attempts=sum(r["attempts"] for r in results),
    )
    with Ledger(url) as ledger:
        final = ledger.messages("contended")
        assert sorted(m.id for m in final) == sorted(
            f"{n}-{k}" for n in names for k in range(count)
        )
        # the history agrees: version v holds exactly the first v messages of the final list
        for v in (1, len(final) // 2, len(final)):
            assert ledger.messages("contended", version=v) == final[:v]


def test_eight_writers_without_expected_version_lose_no_acknowledged_commit(url: str) -> None:
    """Each save re-plans against what the others committed: all 320 are acknowledged, and
    each one's version holds exactly what its writer saved (later ones may replace it)."""
    names = [f"w{i}" for i in range(8)]
    check_replanned(url, run_children("replan", url, names, 40), writers=8, count=40)
    record(
        "contention",
        "processes without expected_version, one session",
        backend=backend_of(url),
        writers=8,
        commits=320,
        acknowledged_commits_checked=320,
    )


def test_helpers_have_backends() -> None:
    """This module must never pass by testing nothing."""
    backends: Callable[[], list[str]] = _backends
    assert backends(), "no persistent backend found to test"


def test_run_lease_holds_across_processes_and_dies_with_its_holder(url: str) -> None:
    from agentledger.errors import SessionBusyError

    code = (
        "import sys, time\n"
        "from agentledger.store import Ledger\n"
        f"ledger = Ledger({url!r})\n"
        "with ledger.lease('leased'):\n"
        "    print('held', flush=True)\n"
        "    time.sleep(60)\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with Ledger(url) as ledger:
            with pytest.raises(SessionBusyError), ledger.lease("leased"):
                pass
            with ledger.lease("another-session"):
                pass
            holder.send_signal(signal.SIGKILL)
            holder.wait(timeout=10)
            with ledger.lease("leased", wait=5):  # the OS released the dead holder's lock
                pass
        record(
            "contention",
            "run lease across processes, holder SIGKILLed",
            backend=backend_of(url),
            busy_refusals=1,
            released_by_kill=1,
        )
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
