"""What the SQLite store reads from its file, and the checks that turn damage into errors.

A damaged page can hold any value in any column, and SQLite returns it as found. So every row
read is checked before it is used: ``typed`` checks column types at C speed, ``timestamp``
refuses out-of-range times, and ``sums_at`` reads what the commit of a version recorded about
each list (``list_sums``), against which a load checks the rows it found. A check that fails is
``CorruptStoreError`` naming the session, never a ``TypeError`` later on. Also here: the SQL
that selects a version's rows, a list's live rows and a page of sessions, and the full-text
query builder.
"""

from __future__ import annotations

import sqlite3
from bisect import bisect_right
from datetime import UTC, datetime, timedelta
from operator import itemgetter
from typing import Any

from agentledger.errors import CorruptStoreError, UserError
from agentledger.store import list_sums
from agentledger.store.base import StoredList, check_ranks, columns, lists_from_rows
from agentledger.store.search_words import query_words

__all__ = [
    "LIST_SESSIONS",
    "LIST_SESSIONS_AFTER",
    "LIVE_LISTS",
    "above_floors",
    "check_sums",
    "find_session",
    "floors_at",
    "fts_query",
    "incarnation",
    "live_list",
    "live_ranks",
    "micros",
    "rows_live_at",
    "sums_at",
    "sums_now",
    "timestamp",
    "typed",
    "typed_row",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)


def find_session(
    conn: sqlite3.Connection, tenant: str, session: str, columns: str, shape: str, where: str
) -> Any:
    """``columns`` (the first is ``sid``) of a session's row, checked as ``shape``, or None.

    The row is found through the ``(tenant, session)`` index and its sid confirmed through the
    ``(session, tenant)`` one: a damaged key in either cannot hide a session, or hand out
    another session's row, without ``CorruptStoreError``. ``conn`` must be in a transaction:
    when the first index finds nothing the second is asked in another statement, and outside
    a transaction a session committed between the two would look like a damaged index.
    """
    if not conn.in_transaction:
        raise RuntimeError("find_session needs a transaction (one snapshot for both lookups)")
    row = conn.execute(
        f"SELECT {columns}, (SELECT sid FROM sessions INDEXED BY sessions_by_id "
        "WHERE session = ?2 AND tenant = ?1) FROM sessions "
        "INDEXED BY sqlite_autoindex_sessions_1 WHERE tenant = ?1 AND session = ?2",
        (tenant, session),
    ).fetchone()
    if row is None:
        other = _other_sid(conn, tenant, session)
        if other is None:
            return None
        row = (None, other)
    if row[0] != row[-1]:
        raise CorruptStoreError(
            f"{where}: the two indexes of session keys disagree (sid {row[0]} or {row[-1]})",
            location=where,
        )
    return typed_row(row[:-1], shape, where)


def _other_sid(conn: sqlite3.Connection, tenant: str, session: str) -> Any:
    row = conn.execute(
        "SELECT sid FROM sessions INDEXED BY sessions_by_id WHERE session = ? AND tenant = ?",
        (session, tenant),
    ).fetchone()
    return None if row is None else row[0]


def micros(at: datetime) -> int:
    if at.tzinfo is None:
        raise UserError("timestamps must be timezone-aware")
    return (at - _EPOCH) // _US


def timestamp(micros: int, location: str) -> datetime:
    try:
        return _EPOCH + micros * _US
    except OverflowError:
        raise CorruptStoreError(
            f"{location}: timestamp {micros} is out of range", location=location
        ) from None


#: Column types ``typed`` accepts, by letter: an int, a str, bytes, or (upper case) also NULL.
_TYPES: dict[str, set[type]] = {
    "i": {int},
    "s": {str},
    "b": {bytes},
    "I": {int, type(None)},
    "S": {str, type(None)},
    "B": {bytes, type(None)},
}


def typed(rows: list[Any], shape: str, location: str) -> list[Any]:
    """``rows``, once each column ``i`` is known to hold only ``_TYPES[shape[i]]``.

    A damaged page can hold a value of any type in any column; it is reported here as
    ``CorruptStoreError``, never met later as a ``TypeError``. One C-level pass per column.
    """
    for i, letter in enumerate(shape):
        found = set(map(type, map(itemgetter(i), rows)))
        if not found <= _TYPES[letter]:
            names = sorted(t.__name__ for t in found - _TYPES[letter])
            raise CorruptStoreError(
                f"{location}: a row holds a value of the wrong type ({', '.join(names)})",
                location=location,
            )
    return rows


def typed_row(row: Any, shape: str, location: str) -> Any:
    """``row`` (or None) checked as ``typed`` checks rows."""
    return row if row is None else typed([row], shape, location)[0]


def rows_live_at(table: str, columns: str) -> str:
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
LIVE_LISTS = """
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

_SESSIONS = "SELECT session, title, message_count, version, created_at, updated_at FROM sessions"
_NEWEST_FIRST = "ORDER BY updated_at DESC, session DESC LIMIT ? OFFSET ?"
#: A tenant's sessions, newest first (parameters ``(tenant, limit, offset)``).
LIST_SESSIONS = f"{_SESSIONS} WHERE tenant = ? {_NEWEST_FIRST}"
#: The same after a keyset (``(tenant, updated_at, session, limit, offset)``): a range of the
#: ``sessions_recent`` index, so a deep page does not walk (and skip) the rows before it.
LIST_SESSIONS_AFTER = (
    f"{_SESSIONS} WHERE tenant = ? AND (updated_at, session) < (?, ?) {_NEWEST_FIRST}"
)

_LIVE = "FROM messages WHERE sid = ? AND list = ? AND version_to IS NULL AND rank > ?"


def live_list(
    conn: sqlite3.Connection, sid: int, name: str, floor: bytes | None, where: str
) -> StoredList:
    """One list's live rows above its ``floor``, in rank order, as columns (ranks included)."""
    rows = conn.execute(
        f"SELECT msg_id, digest, body, rank {_LIVE} ORDER BY rank", (sid, name, floor or b"")
    ).fetchall()
    ids, digests, bodies, ranks = columns(rows, 0, 4)
    check_ranks(ranks, f"{where}/{name}")
    return StoredList(ids, digests, bodies, ranks)


