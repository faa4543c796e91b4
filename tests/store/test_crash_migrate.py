"""SIGKILL during a schema migration, on SQLite and Postgres (JSONL has no schema to migrate:
an older log format is read as it is).

Each round makes the store look like one written before a migration that touches every message (on
SQLite step 5, which maps each row's position to a rank key; on Postgres step 5, which turns the
text of every live row into its search words), starts a writer that opens the store (which
migrates it, over 6,000 messages) and then saves, and SIGKILLs it at a random moment. A fresh ledger
must then migrate the store, load exactly the last acknowledged version (or the save in flight), and
take the next save.

``AGENTLEDGER_MIGRATE_KILLS`` sets the kills per backend (default 6; the full reliability run
sets 50).
"""

from __future__ import annotations

import collections
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from reliability import knob, record

from agentledger.messages import Msg
from agentledger.store import Ledger
from agentledger.store.postgres_schema import MIGRATIONS
from agentledger.store.sqlite_schema import MIGRATIONS as SQLITE_MIGRATIONS
from tests.store.backends import backend_of, store_url
from tests.store.sqlite_old import as_before_ranks

ROOT = Path(__file__).resolve().parents[2]
KILLS = knob("AGENTLEDGER_MIGRATE_KILLS", 6)
pytestmark = pytest.mark.slow

_WRITER = """
import sys
from agentledger.messages import Msg
from agentledger.store import Ledger
print("opening", flush=True)
ledger = Ledger(sys.argv[1])
state = ledger.load("s")
print("migrated", flush=True)
tag = sys.argv[2]
msgs = [*state.context, Msg.user(tag, id=tag, created_at=None)]
print("saved", ledger.save("s", msgs, expected_version=state.version).version, flush=True)
"""


def _unmigrate(url: str) -> None:
    """Make the store look as a version before its last migration step left it."""
    if url.startswith("sqlite"):  # step 5 maps every row's position to a rank, 6 adds a column
        as_before_ranks(Path(url.removeprefix("sqlite:///")))
        return
    import psycopg

    server, _, schema = url.rpartition("schema=")
    with psycopg.connect(server.rstrip("?&"), autocommit=True) as conn, conn.transaction():
        conn.execute(f'DROP INDEX "{schema}".messages_words')
        conn.execute(f'ALTER TABLE "{schema}".messages DROP COLUMN words')
        conn.execute(f'UPDATE "{schema}".messages SET text = msg_id')  # kept for the parser
        conn.execute(MIGRATIONS[2][2].format(schema=f'"{schema}"'))  # its index, as it was
        conn.execute(f'DELETE FROM "{schema}".schema_migrations WHERE version >= 5')


def _migrated(url: str) -> bool:
    if url.startswith("sqlite"):
        with closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as conn:
            latest = "SELECT 1 FROM schema_migrations WHERE id = ?"
            return conn.execute(latest, (SQLITE_MIGRATIONS[-1].id,)).fetchone() is not None
    import psycopg

    server, _, schema = url.rpartition("schema=")
    with psycopg.connect(server.rstrip("?&")) as conn:
        query = f'SELECT 1 FROM "{schema}".schema_migrations WHERE version = 5'
        return conn.execute(query).fetchone() is not None


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def migrated_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with store_url(request.param, tmp_path) as url:
        yield url


def test_sigkill_during_a_migration_keeps_every_acknowledged_commit(migrated_url: str) -> None:
    url, rng = migrated_url, random.Random(5)
    with Ledger(url) as ledger:
        ledger.save("s", [Msg.user(f"m{i} " + "x" * 100, id=f"m{i}") for i in range(6000)])
        expected = [m.id for m in ledger.messages("s")]
    version = 1
    outcomes: collections.Counter[str] = collections.Counter()
    for kill in range(KILLS):
        _unmigrate(url)
        tag = f"w{kill}"
        child = subprocess.Popen(
            [sys.executable, "-c", _WRITER, url, tag],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])},
        )
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == "opening"
            time.sleep(rng.uniform(0, 0.4))
            child.send_signal(signal.SIGKILL)
            said, _ = child.communicate(timeout=30)
        finally:
            if child.poll() is None:
                child.kill()
                child.communicate()
        if not _migrated(url):
            outcomes["killed before the migration committed"] += 1
        elif "saved" not in said:
            outcomes["killed after the migration, before its save was acknowledged"] += 1
        else:
            outcomes["killed after its save"] += 1
        with Ledger(url) as ledger:  # migrates again if the kill undid it
            msgs = ledger.messages("s")
            found = ledger.version("s")
            if "saved" in said or found == version + 1:  # acknowledged, or in flight and landed
                expected, version = [*expected, tag], version + 1
            assert (found, [m.id for m in msgs]) == (version, expected), f"round {kill}"
            assert _migrated(url)
            extra = f"after{kill}"
            ledger.save("s", [*msgs, Msg.user(extra, id=extra)], expected_version=version)
            expected, version = [*expected, extra], version + 1
    print(f"\n{KILLS} kills: {dict(outcomes)}")
    record(
        "crash",
        "SIGKILL during a schema migration over 6,000 messages",
        backend=backend_of(url),
        kills=KILLS,
        outcomes=outcomes,
    )
