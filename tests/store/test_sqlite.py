"""``sqlite://`` specifics: file untouched by no-op saves, migrations, the shared writer, full-text
search, blobs, bytes written per save, corruption and busy handling.

The behaviour every backend shares is checked by the conformance suite (bottom of this file).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agentledger import decode, encode
from agentledger.errors import (
    ClosedError,
    ConflictError,
    CorruptStoreError,
    StoreError,
    UserError,
    VersionNotFoundError,
)
from agentledger.messages import ImageBlock, Msg
from agentledger.store import (
    CommitPlan,
    Ledger,
    ListWrite,
    SessionKey,
    StoredMsg,
    open_store,
    sqlite_db,
    sqlite_rows,
)
from agentledger.store import sqlite as sqlite_module
from agentledger.store.sqlite import SqliteStore
from agentledger.store.sqlite_schema import FLUSH_FTS, MIGRATIONS, define_body_text, migrate
from agentledger.testing.conformance import StoreConformance
from agentledger.testing.samples import every_block_message, sample_conversation, turn
from agentledger.testing.statemachine import run_ledger_state_machine
from tests.store.sqlite_old import as_before_ranks

OpenLedger = Callable[[], Ledger]


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state.db"


@pytest.fixture
def open_ledger(db_path: Path) -> Iterator[OpenLedger]:
    """Opens a new Ledger (new store, empty cache) on the same file; closes them all after."""
    ledgers: list[Ledger] = []

    def open_() -> Ledger:
        ledgers.append(Ledger(SqliteStore(db_path)))
        return ledgers[-1]

    yield open_
    for ledger in ledgers:
        ledger.store.close()  # a Ledger leaves a store it was given open


def _sql(path: Path, query: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    """Run one statement on a separate connection (as another tool would) and close it. The
    connection defines ``body_text``, which a change to ``messages`` needs (schema step 6)."""
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        define_body_text(conn)
        return conn.execute(query, params).fetchall()


def _three() -> list[Msg]:
    return [Msg.user(f"m{i}", id=f"m{i}") for i in range(3)]


def _save_three_and_damage(open_ledger: OpenLedger, db_path: Path, damage: str) -> None:
    """Save messages m0, m1, m2 in session "s", then run ``damage`` on the file as another
    tool would."""
    open_ledger().save("s", _three())
    _sql(db_path, damage)


# A second live row at m1's position (what messages_live_position refuses).
_DUPLICATE_M1 = (
    "INSERT INTO messages (sid, list, rank, version_from, msg_id, digest, body) "
    "SELECT sid, list, rank, version_from, 'x', digest, body FROM messages "
    "WHERE msg_id = 'm1'"
)


def _file_state(path: Path) -> list[tuple[int, int]]:
    return [(p.stat().st_mtime_ns, p.stat().st_size) for p in (path, Path(f"{path}-wal"))]


def _checkpoint(path: Path) -> None:
    """Move the WAL into the database and empty it, through SQLite, so growth can be measured."""
    busy, _, _ = _sql(path, "PRAGMA wal_checkpoint(TRUNCATE)")[0]
    assert busy == 0


def _wal_bytes(path: Path) -> int:
    return Path(f"{path}-wal").stat().st_size


# -- seed 000 ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("size", "positions"), [(10, [3]), (1000, [3, 251, 749])], ids=["10", "1000"]
)
def test_seed_000_edits_anywhere_persist_and_equal_lists_touch_nothing(
    open_ledger: OpenLedger, db_path: Path, size: int, positions: list[int]
) -> None:
    msgs = [Msg.user(f"message {i}", id=f"m{i}") for i in range(size)]
    open_ledger().save("s", msgs)
    edited = list(msgs)
    for p in positions:  # 1000 // 4 = 250, 500, 750: a 5-point sampler never reads these
        edited[p] = edited[p].replace(content=f"EDITED {p}")
    report = open_ledger().save("s", edited)
    assert report.replaced == len(positions) and report.version == 2

    reloaded = open_ledger().messages("s")
    assert [reloaded[p].text for p in positions] == [f"EDITED {p}" for p in positions]
    assert reloaded == edited

    ledger = open_ledger()
    rebuilt = [decode(encode(m)) for m in ledger.messages("s")]
    before = _file_state(db_path)
    report = ledger.save("s", rebuilt)
    assert report.noop and report.version == 2
    assert open_ledger().save("s", [decode(encode(m)) for m in edited]).noop  # never loaded
    assert _file_state(db_path) == before


# -- migrations and connections ----------------------------------------------------------------
def test_migrations_are_recorded_and_idempotent(db_path: Path) -> None:
    store = SqliteStore(db_path)
    try:
        store.setup()
        recorded = _sql(db_path, "SELECT id, name FROM schema_migrations ORDER BY id")
        assert recorded == [(m.id, m.name) for m in MIGRATIONS]
        before = _file_state(db_path)
        store.setup()
        with closing(sqlite3.connect(db_path, isolation_level=None)) as conn:
            assert migrate(conn, lambda c: c.execute("BEGIN IMMEDIATE")) == 0
        assert _file_state(db_path) == before
        assert _sql(db_path, "PRAGMA journal_mode") == [("wal",)]
        assert _sql(db_path, "PRAGMA page_size") == [(sqlite_db.PAGE_SIZE,)]
    finally:
        store.close()


@pytest.mark.parametrize(
    ("recorded", "error"),
    [
        ([*range(1, len(MIGRATIONS) + 2)], StoreError),  # a newer agentledger: upgrade
        ([1, 2, 3, 50], CorruptStoreError),  # a flipped byte (found by the page-flip test)
        ([1, 3, 50], CorruptStoreError),
    ],
)
def test_a_newer_schema_is_told_apart_from_a_damaged_record_of_steps(
    db_path: Path, recorded: list[int], error: type[StoreError]
) -> None:
    store = SqliteStore(db_path)
    store.setup()
    store.close()
    with closing(sqlite3.connect(db_path, isolation_level=None)) as conn:
        conn.execute("DELETE FROM schema_migrations")
        for step in recorded:
            conn.execute(
                "INSERT INTO schema_migrations (id, name, applied_at) VALUES (?, 's', 'now')",
                (step,),
            )
    with pytest.raises(error) as info:
        Ledger(f"sqlite:///{db_path}")
    assert (type(info.value) is StoreError) == (error is StoreError)
    assert ("newer" in str(info.value)) == (error is StoreError)


def test_media_sessions_from_before_the_has_media_flag_still_load_their_media(
    db_path: Path,
) -> None:
    msgs = every_block_message()
    with Ledger(f"sqlite:///{db_path}") as ledger:
        ledger.save("media", msgs)
        ledger.save("plain", [Msg.user("hi", id="p")])
    flags = "SELECT session, has_media FROM sessions ORDER BY session"
    assert _sql(db_path, flags) == [("media", 1), ("plain", 0)]
    # make the file look like one written before migration 2
    _sql(db_path, "ALTER TABLE sessions DROP COLUMN has_media")
    _sql(db_path, "DELETE FROM schema_migrations WHERE id = 2")
    with Ledger(f"sqlite:///{db_path}") as ledger:
        loaded = ledger.messages("media")
    assert loaded == msgs and loaded[1].content[1].data == msgs[1].content[1].data
    assert _sql(db_path, flags) == [("media", 1), ("plain", 0)]


def test_the_database_refuses_a_second_live_row_at_a_position(db_path: Path) -> None:
    with Ledger(f"sqlite:///{db_path}") as ledger:
        ledger.save("s", _three())
    with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"):
        _sql(db_path, _DUPLICATE_M1)


def _as_before_migration_3(db_path: Path) -> None:
    as_before_ranks(db_path)
    _sql(db_path, "DROP INDEX messages_live_position")
    _sql(db_path, "DELETE FROM schema_migrations WHERE id = 3")


def test_migration_3_indexes_live_positions_of_an_existing_file(db_path: Path) -> None:
    msgs = _three()
    with Ledger(f"sqlite:///{db_path}") as ledger:
        ledger.save("s", msgs)
    _as_before_migration_3(db_path)
    with Ledger(f"sqlite:///{db_path}") as ledger:
        assert ledger.messages("s") == msgs
    index = "SELECT name FROM sqlite_master WHERE name = 'messages_live_position'"
    assert _sql(db_path, index) == [("messages_live_position",)]


def test_a_file_with_two_live_rows_at_a_position_is_reported_not_migrated(
    db_path: Path,
) -> None:
    with Ledger(f"sqlite:///{db_path}") as ledger:
        ledger.save("s", _three())
    _as_before_migration_3(db_path)
    _sql(db_path, _DUPLICATE_M1.replace("rank", "position"))
    before = db_path.read_bytes()
    with pytest.raises(CorruptStoreError, match="UNIQUE constraint failed") as info:
        Ledger(f"sqlite:///{db_path}").messages("s")
    assert info.value.location == str(db_path.resolve())
    assert (3,) not in _sql(db_path, "SELECT id FROM schema_migrations")
    assert db_path.read_bytes() == before


def test_sessions_saved_before_list_sums_load_and_record_them_on_their_next_save(
    db_path: Path,
) -> None:
    msgs = _three()
    with Ledger(f"sqlite:///{db_path}") as ledger:
        ledger.save("s", msgs[:2])
        ledger.save("s", msgs)
    as_before_ranks(db_path)
    _sql(db_path, "ALTER TABLE versions DROP COLUMN lists")
    _sql(db_path, "DROP INDEX sessions_by_id")
    _sql(db_path, "DELETE FROM schema_migrations WHERE id = 4")
    with Ledger(f"sqlite:///{db_path}") as ledger:
        assert ledger.messages("s") == msgs and ledger.messages("s", version=1) == msgs[:2]
        assert ledger.save("s", [*msgs, Msg.user("m3", id="m3")]).version == 3
    recorded = "SELECT version, sums IS NOT NULL FROM versions ORDER BY version"
    assert _sql(db_path, recorded) == [(1, 0), (2, 0), (3, 1)]
    _sql(db_path, "UPDATE messages SET version_to = 3 WHERE msg_id = 'm3'")  # hide the last row
    with (
        pytest.raises(CorruptStoreError, match="not the ones committed"),
        Ledger(f"sqlite:///{db_path}") as ledger,
    ):
        ledger.messages("s")


def test_concurrent_first_setup_applies_each_step_once(db_path: Path) -> None:
    """Two independent connections (as two processes) race to create the schema."""
    barrier = threading.Barrier(4)
    applied: list[int] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            with closing(sqlite3.connect(db_path, isolation_level=None, timeout=0.05)) as conn:
                barrier.wait()
                applied.append(migrate(conn, sqlite_db.begin_immediate))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(applied) == [0, 0, 0, len(MIGRATIONS)]
    assert len(_sql(db_path, "SELECT id FROM schema_migrations")) == len(MIGRATIONS)


def test_two_stores_at_once_share_one_writer(db_path: Path, tmp_path: Path) -> None:
    a, b = SqliteStore(db_path), SqliteStore(tmp_path / "." / "state.db")
    try:
        a.setup()
        b.setup()
        assert a.location == b.location == str(db_path.resolve())
        assert a._database is b._database is not None and a._database.refs == 2
        Ledger(a).save("s", [Msg.user("from a", id="a")])
        a.close()
        # b still holds the shared connections
        assert Ledger(b).messages("s")[0].text == "from a"
        Ledger(b).save("s", [Msg.user("from a", id="a"), Msg.user("from b", id="b")])
        b.close()
        assert str(db_path.resolve()) not in sqlite_db._registry
        with pytest.raises(ClosedError):  # a closed store stays closed
            Ledger(a)
        with Ledger(f"sqlite:///{db_path}") as again:  # a new one opens the file again
            assert [m.text for m in again.messages("s")] == ["from a", "from b"]
    finally:
        a.close()
        b.close()
    assert str(db_path.resolve()) not in sqlite_db._registry


def test_threads_share_one_store(open_ledger: OpenLedger, db_path: Path) -> None:
    ledger = open_ledger()
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            msgs: list[Msg] = []
            for i in range(15):
                msgs = [*msgs, Msg.user(f"thread {n} message {i}", id=f"{n}-{i}")]
                ledger.save(f"s{n}", msgs)
                assert ledger.messages(f"s{n}") == msgs
                ledger.search(f"thread {n}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    other = open_ledger()
    assert all(other.version(f"s{n}") == 15 for n in range(6))
    assert other.store.check_integrity() == []  # type: ignore[attr-defined]


def test_url_opens_relative_and_absolute_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    relative = open_store("sqlite:///sub/rel.db")
    absolute = open_store(f"sqlite:///{tmp_path / 'abs.db'}")
    try:
        assert isinstance(relative, SqliteStore) and isinstance(absolute, SqliteStore)
        assert relative.location == str(tmp_path / "sub" / "rel.db")
        assert absolute.location == str(tmp_path / "abs.db")
        relative.setup()  # creates the missing directory
        assert (tmp_path / "sub" / "rel.db").exists()
    finally:
        relative.close()
        absolute.close()


def test_synchronous_full_flushes_every_commit_for_every_store_sharing_the_file(
    db_path: Path,
) -> None:
    """A store asking for ``synchronous=full`` gets it, also when another store on the same file
    (sharing one writer) opened it first with the default; the URL option says the same."""
    normal = SqliteStore(db_path)
    full = open_store(f"sqlite:///{db_path}?synchronous=full")
    try:
        Ledger(normal).save("s", [Msg.user("a", id="a")])
        writer = normal._db().writer()
        assert writer.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
        Ledger(full).save("s", [Msg.user("a", id="a"), Msg.user("b", id="b")])
        assert writer.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL, shared
    finally:
        normal.close()
        full.close()
    for bad in ("?synchronous=off", "?sync=full", "?"):
        with pytest.raises(UserError):
            open_store(f"sqlite:///{db_path}{bad}")


def test_timestamps_are_aware_utc_and_order_is_by_version(open_ledger: OpenLedger) -> None:
    ledger = open_ledger()
    for i in range(3):
        ledger.save("s", [Msg.user(f"v{j}", id=f"m{j}") for j in range(i + 1)])
    history = open_ledger().history("s")
    assert [v.version for v in history] == [1, 2, 3]
    assert all(v.committed_at.tzinfo is not None for v in history)
    assert history[-1].committed_at.utcoffset().total_seconds() == 0  # type: ignore[union-attr]
    info = open_ledger().list_sessions()[0]
    assert info.created_at == history[0].committed_at
    assert info.updated_at == history[-1].committed_at


def test_stale_commit_conflicts_and_writes_nothing(db_path: Path) -> None:
    store = SqliteStore(db_path)
    key = SessionKey("t", "s")
    row = StoredMsg("m", b"\x01" * 16, encode(Msg.user("x", id="m")), "x")

    def plan(base: int) -> CommitPlan:
        return CommitPlan(key, base, datetime.now(UTC), lists=[ListWrite("context", [(0, row)], 1)])

    try:
        store.commit(plan(0))
        before = _file_state(db_path)
        with pytest.raises(ConflictError) as info:
            store.commit(plan(0))
        assert (info.value.expected, info.value.actual) == (0, 1)
        with pytest.raises(ConflictError):
            store.commit(plan(5))
        assert _file_state(db_path) == before
        assert store.read_version(key) == 1
    finally:
        store.close()


def test_busy_writer_retries_then_gives_up(
    open_ledger: OpenLedger, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = open_ledger()
    ledger.save("s", [Msg.user("one", id="1")])
    with closing(sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)) as other:
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        timer = threading.Timer(0.3, other.execute, ("COMMIT",))
        timer.start()
        started = time.monotonic()
        report = ledger.save("s", [Msg.user("one", id="1"), Msg.user("two", id="2")])
        timer.join()
        assert report.version == 2 and time.monotonic() - started >= 0.25

        monkeypatch.setattr(sqlite_db, "WRITE_DEADLINE", 0.2)
        other.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(StoreError, match="locked"):
                ledger.save("s", [Msg.user("three", id="3")])
        finally:
            other.execute("ROLLBACK")
    assert [m.text for m in open_ledger().messages("s")] == ["one", "two"]


# -- full-text search --------------------------------------------------------------------------
def test_search_finds_live_text_per_tenant(open_ledger: OpenLedger, db_path: Path) -> None:
    ledger = open_ledger()
    ledger.save("s1", [Msg.user("The quick brown fox", id="a"), Msg.user("Café au lait", id="b")])
    ledger.save("s2", [Msg.user("quick thinking", id="c")], tenant="other")
    hits = open_ledger().search("QUICK fox")
    assert [(h.tenant, h.session_id, h.list_name, h.position, h.msg_id) for h in hits] == [
        ("default", "s1", "context", 0, "a")
    ]
    assert hits[0].snippet == "The quick brown fox"
    assert [h.msg_id for h in open_ledger().search("cafe")] == ["b"]  # accents folded
    assert [h.msg_id for h in open_ledger().search("bro")] == ["a"]  # word prefixes match
    assert [h.msg_id for h in open_ledger().search("quick", tenant="other")] == ["c"]
    assert open_ledger().search("quick", tenant="nobody") == []
    assert open_ledger().search("   ") == []
    assert open_ledger().store.check_integrity() == []  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "query",
    [
        '"',
        'fox"',
        '"quick fox',
        "(fox",
        "fox)",
        "*",
        "fox*",
        "*fox",
        "NEAR(quick fox)",
        "NEAR",
        "quick AND",
        "OR fox",
        "NOT",
        "text:fox",
        "^fox",
        "-fox",
        "+",
        "{text}: fox",
        "fox'; DROP TABLE messages; --",
        "\x00",
        "fox\x00",  # a NUL ended the FTS5 string it was quoted in: "unterminated string"
        "quick\x00brown",
    ],
)
def test_search_queries_are_never_syntax(open_ledger: OpenLedger, query: str) -> None:
    ledger = open_ledger()
    ledger.save("s", [Msg.user("The quick brown fox; near the text", id="a")])
    hits = ledger.search(query)
    assert all(h.msg_id == "a" for h in hits)
    assert open_ledger().messages("s")[0].id == "a"


def test_search_skips_replaced_truncated_and_deleted_messages(
    open_ledger: OpenLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_module, "FTS_BATCH", 3)  # exercise both queued and indexed rows
    ledger = open_ledger()
    msgs = [Msg.user(f"alpha{i} common", id=f"m{i}") for i in range(6)]
    ledger.save("s", msgs)
    ledger.save("s", [*msgs[:2], Msg.user("beta common", id="b"), *msgs[3:5]])  # v2
    ledger.save("doomed", [Msg.user("gamma common", id="g")])
    ledger.delete("doomed")
    found = {h.msg_id for h in open_ledger().search("common")}
    assert found == {"m0", "m1", "b", "m3", "m4"}
    assert open_ledger().search("alpha2") == [] and open_ledger().search("alpha5") == []
    assert open_ledger().search("gamma") == []
    # the dead rows are still history
    assert open_ledger().messages("s", version=1) == msgs
    ledger.purge_history("s", keep_last=1)
    assert {h.msg_id for h in open_ledger().search("common")} == found
    assert open_ledger().store.check_integrity() == []  # type: ignore[attr-defined]


def test_search_sees_commits_still_queued_for_the_index(
    open_ledger: OpenLedger, db_path: Path
) -> None:
    ledger = open_ledger()
    ledger.save("s", [Msg.user("zebra crossing", id="z")])
    assert _sql(db_path, "SELECT count(*) FROM fts_queue") == [(1,)]
    assert [h.msg_id for h in open_ledger().search("zebra")] == ["z"]
    assert _sql(db_path, "SELECT count(*) FROM fts_queue") == [(0,)]


def test_an_index_flush_reads_the_queue_not_every_message(
    open_ledger: OpenLedger, db_path: Path
) -> None:
    """Each flush looks the queued rows up by id; a plan that scans ``messages`` made every
    flush cost the whole store."""
    ledger = open_ledger()
    for i in range(40):
        ledger.save(f"s{i}", [Msg.user(f"word{i} common", id=f"m{i}")])
    for statement in FLUSH_FTS:
        plan = [row[3] for row in _sql(db_path, "EXPLAIN QUERY PLAN " + statement)]
        assert plan[0] == "SCAN p" and "SEARCH m USING INTEGER PRIMARY KEY (rowid=?)" in plan
        assert not any("TEMP B-TREE" in step for step in plan), plan  # the queue's own order
    assert len(open_ledger().search("common", limit=100)) == 40


# -- blobs -------------------------------------------------------------------------------------
def test_large_media_is_stored_once_and_collected(open_ledger: OpenLedger, db_path: Path) -> None:
    image = bytes(range(256)) * 400  # 100 KB
    shot = Msg.user([ImageBlock(media_type="image/png", data=image)], id="img")
    ledger = open_ledger()
    msgs = [Msg.user("look", id="q"), shot]
    ledger.save("s", msgs)  # v1
    ledger.save("s", [*msgs, Msg.assistant("a cat", id="r1")])  # v2
    ledger.save("s", [msgs[0].replace(content="look again"), shot])  # v3
    ledger.fork("s", "copy", at_version=2)
    assert _sql(db_path, "SELECT count(*), sum(length(data)) FROM blobs") == [(1, len(image))]
    assert open_ledger().messages("copy")[1].content[0].data == image  # type: ignore[union-attr]

    ledger.delete("s")
    assert _sql(db_path, "SELECT count(*) FROM blobs") == [(1,)]  # the fork still uses it
    assert open_ledger().messages("copy")[1] == shot
    ledger.delete("copy")
    assert _sql(db_path, "SELECT count(*) FROM blobs") == [(0,)]
    assert _sql(db_path, "SELECT count(*) FROM blob_refs") == [(0,)]


def test_purge_collects_blobs_only_history_used(open_ledger: OpenLedger, db_path: Path) -> None:
    ledger = open_ledger()
    shot = Msg.user([ImageBlock(media_type="image/png", data=b"\x01" * 8192)], id="img")
    hi = Msg.user("hi", id="q")
    ledger.save("s", [hi, shot])
    ledger.save("s", [hi])  # the image is only in history now
    assert _sql(db_path, "SELECT count(*) FROM blobs") == [(1,)]
    assert ledger.purge_history("s", keep_last=2) == 0
    assert open_ledger().messages("s", version=1)[1] == shot
    assert ledger.purge_history("s", keep_last=1) == 1
    assert _sql(db_path, "SELECT count(*) FROM blobs") == [(0,)]
    with pytest.raises(VersionNotFoundError):
        open_ledger().load("s", version=1)


def test_a_file_made_with_other_pages_keeps_them_and_works(
    db_path: Path, open_ledger: OpenLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # files written before new files moved to 2 KiB pages hold 1 KiB pages; only new files
    # take PAGE_SIZE, and the full-text index keeps the leaf size it was made with
    with monkeypatch.context() as patched:
        patched.setattr(sqlite_db, "PAGE_SIZE", 1024)
        older = Ledger(SqliteStore(db_path))
        older.save("s", sample_conversation(30))
        older.close()
    msgs = open_ledger().messages("s")
    grown = [*msgs, *turn(100, result_size=3000)]  # bodies larger than a page
    assert open_ledger().save("s", grown).appended == 4
    assert open_ledger().messages("s") == grown
    found = {hit.msg_id for hit in open_ledger().search("ledger", limit=1000)}
    assert {"u000100", "t000100", "f000100"} <= found  # the new rows are indexed too
    assert _sql(db_path, "PRAGMA page_size") == [(1024,)]
    assert _sql(db_path, "SELECT v FROM messages_fts_config WHERE k = 'pgsz'") == [(1024 - 64,)]
    assert _sql(db_path, "PRAGMA integrity_check") == [("ok",)]
    assert open_ledger().store.check_integrity() == []


# -- write cost --------------------------------------------------------------------------------
def test_bytes_written_follow_the_change(open_ledger: OpenLedger, db_path: Path) -> None:
    msgs = sample_conversation(500, result_size=1000)  # 2,000 messages
    ledger = open_ledger()
    ledger.save("s", msgs)
    appends = []
    for i in range(60):  # enough appends for the full-text queue to be flushed on the way
        _checkpoint(db_path)
        msgs = msgs + turn(1000 + i, result_size=1000)
        assert ledger.save("s", msgs).appended == 4
        appends.append(_wal_bytes(db_path))
    replaces = []
    for i in range(10):
        _checkpoint(db_path)
        msgs = list(msgs)
        msgs[700 + 37 * i] = msgs[700 + 37 * i].replace(content=f"shortened {i}")
        assert ledger.save("s", msgs).replaced == 1
        replaces.append(_wal_bytes(db_path))
    _checkpoint(db_path)
    assert ledger.save("s", [decode(encode(m)) for m in msgs]).noop
    assert _wal_bytes(db_path) == 0
    # a turn is ~2.2 KB of bodies and ~1.8 KB of searchable text; pages are 2 KiB
    assert max(appends) < 64 * 1024 and sum(appends) / len(appends) < 32 * 1024
    assert max(replaces) < 64 * 1024 and sorted(replaces)[len(replaces) // 2] < 24 * 1024


# -- corruption --------------------------------------------------------------------------------
def test_corrupt_body_fails_its_session_only(open_ledger: OpenLedger, db_path: Path) -> None:
    ledger = open_ledger()
    ledger.save("bad", _three())
    ledger.save("good", [Msg.user("fine", id="f")])
    _sql(db_path, "UPDATE messages SET body = x'00ff' WHERE msg_id = 'm1'")
    with pytest.raises(CorruptStoreError) as info:
        open_ledger().load("bad")
    assert info.value.location is not None and str(db_path.resolve()) in info.value.location
    assert open_ledger().messages("good")[0].text == "fine"


@pytest.mark.parametrize(
    "damage",
    [
        "UPDATE messages SET body = x'' WHERE msg_id = 'm1'",
        "UPDATE messages SET body = 'not bytes' WHERE msg_id = 'm1'",
        "UPDATE messages SET digest = x'0102' WHERE msg_id = 'm1'",
        "UPDATE messages SET msg_id = x'01' WHERE msg_id = 'm1'",
        "UPDATE messages SET msg_id = '' WHERE msg_id = 'm1'",
        "UPDATE messages SET body = 42 WHERE msg_id = 'm1'",
        "UPDATE messages SET digest = 'sixteen chars!!!' WHERE msg_id = 'm1'",
    ],
)
def test_a_malformed_row_fails_the_load(
    open_ledger: OpenLedger, db_path: Path, damage: str
) -> None:
    _save_three_and_damage(open_ledger, db_path, damage)
    with pytest.raises(CorruptStoreError, match="malformed row") as info:
        open_ledger().load("s")
    assert info.value.location is not None and info.value.location.endswith("/s/context")


@pytest.mark.parametrize(
    "damage",
    [
        """UPDATE messages SET body = CAST('{"id":"m1"}' AS BLOB) WHERE msg_id = 'm1'""",
        "UPDATE messages SET body = substr(body, 1, 10) WHERE msg_id = 'm1'",
    ],
)
def test_a_body_damaged_past_its_first_byte_fails_on_first_read(
    open_ledger: OpenLedger, db_path: Path, damage: str
) -> None:
    _save_three_and_damage(open_ledger, db_path, damage)
    loaded = open_ledger().messages("s")
    assert loaded[0].text == "m0" and loaded[2].text == "m2"
    with pytest.raises(CorruptStoreError, match="'m1' cannot be decoded"):
        loaded[1].text  # noqa: B018


def test_damage_that_still_parses_is_not_copied_on(
    open_ledger: OpenLedger, db_path: Path, tmp_path: Path
) -> None:
    original = _three()
    open_ledger().save("s", original)
    forged = encode(original[1].replace(content="forged"))
    _sql(db_path, "UPDATE messages SET body = ? WHERE msg_id = 'm1'", (forged,))
    ledger = open_ledger()
    with pytest.raises(CorruptStoreError, match="'m1' does not match the digest"):
        ledger.export("s", tmp_path / "s.jsonl")
    with pytest.raises(CorruptStoreError, match="'m1' does not match the digest"):
        ledger.fork("s", "copy")
    assert not ledger.load("copy").exists


def test_missing_live_row_is_reported_not_skipped(open_ledger: OpenLedger, db_path: Path) -> None:
    _save_three_and_damage(open_ledger, db_path, "DELETE FROM messages WHERE msg_id = 'm1'")
    with pytest.raises(CorruptStoreError, match="not the ones committed"):
        open_ledger().load("s")
    with pytest.raises(CorruptStoreError, match="not the ones committed"):
        open_ledger().save("s", [Msg.user("x", id="x")])


def test_a_file_that_is_not_a_database(db_path: Path) -> None:
    db_path.write_bytes(b"this is not a database" * 100)
    store = SqliteStore(db_path)
    try:
        with pytest.raises(CorruptStoreError):
            Ledger(store)
    finally:
        store.close()


def test_a_session_committed_between_the_two_key_lookups_is_not_damage(
    open_ledger: OpenLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by a reliability run: a reader polled a session's version while another process
    # made its first save; the first index found nothing, the second (another statement) found
    # the new row, and the healthy file was reported as CorruptStoreError. Both lookups now
    # see one snapshot, so the session is simply not there yet.
    reader, writer = open_ledger(), open_ledger()
    reader.save("other", [Msg.user("x", id="x")])
    second_lookup = sqlite_rows._other_sid
    raced = []

    def commit_in_between(conn: sqlite3.Connection, tenant: str, session: str) -> object:
        if not raced:
            raced.append(True)
            writer.save("s", [Msg.user("hi", id="h")])  # another connection commits
        return second_lookup(conn, tenant, session)

    monkeypatch.setattr(sqlite_rows, "_other_sid", commit_in_between)
    assert reader.version("s") == 0
    assert raced
    monkeypatch.undo()
    assert reader.version("s") == 1


def test_the_key_lookup_refuses_to_run_outside_a_transaction(
    open_ledger: OpenLedger, db_path: Path
) -> None:
    open_ledger().save("s", _three())
    with closing(sqlite3.connect(db_path, isolation_level=None)) as conn:
        with pytest.raises(RuntimeError, match="transaction"):
            sqlite_rows.find_session(conn, "default", "s", "sid", "i", "here")
        conn.execute("BEGIN")
        assert sqlite_rows.find_session(conn, "default", "s", "sid", "i", "here") == (1,)


# -- the shared suites -------------------------------------------------------------------------
class TestSqliteConformance(StoreConformance):
    @pytest.fixture
    def open_ledger(self, db_path: Path) -> Iterator[OpenLedger]:
        ledgers: list[Ledger] = []

        def open_() -> Ledger:
            ledgers.append(Ledger(SqliteStore(db_path)))
            return ledgers[-1]

        yield open_
        for ledger in ledgers:
            ledger.store.close()


def test_state_machine(open_ledger: OpenLedger) -> None:
    run_ledger_state_machine(open_ledger)
