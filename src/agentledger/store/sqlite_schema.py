"""The SQLite database file's schema, as migrations.

Schema (``MIGRATIONS``, applied by ``migrate`` and recorded in ``schema_migrations``):

- ``sessions``: one row per ``(tenant, session)`` with a small integer ``sid`` that every other
  table uses, so a long tenant or session id is stored once, not in every row and index entry.
- ``messages``: every row ever put, live from ``version_from`` until ``version_to`` (NULL while
  live), at its ``rank`` (a rank key, see ``ranks``; step 5 renamed ``position`` to it). A row
  at or below its list's floor (``list_floors``, versioned as values are) is not in the list.
  Two *partial* indexes keep each write cheap: ``messages_live`` covers exactly the live rows
  and holds the digest and id, so ``read_head`` never touches a body; ``messages_dead`` covers
  only closed rows, so an append does not touch it at all.
- ``session_values``: named values, versioned the same way.
- ``versions``: one row per commit (what ``history`` returns), with ``sums``: the length,
  digest sum and id-and-rank sum of every list at that version (``list_sums``), which a load
  checks its rows against. Versions committed before step 5 have ``lists`` instead (sums of
  ids alone); before step 4, neither: those versions load unchecked.
- ``sessions_by_id``: the session keys once more, in the other column order: every lookup by
  key confirms through it what the table's own unique index found.
- ``blobs`` / ``blob_refs``: large media stored once per tenant by digest; ``blob_refs`` says which
  message rows use a blob, so delete and purge can drop blobs nothing references any more.
- ``messages_fts``: FTS5 over the text of *live* messages, with the view ``live_text`` as its
  external content (so ``rebuild`` / ``integrity-check`` agree with the index). Since step 6 the
  text is not stored: the view and the index's changes read it from the body with the SQL
  function ``body_text`` (``store.body_text``, checked against the row's ``text_digest``), which
  every connection registers; rows written before keep their copy in ``messages.text``. Another
  program's connection that changes ``messages`` needs it too (``define_body_text``): without
  it SQLite refuses the change. Triggers queue index changes in ``fts_queue`` (``fts_pending``
  before step 6); ``flush_fts`` applies them in batches.

Timestamps are integer microseconds since the Unix epoch, UTC. The connections to the file are
in ``sqlite_db``.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from agentledger.errors import CorruptStoreError, StoreError
from agentledger.store.body_text import text_of_body
from agentledger.store.ranks import position_rank

__all__ = [
    "FLUSH_FTS",
    "MIGRATIONS",
    "Migration",
    "applied_migrations",
    "define_body_text",
    "flush_fts",
    "migrate",
    "text_digest",
]


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema step. ``statements`` run in order inside the migrating transaction, after
    ``prepare`` (if any) has defined the SQL functions they use on the connection."""

    id: int
    name: str
    statements: tuple[str, ...]
    prepare: Callable[[sqlite3.Connection], None] | None = None


