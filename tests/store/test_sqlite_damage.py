"""SQLite on a damaged file: every outcome is a ``StoreError`` or exactly what was committed.

Byte flips: a small database is saved through a ledger (two sessions, several versions, values,
a list besides ``context``, a stored image). Each trial XORs one byte at a random offset of a
copy of the database file, or of its WAL (copied while a connection still had commits in it),
then reads everything back through a fresh ledger (every session at every version on record,
history, the session list, a search) and saves once more. Each trial must end in a
``StoreError`` or in exactly the committed content: never another exception, never different
content, and a save that reports success must read back as saved.

The committed content is, for the database file, the state after the last commit. For the WAL
it is the state after one of the commits: SQLite checks each WAL frame against a checksum chain
and takes the first frame that fails as the end of the log, which is also what a power loss
leaves (with ``synchronous=NORMAL`` a commit becomes durable at the next checkpoint). No reader
can tell the two apart, so a flipped frame drops its commit and every later one; what loads is
exactly the state before them, never a mix.

Quick mode (the default) runs ``QUICK`` trials per file. The long run, ``LONG`` trials per file
(a few minutes), prints its figures::

    AGENTLEDGER_FUZZ=long PYTHONPATH=src python -m pytest tests/store/test_sqlite_damage.py -s

Also here: the file truncated while open (it was a SIGBUS, through a 1 GiB memory map), and
regression cases for single damaged values (bad UTF-8, wrong types, out-of-range numbers).
"""

from __future__ import annotations

import collections
import os
import random
import shutil
import sqlite3
import subprocess
import sys
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from reliability import record

from agentledger import encode
from agentledger.errors import CorruptStoreError, StoreError, UserError
from agentledger.messages import Msg, digest_of, encode_value
from agentledger.store import CommitPlan, Ledger, ListWrite, SessionKey, StoredMsg, sqlite_db
from agentledger.store.sqlite import SqliteStore
from agentledger.testing.samples import every_block_message, sample_conversation

QUICK = 150
LONG = 10_000
LONG_MODE = os.environ.get("AGENTLEDGER_FUZZ", "").lower() == "long"
ROOT = Path(__file__).resolve().parents[2]

Content = dict[str, Any]
SESSIONS = ("a", "b")  # the sessions ``_commits`` saves


def _state(state: Any) -> tuple[Any, ...]:
    """What a load returned, as comparable bytes (every message encoded, so decoded)."""
    lists = {name: [(m.id, encode(m)) for m in msgs] for name, msgs in state.lists.items()}
    return state.version, lists, {k: encode_value(v) for k, v in state.values.items()}


def _content(ledger: Ledger) -> Content:
    """Every session at every version on record, and at its latest through the live rows.

    The session list and search are indexes derived from the content: they must answer or
    fail typed, but what they answer is not compared (a damaged entry can hide a session from
    the list; the session itself still loads, or fails).
    """
    out: Content = {}
    for name in SESSIONS:
        versions = [v.version for v in ledger.history(name)]
        out[name] = (
            _state(ledger.load(name)),
            [_state(ledger.load(name, version=v)) for v in versions],
        )
    ledger.list_sessions()
    ledger.search("ledger image")
    return out


def _commits() -> list[dict[str, Any]]:
    """The saves that build the database, in order (``save_state`` arguments)."""
    convo = sample_conversation(3, result_size=300)
    edited = list(convo)
    edited[5] = edited[5].replace(content="shortened")
    return [
        {"session": "a", "lists": {"context": convo[:4]}},
        {"session": "a", "lists": {"context": convo[:8]}},
        {
            "session": "a",
            "lists": {"context": convo, "notes": [Msg.user("note", id="n1")]},
            "values": {"title": "Chat A", "cfg": {"k": [1, 2.5, b"\x00\x01"]}},
        },
        {"session": "b", "lists": {"context": every_block_message()}},
        {"session": "a", "lists": {"context": edited[:10]}, "values": {"cfg": None}},
        {"session": "b", "lists": {"context": every_block_message()[:3]}},
    ]


