"""PostgreSQL helpers for ``test_postgres.py``: server discovery, throwaway schemas, WAL
accounting, the worker functions that child processes run, and the measurements
(``python -m tests.store.pg`` prints them).

The tests use ``AGENTLEDGER_TEST_POSTGRES`` (default ``postgresql://postgres@127.0.0.1:5432/test``).
When no server answers they skip, naming the URL and the error, except under ``CI=true``,
where they fail: CI must never pass by skipping.

Workers run in fresh interpreters (``python -m tests.store.pg WORKER JSON``, see ``spawn``)
so that a SIGKILL hits a real process with its own connections, as a crashed worker on another
host would.
"""

from __future__ import annotations

import functools
import json
import os
import random
import select
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from agentledger.errors import ConflictError, SessionBusyError
from agentledger.messages import Msg
from agentledger.store import Ledger
from agentledger.store.postgres import PostgresStore

ENV = "AGENTLEDGER_TEST_POSTGRES"
DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
ROOT = Path(__file__).resolve().parents[2]


def server_url() -> str:
    return os.environ.get(ENV) or DEFAULT_URL


@functools.cache
def _problem(url: str) -> str | None:
    try:
        with psycopg.connect(url, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:  # any failure means "no usable server"
        return f"{type(exc).__name__}: {' '.join(str(exc).split())}"
    return None


def require_server() -> str:
    """The server URL; skip (or, under CI, fail) with the reason if it cannot be reached."""
    url = server_url()
    problem = _problem(url)
    if problem is not None:
        message = f"no PostgreSQL server at {url} ({problem}); set {ENV} to a reachable one"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"{message}. CI=true: refusing to skip", pytrace=False)
        pytest.skip(message)
    return url


def admin(url: str) -> psycopg.Connection[Any]:
    return psycopg.connect(url, autocommit=True)


