"""``sqlite:///file.db``: the embedded default backend, on the standard library's ``sqlite3``.

Every save is one ``BEGIN IMMEDIATE`` transaction that writes only the rows the plan names: closing
a replaced row updates one small column, an append adds rows at the tail of the table and one entry
to the live index, and full-text indexing is batched, so the cost follows the change, never the
session. Rows are ordered by rank keys (``ranks``), so an insert, a deletion or a move writes the
rows it adds and closes, never the rows after it; a dropped prefix is one row of ``list_floors``,
and the rows under it stay as they are until ``purge_history``. The schema and its migrations are in
``sqlite_schema``; the connections (WAL, one shared writer per process, jittered retry instead of a
busy handler, no memory map, reopened when the file is replaced) and the mapping of SQLite's errors
to ``StoreError`` are in ``sqlite_db``.

What comes back from the file is checked before it is used, since a damaged page can hold any
value: every column's type (``typed``), a value's bytes against its digest, a blob's against
its digest, the session's version against the first and last rows of ``versions``, each list's
rows against the length, digest sum and id-and-rank sum its commit recorded (``list_sums``), and
their order against their ranks. Damage found
is ``CorruptStoreError``; message bodies are checked by the ledger as it decodes them.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from operator import itemgetter
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from agentledger.errors import CorruptStoreError, StoreUnavailableError, UserError
from agentledger.messages import digest_of
from agentledger.store import list_sums
from agentledger.store.base import (
    CommitPlan,
    Head,
    ListWrite,
    SearchHit,
    SessionInfo,
    SessionKey,
    Store,
    StoredState,
    VersionInfo,
    check_base,
    check_blobs,
    check_title,
    check_version,
    lists_from_rows,
    snippet_around,
)
from agentledger.store.body_text import text_of_body
from agentledger.store.cursor import Keyset
from agentledger.store.media import blob_refs
from agentledger.store.ranks import plan_ranks
from agentledger.store.search_words import query_words
from agentledger.store.sqlite_db import (
    Database,
    acquire,
    begin_immediate,
    release,
    store_error,
)
from agentledger.store.sqlite_rows import (
    LIST_SESSIONS,
    LIST_SESSIONS_AFTER,
    LIVE_LISTS,
    above_floors,
    check_sums,
    find_session,
    floors_at,
    fts_query,
    incarnation,
    live_list,
    live_ranks,
    micros,
    rows_live_at,
    sums_at,
    sums_now,
    timestamp,
    typed,
    typed_row,
)
from agentledger.store.sqlite_schema import flush_fts, migrate, text_digest

__all__ = ["FTS_BATCH", "SqliteStore"]

#: Queued full-text changes applied in one go (see ``sqlite_schema``); search applies the rest.
FTS_BATCH = 128
_CHUNK = 500  # bound on '?' parameters per statement

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _translated(method: Callable[_P, _R]) -> Callable[_P, _R]:
    """Report every SQLite failure as a ``StoreError`` (see ``sqlite_db.store_error``)."""

    @functools.wraps(method)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return method(*args, **kwargs)
        except UnicodeEncodeError as exc:  # binding a str that UTF-8 cannot hold
            raise UserError(
                f"text that cannot be stored as UTF-8 (a lone surrogate?): {exc}"
            ) from None
        except (sqlite3.Error, UnicodeDecodeError) as exc:
            store = args[0]
            assert isinstance(store, SqliteStore)
            raise store_error(exc, store.location) from exc

    return wrapper


def _floor(conn: sqlite3.Connection, sid: int, name: str, where: str) -> bytes | None:
    """The live floor of list ``name`` (see ``ranks``), or None."""
    row = conn.execute(
        "SELECT floor FROM list_floors WHERE sid = ? AND list = ? AND version_to IS NULL",
        (sid, name),
    ).fetchone()
    return typed_row(row, "b", where)[0] if row else None


class SqliteStore(Store):
    """Sessions in one SQLite file; see the module docstring.

    ``synchronous="full"`` (URL ``sqlite:///state.db?synchronous=full``) flushes every commit
    to disk before it returns, surviving a power loss, at the cost of an fsync per save; the
    default ``"normal"`` flushes at checkpoints: a commit survives a crash of the process, and
    a power loss may take the last few back (never a part of one).

    ``location`` is the resolved path; every store on that path in this process shares one
    writer connection, released by ``close()`` (the last store on the path to close closes
    it; a closed store refuses every call with ``ClosedError``). Loads
    return ``StoredMsg.text`` empty, and commits store only a digest of it: the full-text index
    reads the text from ``body`` (``sqlite_schema``, step 6).
    """

    ranked = True
    stamp_before_commit = False  # ``commit`` checks version and incarnation under the write lock

    def __init__(self, path: str | os.PathLike[str], *, synchronous: str = "normal") -> None:
        if synchronous.lower() not in ("normal", "full"):
            raise UserError(f"synchronous must be 'normal' or 'full', got {synchronous!r}")
        self.full_sync = synchronous.lower() == "full"
        self.path = Path(path).resolve()
        if not self.path.name or self.path.is_dir():
            raise UserError(f"a SQLite store is a file, and {str(path)!r} is a directory")
        self.location = str(self.path)
        # Run leases are flock'ed files beside the database (never the database file itself).
        self.lease_dir = self.path.with_name(self.path.name + ".leases")
        self._db_guard = threading.Lock()
        self._database: Database | None = None

    def __repr__(self) -> str:
        return f"SqliteStore({self.location!r})"

    # -- connections ---------------------------------------------------------------------
    def _db(self) -> Database:
        """The shared connections, checked against the file the path names, schema migrated.

        A first use that fails (the file is not a database, a migration refuses a damaged file)
        releases the reference it took before the error propagates: a failed open holds nothing.
        """
        with self._db_guard:
            if self.closed:  # a call under way as ``close`` ran: it takes no new connections
                raise self._closed_error()
            if self._database is not None and self._database.pid != os.getpid():
                self._database = None  # inherited through fork(): never reuse those connections
            opening = self._database is None
            if opening:
                self._database = acquire(self.location)
                if self.full_sync:
                    self._database.require_full_sync()
            db = self._database
            assert db is not None
        try:
            db.check_file()
            if not db.ready:
                with db.write_lock:
                    if not db.ready:
                        migrate(db.writer(), begin_immediate)
                        db.ready = True
        except BaseException:
            if opening:
                self._release()  # the store stays open: its next use tries the file again
            raise
        return db

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction on the file the path names (checked once the lock is held)."""
        for _ in range(2):
            db = self._db()
            with db.write_lock:
                conn = db.writer()
                begin_immediate(conn)
                if not db.holds_current_file():  # replaced since ``_db`` looked: start again
                    conn.execute("ROLLBACK")
                    continue
                try:
                    yield conn
                    conn.execute("COMMIT")
                except BaseException:
                    self._roll_back(db, conn)
                    raise
                return
        raise StoreUnavailableError(f"{self.location}: the database file keeps being replaced")

    @staticmethod
    def _roll_back(db: Database, conn: sqlite3.Connection) -> None:
        """End a failed write transaction; a writer that cannot roll back is closed (SQLite
        then rolls back what it had written), never reused."""
        try:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        except sqlite3.Error:
            db.drop_writer()

    @contextmanager
    def _read(self, *, snapshot: bool = False) -> Iterator[sqlite3.Connection]:
        """A reader connection; with ``snapshot`` every query sees the same commit."""
        db = self._db()
        conn, generation = db.take_reader()
        try:
            if snapshot:
                conn.execute("BEGIN")
            yield conn
        finally:
            healthy = True
            if conn.in_transaction:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:
                    healthy = False
            if healthy:
                db.give_back(conn, generation)
            else:
                conn.close()  # state unknown: do not hand it to the next caller

    @_translated
    def setup(self) -> None:
        self._db()  # migrates once per process and file

    def close(self) -> None:
        self._release()

    def _release(self) -> None:
        """Give back this store's reference to the shared connections (the last one closes
        them); a use that follows takes a new one, so only ``close`` ends the store."""
        with self._db_guard:
            db, self._database = self._database, None
        if db is not None:
            release(db)

    # -- reading -------------------------------------------------------------------------
    def _where(self, key: SessionKey, name: str | None = None) -> str:
        """Where a session (or one of its lists) lives, for errors."""
        where = f"{self.location} {key.tenant}/{key.session}"
        return where if name is None else f"{where}/{name}"

    @_translated
    def read_version(self, key: SessionKey) -> int:
        return self.read_stamp(key)[1]

    @_translated
    def read_stamp(self, key: SessionKey) -> tuple[str, int]:
        with self._read(snapshot=True) as conn:  # ``find_session`` may ask twice
            row = self._find(conn, key, "sid, created_at, version", "iii")
        return (incarnation(row[0], row[1]), row[2]) if row else ("", 0)

    def _find(self, conn: sqlite3.Connection, key: SessionKey, columns: str, shape: str) -> Any:
        """The session's row (see ``sqlite_rows.find_session``)."""
        return find_session(conn, key.tenant, key.session, columns, shape, self._where(key))

    def _session(
        self, conn: sqlite3.Connection, key: SessionKey
    ) -> tuple[int, int, int, str, bool] | None:
        """``(sid, version, oldest_version, incarnation, has_media)`` of a session, or None.

        The versions on record must run from ``oldest_version`` to ``version``: a damaged
        version number fails here rather than load rows under the wrong version.
        """
        row = self._find(
            conn,
            key,
            "sid, version, oldest_version, created_at, has_media, "
            "(SELECT min(version) FROM versions v WHERE v.sid = sessions.sid), "
            "(SELECT max(version) FROM versions v WHERE v.sid = sessions.sid)",
            "iiiiiII",
        )
        where = self._where(key)
        if row is None:
            return None
        sid, version, oldest, created, has_media, first, last = row
        if (first, last) != (oldest, version):
            raise CorruptStoreError(
                f"{where}: the session is at versions {oldest}..{version}, but versions "
                f"{first}..{last} are on record",
                location=where,
            )
        return (sid, version, oldest, incarnation(sid, created), bool(has_media))

    @_translated
    def read_head(self, key: SessionKey) -> Head | None:
        with self._read(snapshot=True) as conn:
            found = self._session(conn, key)
            if found is None:
                return None
            sid, version, _, life, _ = found
            where = self._where(key)
            floors = floors_at(conn, sid, None, where)
            names = typed(conn.execute(LIVE_LISTS, (sid, sid)).fetchall(), "s", where)
            lists: dict[str, list[bytes]] = {}
            ranks: dict[str, list[bytes]] = {}
            for (name,) in names:
                list_ranks, digests = live_ranks(conn, sid, name, floors.get(name), where)
                if digests:
                    ranks[name], lists[name] = list_ranks, digests
            values = conn.execute(
                "SELECT name, digest FROM session_values WHERE sid = ? AND version_to IS NULL",
                (sid,),
            ).fetchall()
            typed(values, "sb", where)
            check_sums(conn, sid, version, lists, values, where)
        return Head(version, lists, dict(values), life, ranks=ranks, floors=floors)

    @_translated
    def load(self, key: SessionKey, version: int | None = None) -> StoredState | None:
        where = self._where(key)
        with self._read(snapshot=True) as conn:
            found = self._session(conn, key)
            if found is None:
                return None
            sid, latest, oldest, life, has_media = found
            check_version(version, oldest, latest)
            if version is None or version == latest:
                at = latest
                floors = floors_at(conn, sid, None, where)
                names = typed(conn.execute(LIVE_LISTS, (sid, sid)).fetchall(), "s", where)
                lists = {
                    name: live_list(conn, sid, name, floors.get(name), where) for (name,) in names
                }
                lists = {name: rows for name, rows in lists.items() if rows.ids}
                values = conn.execute(
                    "SELECT name, digest, raw FROM session_values "
                    "WHERE sid = ? AND version_to IS NULL",
                    (sid,),
                ).fetchall()
            else:
                at = version
                params = (sid, at, sid, at, at)
                rows = conn.execute(
                    rows_live_at("messages", "list, rank, msg_id, digest, body"), params
                ).fetchall()
                typed(rows, "sb", where)  # ids, digests and bodies: see ``loaded_messages``
                rows.sort(key=itemgetter(0, 1))
                floors = floors_at(conn, sid, at, where)
                lists = above_floors(lists_from_rows(rows, where), floors)
                value_rows = rows_live_at("session_values", "name, digest, raw")
                values = conn.execute(value_rows, params).fetchall()
            check_sums(conn, sid, at, lists, values, where)
        return StoredState(
            at, lists, self._values(values, where), life, may_have_media=has_media, floors=floors
        )

    @staticmethod
    def _values(rows: list[Any], where: str) -> dict[str, bytes]:
        """Rows ``(name, digest, raw)`` as ``{name: raw}``, each raw checked against its
        digest (values are few and small; a message body is checked as it is decoded)."""
        for name, digest, raw in typed(rows, "sbb", where):
            if digest_of(raw) != digest:
                raise CorruptStoreError(
                    f"{where}: value {name!r} does not match its digest", location=where
                )
        return {name: raw for name, _, raw in rows}

    @_translated
    def read_media(self, key: SessionKey, digests: Sequence[bytes]) -> dict[bytes, bytes]:
        """The blobs stored for ``digests``; a blob whose bytes do not match its digest is
        ``CorruptStoreError`` (never handed out as the media)."""
        found: dict[bytes, bytes] = {}
        wanted = list(dict.fromkeys(digests))
        where = f"{self.location} {key.tenant} blobs"
        with self._read(snapshot=True) as conn:  # every chunk from the same commit
            for start in range(0, len(wanted), _CHUNK):
                chunk = wanted[start : start + _CHUNK]
                marks = ",".join("?" * len(chunk))
                rows = conn.execute(
                    f"SELECT digest, data FROM blobs WHERE tenant = ? AND digest IN ({marks})",
                    (key.tenant, *chunk),
                ).fetchall()
                found.update(typed(rows, "bb", where))
        return check_blobs(found, where)

    @_translated
    def history(self, key: SessionKey) -> list[VersionInfo]:
        with self._read(snapshot=True) as conn:
            found = self._session(conn, key)
            if found is None:
                return []
            sid, latest, oldest, _, _ = found
            rows = conn.execute(
                "SELECT version, committed_at, appended, replaced, truncated, values_changed "
                "FROM versions WHERE sid = ? AND version >= ? ORDER BY version",
                (sid, oldest),
            ).fetchall()
        where = self._where(key)
        if [r[0] for r in typed(rows, "iiiiii", where)] != list(range(oldest, latest + 1)):
            raise CorruptStoreError(
                f"{where}: versions {oldest}..{latest} are not all on record", location=where
            )
        return [VersionInfo(r[0], timestamp(r[1], where), r[2], r[3], r[4], r[5]) for r in rows]

    @_translated
    def list_sessions(
        self,
        tenant: str,
        *,
        limit: int | None = None,
        offset: int = 0,
        after: Keyset | None = None,
    ) -> list[SessionInfo]:
        page = (-1 if limit is None else limit, offset)
        with self._read() as conn:
            if after is None:
                rows = conn.execute(LIST_SESSIONS, (tenant, *page)).fetchall()
            else:
                key = (micros(after.updated_at), after.session_id)
                rows = conn.execute(LIST_SESSIONS_AFTER, (tenant, *key, *page)).fetchall()
        where = f"{self.location} {tenant}"
        typed(rows, "sSiiii", where)
        return [
            SessionInfo(tenant, *r[:4], timestamp(r[4], where), timestamp(r[5], where))
            for r in rows
        ]

    @_translated
    def search(self, tenant: str, query: str, *, limit: int = 20) -> list[SearchHit]:
        """Live messages whose text holds every word of ``query`` (as a word prefix), best first.

        Matching is by word, case- and accent-insensitive (FTS5 ``unicode61``); any characters
        in ``query`` are safe. A hit's snippet is cut from its body's text as on every store
        (``snippet_around``): FTS5's ``snippet()`` cut differently and dropped NUL characters.
        """
        match = fts_query(query)
        if not match or limit <= 0:
            return []
        first = query_words(query)[0]  # a word the match holds: the snippet centres on it
        self._flush_fts()
        # one snapshot: each hit's position is counted in the version the hit was found in
        with self._read(snapshot=True) as conn:
            rows = conn.execute(
                "SELECT s.session, m.sid, m.list, m.rank, f.floor, m.msg_id, m.body "
                "FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid "
                "JOIN sessions s ON s.sid = m.sid "
                "LEFT JOIN list_floors f "
                "ON f.sid = m.sid AND f.list = m.list AND f.version_to IS NULL "
                "WHERE messages_fts MATCH ? AND s.tenant = ? AND m.version_to IS NULL "
                "AND (f.floor IS NULL OR m.rank > f.floor) "
                "ORDER BY messages_fts.rank LIMIT ?",
                (match, tenant, limit),
            ).fetchall()
            where = f"{self.location} {tenant}"
            typed(rows, "sisbBsb", where)
            # A hit's position: the live rows above the floor ranked before it (an index count).
            positions = [
                conn.execute(
                    "SELECT count(*) FROM messages WHERE sid = ? AND list = ? "
                    "AND version_to IS NULL AND rank > ? AND rank < ?",
                    (sid, name, floor or b"", rank),
                ).fetchone()[0]
                for _, sid, name, rank, floor, _, _ in rows
            ]
        return [
            SearchHit(
                tenant, session, name, position, msg_id, snippet_around(text_of_body(body), first)
            )
            for (session, _, name, _, _, msg_id, body), position in zip(
                rows, positions, strict=True
            )
        ]

    # -- writing -------------------------------------------------------------------------
    @_translated
    def commit(self, plan: CommitPlan) -> str:
        """Apply ``plan`` in one ``BEGIN IMMEDIATE`` transaction.

        A version race costs one indexed read under the write lock: the loser finds the
        session moved and raises ``ConflictError`` before writing anything.
        """
        key, version = plan.key, plan.version
        title = check_title(plan)
        at = micros(plan.committed_at)
        with self._write() as conn:
            found = self._find(conn, key, "sid, version, created_at", "iii")
            where = self._where(key)
            sums: list_sums.Sums | None = {}
            if found is None:
                check_base(plan, 0, "")
                created = at
                sid = conn.execute(
                    "INSERT INTO sessions (tenant, session, version, created_at, updated_at) "
                    "VALUES (?, ?, ?, ?, ?) RETURNING sid",
                    (key.tenant, key.session, version, at, at),
                ).fetchone()[0]
            else:
                sid, stored, created = found
                check_base(plan, stored, incarnation(sid, created))
                sums, ranked = sums_at(conn, sid, stored, where)
                if not ranked:  # recorded before ranks: computed afresh below
                    sums = None
            for write in plan.lists:
                before = sums.get(write.name, (0, 0, 0))[0] if sums is not None else None
                before, left, put, kept = self._write_list(
                    conn, key.tenant, sid, version, write, before, where
                )
                if sums is not None and kept is not None:
                    list_sums.recount(sums, write.name, [*kept, *put])
                elif sums is not None:
                    list_sums.apply(sums, write.name, before, left, put, write.length, where)
            if plan.media:  # a row now references stored media (see StoredState)
                conn.execute("UPDATE sessions SET has_media = 1 WHERE sid = ?", (sid,))
            closed_values: list[list_sums.Row] = []
            put_values: list[list_sums.Row] = []
            for name, raw in plan.values.items():
                closed_values += conn.execute(
                    "UPDATE session_values SET version_to = ? "
                    "WHERE sid = ? AND name = ? AND version_to IS NULL RETURNING digest, name",
                    (version, sid, name),
                ).fetchall()
                if raw is not None:
                    put_values.append((digest_of(raw), name))
                    conn.execute(
                        "INSERT INTO session_values (sid, name, version_from, digest, raw) "
                        "VALUES (?, ?, ?, ?, ?)",
                        (sid, name, version, digest_of(raw), raw),
                    )
            if sums is None:  # the last commit was made before list sums were recorded
                sums = sums_now(conn, sid, where)
            else:
                list_sums.apply_values(sums, typed(closed_values, "bs", where), put_values)
            if plan.media:
                conn.executemany(
                    "INSERT OR IGNORE INTO blobs (tenant, digest, data) VALUES (?, ?, ?)",
                    [(key.tenant, d, data) for d, data in plan.media.items()],
                )
            conn.execute(
                "INSERT INTO versions (sid, version, committed_at, appended, replaced, "
                "truncated, values_changed, sums) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (sid, version, at, plan.appended, plan.replaced, plan.truncated,
                 len(plan.values), list_sums.pack(sums)),
            )  # fmt: skip
            conn.execute(
                "UPDATE sessions SET version = ?, updated_at = ?, "
                "title = CASE WHEN ? THEN ? ELSE title END, "
                "message_count = coalesce(?, message_count) WHERE sid = ?",
                (version, at, title is not None, title or None, plan.message_count, sid),
            )
            if conn.execute("SELECT count(*) FROM fts_queue").fetchone()[0] >= FTS_BATCH:
                flush_fts(conn)
        return incarnation(sid, created)

    @staticmethod
    def _write_list(
        conn: sqlite3.Connection,
        tenant: str,
        sid: int,
        version: int,
        write: ListWrite,
        before: int | None,
        where: str,
    ) -> tuple[int, list[list_sums.Row], list[list_sums.Row], list[list_sums.Row] | None]:
        """Apply one list's write (see ``ranks``): close the rows it closes, raise the floor
        over a dropped prefix (which updates no message row), insert the puts at their ranks.

        ``before`` is the list's live length as the last commit recorded it (None: count the
        rows). Returns it, the ``(digest, msg_id, rank)`` of the rows that left the list and of
        those put, and, when a floor hid more rows than stayed, those that stayed instead of the
        hidden ones (None otherwise). A row the list should have and has not is
        ``CorruptStoreError``.
        """
        name = write.name
        planned = write.ranks
        if planned is None or before is None:  # a plan made without ranks, or legacy sums
            old, _ = live_ranks(conn, sid, name, _floor(conn, sid, name, where), where)
            before = len(old)
        runs = write.kept_runs(before)
        if planned is None:
            positions = sorted(p for p, _ in write.puts)
            planned = plan_ranks(old, _floor(conn, sid, name, where), runs, positions, write.length)
        kept = sum(count for _, _, count in runs)
        if len(planned.closed_ranks) + planned.dropped != before - kept:
            raise UserError(f"list {name!r}: the rank plan does not match the kept runs")
        live = "sid = ? AND list = ? AND version_to IS NULL"
        left: list[Any] = []
        closing = planned.closed_ranks
        for start in range(0, len(closing), _CHUNK):
            chunk = closing[start : start + _CHUNK]
            left += conn.execute(
                f"UPDATE messages SET version_to = ? WHERE {live} "
                f"AND rank IN ({','.join('?' * len(chunk))}) RETURNING digest, msg_id, rank",
                (version, sid, name, *chunk),
            ).fetchall()
        if len(left) != len(closing):
            raise CorruptStoreError(
                f"{where}/{name}: {len(left)} live rows closed where {len(closing)} should be",
                location=where,
            )
        kept: list[Any] | None = None
        if planned.floor is not None:
            # The list sums lose the rows the floor hides. Of those and the rows that stay,
            # read whichever are fewer: a sliding window reads one row, a summary over 12,000
            # messages the few it keeps (the sums are then counted afresh).
            staying = before - planned.dropped - len(closing)
            if planned.dropped <= staying:
                fewer, bounds, params = (
                    "hidden",
                    "rank > ? AND rank <= ?",
                    (_floor(conn, sid, name, where) or b"", planned.floor),
                )
                expected = planned.dropped
            else:  # the puts are not inserted yet: the live rows above the floor stay
                fewer, bounds, params, expected = "kept", "rank > ?", (planned.floor,), staying
            found = conn.execute(
                f"SELECT digest, msg_id, rank FROM messages WHERE {live} AND {bounds}",
                (sid, name, *params),
            ).fetchall()
            if len(found) != expected:
                raise CorruptStoreError(
                    f"{where}/{name}: {len(found)} live rows {fewer} by the new floor where "
                    f"{expected} should be",
                    location=where,
                )
            if fewer == "hidden":
                left += found
            else:
                kept = typed(found, "bsb", where)
            conn.execute(
                f"UPDATE list_floors SET version_to = ? WHERE {live}", (version, sid, name)
            )
            conn.execute(
                "INSERT INTO list_floors (sid, list, version_from, floor) VALUES (?, ?, ?, ?)",
                (sid, name, version, planned.floor),
            )
        insert = (
            "INSERT INTO messages "
            "(sid, list, rank, version_from, msg_id, digest, text_digest, body) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
        )
        plain = []
        put: list[list_sums.Row] = []
        puts = sorted(write.puts, key=itemgetter(0))
        for (_, m), rank in zip(puts, planned.put_ranks, strict=True):
            row = (sid, name, rank, version, m.msg_id, m.digest, text_digest(m.text), m.body)
            put.append((m.digest, m.msg_id, rank))
            refs = blob_refs(m.body)
            if not refs:
                plain.append(row)
                continue
            row_id = conn.execute(insert, row).lastrowid
            conn.executemany(
                "INSERT OR IGNORE INTO blob_refs (tenant, digest, row_id) VALUES (?, ?, ?)",
                [(tenant, digest, row_id) for digest in refs],
            )
        conn.executemany(insert, plain)
        return before, typed(left, "bsb", where), put, kept

    @_translated
    def delete(self, key: SessionKey) -> bool:
        with self._write() as conn:
            found = self._find(conn, key, "sid", "i")
            if found is None:
                return False
            sid = found[0]
            # Each statement names its partial index's condition, so none scans the table.
            for table in ("messages", "session_values"):
                conn.execute(f"DELETE FROM {table} WHERE sid = ? AND version_to IS NULL", (sid,))
                conn.execute(
                    f"DELETE FROM {table} WHERE sid = ? AND version_to IS NOT NULL", (sid,)
                )
            conn.execute("DELETE FROM list_floors WHERE sid = ?", (sid,))
            conn.execute("DELETE FROM versions WHERE sid = ?", (sid,))
            conn.execute("DELETE FROM sessions WHERE sid = ?", (sid,))
            self._collect_blobs(conn, key.tenant)
            return True

    @_translated
    def purge_history(self, key: SessionKey, keep_last: int) -> int:
        with self._write() as conn:
            found = self._session(conn, key)
            if found is None:
                return 0
            sid, latest, oldest, _, _ = found
            new_oldest = max(oldest, latest - keep_last + 1)
            removed = 0
            # Floors only rise: a row at or below a list's floor at the oldest version kept is
            # in no version kept.
            for name, floor in floors_at(conn, sid, new_oldest, self._where(key)).items():
                removed += conn.execute(
                    "DELETE FROM messages WHERE sid = ? AND list = ? AND version_to IS NULL "
                    "AND rank <= ?",
                    (sid, name, floor),
                ).rowcount
                removed += conn.execute(
                    "DELETE FROM messages WHERE sid = ? AND version_to IS NOT NULL "
                    "AND version_to > ? AND list = ? AND rank <= ?",
                    (sid, new_oldest, name, floor),
                ).rowcount
            conn.execute(
                "DELETE FROM list_floors WHERE sid = ? AND version_to IS NOT NULL "
                "AND version_to <= ?",
                (sid, new_oldest),
            )
            for table in ("messages", "session_values"):
                removed += conn.execute(
                    f"DELETE FROM {table} "
                    "WHERE sid = ? AND version_to IS NOT NULL AND version_to <= ?",
                    (sid, new_oldest),
                ).rowcount
            if new_oldest != oldest:
                conn.execute(
                    "DELETE FROM versions WHERE sid = ? AND version < ?", (sid, new_oldest)
                )
                conn.execute(
                    "UPDATE sessions SET oldest_version = ? WHERE sid = ?", (new_oldest, sid)
                )
            if removed:
                self._collect_blobs(conn, key.tenant)
            return removed

    @staticmethod
    def _collect_blobs(conn: sqlite3.Connection, tenant: str) -> None:
        conn.execute(
            "DELETE FROM blobs WHERE tenant = ? AND NOT EXISTS (SELECT 1 FROM blob_refs r "
            "WHERE r.tenant = blobs.tenant AND r.digest = blobs.digest)",
            (tenant,),
        )

    def _flush_fts(self) -> None:
        with self._read() as conn:
            pending = conn.execute("SELECT 1 FROM fts_queue LIMIT 1").fetchone()
        if pending:
            with self._write() as conn:
                flush_fts(conn)

    # -- diagnostics ---------------------------------------------------------------------
    @_translated
    def check_integrity(self) -> list[str]:
        """Problems SQLite and FTS5 find in the file (empty when it is sound). Reads only."""
        with self._read() as conn:
            problems = [r[0] for r in conn.execute("PRAGMA integrity_check") if r[0] != "ok"]
        # The FTS5 check is spelled as an INSERT, so it runs on the writer.
        with self._write() as conn:
            flush_fts(conn)
            try:
                conn.execute(
                    "INSERT INTO messages_fts (messages_fts, rank) VALUES ('integrity-check', 1)"
                )
            except sqlite3.DatabaseError as exc:
                problems.append(f"full-text index: {exc}")
        return problems