class Damage:
    """A saved database, the content after each commit, and the copy a trial damages."""

    def __init__(self, root: Path, *, wal: bool) -> None:
        self.root = root
        self.wal = wal
        source = root / "source.db"
        store = SqliteStore(source)
        ledger = Ledger(store)
        self.states: list[Content] = [{}]
        for i, commit in enumerate(_commits()):
            ledger.save_state(commit.pop("session"), **commit)
            self.states.append(_content(Ledger(store)))
            if wal and i == 2:  # the first commits in the file, the rest in the WAL
                store._db().writer().execute("PRAGMA wal_checkpoint(TRUNCATE)")
        if wal:  # copied while open: the WAL still holds the last commits
            shutil.copy(source, root / "saved.db")
            shutil.copy(f"{source}-wal", root / "saved.db-wal")
        store.close()
        if not wal:
            shutil.copy(source, root / "saved.db")
        self.target = root / ("saved.db-wal" if wal else "saved.db")
        self.size = self.target.stat().st_size

    def trial(self, offset: int, xor: int, number: int) -> str:
        """Damage one byte of a fresh copy and check every operation; return the outcome."""
        path = self.root / f"trial{number}.db"
        shutil.copy(self.root / "saved.db", path)
        if self.wal:
            shutil.copy(self.root / "saved.db-wal", f"{path}-wal")
        target = Path(f"{path}-wal") if self.wal else path
        data = bytearray(target.read_bytes())
        data[offset] ^= xor
        target.write_bytes(bytes(data))
        where = f"{'WAL' if self.wal else 'database'} offset {offset} xor {xor}"
        try:
            outcome = self._check(path, where)
            assert str(path.resolve()) not in sqlite_db._registry, f"{where}: a store left open"
            return outcome
        finally:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)

    def _check(self, path: Path, where: str) -> str:
        outcome = "typed error"
        try:
            with Ledger(f"sqlite:///{path}") as ledger:
                found = _content(ledger)
            if found == self.states[-1]:
                outcome = "exact latest"
            elif self.wal and found in self.states:
                outcome = "exact earlier (WAL cut at the flip)"
            else:
                latest = self.states[-1]
                changed = sorted(k for k in {*found, *latest} if found.get(k) != latest.get(k))
                pytest.fail(f"{where}: loaded different content (sessions {changed}){_why(path)}")
        except StoreError as exc:
            outcome = f"typed error ({type(exc).__name__})"
        self._save_once_more(path, where)
        return outcome

    @staticmethod
    def _save_once_more(path: Path, where: str) -> None:
        """A save on the damaged file either fails typed or reads back exactly as saved."""
        msgs = [Msg.user("after the damage", id="after")]
        try:
            with Ledger(f"sqlite:///{path}") as ledger:
                report = ledger.save("a", msgs)
            with Ledger(f"sqlite:///{path}") as ledger:
                version, lists, _ = _state(ledger.load("a"))
        except StoreError:
            return
        assert (version, lists.get("context")) == (
            report.version,
            [(m.id, encode(m)) for m in msgs],
        ), f"{where}: a save reported success but reads back otherwise"


def _why(path: Path) -> str:
    """A hint for a failure: whether some message came back unlike its own stored digest
    (which the loader, decoding it, should have refused)."""
    with Ledger(f"sqlite:///{path}") as ledger:
        for name in SESSIONS:
            for version in ledger.history(name):
                state = ledger.load(name, version=version.version)
                for msgs in state.lists.values():
                    for m in msgs:
                        if digest_of(encode(m)) != m.digest:
                            return f"; message {m.id!r} decoded unlike its stored digest"
    return ""


def _run(damage: Damage, trials: int, seed: int) -> collections.Counter[str]:
    rng = random.Random(seed)
    outcomes: collections.Counter[str] = collections.Counter()
    for number in range(trials):
        offset, xor = rng.randrange(damage.size), rng.randrange(1, 256)
        try:
            outcomes[damage.trial(offset, xor, number)] += 1
        except (pytest.fail.Exception, AssertionError):
            raise
        except Exception as exc:
            kind = "WAL" if damage.wal else "database"
            pytest.fail(f"{kind} offset {offset} xor {xor}: untyped {type(exc).__name__}: {exc}")
    return outcomes


