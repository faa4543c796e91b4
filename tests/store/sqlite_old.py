"""SQLite files as an older agentledger left them, made from a file of today's schema."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from agentledger.store.sqlite_schema import MIGRATIONS, define_body_text

_START = 1 << 62


def as_before_body_text(path: Path) -> None:
    """Undo schema step 6: every row holds its searchable text in ``text`` (as the full-text
    index was given it), with the view and triggers of step 1 that read it from there."""
    old = [s for s in MIGRATIONS[0].statements if "live_text AS" in s or "CREATE TRIGGER" in s]
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        define_body_text(conn)
        conn.execute("BEGIN")
        conn.execute(
            "UPDATE messages SET text = body_text(body, text_digest) WHERE text_digest IS NOT NULL"
        )
        conn.execute("DROP VIEW live_text")
        for trigger in ("messages_insert", "messages_close", "messages_delete"):
            conn.execute(f"DROP TRIGGER {trigger}")
        conn.execute("ALTER TABLE fts_queue RENAME TO fts_pending")
        for statement in old:
            conn.execute(statement)
        conn.execute("ALTER TABLE messages DROP COLUMN text_digest")
        conn.execute("DELETE FROM schema_migrations WHERE id = 6")
        conn.execute("COMMIT")


def as_before_ranks(path: Path) -> None:
    """Undo schema steps 6 and 5 (rank keys) on a file whose lists only ever grew at the end:
    ranks back to positions, no floors, versions recorded without list sums (which, before
    step 5, loads unchecked and records sums on the next save)."""
    as_before_body_text(path)
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.create_function("rank_position", 1, lambda rank: int.from_bytes(rank, "big") - _START)
        conn.execute("BEGIN")
        conn.execute("UPDATE messages SET rank = rank_position(rank)")
        conn.execute("ALTER TABLE messages RENAME COLUMN rank TO position")
        conn.execute("DROP TABLE list_floors")
        conn.execute("ALTER TABLE versions DROP COLUMN sums")
        conn.execute("DELETE FROM schema_migrations WHERE id = 5")
        conn.execute("COMMIT")