def live_ranks(
    conn: sqlite3.Connection, sid: int, name: str, floor: bytes | None, where: str
) -> tuple[list[bytes], list[bytes]]:
    """``(ranks, digests)`` of one list's live rows above its ``floor``, in rank order, read
    from the live index alone."""
    rows = conn.execute(
        f"SELECT rank, digest {_LIVE} ORDER BY rank", (sid, name, floor or b"")
    ).fetchall()
    ranks, digests = columns(typed(rows, "bb", where), 0, 2)
    check_ranks(ranks, f"{where}/{name}")
    return ranks, digests


def floors_at(
    conn: sqlite3.Connection, sid: int, version: int | None, where: str
) -> dict[str, bytes]:
    """Each list's floor at ``version`` (None: the latest), for lists that have one."""
    if version is None:
        rows = conn.execute(
            "SELECT list, floor FROM list_floors WHERE sid = ? AND version_to IS NULL", (sid,)
        ).fetchall()
    else:
        rows = conn.execute(
            rows_live_at("list_floors", "list, floor"), (sid, version, sid, version, version)
        ).fetchall()
    found = dict(typed(rows, "sb", where))
    if len(found) != len(rows):
        raise CorruptStoreError(f"{where}: a list has two floors", location=where)
    return found


def above_floors(lists: dict[str, StoredList], floors: dict[str, bytes]) -> dict[str, StoredList]:
    """``lists`` (each in rank order) without the rows at or below their list's floor."""
    out = {}
    for name, rows in lists.items():
        floor = floors.get(name)
        cut = 0 if floor is None or rows.ranks is None else bisect_right(rows.ranks, floor)
        if cut:
            rows = StoredList(
                rows.ids[cut:], rows.digests[cut:], rows.bodies[cut:], rows.ranks[cut:]
            )
        if rows.ids:
            out[name] = rows
    return out


def fts_query(query: str) -> str:
    """A MATCH expression that finds every word of ``query`` as a word prefix, anywhere.

    The words are those every store looks for (``search_words.query_words``): runs of letters
    and digits, so quotes, parentheses, ``*``, NUL and column filters in user input are never
    syntax; each is quoted as an FTS5 string all the same, and ``NEAR`` or ``AND`` is a word.
    """
    return " ".join(f'"{word}"*' for word in query_words(query))


def incarnation(sid: int, created_at: int) -> str:
    """One life of a session: row ids can be reused after a delete, creation times are not."""
    return f"{sid}.{created_at}"


def sums_at(
    conn: sqlite3.Connection, sid: int, version: int, where: str
) -> tuple[list_sums.Sums | None, bool]:
    """The list sums recorded at ``version`` (None if it was committed without them), and
    whether their id sums cover the ranks (versions committed since ranks exist)."""
    row = conn.execute(
        "SELECT lists, sums FROM versions WHERE sid = ? AND version = ?", (sid, version)
    ).fetchone()
    if typed_row(row, "BB", where) is None:
        raise CorruptStoreError(f"{where}: version {version} is not on record", location=where)
    if row[1] is not None:
        return list_sums.unpack(row[1], where), True
    return (None if row[0] is None else list_sums.unpack(row[0], where)), False


def sums_now(conn: sqlite3.Connection, sid: int, where: str) -> list_sums.Sums:
    """The list sums (over ranks) of the session's live rows, read from them (once per
    session last saved before such sums were recorded)."""
    rows = conn.execute(
        "SELECT list, rank, msg_id, digest, body FROM messages "
        "WHERE sid = ? AND version_to IS NULL ORDER BY list, rank",
        (sid,),
    ).fetchall()
    lists = above_floors(
        lists_from_rows(typed(rows, "sbsb", where), where), floors_at(conn, sid, None, where)
    )
    found: dict[str, Any] = {n: (r.digests, r.ids, r.ranks) for n, r in lists.items()}
    values = conn.execute(
        "SELECT digest, name FROM session_values WHERE sid = ? AND version_to IS NULL", (sid,)
    ).fetchall()
    found[list_sums.VALUES] = (
        [d for d, _ in values],
        [n for _, n in typed(values, "bs", where)],
        None,
    )
    return list_sums.of(found)


def check_sums(
    conn: sqlite3.Connection,
    sid: int,
    version: int,
    lists: dict[str, Any],
    values: list[Any],
    where: str,
) -> None:
    """Raise ``CorruptStoreError`` unless ``lists`` (name -> ``StoredList``, or the digests
    alone) and ``values`` (rows that start ``(name, digest)``) hold what the commit of
    ``version`` recorded; versions without a record pass."""
    sums, ranked = sums_at(conn, sid, version, where)
    if sums is not None:
        found: dict[str, Any] = {
            name: (rows.digests, rows.ids, rows.ranks if ranked else None)
            if isinstance(rows, StoredList)
            else (rows, None, None)
            for name, rows in lists.items()
        }
        found[list_sums.VALUES] = ([v[1] for v in values], [v[0] for v in values], None)
        list_sums.check(found, sums, where)