@pytest.mark.parametrize("wal", [False, True], ids=["database", "wal"])
def test_byte_flips_give_a_typed_error_or_the_committed_content(tmp_path: Path, wal: bool) -> None:
    damage = Damage(tmp_path, wal=wal)
    trials = LONG if LONG_MODE else QUICK
    outcomes = _run(damage, trials, seed=12 + wal)
    print(f"\n{damage.target.name} ({damage.size} bytes), {trials} flips: {dict(outcomes)}")
    record(
        "damage",
        f"SQLite byte flips in the {'WAL' if wal else 'database file'}",
        backend="sqlite",
        file_bytes=damage.size,
        trials=trials,
        outcomes=outcomes,
    )
    assert sum(outcomes.values()) == trials
    assert outcomes["exact latest"] > 0  # flips that touch nothing read must still load


# -- truncation ---------------------------------------------------------------------------------
_TRUNCATE_WHILE_OPEN = """
import os, sys
from agentledger.errors import StoreError
from agentledger.store import Ledger
from agentledger.testing.samples import sample_conversation

path = sys.argv[1]
msgs = sample_conversation(100, result_size=1000)
ledger = Ledger(f"sqlite:///{path}")
ledger.save("s", msgs)
ledger.store._db().writer().execute("PRAGMA wal_checkpoint(TRUNCATE)")
assert ledger.messages("s") == msgs  # a reader now has the whole file in view
os.truncate(path, 20 * 1024)
for opened in (ledger, Ledger(f"sqlite:///{path}")):
    try:
        print("exact" if opened.messages("s") == msgs else "different", flush=True)
    except StoreError as exc:
        print(type(exc).__name__, flush=True)
"""


def test_a_file_truncated_while_open_is_an_error_not_a_crash(tmp_path: Path) -> None:
    """In a child process: a SIGBUS would kill it (as the 1 GiB memory map once did)."""
    done = subprocess.run(
        [sys.executable, "-c", _TRUNCATE_WHILE_OPEN, str(tmp_path / "state.db")],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])},
    )
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    assert set(done.stdout.split()) <= {"exact", "CorruptStoreError"}, done.stdout


