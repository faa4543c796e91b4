"""SQLite files as an older agentledger left them, made from a file of today's schema."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

_START = 1 << 62


def as_before_ranks(path: Path) -> None:
    """Undo schema step 5 (rank keys) on a file whose lists only ever grew at the end: ranks
    back to positions, no floors, versions recorded without list sums (which, before step 5,
    loads unchecked and records sums on the next save)."""
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.create_function("rank_position", 1, lambda rank: int.from_bytes(rank, "big") - _START)
        conn.execute("BEGIN")
        conn.execute("UPDATE messages SET rank = rank_position(rank)")
        conn.execute("ALTER TABLE messages RENAME COLUMN rank TO position")
        conn.execute("DROP TABLE list_floors")
        conn.execute("ALTER TABLE versions DROP COLUMN sums")
        conn.execute("DELETE FROM schema_migrations WHERE id = 5")
        conn.execute("COMMIT")