_INITIAL = (
    """
    CREATE TABLE sessions (
        sid INTEGER PRIMARY KEY,
        tenant TEXT NOT NULL,
        session TEXT NOT NULL,
        version INTEGER NOT NULL,
        oldest_version INTEGER NOT NULL DEFAULT 1,
        title TEXT,
        message_count INTEGER NOT NULL DEFAULT 0,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        UNIQUE (tenant, session)
    )
    """,
    "CREATE INDEX sessions_recent ON sessions (tenant, updated_at, session)",
    # Small columns first, then body, then text (which only the full-text index reads): a load
    # never walks the text's overflow pages.
    """
    CREATE TABLE messages (
        id INTEGER PRIMARY KEY,
        sid INTEGER NOT NULL,
        list TEXT NOT NULL,
        position INTEGER NOT NULL,
        version_from INTEGER NOT NULL,
        version_to INTEGER,
        msg_id TEXT NOT NULL,
        digest BLOB NOT NULL,
        body BLOB NOT NULL,
        text TEXT NOT NULL DEFAULT ''
    )
    """,
    """
    CREATE INDEX messages_live ON messages (sid, list, position, digest, version_to)
    WHERE version_to IS NULL
    """,
    """
    CREATE INDEX messages_dead ON messages (sid, version_to)
    WHERE version_to IS NOT NULL
    """,
    """
    CREATE TABLE session_values (
        id INTEGER PRIMARY KEY,
        sid INTEGER NOT NULL,
        name TEXT NOT NULL,
        version_from INTEGER NOT NULL,
        version_to INTEGER,
        digest BLOB NOT NULL,
        raw BLOB NOT NULL
    )
    """,
    """
    CREATE UNIQUE INDEX session_values_live ON session_values (sid, name)
    WHERE version_to IS NULL
    """,
    """
    CREATE INDEX session_values_dead ON session_values (sid, version_to)
    WHERE version_to IS NOT NULL
    """,
    """
    CREATE TABLE versions (
        sid INTEGER NOT NULL,
        version INTEGER NOT NULL,
        committed_at INTEGER NOT NULL,
        appended INTEGER NOT NULL,
        replaced INTEGER NOT NULL,
        truncated INTEGER NOT NULL,
        values_changed INTEGER NOT NULL,
        PRIMARY KEY (sid, version)
    ) WITHOUT ROWID
    """,
    """
    CREATE TABLE blobs (
        id INTEGER PRIMARY KEY,
        tenant TEXT NOT NULL,
        digest BLOB NOT NULL,
        data BLOB NOT NULL,
        UNIQUE (tenant, digest)
    )
    """,
    """
    CREATE TABLE blob_refs (
        tenant TEXT NOT NULL,
        digest BLOB NOT NULL,
        row_id INTEGER NOT NULL,
        PRIMARY KEY (tenant, digest, row_id)
    ) WITHOUT ROWID
    """,
    "CREATE INDEX blob_refs_row ON blob_refs (row_id)",
    """
    CREATE VIEW live_text AS
    SELECT id, text FROM messages WHERE version_to IS NULL AND text != ''
    """,
    """
    CREATE VIRTUAL TABLE messages_fts USING fts5(
        text, content='live_text', content_rowid='id',
        tokenize='unicode61 remove_diacritics 2'
    )
    """,
    # One FTS5 leaf per database page (the default assumes 4 KiB pages).
    """
    INSERT INTO messages_fts (messages_fts, rank)
    SELECT 'pgsz', page_size - 64 FROM pragma_page_size()
    """,
    # Rows waiting to be added to (op 1) or removed from (op -1) the full-text index. Indexing
    # in batches, not in every commit, is what keeps a commit's cost at the size of the change:
    # every FTS5 flush writes a new segment, its structure record and merge work (about eight
    # pages, more than the rows themselves). ``flush_fts`` applies the queue.
    """
    CREATE TABLE fts_pending (
        row_id INTEGER PRIMARY KEY,
        op INTEGER NOT NULL
    )
    """,
    """
    CREATE TRIGGER messages_insert AFTER INSERT ON messages
    WHEN new.version_to IS NULL AND new.text != ''
    BEGIN
        INSERT INTO fts_pending (row_id, op) VALUES (new.id, 1);
    END
    """,
    # A closed row still waiting to be added was never indexed: drop it from the queue;
    # otherwise queue its removal (its text stays in the row, as FTS5 'delete' needs).
    """
    CREATE TRIGGER messages_close AFTER UPDATE OF version_to ON messages
    WHEN old.version_to IS NULL AND new.version_to IS NOT NULL AND old.text != ''
    BEGIN
        INSERT INTO fts_pending (row_id, op) SELECT old.id, -1
        WHERE NOT EXISTS (SELECT 1 FROM fts_pending WHERE row_id = old.id);
        DELETE FROM fts_pending WHERE row_id = old.id AND op = 1;
    END
    """,
    # A deleted row leaves the index at once (its text goes with it).
    """
    CREATE TRIGGER messages_delete AFTER DELETE ON messages
    BEGIN
        INSERT INTO messages_fts (messages_fts, rowid, text)
        SELECT 'delete', old.id, old.text
        WHERE old.text != '' AND coalesce(
            (SELECT op = -1 FROM fts_pending WHERE row_id = old.id), old.version_to IS NULL);
        DELETE FROM fts_pending WHERE row_id = old.id;
        DELETE FROM blob_refs WHERE row_id = old.id;
    END
    """,
)