@contextmanager
def fresh_schema(url: str) -> Iterator[str]:
    """A uniquely named schema, dropped afterwards with everything in it."""
    name = f"agentledger_test_{uuid.uuid4().hex[:12]}"
    try:
        yield name
    finally:
        with admin(url) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def wal_lsn(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint").fetchone()
    assert row is not None
    return int(row[0])


def min_wal(
    conn: psycopg.Connection[Any],
    action: Callable[[], object],
    *,
    below: int = 1,
    budget: float = 20,
) -> int:
    """The fewest WAL bytes written around ``action``, repeated until fewer than ``below``
    bytes or ``budget`` seconds.

    The WAL position is server-wide, so other clients (another test run on the same server) and
    autovacuum add noise. Noise only ever adds bytes: an action that writes nothing shows 0 in a
    quiet moment, and one that writes more than ``below`` shows it on every try.
    """
    deadline = time.monotonic() + budget
    best = None
    while True:
        before = wal_lsn(conn)
        action()
        delta = wal_lsn(conn) - before
        best = delta if best is None else min(best, delta)
        if best < below or time.monotonic() > deadline:
            return best
        time.sleep(0.05)  # let a burst of someone else's writes pass


def terminate(url: str, pid: int, timeout: float = 10.0) -> None:
    """Terminate a backend from another connection and wait until it is gone."""
    with admin(url) as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", [pid])
        deadline = time.monotonic() + timeout
        while conn.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone():
            assert time.monotonic() < deadline, f"backend {pid} did not exit"
            time.sleep(0.01)


# -- realistic message text -------------------------------------------------------------
_rng = random.Random(0)
_VOCABULARY = [
    "".join(_rng.choice("etaoinshrdlucmfwypvbgkjqxz") for _ in range(_rng.randint(2, 10)))
    for _ in range(5000)
]
_WEIGHTS = [1 / (rank + 1) for rank in range(len(_VOCABULARY))]  # Zipf, like natural text
_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def prose(chars: int, seed: int) -> str:
    """About ``chars`` characters of word-like text that compresses like prose (about 2x)."""
    rng = random.Random(seed)
    words = rng.choices(_VOCABULARY, _WEIGHTS, k=chars // 4)
    return " ".join(words)[:chars]


def message(i: int, chars: int = 1130) -> Msg:
    """One message whose stored body is about 1.25 KB (at the default size)."""
    at = _EPOCH + timedelta(seconds=i)
    make = Msg.assistant if i % 2 else Msg.user
    return make(prose(chars, seed=i), id=f"m{i:06d}", created_at=at)


# -- child processes -----------------------------------------------------------------------
def spawn(worker: str, **kwargs: Any) -> subprocess.Popen[str]:
    """Run ``worker(**kwargs)`` from this module in a new interpreter; it talks JSON lines."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.store.pg", worker, json.dumps(kwargs)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])},
    )


def read_line(proc: subprocess.Popen[str], timeout: float) -> dict[str, Any] | None:
    """The child's next JSON line, or None if it printed nothing within ``timeout``."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    if not ready:
        return None
    line = proc.stdout.readline()
    return json.loads(line) if line else None


def reap(procs: list[subprocess.Popen[str]]) -> None:
    """Kill and wait for every child still running (used in ``finally``)."""
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()


def child_main() -> None:
    worker = globals()[sys.argv[1]]
    worker(**json.loads(sys.argv[2]))


def _say(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def _ledger(url: str, schema: str) -> Ledger:
    return Ledger(PostgresStore(url, schema=schema, pool_min=1, pool_max=2))


def appender(url: str, schema: str, session: str, count: int, start_at: float) -> None:
    """Append ``count`` messages to ``session`` one save at a time; report the time taken."""
    with _ledger(url, schema) as ledger:
        msgs = ledger.messages(session)
        time.sleep(max(0.0, start_at - time.time()))
        began = time.perf_counter()
        for _ in range(count):
            msgs.append(message(len(msgs)))
            report = ledger.save(session, msgs)
            assert report.appended == 1 and not report.noop
        _say(saves=count, seconds=time.perf_counter() - began)


def contender(url: str, schema: str, session: str, tag: str, saves: int) -> None:
    """Append ``saves`` messages with ``expected_version``, retrying after each conflict.

    Every attempt has its own message id, so the parent can check that exactly the attempts
    reported as committed are in the final list, and no attempt reported as a conflict is.
    """
    committed: list[str] = []
    conflicted: list[str] = []
    with _ledger(url, schema) as ledger:
        attempt = 0
        while len(committed) < saves:
            attempt += 1
            state = ledger.load(session)
            msg_id = f"{tag}-{attempt}"
            msgs = [*state.context, Msg.user(f"{tag} attempt {attempt}", id=msg_id)]
            try:
                ledger.save(session, msgs, expected_version=state.version)
            except ConflictError:
                conflicted.append(msg_id)
            else:
                committed.append(msg_id)
    _say(committed=committed, conflicted=conflicted)


def shifter(url: str, schema: str, session: str, tag: str, saves: int) -> None:
    """Like ``contender``, but each attempt edits, deletes, slides or inserts at the front
    (closing rows, raising a floor, putting a rank below the first) with ``expected_version``;
    reports, for each attempt that committed, the version and the ids it saved."""
    committed: list[tuple[int, list[str]]] = []
    conflicts = 0
    with _ledger(url, schema) as ledger:
        attempt = 0
        while len(committed) < saves:
            attempt += 1
            state = ledger.load(session)
            msgs = list(state.context)
            new = Msg.user(f"{tag} attempt {attempt}", id=f"{tag}-{attempt}")
            shift = attempt % 4
            if shift == 0:  # replace the last message
                msgs[-1] = new
            elif shift == 1 and len(msgs) > 2:  # delete the middle one, append
                del msgs[len(msgs) // 2]
                msgs.append(new)
            elif shift == 2:  # slide
                msgs = [*msgs[1:], new]
            else:  # insert at the front
                msgs.insert(0, new)
            try:
                report = ledger.save(session, msgs, expected_version=state.version)
            except ConflictError:
                conflicts += 1
            else:
                committed.append((report.version, [m.id for m in msgs]))
    _say(committed=committed, conflicts=conflicts)


def lease_holder(url: str, schema: str, session: str, wait: float, hold: float) -> None:
    """Try to take the run lease; say whether it was taken, then hold it for ``hold`` s."""
    with _ledger(url, schema) as ledger:
        began = time.monotonic()
        try:
            with ledger.lease(session, wait=wait):
                _say(held=True, waited=time.monotonic() - began, pid=os.getpid())
                time.sleep(hold)
        except SessionBusyError as exc:
            _say(held=False, waited=time.monotonic() - began, error=str(exc))


# -- measurements ---------------------------------------------------------------------------
def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def quiet(conn: psycopg.Connection[Any], schema: str) -> None:
    """Vacuum the schema's tables once and keep autovacuum off them, so that the server-wide
    WAL position moves only for the saves being measured."""
    rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", [schema])
    for (table,) in rows.fetchall():
        conn.execute(f'ALTER TABLE "{schema}"."{table}" SET (autovacuum_enabled = false)')
        conn.execute(f'VACUUM (ANALYZE) "{schema}"."{table}"')


def measure_save_costs(
    url: str, schema: str, *, size: int = 12_000, repeats: int = 30
) -> dict[str, dict[str, float]]:
    """Median WAL bytes and milliseconds per save at ``size`` messages of ~1.25 KB.

    ``append`` adds one message, ``replace`` swaps the message in the middle, ``noop`` saves
    the unchanged list, ``delete`` drops the message in the middle, ``window`` drops the first
    message and appends one, ``summary`` replaces the first 50 messages with one; ``load``
    reads the whole session through a new handle.
    """
    msgs = [message(i) for i in range(size)]
    out: dict[str, dict[str, float]] = {}
    with _ledger(url, schema) as ledger, admin(url) as conn:
        ledger.save("bench", msgs)
        quiet(conn, schema)

        def run(name: str, change: Callable[[int], None]) -> None:
            wal, ms, body = [], [], []
            for r in range(repeats):
                change(r)
                before = wal_lsn(conn)
                began = time.perf_counter()
                report = ledger.save("bench", msgs)
                ms.append((time.perf_counter() - began) * 1000)
                wal.append(wal_lsn(conn) - before)
                body.append(report.bytes_written)
            out[name] = {
                "wal_bytes": _median(wal),
                "wal_bytes_min": min(wal),
                "ms": _median(ms),
                "body_bytes": _median(body),
            }

        run("append", lambda r: msgs.append(message(size + r)))
        run("replace", lambda r: msgs.__setitem__(size // 2, message(1_000_000 + r)))
        run("noop", lambda r: None)
        run("delete", lambda r: msgs.__delitem__(len(msgs) // 2))

        def window(r: int) -> None:
            del msgs[0]
            msgs.append(message(2_000_000 + r))

        def summary(r: int) -> None:
            msgs[:50] = [Msg.system(f"summary {r}", id=f"summary{r}")]

        run("window", window)
        run("summary", summary)
        loads = []
        for _ in range(5):
            with _ledger(url, schema) as other:
                began = time.perf_counter()
                assert len(other.messages("bench")) == len(msgs)
                loads.append((time.perf_counter() - began) * 1000)
        out["load"] = {"ms": _median(loads), "messages": len(msgs)}
    return out


def measure_throughput(url: str, schema: str, *, processes: int = 8, saves: int = 100) -> float:
    """Committed appends per second with ``processes`` workers, each on its own session."""
    with _ledger(url, schema) as ledger:
        for p in range(processes):
            ledger.save(f"tp{p}", [message(i) for i in range(100)])
    start_at = time.time() + 3.0  # every worker connected and loaded before the clock starts
    procs = [
        spawn("appender", url=url, schema=schema, session=f"tp{p}", count=saves, start_at=start_at)
        for p in range(processes)
    ]
    try:
        reports = [read_line(proc, timeout=300) for proc in procs]
        assert all(r is not None for r in reports), reports
        return processes * saves / max(r["seconds"] for r in reports if r)
    finally:
        reap(procs)


if __name__ == "__main__":
    if len(sys.argv) > 2:  # a child process started by ``spawn``
        child_main()
    else:  # python -m tests.store.pg: print the figures for the report
        with fresh_schema(server_url()) as _schema:
            print(json.dumps(measure_save_costs(server_url(), _schema), indent=2))
        with fresh_schema(server_url()) as _schema:
            print(f"{measure_throughput(server_url(), _schema):.0f} appends/s across 8 sessions")
