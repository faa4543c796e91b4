"""``store/cursor.py``: list_sessions cursors round-trip exactly and refuse anything else with a
``UserError``; and on SQLite and Postgres a page after a cursor is a range of the
``sessions_recent`` index, which reads the rows of its page, not the ones before it.

(The conformance suite checks paging itself on every backend: ``conformance_paging``.)
"""

from __future__ import annotations

import base64
import re
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentledger.errors import UserError
from agentledger.messages import Msg
from agentledger.store import Ledger, SessionInfo
from agentledger.store.cursor import Keyset, decode_cursor, encode_cursor
from agentledger.store.sqlite_rows import LIST_SESSIONS, LIST_SESSIONS_AFTER, micros

ids = st.text(st.characters(exclude_categories=["Cc", "Cs", "Zl", "Zp"]), min_size=1, max_size=256)
ids = ids.filter(str.isprintable)
moments = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
)
SESSIONS = 400
PAGE = 20


# -- the codec ---------------------------------------------------------------------------------
@given(tenant=ids, updated_at=moments, session=ids)
def test_a_cursor_round_trips_its_key_exactly(tenant: str, updated_at: datetime, session: str):
    cursor = encode_cursor(tenant, updated_at, session)
    assert re.fullmatch(r"[A-Za-z0-9_-]+", cursor)
    assert decode_cursor(cursor, tenant) == Keyset(updated_at, session)
    with pytest.raises(UserError, match="another tenant"):
        decode_cursor(cursor, tenant + "x")


def test_a_cursor_holds_microseconds_in_any_time_zone() -> None:
    at = datetime(2026, 12, 3, 18, 42, 1, 999999, tzinfo=UTC)
    east = at.astimezone(__import__("zoneinfo").ZoneInfo("Asia/Tokyo"))
    info = SessionInfo("t", "s", None, 0, 1, at, east)
    assert info.cursor == encode_cursor("t", at, "s")
    assert decode_cursor(info.cursor, "t").updated_at == at
    later = encode_cursor("t", at + timedelta(microseconds=1), "s")
    assert decode_cursor(later, "t") > decode_cursor(info.cursor, "t")


@given(st.one_of(st.text(max_size=80), st.binary(max_size=60).map(base64.urlsafe_b64encode)))
def test_anything_else_is_a_user_error_or_a_real_position(text: Any) -> None:
    text = text.decode() if isinstance(text, bytes) else text
    try:
        keyset = decode_cursor(text, "t")
    except UserError:
        return
    assert encode_cursor("t", *keyset) == text


def test_cursors_name_what_is_wrong() -> None:
    good = encode_cursor("t", datetime(2026, 1, 1, tzinfo=UTC), "s")
    with pytest.raises(UserError, match="is a string"):
        decode_cursor(good.encode(), "t")
    with pytest.raises(UserError, match="is not a list_sessions cursor"):
        decode_cursor(good + "A", "t")
    with pytest.raises(UserError, match="another tenant"):
        decode_cursor(good, "u")
    raw = bytearray(base64.urlsafe_b64decode(good + "=" * (-len(good) % 4)))
    raw[0] = 2  # a format this version does not know
    with pytest.raises(UserError, match="is not a list_sessions cursor"):
        decode_cursor(base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode(), "t")


# -- SQLite: the page after a cursor is an index range ----------------------------------------
@pytest.fixture(scope="module")
def sqlite_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("cursor") / "state.db"
    with Ledger(f"sqlite:///{path}") as ledger:
        for i in range(SESSIONS):
            ledger.save(f"s{i:04d}", [Msg.user(f"message {i}", id="m")])
    yield path


def _steps(path: Path, sql: str, args: tuple[object, ...]) -> tuple[int, list[tuple[Any, ...]]]:
    """How many SQLite VM instructions (in tens) ``sql`` ran, and its rows: the work it did,
    free of the machine's timing noise."""
    with closing(sqlite3.connect(path)) as conn:
        count = [0]

        def tick() -> int:
            count[0] += 1
            return 0

        conn.set_progress_handler(tick, 10)
        rows = conn.execute(sql, args).fetchall()
    return count[0], rows