# ``has_media``: 1 once the session has written a row that references stored media. A load of a
# session without it skips searching every body for references.
_HAS_MEDIA = (
    "ALTER TABLE sessions ADD COLUMN has_media INTEGER NOT NULL DEFAULT 0",
    """
    UPDATE sessions SET has_media = 1
    WHERE sid IN (SELECT m.sid FROM blob_refs r JOIN messages m ON m.id = r.row_id)
    """,
)

# One live row per position, refused by the database itself (as Postgres's messages_live): a
# load then needs no position from each row, only the first and last of each list.
_LIVE_POSITION = (
    """
    CREATE UNIQUE INDEX messages_live_position ON messages (sid, list, position)
    WHERE version_to IS NULL
    """,
)

# What each list holds at each version (see ``list_sums``); the next commit of a session saved
# before this step computes it once from the session's live rows. A second index of session
# keys, so that a lookup can confirm what the first found (``sqlite_rows.find_session``).
_INTEGRITY = (
    "ALTER TABLE versions ADD COLUMN lists BLOB",
    "CREATE UNIQUE INDEX sessions_by_id ON sessions (session, tenant)",
)

# Rank keys instead of positions (see ``ranks``): a shift writes the rows it adds, never the
# rows after it. Every row, live or closed, gets the rank of its position, which keeps the order
# of every past version. The column keeps the INTEGER type the first step declared (SQLite cannot
# change it in place); it holds BLOBs, which sort byte by byte. ``list_floors`` holds each
# list's floor, versioned as values are: rows ranked at or below the floor live at a version are
# not in the list at it. ``versions.sums`` records list sums whose id sums cover the ranks;
# ``versions.lists`` keeps those of versions committed before this step.
_RANKS = (
    "ALTER TABLE messages RENAME COLUMN position TO rank",
    "UPDATE messages SET rank = position_rank(rank)",
    """
    CREATE TABLE list_floors (
        id INTEGER PRIMARY KEY,
        sid INTEGER NOT NULL,
        list TEXT NOT NULL,
        version_from INTEGER NOT NULL,
        version_to INTEGER,
        floor BLOB NOT NULL
    )
    """,
    "CREATE UNIQUE INDEX list_floors_live ON list_floors (sid, list) WHERE version_to IS NULL",
    """
    CREATE INDEX list_floors_dead ON list_floors (sid, version_to)
    WHERE version_to IS NOT NULL
    """,
    "ALTER TABLE versions ADD COLUMN sums BLOB",
    # The live index covers the ids too: raising a floor reads the rows it hides from it alone.
    "DROP INDEX messages_live",
    """
    CREATE INDEX messages_live ON messages (sid, list, rank, digest, msg_id, version_to)
    WHERE version_to IS NULL
    """,
)


def _define_position_rank(conn: sqlite3.Connection) -> None:
    conn.create_function("position_rank", 1, position_rank, deterministic=True)


