"""``sqlite:///file.db``: the embedded default backend, on the standard library's ``sqlite3``.

Every save is one ``BEGIN IMMEDIATE`` transaction that writes only the rows the plan names:
closing a replaced row updates one small column, an append adds rows at the tail of the table
and one entry to the live index, and full-text indexing is batched, so the cost follows the
change, never the session. The schema, the migrations and the connection handling (WAL, one
shared writer per process, jittered retry instead of a busy handler) are in ``sqlite_schema``.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import ParamSpec, TypeVar

from agentledger.errors import CorruptStoreError, StoreError, UserError
from agentledger.messages import digest_of
from agentledger.store.base import (
    CommitPlan,
    Head,
    ListWrite,
    SearchHit,
    SessionInfo,
    SessionKey,
    Store,
    StoredList,
    StoredState,
    VersionInfo,
    check_base,
    check_positions,
    check_version,
    columns,
    lists_from_rows,
)
from agentledger.store.media import blob_refs
from agentledger.store.sqlite_schema import (
    Database,
    acquire,
    begin_immediate,
    flush_fts,
    migrate,
    release,
)

__all__ = ["FTS_BATCH", "SqliteStore"]

#: Queued full-text changes applied in one go (see ``sqlite_schema``); search applies the rest.
FTS_BATCH = 128
_CHUNK = 500  # bound on '?' parameters per statement

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _micros(at: datetime) -> int:
    if at.tzinfo is None:
        raise UserError("timestamps must be timezone-aware")
    return (at - _EPOCH) // _US


def _datetime(micros: int) -> datetime:
    return _EPOCH + micros * _US


def _translated(method: Callable[_P, _R]) -> Callable[_P, _R]:
    """Report SQLite failures as ``StoreError`` (``CorruptStoreError`` for a damaged file)."""

    @functools.wraps(method)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return method(*args, **kwargs)
        except sqlite3.DatabaseError as exc:
            store = args[0]
            assert isinstance(store, SqliteStore)
            text = str(exc)
            if not isinstance(exc, sqlite3.OperationalError) or "malformed" in text:
                raise CorruptStoreError(
                    f"{store.location}: {text}", location=store.location
                ) from exc
            raise StoreError(f"{store.location}: {text}") from exc

    return wrapper


def _rows_live_at(table: str, columns: str) -> str:
    """Rows of ``table`` live at a past version; parameters ``(sid, v, sid, v, v)``.

    Two halves, one per partial index: live rows created by then, and closed rows that closed
    after it.
    """
    return (
        f"SELECT {columns} FROM {table} "
        "WHERE sid = ? AND version_to IS NULL AND version_from <= ? "
        f"UNION ALL SELECT {columns} FROM {table} "
        "WHERE sid = ? AND version_to IS NOT NULL AND version_to > ? AND version_from <= ?"
    )


#: The names of a session's non-empty lists (parameters ``(sid, sid)``): one index seek per
#: list, where ``SELECT DISTINCT`` would read every live row's index entry.
_LIVE_LISTS = """
    WITH RECURSIVE names(name) AS (
        SELECT min(list) FROM messages WHERE sid = ? AND version_to IS NULL
        UNION ALL
        SELECT (
            SELECT min(list) FROM messages
            WHERE sid = ? AND version_to IS NULL AND list > names.name
        )
        FROM names WHERE name IS NOT NULL
    )
    SELECT name FROM names WHERE name IS NOT NULL