def test_a_truncated_file_opened_afresh_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with Ledger(f"sqlite:///{path}") as ledger:
        ledger.save("s", sample_conversation(30, result_size=1000))
    for size in (path.stat().st_size // 2, 1500, 100):
        os.truncate(path, size)
        with pytest.raises(CorruptStoreError), Ledger(f"sqlite:///{path}") as ledger:
            ledger.messages("s")


def test_no_reader_maps_the_file(tmp_path: Path) -> None:
    with Ledger(f"sqlite:///{tmp_path / 'state.db'}") as ledger:
        ledger.save("s", [Msg.user("x", id="x")])
        store = ledger.store
        assert isinstance(store, SqliteStore)
        with store._read() as conn:
            assert conn.execute("PRAGMA mmap_size").fetchone() == (0,)
        assert store._db().writer().execute("PRAGMA mmap_size").fetchone() == (0,)


# -- single damaged values ------------------------------------------------------------------------
def _damaged(tmp_path: Path, *statements: str) -> Path:
    """A saved database (session "s": two versions, a title, an image) damaged by
    ``statements``, run by another connection with the schema writable."""
    path = tmp_path / "state.db"
    with Ledger(f"sqlite:///{path}") as ledger:
        ledger.save("s", every_block_message()[:2])
        ledger.save_state("s", values={"title": "T", "n": 1})
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("PRAGMA writable_schema = ON")
        for statement in statements:
            conn.execute(statement)
    return path


def _bad_utf8(prefix: str) -> str:
    return f"CAST(x'{prefix.encode().hex()}e2ff' AS TEXT)"


@pytest.mark.parametrize(
    "statement",
    [
        # invalid UTF-8 in a schema row (was UnicodeDecodeError) and in data
        f"UPDATE sqlite_master SET sql = {_bad_utf8('CREATE')} WHERE name = 'sessions_recent'",
        f"UPDATE sqlite_master SET name = {_bad_utf8('sess')} WHERE name = 'sessions_recent'",
        f"UPDATE sessions SET title = {_bad_utf8('T')}",
        f"UPDATE messages SET msg_id = {_bad_utf8('m')}",
        f"UPDATE session_values SET name = {_bad_utf8('n')} WHERE name = 'n'",
        # wrong types, out-of-range numbers, broken cross-references
        "UPDATE sessions SET version = 'two'",
        "UPDATE sessions SET version = 7",
        "UPDATE sessions SET oldest_version = 2",
        "UPDATE sessions SET created_at = 'then'",
        "UPDATE sessions SET title = x'00'",
        "UPDATE sessions SET message_count = 2.5",
        "UPDATE versions SET committed_at = 9223372036854775807",
        "UPDATE versions SET appended = 'many'",
        "UPDATE versions SET version = 5 WHERE version = 1",
        "UPDATE messages SET rank = 'first' WHERE rank = x'4000000000000000'",
        "UPDATE messages SET rank = x'400000000000000180' WHERE rank = x'4000000000000000'",
        "UPDATE messages SET list = 3",
        # a row gone from the end of a list leaves no gap: the recorded length finds it
        "UPDATE messages SET version_to = 2 "
        "WHERE rank = x'4000000000000001' AND version_to IS NULL",
        "UPDATE versions SET sums = x'00' WHERE version = 2",
        # an id changed in its row, the body untouched: the recorded id sum finds it
        "UPDATE messages SET msg_id = 'other' WHERE rank = x'4000000000000000'",
        "UPDATE session_values SET raw = CAST('2' AS BLOB) WHERE name = 'n'",
        "UPDATE session_values SET raw = 'text' WHERE name = 'n'",
        "UPDATE session_values SET digest = 7",
        "UPDATE blobs SET data = zeroblob(length(data))",
        "UPDATE blobs SET data = 'text'",
        "UPDATE sqlite_master SET sql = replace(sql, 'version_to', 'version_XX') "
        "WHERE name = 'messages'",
    ],
)
def test_a_damaged_value_is_a_store_error_everywhere(tmp_path: Path, statement: str) -> None:
    path = _damaged(tmp_path, statement)
    operations = {
        "load": lambda ledger: _state(ledger.load("s")),
        "load v1": lambda ledger: _state(ledger.load("s", version=1)),
        "history": lambda ledger: ledger.history("s"),
        "sessions": lambda ledger: ledger.list_sessions(),
        "search": lambda ledger: ledger.search("Look"),
        "save": lambda ledger: ledger.save("s", [Msg.user("new", id="new")]),
    }
    errors = {}
    for name, operation in operations.items():
        try:
            with Ledger(f"sqlite:///{path}") as ledger:
                operation(ledger)
        except StoreError as exc:
            errors[name] = exc
    assert errors, "the damage went unnoticed by every operation"
    assert all(isinstance(e, CorruptStoreError) for e in errors.values()), errors


@pytest.mark.parametrize("title", [{"a": 1}, ["x"], 7, 2.5, True, b"t"])
def test_a_title_that_is_not_text_is_refused_before_writing(tmp_path: Path, title: Any) -> None:
    store = SqliteStore(tmp_path / "state.db")
    key = SessionKey("t", "s")
    row = StoredMsg("m", b"\x01" * 16, encode(Msg.user("x", id="m")), "x")

    def plan(base: int, title: Any) -> CommitPlan:
        lists = [ListWrite("context", [(base, row)], base + 1)]
        return CommitPlan(key, base, datetime.now(UTC), lists=lists, title=title)

    try:
        store.commit(plan(0, "kept"))
        with pytest.raises(UserError, match="title must be text"):
            store.commit(plan(1, title))
        assert store.read_version(key) == 1
        assert [i.title for i in store.list_sessions("t")] == ["kept"]
    finally:
        store.close()
