"""``python -m bench.many_sessions``: what a store's operations cost with 100,000 sessions in it.

python -m bench.many_sessions                       # 100 then 100,000 sessions, SQLite and Postgres
python -m bench.many_sessions --quick               # 40 then 400 sessions (a smoke test)
python -m bench.many_sessions --backends sqlite --out docs/benchmarks.md

Each size gets a store of its own, filled first; then every operation runs on all of them,
taking turns call by call (``bench.measure.turn_order``), so that a slower stretch of the shared
machine falls on every size alike (measured one size after the other, minutes apart, the same
code's sub-millisecond ratios moved between 0.55x and 2.24x). Every session holds ``MESSAGES``
messages (user and assistant text of about 20 words drawn from a fixed vocabulary, so one
million messages at 100,000 sessions). Filling goes through the public API only: one
``Ledger.save(session, messages)`` per session (a new session is one commit), from one process
on SQLite (one writer at a time) and from ``--fill-workers`` processes on Postgres. Operations
measured at each size, medians over ``SAMPLES`` sessions picked at random (``CALLS`` calls for
``list_sessions`` and ``search``):

- ``save: new session``: ``Ledger.save`` of a new 10-message session;
- ``save: append``: ``Ledger.save`` of a session's messages plus one user/assistant turn;
- on SQLite, both saves again with every commit flushed (``synchronous=FULL``, SQLite's own
  default), after every other operation: a file's connections in one process keep ``FULL``
  once a store asks for it, so nothing measured after them would run at ``NORMAL``;
- ``load``: ``Ledger.messages(session)`` (every message then read);
- ``list_sessions``: the first page (50, the most recently updated), a page in the middle and the
  last page, each by ``offset`` (a page deep in the list costs its offset) and the middle and
  last ones also by cursor (``after=`` the row before the page: a range of the index), shown
  with the plans of the first page and of the last page by cursor;
- ``search``: a word held by the same 30 messages at every size (``needle``: the hits do not
  grow with the store), and a vocabulary word held by about 1% of the messages (the hits grow
  with the store), each with ``limit=20``, shown with its query plan.

The stores live under ``/tmp`` (SQLite) or in a schema of their own (Postgres), removed at the
end. Postgres tables are vacuumed and analyzed after each fill (``VACUUM (ANALYZE)``), as
autovacuum does after a bulk insert (PostgreSQL 13 on vacuums a table after inserts too): that
also merges the full-text index's pending list, which a search otherwise scans linearly.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from agentledger import Ledger, Msg
from agentledger.store.cursor import decode_cursor
from bench.measure import turn_order

__all__ = ["Figures", "main", "measure_backend", "render"]

MESSAGES = 10  # per session
SAMPLES = 100  # sessions sampled per operation (all of them at 100 sessions)
CALLS = 10  # calls per figure of list_sessions and search
PAGE = 50
NEEDLE = "needle"  # held by NEEDLE_HITS messages, whatever the store's size
NEEDLE_HITS = 30
VOCABULARY = 2000  # words; each message draws 20, so one word is in about 1% of the messages
FULL = (100, 100_000)
QUICK = (40, 400)
PG_ENV = "AGENTLEDGER_BENCH_POSTGRES"
FULL_NEW = "save: new session, synchronous=FULL"
FULL_APPEND = "save: append a turn, synchronous=FULL"
PG_DEFAULT = "postgresql://postgres@127.0.0.1:5432/test"
KEPT_HEADING = "## Many sessions"


def _word(i: int) -> str:
    """The ``i``-th vocabulary word: pronounceable, never a prefix of another."""
    consonants, vowels = "bdfgklmnprstvz", "aeiou"
    out = []
    for _ in range(3):
        i, c = divmod(i, len(consonants))
        i, v = divmod(i, len(vowels))
        out.append(consonants[c] + vowels[v])
    return "".join(out) + "x"


COMMON = _word(7)  # the word measured as the common search term


def session_messages(index: int, count: int = MESSAGES) -> list[Msg]:
    """Session ``index``'s messages: deterministic, ids included. The needle goes into the
    first message of each of the first ``NEEDLE_HITS`` sessions."""
    rng = random.Random(index)
    out = []
    for k in range(count):
        words = [_word(rng.randrange(VOCABULARY)) for _ in range(20)]
        if k == 0 and index < NEEDLE_HITS:
            words[3] = NEEDLE
        if k % 2 == 0 and index % 100 == 7:
            words[5] = COMMON  # a floor of hits for the common word even in a small store
        text = " ".join(words)
        make = Msg.user if k % 2 == 0 else Msg.assistant
        out.append(make(text, id=f"m{index}-{k}"))
    return out


def _name(index: int) -> str:
    return f"s{index:06d}"


# -- the stores ---------------------------------------------------------------------------
@dataclass
class Backend:
    name: str
    url: str
    fill_workers: int
    cleanup: Callable[[], None]
    explain: Callable[[Ledger, str, str], str]
    analyze: Callable[[], None] = lambda: None
    #: The same store with every commit flushed (SQLite's ``synchronous=FULL``), if it has one.
    full_url: str | None = None


def _sqlite(root: Path) -> Backend:
    path = root / "many.db"

    def explain(ledger: Ledger, kind: str, query: str) -> str:
        """The plan of the statement the store ran, captured with a trace callback."""
        store: Any = ledger.store
        statements: list[str] = []
        with store._read() as conn:  # the connection the next read on this thread reuses
            conn.set_trace_callback(statements.append)
        try:
            if kind == "search":
                ledger.search(query)
            else:
                ledger.list_sessions(limit=PAGE, after=query or None)
        finally:
            with store._read() as conn:
                conn.set_trace_callback(None)
        mark = "MATCH" if kind == "search" else "FROM sessions"
        sql = next((s for s in statements if mark in s), None)
        if sql is None:
            return "(the statement was not captured)"
        import sqlite3

        with sqlite3.connect(path) as conn:
            rows = conn.execute("EXPLAIN QUERY PLAN " + sql).fetchall()
        return "\n".join(f"{'  ' * _depth(rows, r)}{r[3]}" for r in rows)

    url = f"sqlite:///{path}"
    cleanup = partial(shutil.rmtree, root, True)
    return Backend("sqlite", url, 1, cleanup, explain, full_url=f"{url}?synchronous=full")


def _depth(rows: list[tuple[Any, ...]], row: tuple[Any, ...]) -> int:
    parents = {r[0]: r[1] for r in rows}
    depth, parent = 0, row[1]
    while parent in parents:
        depth, parent = depth + 1, parents[parent]
    return depth


def _postgres(workers: int) -> Backend:
    import psycopg

    base = os.environ.get(PG_ENV) or PG_DEFAULT
    schema = f"many_{uuid.uuid4().hex[:10]}"
    sep = "&" if "?" in base else "?"

    def cleanup() -> None:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    def analyze() -> None:
        with psycopg.connect(base, autocommit=True) as conn:
            for table in ("sessions", "messages", "versions", "session_values", "list_floors"):
                conn.execute(f'VACUUM (ANALYZE) "{schema}".{table}')

    def explain(ledger: Ledger, kind: str, query: str) -> str:
        q: Any = ledger.store._q  # type: ignore[attr-defined]
        args: dict[str, Any] = {"tenant": ledger.tenant, "limit": PAGE, "offset": 0}
        if kind == "search":
            return _explain_search(ledger, query)
        if query:  # a page after this cursor
            after = decode_cursor(query, ledger.tenant)
            sql = q.list_sessions_after
            args.update(updated_at=after.updated_at, session=after.session_id)
        else:
            sql = q.list_sessions
        with psycopg.connect(base, autocommit=True) as conn:
            return _plan(conn, sql, args)

    def _explain_search(ledger: Ledger, query: str) -> str:
        """The plans of the statements ``PostgresStore.search`` runs for ``query``, in order,
        each under the name of the question it asks (see that method)."""
        from agentledger.store.postgres import search_rows
        from agentledger.store.search_words import prefix_query

        q: Any = ledger.store._q  # type: ignore[attr-defined]
        names = {
            q.search_capped: "at most SEARCH_CAP matches (search_capped)",
            q.search_recent: "the latest sessions' first rows (search_recent)",
            q.search: "every match (search)",
        }
        out: list[str] = []
        with psycopg.connect(base, autocommit=True) as conn:

            def execute(sql: str, args: dict[str, Any]) -> list[Any]:
                out.append(f"-- {len(out) // 2 + 1}. {names[sql]}")
                out.append(_plan(conn, sql, args))
                return conn.execute(sql, args).fetchall()

            args = {"tenant": ledger.tenant, "query": prefix_query(query), "limit": 20}
            search_rows(q, args, execute)
        return "\n".join(out)

    return Backend("postgres", f"{base}{sep}schema={schema}", workers, cleanup, explain, analyze)


def _plan(conn: Any, sql: str, args: dict[str, Any]) -> str:
    rows = conn.execute("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + sql, args)
    return "\n".join(r[0] for r in rows.fetchall())


# -- filling ------------------------------------------------------------------------------
def _fill_range(url: str, start: int, stop: int) -> int:
    with Ledger(url) as ledger:
        for i in range(start, stop):
            ledger.save(_name(i), session_messages(i))
    return stop - start


def fill(backend: Backend, start: int, stop: int, log: Any = sys.stderr) -> float:
    """Save sessions ``start`` .. ``stop - 1``; return the seconds it took."""
    began = time.perf_counter()
    chunk = 2000
    ranges = [(i, min(i + chunk, stop)) for i in range(start, stop, chunk)]
    done = start
    if backend.fill_workers <= 1 or len(ranges) == 1:
        for a, b in ranges:
            done += _fill_range(backend.url, a, b)
            _progress(log, backend.name, done, stop, began)
    else:
        with ProcessPoolExecutor(backend.fill_workers) as pool:
            futures = [pool.submit(_fill_range, backend.url, a, b) for a, b in ranges]
            for f in futures:
                done += f.result()
                _progress(log, backend.name, done, stop, began)
    backend.analyze()
    return time.perf_counter() - began


def _progress(log: Any, name: str, done: int, stop: int, began: float) -> None:
    log.write(f"\r{name}: {done:,} / {stop:,} sessions ({time.perf_counter() - began:.0f} s)")
    if done == stop:
        log.write("\n")
    log.flush()


# -- measuring ----------------------------------------------------------------------------
@dataclass
class Figures:
    """Medians in seconds by operation, at one size; plans by search term."""

    sessions: int
    messages: int
    fill_seconds: float
    seconds: dict[str, float] = field(default_factory=dict)
    hits: dict[str, int] = field(default_factory=dict)
    plans: dict[str, str] = field(default_factory=dict)
    fill_workers: int = 1


#: One measured operation on one store: its name and its calls, one per sample.
Operation = tuple[str, list[Callable[[], Any]]]


def _operations(backend: Backend, ledger: Ledger, fig: Figures) -> Iterator[Operation]:
    """The operations measured on one store, in order: each a name and its calls, one per
    sample. Lazy: a step's calls are made once the steps before it ran (an append saves the
    messages the load read)."""
    sessions = fig.sessions
    picks = random.Random(sessions).sample(range(sessions), min(SAMPLES, sessions))
    fresh = iter(range(10_000_000 + sessions * 10, 10_000_000 + sessions * 12))

    def new_session(saver: Ledger, i: int) -> None:
        saver.save(f"new-{next(fresh)}", session_messages(10_000_000 + i))

    yield "save: new session", [partial(new_session, ledger, i) for i in picks]
    loaded: dict[int, list[Msg]] = {}

    def load(i: int) -> None:
        msgs = ledger.messages(_name(i))
        for m in msgs:
            m.content  # noqa: B018 - read every message, as a caller would
        loaded[i] = msgs

    yield "load", [partial(load, i) for i in picks]
    turn = session_messages(sessions + 1, 2)

    def append(saver: Ledger, i: int, tag: str = "") -> None:
        grown = [*loaded[i], *(m.replace(id=f"{m.id}-{i}{tag}") for m in turn)]
        saver.save(_name(i), grown)
        loaded[i] = grown  # a later append (the FULL one) appends to this

    yield "save: append a turn", [partial(append, ledger, i) for i in picks]
    total = len(ledger.list_sessions())
    for label, offset in (("first", 0), ("middle", total // 2), ("last", max(0, total - PAGE))):
        page = partial(ledger.list_sessions, limit=PAGE, offset=offset)
        yield f"list_sessions: {label} page", [page] * CALLS
        if offset:
            before = ledger.list_sessions(limit=1, offset=offset - 1)[0].cursor
            page = partial(ledger.list_sessions, limit=PAGE, after=before)
            yield f"list_sessions: {label} page by cursor", [page] * CALLS
    for label, term in (("rare word", NEEDLE), ("common word", COMMON)):
        yield f"search: {label}", [partial(ledger.search, term)] * CALLS
        fig.hits[label] = len(ledger.search(term, limit=1_000_000))
        fig.plans[label] = backend.explain(ledger, "search", term)
    fig.plans["list_sessions"] = backend.explain(ledger, "list", "")
    last = ledger.list_sessions(limit=1, offset=max(0, total - PAGE - 1))
    if last and total > PAGE:
        fig.plans["list_sessions by cursor"] = backend.explain(ledger, "list", last[0].cursor)
    if backend.full_url is not None:  # last: the file's connections stay FULL from here on
        with Ledger(backend.full_url) as full:
            yield FULL_NEW, [partial(new_session, full, i) for i in picks]
            yield FULL_APPEND, [partial(append, full, i, "f") for i in picks]


def measure(stores: list[tuple[Backend, Ledger, Figures]]) -> None:
    """Fill in each store's ``Figures``: every operation's calls on every store taking turns
    (``turn_order``), so that the shared machine's slower stretches fall on every size alike;
    a median of as many calls at each size."""
    steps = zip(*(_operations(*store) for store in stores), strict=True)
    for step in steps:
        names = {name for name, _ in step}
        if len(names) != 1:
            raise AssertionError(f"the stores measured different operations: {sorted(names)}")
        (name,) = names
        calls = [c for _, c in step]
        samples: list[list[float]] = [[] for _ in stores]
        for k in range(min(map(len, calls))):
            for i in turn_order(len(stores), k):
                began = time.perf_counter()
                calls[i][k]()
                samples[i].append(time.perf_counter() - began)
        for (_, _, fig), figures in zip(stores, samples, strict=True):
            fig.seconds[name] = statistics.median(figures)


def measure_backend(
    make: Callable[[], Backend], sizes: tuple[int, ...], log: Any = sys.stderr
) -> list[Figures]:
    """Fill one store per size (``make`` gives each its own), then measure them together."""
    backends: list[Backend] = []
    stores: list[tuple[Backend, Ledger, Figures]] = []
    try:
        for n in sizes:
            backend = make()
            backends.append(backend)
            seconds = fill(backend, 0, n, log)
            ledger = Ledger(backend.url)
            fig = Figures(n, n * MESSAGES, seconds, fill_workers=backend.fill_workers)
            stores.append((backend, ledger, fig))
            ledger.messages(_name(0))  # connect (Postgres opens its pool) before timing
        measure(stores)
        log.write(f"{backends[0].name} @ {', '.join(f'{n:,}' for n in sizes)} sessions measured\n")
        return [fig for _, _, fig in stores]
    finally:
        for _, ledger, _ in stores:
            ledger.close()
        for backend in backends:
            backend.cleanup()


# -- the report ---------------------------------------------------------------------------
def _ms(seconds: float) -> str:
    v = seconds * 1e3
    return f"{v:,.0f} ms" if v >= 100 else f"{v:.2f} ms" if v >= 1 else f"{v:.3f} ms"


_PLANNED = {
    "list_sessions": "list_sessions, first page",
    "list_sessions by cursor": "list_sessions, last page by cursor",
}


def render(results: dict[str, list[Figures]], command: str) -> str:
    lines = [
        f"{KEPT_HEADING} (issue 17)\n",
        f"Generated by `{command}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. "
        "Target: every operation at the large size within 1.2x of its cost at the small size. "
        "See `bench/many_sessions.py` for what each operation is and how the store was filled. "
        "Times are medians, each size's calls taking turns with the other's.\n",
    ]
    for name, figs in results.items():
        small, large = figs[0], figs[-1]
        lines += [
            f"\n### {name}: {small.sessions:,} vs {large.sessions:,} sessions "
            f"({large.messages:,} messages)\n",
            f"Filled through `Ledger.save`, one commit per session, from {large.fill_workers} "
            f"process{'es' if large.fill_workers > 1 else ''}, each size in a store of its "
            f"own: {small.sessions:,} sessions in {small.fill_seconds:.1f} s, "
            f"{large.sessions:,} in {large.fill_seconds:.0f} s "
            f"({large.sessions / large.fill_seconds:,.0f} sessions/s).\n",
            f"\n| operation | {small.sessions:,} sessions | {large.sessions:,} sessions | ratio "
            "| within 1.2x |",
            "|---|---:|---:|---:|---|",
        ]
        for op, a in small.seconds.items():
            b = large.seconds[op]
            r = b / a if a > 0 else float("inf")
            label = op
            if op.startswith("search: "):
                kind = op.removeprefix("search: ")
                label += f" ({small.hits[kind]:,} → {large.hits[kind]:,} hits)"
            verdict = "met" if r <= 1.2 else "**missed**"
            lines.append(f"| {label} | {_ms(a)} | {_ms(b)} | {r:.2f}x | {verdict} |")
        for kind, plan in large.plans.items():
            what = _PLANNED.get(kind, "search")
            term = {"rare word": NEEDLE, "common word": COMMON}.get(kind)
            lines += [
                f"\n{what}{f' for `{term}` ({kind})' if term else ''}, at "
                f"{large.sessions:,} sessions:\n",
                "```",
                plan,
                "```",
            ]
    return "\n".join(lines) + "\n"


def _write_section(out: Path, section: str) -> None:
    """Replace the report's many-sessions section (or append it), keeping everything else."""
    text = out.read_text() if out.exists() else ""
    start = text.find("\n" + KEPT_HEADING)
    if start < 0:
        out.write_text(text.rstrip("\n") + "\n\n" + section)
        return
    end = text.find("\n## ", start + 1)
    rest = text[end:] if end >= 0 else ""
    out.write_text(text[: start + 1] + section + rest)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.many_sessions",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--quick", action="store_true", help=f"{QUICK[0]} then {QUICK[1]} sessions")
    p.add_argument("--sizes", help="comma-separated session counts, ascending")
    p.add_argument("--backends", default="sqlite,postgres", help="sqlite, postgres or both")
    p.add_argument("--fill-workers", type=int, default=3, help="Postgres fill processes")
    p.add_argument("--out", help="also write the section into this markdown report")
    args = p.parse_args(argv)
    sizes = (
        tuple(int(s) for s in args.sizes.split(","))
        if args.sizes
        else (QUICK if args.quick else FULL)
    )
    if list(sizes) != sorted(sizes) or sizes[0] < NEEDLE_HITS:
        p.error(f"--sizes: ascending, each at least {NEEDLE_HITS}")
    results: dict[str, list[Figures]] = {}
    for name in args.backends.split(","):
        results[name] = measure_backend(_maker(name, args.fill_workers), sizes)
    given = argv if argv is not None else sys.argv[1:]
    section = render(results, " ".join(["python -m bench.many_sessions", *given]))
    print(section)
    if args.out:
        _write_section(Path(args.out), section)
    return 0


def _maker(name: str, workers: int) -> Callable[[], Backend]:
    """What makes a new, empty store of backend ``name`` (its own file or schema) each call."""
    if name == "sqlite":
        return lambda: _sqlite(Path(tempfile.mkdtemp(prefix="agentledger-many-", dir="/tmp")))
    if name == "postgres":
        return partial(_postgres, workers)
    sys.exit(f"--backends: unknown {name!r}; choose sqlite, postgres")


if __name__ == "__main__":
    sys.exit(main())