# The full-text index reads a row's text from its body (``body_text``, registered on every
# connection) instead of a copy in the row: the copy was most of a row's bytes (the text of the
# benchmark's messages is 88% of their bodies' size), written in every commit and read by
# nothing else. The row keeps ``text_digest`` instead, 8 bytes of BLAKE2b of the text it was
# committed with (NULL when it has none, so such rows never enter the queue), and ``body_text``
# gives the text only while the body still yields that text: FTS5 must be told to remove a row
# with the very words it indexed, and a body damaged after its row was indexed would otherwise
# tell it other words and leave the whole index unreadable ("database disk image is
# malformed"). Such a row's words stay in the index, which ``check_integrity`` reports; searches
# skip them, as they skip every row that is not live. Rows written before this step keep their
# ``text`` and a NULL ``text_digest``: each row leaves the index with the text it entered it with.
# The queue is renamed ``fts_queue``: a process still running an earlier agentledger on the file
# would flush it with the ``text`` column, which new rows leave empty, and tell the index to
# remove words it holds as none; its commits fail on the missing table instead, and roll back.
_BODY_TEXT = (
    "DROP TRIGGER messages_insert",
    "DROP TRIGGER messages_close",
    "DROP TRIGGER messages_delete",
    "DROP VIEW live_text",
    "ALTER TABLE fts_pending RENAME TO fts_queue",
    "ALTER TABLE messages ADD COLUMN text_digest BLOB",
    """
    CREATE VIEW live_text AS
    SELECT id, CASE WHEN text_digest IS NULL THEN text ELSE body_text(body, text_digest) END
        AS text
    FROM messages WHERE version_to IS NULL AND (text_digest IS NOT NULL OR text != '')
    """,
    """
    CREATE TRIGGER messages_insert AFTER INSERT ON messages
    WHEN new.version_to IS NULL AND (new.text_digest IS NOT NULL OR new.text != '')
    BEGIN
        INSERT INTO fts_queue (row_id, op) VALUES (new.id, 1);
    END
    """,
    """
    CREATE TRIGGER messages_close AFTER UPDATE OF version_to ON messages
    WHEN old.version_to IS NULL AND new.version_to IS NOT NULL
        AND (old.text_digest IS NOT NULL OR old.text != '')
    BEGIN
        INSERT INTO fts_queue (row_id, op) SELECT old.id, -1
        WHERE NOT EXISTS (SELECT 1 FROM fts_queue WHERE row_id = old.id);
        DELETE FROM fts_queue WHERE row_id = old.id AND op = 1;
    END
    """,
    """
    CREATE TRIGGER messages_delete AFTER DELETE ON messages
    BEGIN
        INSERT INTO messages_fts (messages_fts, rowid, text)
        SELECT 'delete', old.id, t.text FROM (
            SELECT CASE WHEN old.text_digest IS NULL THEN old.text
                ELSE body_text(old.body, old.text_digest) END AS text
        ) t
        WHERE t.text IS NOT NULL AND t.text != '' AND coalesce(
            (SELECT op = -1 FROM fts_queue WHERE row_id = old.id), old.version_to IS NULL);
        DELETE FROM fts_queue WHERE row_id = old.id;
        DELETE FROM blob_refs WHERE row_id = old.id;
    END
    """,
)


def text_digest(text: str) -> bytes | None:
    """What a row written since schema step 6 keeps of its searchable text (None: it has none)."""
    if not text:
        return None
    # Committed text is valid and msgspec refuses lone surrogates in a body, so strict
    # encoding would do; surrogatepass only makes sure a flush can never fail in here.
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()


def _body_text(body: bytes, digest: bytes) -> str | None:
    """The text of ``body`` for the full-text index, if it is the text ``digest`` was made of
    (None otherwise: the body is not what was committed)."""
    text = text_of_body(body)
    return text if text_digest(text) == digest else None


def define_body_text(conn: sqlite3.Connection) -> None:
    """Register ``body_text(body, text_digest)``, which the full-text index's triggers, queue
    and content view call (schema step 6): every connection to the file needs it."""
    conn.create_function("body_text", 2, _body_text, deterministic=True)


#: Every schema step, oldest first. Append new steps; never edit or reorder applied ones.
MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "initial schema", _INITIAL),
    Migration(2, "sessions.has_media", _HAS_MEDIA),
    Migration(3, "one live message per position", _LIVE_POSITION),
    Migration(4, "list sums in versions.lists; a second session key index", _INTEGRITY),
    Migration(5, "rank keys, list floors, list sums over ranks", _RANKS, _define_position_rank),
    Migration(6, "full-text index reads text from the body", _BODY_TEXT, define_body_text),
)

