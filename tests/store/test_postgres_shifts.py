"""PostgresStore as a ``ranked`` store: what shifts write, what loads, searches and purges see
past a list's floor, plans made without ranks, and the migration from positions to ranks.

The conformance suite (``test_postgres.py``) checks the contract; these tests check what only
the SQL layout shows: the rows a shift touches, the floor rows, and a schema written before
migration 4.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from agentledger.errors import ConflictError, CorruptStoreError
from agentledger.messages import Msg, encode
from agentledger.store import CommitPlan, Ledger, ListWrite, SessionKey, StoredMsg
from agentledger.store import postgres_schema as ddl
from agentledger.store.ids import DEFAULT_TENANT
from agentledger.store.ranks import RankPlan, plan_ranks, position_rank
from tests.store import pg
from tests.store.test_postgres import OpenStore, db, open_store, pg_url, schema

pytestmark = pytest.mark.postgres
__all__ = ["db", "open_store", "pg_url", "schema"]  # fixtures, shared with test_postgres.py


@pytest.fixture
def tables(db: psycopg.Connection[Any], schema: str) -> Iterator[str]:
    yield f'"{schema}"'


def _count(db: psycopg.Connection[Any], sql: str) -> int:
    row = db.execute(sql).fetchone()
    assert row is not None
    return int(row[0])


def _msgs(start: int, count: int, tag: str = "m") -> list[Msg]:
    return [
        Msg.user(f"{tag}{i} words here", id=f"{tag}{i}", created_at=None)
        for i in range(start, start + count)
    ]


# -- what a shift writes -----------------------------------------------------------------------
def test_a_summary_over_2000_messages_inserts_one_row_and_one_floor_and_updates_nothing(
    open_store: OpenStore, db: psycopg.Connection[Any], tables: str
) -> None:
    ledger = Ledger(open_store())
    msgs = [pg.message(i, chars=200) for i in range(2500)]
    ledger.save("s", msgs)

    def row_versions() -> dict[str, tuple[str, str, Any]]:
        rows = db.execute(
            f"SELECT msg_id, ctid::text, xmin::text, version_to FROM {tables}.messages"
        )
        return {r[0]: (r[1], r[2], r[3]) for r in rows.fetchall()}

    before = row_versions()
    summary = Msg.system("summary of the first 2,000 messages", id="summary")
    report = ledger.save("s", [summary, *msgs[2000:]])
    after = row_versions()
    assert set(after) - set(before) == {"summary"}
    assert all(after[msg_id] == seen for msg_id, seen in before.items())  # not one row updated
    assert _count(db, f"SELECT count(*) FROM {tables}.list_floors") == 1
    assert report.bytes_written == len(encode(summary))
    assert (report.appended, report.replaced, report.truncated) == (0, 1, 1999)
    fresh = Ledger(open_store())
    assert fresh.messages("s") == [summary, *msgs[2000:]]
    assert fresh.messages("s", version=1) == msgs
    assert fresh.list_sessions()[0].message_count == 501


def test_shifts_write_about_what_an_append_writes(
    open_store: OpenStore, db: psycopg.Connection[Any]
) -> None:
    """WAL per save at 2,000 messages of ~1.25 KB: a sliding window, a summary over a prefix, a
    deletion in the middle and a moved message stay a few KB, as an append does (a moved
    message is written again at its new place: its bytes, once)."""
    ledger = Ledger(open_store())
    msgs = [pg.message(i) for i in range(2000)]
    ledger.save("s", msgs)
    ledger.save("s", [*msgs, pg.message(-1)])  # warm every page the next saves touch
    msgs.append(pg.message(-1))
    made = iter(range(100_000, 200_000))

    def window() -> None:
        del msgs[0]
        msgs.append(pg.message(next(made)))
        ledger.save("s", msgs)

    def summary() -> None:
        msgs[:100] = [Msg.system(f"summary {next(made)}", id=f"s{next(made)}")]
        ledger.save("s", msgs)

    def delete() -> None:
        del msgs[len(msgs) // 2]
        ledger.save("s", msgs)

    def move() -> None:
        msgs.insert(1000, msgs.pop(500))
        ledger.save("s", msgs)

    for shift in (window, summary, delete, move):
        assert pg.min_wal(db, shift, below=12_000) < 12_000, shift.__name__
    assert Ledger(open_store()).messages("s") == msgs


# -- reads past the floor ----------------------------------------------------------------------
def test_search_skips_rows_below_the_floor_and_counts_positions_from_it(
    open_store: OpenStore,
) -> None:
    ledger = Ledger(open_store())
    msgs = [Msg.user(f"word{i} common", id=f"m{i}") for i in range(30)]
    ledger.save("s", msgs)
    summary = Msg.system("a summary, common too", id="summary")
    ledger.save("s", [summary, *msgs[20:]])
    assert ledger.search("word5") == []  # hidden by the floor, still live in SQL terms
    assert [(h.msg_id, h.position) for h in ledger.search("word25")] == [("m25", 6)]
    hits = ledger.search("common", limit=40)
    assert [(h.msg_id, h.position) for h in hits] == [
        (m.id, p) for p, m in enumerate([summary, *msgs[20:]])
    ]
    ledger.save("s", [summary, *msgs[20:24], *msgs[25:]])  # a deletion closes m24
    assert [h.position for h in ledger.search("word25")] == [5]


def _rows_read(plan: Any, table: str = "messages") -> int:
    """Rows of ``table`` that the scans of an ``EXPLAIN (ANALYZE, FORMAT JSON)`` plan read:
    the rows each scan returned or filtered out, times its loops."""
    read = 0
    if plan.get("Relation Name") == table:
        rows = plan["Actual Rows"] + plan.get("Rows Removed by Filter", 0)
        read += (rows + plan.get("Rows Removed by Index Recheck", 0)) * plan["Actual Loops"]
    for child in plan.get("Plans", []):
        read += _rows_read(child, table)
    return read


@pytest.mark.parametrize("analyzed", [False, True], ids=["no-statistics", "analyzed"])
def test_loads_read_each_list_from_its_floor_up_never_the_rows_it_hides(
    open_store: OpenStore, db: psycopg.Connection[Any], tables: str, analyzed: bool
) -> None:
    """A sliding window or a summary leaves the rows below the floor in the table until a
    purge: a load, ``read_head`` and a load at a past version read the rows above each list's
    floor (and one index probe per list), and each list's floor at a past version is one probe,
    whether or not the planner has statistics."""
    store = open_store()
    ledger = Ledger(store)
    context, notes = _msgs(0, 900), _msgs(0, 60, "n")
    aside = _msgs(0, 5, "a")  # a list without a floor, ordered before the others
    ledger.save_state("s", lists={"aside": aside, "context": context, "notes": notes})
    summary = Msg.system("summary of 600 messages", id="summary")
    shifted = {"aside": aside, "context": [summary, *context[600:]], "notes": notes[50:]}
    ledger.save_state("s", lists=shifted)  # v2: 650 rows hidden, 316 live
    for i in range(20):  # sliding windows: each hides one more row
        shifted["context"] = [*shifted["context"][1:], *_msgs(1000 + i, 1)]
        ledger.save_state("s", lists=shifted)
    live = sum(map(len, shifted.values()))
    if analyzed:
        db.execute(f"ANALYZE {tables}.messages, {tables}.list_floors, {tables}.sessions")
    sid = _count(db, f"SELECT sid FROM {tables}.sessions")
    q = ddl.Queries(store.schema)
    probes = 2 * len(shifted)  # a list name found, or none left, by one index probe each
    reads = {
        "load": (q.live_rows, {"sid": sid}),
        "read_head": (q.live_digests, {"tenant": DEFAULT_TENANT, "session": "s"}),
        "load at v22": (q.rows_at, {"sid": sid, "v": 22}),
        "load at v2": (q.rows_at, {"sid": sid, "v": 2}),
    }
    for what, (sql, args) in reads.items():
        row = db.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, args).fetchone()
        assert row is not None
        read = _rows_read(row[0][0]["Plan"])
        expected = 316 if what == "load at v2" else live
        assert expected <= read <= expected + probes, (what, read, expected)
    if not analyzed:  # with statistics, 22 floors on one page are rightly read whole
        row = db.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + q.floors_at, {"sid": sid, "v": 22})
        plan = row.fetchone()[0][0]["Plan"]  # type: ignore[index]
        assert _rows_read(plan, "list_floors") <= probes  # not each of the 21 floors of context
    assert Ledger(open_store()).load("s").lists == shifted
    assert Ledger(open_store()).load("s", version=2).lists == {
        "aside": aside, "context": [summary, *context[600:]], "notes": notes[50:]
    }  # fmt: skip


def test_loads_and_read_head_plan_without_jit(open_store: OpenStore) -> None:
    """A load's plan counts on about 100 lists, so a large session's cost passed
    ``jit_above_cost``: compiling took 0.4 s for a 10 ms query. Reads turn JIT off for their
    own transaction only."""
    store = open_store()
    Ledger(store).save("s", _msgs(0, 3))
    with store._pool.connection() as conn:
        before = conn.execute("SHOW jit").fetchone()
        with conn.pipeline():
            store._begin_read(conn)
            inside = conn.execute("SHOW jit")
            conn.execute("COMMIT")
        assert inside.fetchone() == ("off",)
        assert conn.execute("SHOW jit").fetchone() == before
    assert Ledger(store).messages("s") == _msgs(0, 3)


def test_purge_deletes_the_rows_every_kept_version_hides(
    open_store: OpenStore, db: psycopg.Connection[Any], tables: str
) -> None:
    ledger = Ledger(open_store())
    msgs = _msgs(0, 50)
    ledger.save("s", msgs)  # v1
    ledger.save("s", msgs[10:])  # v2: floor below m10
    ledger.save("s", msgs[30:])  # v3: floor below m30
    ledger.save("s", [*msgs[30:], *_msgs(50, 2)])  # v4
    rows = f"SELECT count(*) FROM {tables}.messages"
    floors = f"SELECT count(*) FROM {tables}.list_floors"
    assert (_count(db, rows), _count(db, floors)) == (52, 2)  # nothing closed, two floors
    assert ledger.purge_history("s", keep_last=2) == 30  # m0..m29: hidden at v3 and v4
    assert (_count(db, rows), _count(db, floors)) == (22, 1)
    other = Ledger(open_store())
    assert other.messages("s", version=3) == msgs[30:]
    assert other.messages("s") == [*msgs[30:], *_msgs(50, 2)]
    other.save("s", _msgs(50, 2))  # another floor, then purge to the last version
    assert ledger.purge_history("s", keep_last=1) == 20
    assert (_count(db, rows), _count(db, floors)) == (2, 1)
    assert Ledger(open_store()).messages("s") == _msgs(50, 2)


# -- plans without ranks, and plans that do not match the store ----------------------------------
def _row(msg: Msg) -> StoredMsg:
    return StoredMsg(msg.id, msg.digest, encode(msg), msg.text)


def test_plans_made_without_ranks_are_ranked_by_the_store(open_store: OpenStore) -> None:
    store = open_store()
    key = SessionKey(DEFAULT_TENANT, "s")
    msgs = _msgs(0, 10)
    ledger = Ledger(store)
    ledger.save("s", msgs)
    ledger.save("s", msgs[4:])  # a floor below m4

    def commit(base: int, write: ListWrite) -> None:
        # odd versions by the one-round-trip path (the session row known), even ones without
        incarnation = store.read_stamp(key)[0] if base % 2 else ""
        plan = CommitPlan(key, base, datetime.now(UTC), [write], base_incarnation=incarnation)
        store.commit(plan)

    x, y, z = (Msg.user(t, id=t) for t in "xyz")
    commit(2, ListWrite("context", [(1, _row(x)), (6, _row(y))], 7))  # positional: edit, append
    assert Ledger(open_store()).messages("s") == [msgs[4], x, *msgs[6:], y]
    # kept runs given: m4 and x leave by a new floor, z goes below m6, m8 is closed
    commit(3, ListWrite("context", [(0, _row(z))], 5, [(2, 1, 2), (5, 3, 2)]))
    assert Ledger(open_store()).messages("s") == [z, msgs[6], msgs[7], msgs[9], y]
    with pytest.raises(ConflictError):  # refused by the bump before the ranks are read
        commit(3, ListWrite("context", [], 0))
    commit(4, ListWrite("context", [], 0))  # emptied: a floor above every row
    commit(5, ListWrite("context", [(0, _row(x))], 1))
    fresh = Ledger(open_store())
    assert fresh.messages("s") == [x]
    assert fresh.messages("s", version=5) == []
    assert fresh.messages("s", version=4) == [z, msgs[6], msgs[7], msgs[9], y]
    assert fresh.messages("s", version=2) == msgs[4:]
    fresh.save("s", [y, x])  # the ledger plans from the ranks the store returns
    assert Ledger(open_store()).messages("s") == [y, x]


def test_a_plan_closing_rows_that_are_not_live_is_corrupt_and_changes_nothing(
    open_store: OpenStore,
) -> None:
    store = open_store()
    key = SessionKey(DEFAULT_TENANT, "s")
    ledger = Ledger(store)
    msgs = _msgs(0, 5)
    ledger.save("s", msgs)
    head = store.read_head(key)
    assert head is not None and len(head.ranks["context"]) == 5
    good = plan_ranks(head.ranks["context"], None, [(0, 0, 2), (3, 2, 2)], [], 4)
    bad = RankPlan(good.put_ranks, good.closed, [b"\x7f" * 9], None, 0)
    write = ListWrite("context", [], 4, [(0, 0, 2), (3, 2, 2)], bad)
    plan = CommitPlan(key, 1, datetime.now(UTC), lists=[write], base_incarnation=head.incarnation)
    with pytest.raises(CorruptStoreError, match="0 of the 1 rows the save closes are live"):
        store.commit(plan)
    assert store.read_version(key) == 1
    assert Ledger(open_store()).messages("s") == msgs
    assert ledger.save("s", [*msgs[:2], *msgs[3:]]).version == 2  # the good plan commits


# -- the migration from positions to ranks ----------------------------------------------------
def test_the_migration_maps_positions_as_position_rank_does(db: psycopg.Connection[Any]) -> None:
    positions = [0, 1, 255, 256, 65_535, 1_000_000, 2**31 - 1]
    rows = db.execute(
        "SELECT int8send(p::bigint + 4611686018427387904) FROM unnest(%s::int4[]) AS p",
        [positions],
    ).fetchall()
    assert [bytes(r[0]) for r in rows] == [position_rank(p) for p in positions]
    assert "int8send(position::bigint + 4611686018427387904)" in ddl.MIGRATIONS[3][2]


def _write_positional(db: psycopg.Connection[Any], tables: str, versions: list[list[Msg]]) -> None:
    """Session ``s`` as the store wrote it before migration 4: rows by position, a replaced
    position closed and written again, positions past the new length closed."""
    at = datetime(2026, 1, 1, tzinfo=UTC)
    found = db.execute(
        f"INSERT INTO {tables}.sessions (tenant, session, version, message_count, created_at, "
        "updated_at) VALUES (%s, 's', %s, %s, %s, %s) RETURNING sid",
        [DEFAULT_TENANT, len(versions), len(versions[-1]), at, at],
    ).fetchone()
    assert found is not None
    sid, old = found[0], []
    for version, msgs in enumerate(versions, start=1):
        changed = [p for p, m in enumerate(msgs) if p >= len(old) or old[p].digest != m.digest]
        closed = [p for p in changed if p < len(old)] + list(range(len(msgs), len(old)))
        db.execute(
            f"UPDATE {tables}.messages SET version_to = %s WHERE sid = %s "
            "AND version_to IS NULL AND position = ANY(%s)",
            [version, sid, closed],
        )
        for p in changed:
            m = msgs[p]
            db.execute(
                f"INSERT INTO {tables}.messages (sid, list, position, version_from, msg_id, "
                "digest, body, text) VALUES (%s, 'context', %s, %s, %s, %s, %s, %s)",
                [sid, p, version, m.id, m.digest, encode(m), m.text],
            )
        db.execute(
            f"INSERT INTO {tables}.versions VALUES (%s, %s, %s, %s, 0, 0, 0)",
            [sid, version, at, len(changed)],
        )
        old = msgs


def test_the_migration_from_positions_keeps_every_version_exact(
    open_store: OpenStore,
    db: psycopg.Connection[Any],
    tables: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ddl, "MIGRATIONS", ddl.MIGRATIONS[:3])  # the schema before ranks
    open_store().setup()
    monkeypatch.undo()
    msgs = _msgs(0, 300)
    edited = [*msgs[:100], msgs[100].replace(content="edited"), *msgs[101:]]
    versions = [
        msgs[:120],
        msgs,
        edited,
        edited[:50],  # truncated
        [*edited[:50], *_msgs(300, 280)],  # grown again over the truncated positions
        [*edited[1:50], *_msgs(300, 280)],  # a deletion at the front, written positionally
    ]
    _write_positional(db, tables, versions)

    ledger = Ledger(open_store())  # migrates
    for version, expected in enumerate(versions, start=1):
        assert ledger.messages("s", version=version) == expected, version
    dead = db.execute(
        f"SELECT rank FROM {tables}.messages WHERE msg_id = 'm100' AND version_to = 3"
    ).fetchone()
    assert dead is not None and bytes(dead[0]) == position_rank(100)
    indexes = db.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s AND tablename = %s",
        [tables.strip('"'), "messages"],
    ).fetchall()
    keys = {name: sql.partition(" USING btree ")[2] for name, sql in indexes}
    assert keys["messages_live"] == "(sid, list, rank) WHERE (version_to IS NULL)"
    assert keys["messages_pkey"] == "(sid, list, rank, version_from)"
    # shifts on the migrated rows: a window, a summary, an insert between two migrated rows
    latest = versions[-1]
    more = [
        [*latest[5:], *_msgs(600, 2)],
        [Msg.system("summary", id="sum"), *latest[300:], *_msgs(600, 2)],
        [Msg.system("summary", id="sum"), *latest[300:310], *_msgs(700, 3), *latest[310:]],
    ]
    for expected in more:
        ledger.save("s", expected)
        versions.append(expected)
    fresh = Ledger(open_store())
    for version, expected in enumerate(versions, start=1):
        assert fresh.messages("s", version=version) == expected, version
    assert [v.version for v in fresh.history("s")] == list(range(1, len(versions) + 1))