"""

_LIVE = "FROM messages WHERE sid = ? AND list = ? AND version_to IS NULL"


def _live_list(
    conn: sqlite3.Connection, sid: int, name: str, gap: Callable[[str, int, int], Exception]
) -> StoredList:
    """One list's live rows, in order, as columns.

    The rows carry no position: the unique index ``messages_live_position`` allows one live
    row per position, so rows whose first position is 0 and last is ``len - 1`` hold every
    position once. Only when they do not are the positions read, to name the first gap.
    """
    query = f"SELECT msg_id, digest, body {_LIVE} ORDER BY position"
    rows = conn.execute(query, (sid, name)).fetchall()
    span = conn.execute(
        f"SELECT (SELECT min(position) {_LIVE}), (SELECT max(position) {_LIVE})",
        (sid, name, sid, name),
    ).fetchone()
    if span != (0, len(rows) - 1):
        found = conn.execute(f"SELECT position {_LIVE} ORDER BY position", (sid, name))
        check_positions([position for (position,) in found], name, gap)
    ids, digests, bodies = columns(rows, 0, 3)
    return StoredList(ids, digests, bodies)


def _fts_query(query: str) -> str:
    """A MATCH expression that finds every word of ``query`` as a word prefix.

    Each word is quoted as an FTS5 string, so quotes, parentheses, ``*``, ``NEAR``, ``AND`` and
    column filters in user input are plain text, never syntax.
    """
    terms = [
        '"' + word.replace('"', '""') + '"*'
        for word in query.split()
        if any(ch.isalnum() for ch in word)
    ]
    return " ".join(terms)


def _incarnation(sid: int, created_at: int) -> str:
    """One life of a session: row ids can be reused after a delete, creation times are not."""
    return f"{sid}.{created_at}"


class SqliteStore(Store):
    """Sessions in one SQLite file; see the module docstring.

    ``location`` is the resolved path; every store on that path in this process shares one
    writer connection, released by ``close()`` (a closed store reopens on its next use). Loads
    return ``StoredMsg.text`` empty: the text is kept for the full-text index only, and the
    ledger rebuilds messages from ``body``.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).resolve()
        self.location = str(self.path)
        # Run leases are flock'ed files beside the database (never the database file itself).
        self.lease_dir = self.path.with_name(self.path.name + ".leases")
        self._db_guard = threading.Lock()
        self._database: Database | None = None

    def __repr__(self) -> str:
        return f"SqliteStore({self.location!r})"

    # -- connections ---------------------------------------------------------------------
    def _db(self) -> Database:
        with self._db_guard:
            if self._database is not None and self._database.pid != os.getpid():
                self._database = None  # inherited through fork(): never reuse those connections
            if self._database is None:
                self._database = acquire(self.location)
            db = self._database
        if not db.ready:
            with db.write_lock:
                if not db.ready:
                    migrate(db.writer(), begin_immediate)
                    db.ready = True
        return db

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        db = self._db()
        with db.write_lock:
            conn = db.writer()
            begin_immediate(conn)
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    @contextmanager
    def _read(self, *, snapshot: bool = False) -> Iterator[sqlite3.Connection]:
        """A reader connection; with ``snapshot`` every query sees the same commit."""
        db = self._db()
        conn = db.take_reader()
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
                db.give_back(conn)
            else:
                conn.close()  # state unknown: do not hand it to the next caller

    @_translated
    def setup(self) -> None:
        self._db()  # migrates once per process and file

    def close(self) -> None:
        with self._db_guard:
            db, self._database = self._database, None
        if db is not None:
            release(db)

    # -- reading -------------------------------------------------------------------------
    @_translated
    def read_version(self, key: SessionKey) -> int:
        with self._read() as conn:
            row = conn.execute(
                "SELECT version FROM sessions WHERE tenant = ? AND session = ?",
                (key.tenant, key.session),
            ).fetchone()
        return row[0] if row else 0

    @_translated
    def read_stamp(self, key: SessionKey) -> tuple[str, int]:
        with self._read() as conn:
            row = conn.execute(
                "SELECT sid, created_at, version FROM sessions WHERE tenant = ? AND session = ?",
                (key.tenant, key.session),
            ).fetchone()
        return (_incarnation(row[0], row[1]), row[2]) if row else ("", 0)

    @staticmethod
    def _session(
        conn: sqlite3.Connection, key: SessionKey
    ) -> tuple[int, int, int, str, bool] | None:
        """``(sid, version, oldest_version, incarnation, has_media)`` of a session, or None."""
        row = conn.execute(
            "SELECT sid, version, oldest_version, created_at, has_media FROM sessions "
            "WHERE tenant = ? AND session = ?",
            (key.tenant, key.session),
        ).fetchone()
        if row is None:
            return None
        return (row[0], row[1], row[2], _incarnation(row[0], row[3]), bool(row[4]))

    @_translated
    def read_head(self, key: SessionKey) -> Head | None:
        with self._read(snapshot=True) as conn:
            found = self._session(conn, key)
            if found is None:
                return None
            sid, version, _, incarnation, _ = found
            rows = conn.execute(
                "SELECT list, position, digest FROM messages "
                "WHERE sid = ? AND version_to IS NULL ORDER BY list, position",
                (sid,),
            ).fetchall()
            values = conn.execute(
                "SELECT name, digest FROM session_values WHERE sid = ? AND version_to IS NULL",
                (sid,),
            ).fetchall()
        lists: dict[str, list[bytes]] = {}
        for name, position, digest in rows:
            digests = lists.setdefault(name, [])
            if position != len(digests):
                raise self._gap(key, name, len(digests), position)
            digests.append(digest)
        return Head(version, lists, dict(values), incarnation)

    def _gap(self, key: SessionKey, name: str, expected: int, found: int) -> CorruptStoreError:
        return CorruptStoreError(
            f"session {key.session!r} list {name!r}: expected a live row at position "
            f"{expected}, found {found}",
            location=f"{self.location} {key.tenant}/{key.session}/{name}",
        )

    @_translated
    def load(self, key: SessionKey, version: int | None = None) -> StoredState | None:
        def gap(name: str, expected: int, found: int) -> CorruptStoreError:
            return self._gap(key, name, expected, found)

        with self._read(snapshot=True) as conn:
            found = self._session(conn, key)
            if found is None:
                return None
            sid, latest, oldest, incarnation, has_media = found
            check_version(version, oldest, latest)
            if version is None or version == latest:
                at = latest
                names = [name for (name,) in conn.execute(_LIVE_LISTS, (sid, sid))]
                lists = {name: _live_list(conn, sid, name, gap) for name in names}
                values = conn.execute(
                    "SELECT name, raw FROM session_values WHERE sid = ? AND version_to IS NULL",
                    (sid,),
                ).fetchall()
            else:
                at = version
                params = (sid, at, sid, at, at)
                rows = conn.execute(
                    _rows_live_at("messages", "list, position, msg_id, digest, body"), params
                ).fetchall()
                rows.sort(key=lambda r: (r[0], r[1]))
                lists = lists_from_rows(rows, gap)
                value_rows = _rows_live_at("session_values", "name, raw")
                values = conn.execute(value_rows, params).fetchall()
        return StoredState(at, lists, dict(values), incarnation, may_have_media=has_media)

    @_translated
    def read_media(self, key: SessionKey, digests: Sequence[bytes]) -> dict[bytes, bytes]:
        found: dict[bytes, bytes] = {}
        wanted = list(dict.fromkeys(digests))
        with self._read() as conn:
            for start in range(0, len(wanted), _CHUNK):
                chunk = wanted[start : start + _CHUNK]
                marks = ",".join("?" * len(chunk))
                found.update(
                    conn.execute(
                        f"SELECT digest, data FROM blobs WHERE tenant = ? AND digest IN ({marks})",
                        (key.tenant, *chunk),
                    ).fetchall()
                )
        return found

    @_translated
    def history(self, key: SessionKey) -> list[VersionInfo]:
        with self._read() as conn:
            rows = conn.execute(
                "SELECT v.version, v.committed_at, v.appended, v.replaced, v.truncated, "
                "v.values_changed FROM versions v JOIN sessions s ON s.sid = v.sid "
                "WHERE s.tenant = ? AND s.session = ? AND v.version >= s.oldest_version "
                "ORDER BY v.version",
                (key.tenant, key.session),
            ).fetchall()
        return [VersionInfo(r[0], _datetime(r[1]), r[2], r[3], r[4], r[5]) for r in rows]

    @_translated
    def list_sessions(
        self, tenant: str, *, limit: int | None = None, offset: int = 0
    ) -> list[SessionInfo]:
        with self._read() as conn:
            rows = conn.execute(
                "SELECT session, title, message_count, version, created_at, updated_at "
                "FROM sessions WHERE tenant = ? ORDER BY updated_at DESC, session DESC "
                "LIMIT ? OFFSET ?",
                (tenant, -1 if limit is None else limit, offset),
            ).fetchall()
        return [
            SessionInfo(tenant, r[0], r[1], r[2], r[3], _datetime(r[4]), _datetime(r[5]))
            for r in rows
        ]

    @_translated
    def search(self, tenant: str, query: str, *, limit: int = 20) -> list[SearchHit]:
        """Live messages whose text holds every word of ``query`` (as a word prefix), best first.

        Matching is by word, case- and accent-insensitive (FTS5 ``unicode61``); any characters
        in ``query`` are safe.
        """
        match = _fts_query(query)
        if not match or limit <= 0:
            return []
        self._flush_fts()
        with self._read() as conn:
            rows = conn.execute(
                "SELECT s.session, m.list, m.position, m.msg_id, "
                "snippet(messages_fts, 0, '', '', '…', 16) "
                "FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid "
                "JOIN sessions s ON s.sid = m.sid "
                "WHERE messages_fts MATCH ? AND s.tenant = ? AND m.version_to IS NULL "
                "ORDER BY rank LIMIT ?",
                (match, tenant, limit),
            ).fetchall()
        return [
            SearchHit(tenant, session, name, position, msg_id, snippet.replace("\n", " "))
            for session, name, position, msg_id, snippet in rows
        ]

    # -- writing -------------------------------------------------------------------------
    @_translated
    def commit(self, plan: CommitPlan) -> str:
        key, version = plan.key, plan.version
        at = _micros(plan.committed_at)
        with self._write() as conn:
            found = conn.execute(
                "SELECT sid, version, created_at FROM sessions WHERE tenant = ? AND session = ?",
                (key.tenant, key.session),
            ).fetchone()
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
                check_base(plan, stored, _incarnation(sid, created))
            for write in plan.lists:
                self._write_list(conn, key.tenant, sid, version, write)
            if plan.media:  # a row now references stored media (see StoredState)
                conn.execute("UPDATE sessions SET has_media = 1 WHERE sid = ?", (sid,))
            for name, raw in plan.values.items():
                conn.execute(
                    "UPDATE session_values SET version_to = ? "
                    "WHERE sid = ? AND name = ? AND version_to IS NULL",
                    (version, sid, name),
                )
                if raw is not None:
                    conn.execute(
                        "INSERT INTO session_values (sid, name, version_from, digest, raw) "
                        "VALUES (?, ?, ?, ?, ?)",
                        (sid, name, version, digest_of(raw), raw),
                    )
            if plan.media:
                conn.executemany(
                    "INSERT OR IGNORE INTO blobs (tenant, digest, data) VALUES (?, ?, ?)",
                    [(key.tenant, d, data) for d, data in plan.media.items()],
                )
            conn.execute(
                "INSERT INTO versions (sid, version, committed_at, appended, replaced, "
                "truncated, values_changed) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (sid, version, at, plan.appended, plan.replaced, plan.truncated, len(plan.values)),
            )
            conn.execute(
                "UPDATE sessions SET version = ?, updated_at = ?, "
                "title = CASE WHEN ? THEN ? ELSE title END, "
                "message_count = coalesce(?, message_count) WHERE sid = ?",
                (version, at, plan.title is not None, plan.title or None, plan.message_count, sid),
            )
            if conn.execute("SELECT count(*) FROM fts_pending").fetchone()[0] >= FTS_BATCH:
                flush_fts(conn)
        return _incarnation(sid, created)

    @staticmethod
    def _write_list(
        conn: sqlite3.Connection, tenant: str, sid: int, version: int, write: ListWrite
    ) -> None:
        where_live = "sid = ? AND list = ? AND version_to IS NULL"
        top = conn.execute(
            f"SELECT max(position) FROM messages WHERE {where_live}", (sid, write.name)
        ).fetchone()[0]
        length = 0 if top is None else top + 1
        closing = [(version, sid, write.name, p) for p, _ in write.puts if p < length]
        if closing:
            conn.executemany(
                f"UPDATE messages SET version_to = ? WHERE {where_live} AND position = ?", closing
            )
        insert = (
            "INSERT INTO messages (sid, list, position, version_from, msg_id, digest, text, body) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
        )
        plain = []
        name = write.name
        for position, m in write.puts:
            row = (sid, name, position, version, m.msg_id, m.digest, m.text, m.body)
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
        if write.length < length:
            conn.execute(
                f"UPDATE messages SET version_to = ? WHERE {where_live} AND position >= ?",
                (version, sid, write.name, write.length),
            )

    @_translated
    def delete(self, key: SessionKey) -> bool:
        with self._write() as conn:
            found = conn.execute(
                "SELECT sid FROM sessions WHERE tenant = ? AND session = ?",
                (key.tenant, key.session),
            ).fetchone()
            if found is None:
                return False
            sid = found[0]
            # Each statement names its partial index's condition, so none scans the table.
            for table in ("messages", "session_values"):
                conn.execute(f"DELETE FROM {table} WHERE sid = ? AND version_to IS NULL", (sid,))
                conn.execute(
                    f"DELETE FROM {table} WHERE sid = ? AND version_to IS NOT NULL", (sid,)
                )
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
            pending = conn.execute("SELECT 1 FROM fts_pending LIMIT 1").fetchone()
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