_LEDGER = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at TEXT NOT NULL
)
"""


def applied_migrations(conn: sqlite3.Connection) -> list[int]:
    """Ids of the steps recorded in this database (empty for a new file). Reads only."""
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
    ).fetchone()
    if not exists:
        return []
    ids = [row[0] for row in conn.execute("SELECT id FROM schema_migrations ORDER BY id")]
    if not set(map(type, ids)) <= {int}:  # a damaged page
        raise CorruptStoreError(f"schema_migrations holds an id that is not a number: {ids!r}")
    return ids


def migrate(conn: sqlite3.Connection, begin: Callable[[sqlite3.Connection], None]) -> int:
    """Apply the missing steps in one write transaction; return how many were applied.

    ``begin`` opens the write transaction (``begin_immediate``). When every step is
    already recorded nothing is written at all, so a second ``setup()`` leaves the file as it
    is. Two processes migrating at once serialize on the write lock; the second finds the steps
    recorded and applies none.
    """
    latest = MIGRATIONS[-1].id
    _check_not_newer(applied_migrations(conn), latest)
    if set(applied_migrations(conn)) >= {m.id for m in MIGRATIONS}:
        return 0
    begin(conn)
    try:
        conn.execute(_LEDGER)
        done = set(applied_migrations(conn))
        _check_not_newer(sorted(done), latest)
        count = 0
        now = datetime.now(UTC).isoformat()
        for step in MIGRATIONS:
            if step.id in done:
                continue
            if step.prepare is not None:
                step.prepare(conn)
            for statement in step.statements:
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_migrations (id, name, applied_at) VALUES (?, ?, ?)",
                (step.id, step.name, now),
            )
            count += 1
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return count


def _check_not_newer(applied: list[int], latest: int) -> None:
    """Refuse a database a newer agentledger migrated. A newer version applies every step up
    to its own, in order: a step past ours with gaps before it is a damaged record."""
    if applied and applied[-1] > latest:
        if applied != list(range(1, len(applied) + 1)):
            shown = applied if len(applied) <= 10 else [*applied[:10], "..."]
            raise CorruptStoreError(f"schema_migrations is damaged: it records the steps {shown}")
        raise StoreError(
            f"this database was migrated by a newer agentledger (schema step {applied[-1]}, "
            f"this version knows up to {latest}); upgrade agentledger to open it"
        )


#: The queued rows' index changes. Each reads the queue and looks its rows up by id
#: (``CROSS JOIN`` fixes that order, ``ORDER BY p.row_id`` is the queue's own order): written
#: as a plain join ordered by ``m.id``, SQLite scanned every row of ``messages`` in id order
#: and probed the queue, so each flush cost the whole store (20 ms a session at 40,000
#: sessions of 10 messages, growing with the store). A row's text is read as step 6 says.
_QUEUED = (
    "SELECT m.id, CASE WHEN m.text_digest IS NULL THEN m.text "
    "ELSE body_text(m.body, m.text_digest) END AS text "
    "FROM fts_queue p CROSS JOIN messages m ON m.id = p.row_id WHERE p.op = {op} "
    "ORDER BY p.row_id"
)
FLUSH_FTS = (
    "INSERT INTO messages_fts (messages_fts, rowid, text) SELECT 'delete', id, text FROM "
    f"({_QUEUED.format(op=-1)}) WHERE text IS NOT NULL",
    f"INSERT INTO messages_fts (rowid, text) SELECT id, text FROM ({_QUEUED.format(op=1)}) "
    "WHERE text IS NOT NULL",
)


def flush_fts(conn: sqlite3.Connection) -> int:
    """Apply the queued full-text index changes (inside a write transaction); return how many."""
    for statement in FLUSH_FTS:
        conn.execute(statement)
    return conn.execute("DELETE FROM fts_queue").rowcount