def test_sqlite_pages_after_a_cursor_through_the_index(sqlite_db: Path) -> None:
    with closing(sqlite3.connect(sqlite_db)) as conn:
        plan = [r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + LIST_SESSIONS_AFTER, (
            "default", 0, "", PAGE, 0))]  # fmt: skip
    assert plan == [
        "SEARCH sessions USING INDEX sessions_recent (tenant=? AND (updated_at,session)<(?,?))"
    ]


def test_sqlite_the_last_page_by_cursor_costs_what_the_first_does(sqlite_db: Path) -> None:
    with Ledger(f"sqlite:///{sqlite_db}") as ledger:
        every = ledger.list_sessions()
    last = len(every) - PAGE
    first_steps, first = _steps(sqlite_db, LIST_SESSIONS, ("default", PAGE, 0))
    offset_steps, by_offset = _steps(sqlite_db, LIST_SESSIONS, ("default", PAGE, last))
    before = every[last - 1]
    key = ("default", micros(before.updated_at), before.session_id, PAGE, 0)
    cursor_steps, by_cursor = _steps(sqlite_db, LIST_SESSIONS_AFTER, key)
    assert [r[0] for r in first] == [i.session_id for i in every[:PAGE]]
    assert by_cursor == by_offset and [r[0] for r in by_cursor] == [
        i.session_id for i in every[last:]
    ]
    assert cursor_steps <= 1.5 * first_steps, (cursor_steps, first_steps)
    assert offset_steps > 3 * first_steps, (offset_steps, first_steps)  # what the cursor saves


# -- Postgres: the same ------------------------------------------------------------------------
def _scanned(plan: list[str]) -> list[int]:
    """The rows each scan node of an ``EXPLAIN ANALYZE`` read."""
    return [int(re.search(r"rows=(\d+)", line)[1]) for line in plan if "Scan" in line]


@pytest.mark.postgres
def test_postgres_pages_after_a_cursor_through_the_index() -> None:
    """In the middle of the list and before its last page (where the planner may take the
    few matching rows through a bitmap and sort them), the scans read the page's rows only,
    from a range of ``sessions_recent``."""
    from agentledger.store.postgres import PostgresStore
    from tests.store import pg

    url = pg.require_server()
    explain = "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) "
    with pg.fresh_schema(url) as schema, pg.admin(url) as db:
        store = PostgresStore(url, schema=schema, pool_min=1, pool_max=1)
        with Ledger(store) as ledger:
            for i in range(SESSIONS):
                ledger.save(f"s{i:04d}", [Msg.user(f"message {i}", id="m")])
            db.execute(f'ANALYZE "{schema}".sessions')
            every = ledger.list_sessions()
            plans = []
            for at in (SESSIONS // 2, SESSIONS - PAGE):
                before = every[at - 1]
                assert ledger.list_sessions(limit=PAGE, after=before) == every[at : at + PAGE]
                args = {"tenant": "default", "limit": PAGE, "offset": 0,
                        "updated_at": before.updated_at, "session": before.session_id}  # fmt: skip
                plans.append(
                    [r[0] for r in db.execute(explain + store._q.list_sessions_after, args)]
                )
            deep = {**args, "offset": SESSIONS - PAGE}
            skipped = [r[0] for r in db.execute(explain + store._q.list_sessions, deep)]
    for plan in plans:
        text = "\n".join(plan)
        assert "sessions_recent" in text and "ROW(updated_at, session) < ROW(" in text, text
        assert _scanned(plan) and max(_scanned(plan)) <= PAGE, text
        assert "Filter" not in text and "Seq Scan" not in text, text
    assert max(_scanned(skipped)) == SESSIONS, skipped  # what the cursor saves: the skipped rows
