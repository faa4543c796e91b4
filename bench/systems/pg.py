"""What every PostgreSQL system of the benchmark shares: the server, a schema per store, its size.

Every Postgres system (agentledger's and the peers') writes into a schema of its own on the same
local server (``AGENTLEDGER_BENCH_POSTGRES``, default ``postgresql://postgres@127.0.0.1:5432/
test``), named ``bench_<random>_<generation>`` and dropped at the end. The store's size is the
schema's relations; the bytes an operation writes are the server's WAL growth, read around it on
a connection kept for that. Needs only ``psycopg``, which both interpreters have.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

__all__ = [
    "PG_DEFAULT",
    "PG_ENV",
    "SCHEMA_ENV",
    "OnPostgres",
    "PgSchemas",
    "Unavailable",
    "base_url",
]

PG_ENV = "AGENTLEDGER_BENCH_POSTGRES"
PG_DEFAULT = "postgresql://postgres@127.0.0.1:5432/test"
#: Set by ``bench.pg_throughput`` so that its processes share one schema (it drops it).
SCHEMA_ENV = "AGENTLEDGER_BENCH_PG_SCHEMA"


class Unavailable(Exception):
    """The system cannot run here (not built yet, or no server); the message says why."""


def base_url() -> str:
    return os.environ.get(PG_ENV) or PG_DEFAULT


class PgSchemas:
    """A schema name per storage generation, the WAL counter, the size, and the clean-up."""

    def __init__(self) -> None:
        self.prefix = os.environ.get(SCHEMA_ENV) or f"bench_{uuid.uuid4().hex[:12]}"
        self._counter: Any = None

    @staticmethod
    def probe() -> None:
        import psycopg

        try:
            with psycopg.connect(base_url(), connect_timeout=3) as conn:
                conn.execute("SELECT 1")
        except Exception as exc:
            raise Unavailable(f"no PostgreSQL at {base_url()}: {exc}") from None

    @staticmethod
    def server_version() -> str:
        import psycopg

        with psycopg.connect(base_url()) as conn:
            return str(conn.execute("SHOW server_version").fetchone()[0])

    def name(self, generation: int) -> str:
        return f"{self.prefix}_{generation}"

    def create(self, generation: int) -> str:
        """Create generation's schema (for systems that do not create their own); its name."""
        import psycopg

        name = self.name(generation)
        with psycopg.connect(base_url(), autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{name}"')
        return name

    def size(self, generation: int) -> int:
        import psycopg

        with psycopg.connect(base_url()) as conn:
            row = conn.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = %s AND c.relkind IN ('r', 'm')",
                (self.name(generation),),
            ).fetchone()
        return int(row[0])

    def wal(self) -> dict[str, int]:
        """The server's WAL position in bytes (one connection, kept)."""
        if self._counter is None:
            import psycopg

            self._counter = psycopg.connect(base_url(), autocommit=True)
        sql = "SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn"
        return {"server_wal_bytes": int(self._counter.execute(sql).fetchone()[0])}

    def drop(self, generations: int) -> None:
        import psycopg

        if self._counter is not None:
            self._counter.close()
            self._counter = None
        with psycopg.connect(base_url(), autocommit=True) as conn:
            for g in range(generations + 1):
                conn.execute(f'DROP SCHEMA IF EXISTS "{self.name(g)}" CASCADE')


class OnPostgres:
    """The storage figures of a peer whose store is its schema on the server (mixed in before
    the peer's own class): no file, the schema's size, the server's WAL. The system sets
    ``_pg`` and has ``generation``."""

    _pg: PgSchemas
    generation: int

    def storage_path(self) -> str | None:
        return None

    def storage_bytes(self) -> int | None:
        return self._pg.size(self.generation)

    def counters(self) -> dict[str, int]:
        return self._pg.wal()
