"""SQLite's full-text index reads a row's text from its body (schema step 6): rows keep no copy
of it, and every row leaves the index with the very text it entered it with, whether it was
written before step 6 (text in the row) or after (text read from the body)."""

from __future__ import annotations

import sqlite3
import tempfile
from contextlib import closing
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger import Ledger, Msg, ToolUseBlock
from agentledger.store import sqlite as sqlite_module
from agentledger.store.sqlite_schema import define_body_text, text_digest
from tests.store.sqlite_old import as_before_body_text


def _sql(path: Path, query: str) -> list[tuple[object, ...]]:
    with closing(sqlite3.connect(path)) as conn:
        define_body_text(conn)
        return conn.execute(query).fetchall()


def _said(token: str, msg_id: str) -> Msg:
    return Msg.user(f"{token} shared", id=msg_id)


def _tool_call(msg_id: str) -> Msg:
    return Msg.assistant([ToolUseBlock(id=f"c-{msg_id}", name="look", input={})], id=msg_id)


def test_rows_store_a_digest_of_their_text_not_the_text(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with Ledger(f"sqlite:///{path}") as ledger:
        ledger.save("s", [_said("zebra", "z"), _tool_call("t")])
        rows = "SELECT msg_id, text, text_digest FROM messages ORDER BY id"
        assert _sql(path, rows) == [("z", "", text_digest("zebra shared")), ("t", "", None)]
        assert _sql(path, "SELECT row_id FROM fts_queue") == [(1,)]  # the call has no text
        assert [h.msg_id for h in ledger.search("zebra")] == ["z"]
        assert ledger.search("zebra")[0].snippet == "zebra shared"
        assert ledger.store.check_integrity() == []  # type: ignore[attr-defined]


def test_a_file_from_before_step_6_keeps_its_text_and_its_index_sound(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with Ledger(f"sqlite:///{path}") as ledger:
        ledger.save("s", [_said(f"old{i}x", f"o{i}") for i in range(4)])
        ledger.search("old")  # rows 0-3 indexed
        ledger.save("s", [*ledger.messages("s"), _said("queued", "q")])  # still in the queue
    as_before_body_text(path)
    assert _sql(path, "SELECT count(*) FROM messages WHERE text LIKE '%shared'") == [(5,)]
    with Ledger(f"sqlite:///{path}") as ledger:
        assert _sql(path, "SELECT count(*) FROM messages WHERE text_digest IS NULL") == [(5,)]
        o0, _dropped, o2, o3, q = ledger.messages("s")
        ledger.save("s", [o0.replace(content="edited shared"), o2, o3, q, _said("new", "n")])
        ledger.purge_history("s", keep_last=1)  # deletes the replaced and dropped rows
        found = {t: {h.msg_id for h in ledger.search(t)} for t in ("old", "edited", "queued")}
        assert found == {"old": {"o2", "o3"}, "edited": {"o0"}, "queued": {"q"}}
        assert len(ledger.search("shared")) == 5
        assert ledger.store.check_integrity() == []  # type: ignore[attr-defined]
        ledger.delete("s")
        assert ledger.search("shared") == []
        assert ledger.store.check_integrity() == []  # type: ignore[attr-defined]


def test_a_process_still_running_the_code_before_step_6_cannot_flush_the_queue(
    tmp_path: Path,
) -> None:
    """Code from before step 6 flushes the queue with the ``text`` column, which new rows leave
    empty: it would tell the index to remove no words for a row indexed with some. The queue's
    new name makes each of its commits fail, and roll back, at the count every commit takes."""
    path = tmp_path / "state.db"
    with Ledger(f"sqlite:///{path}") as ledger:
        ledger.save("s", [_said("zebra", "z")])
    with closing(sqlite3.connect(path)) as conn:
        define_body_text(conn)
        with pytest.raises(sqlite3.OperationalError, match="no such table: fts_pending"):
            conn.execute("SELECT count(*) FROM fts_pending")
        assert conn.execute("SELECT count(*) FROM fts_queue").fetchone() == (1,)


def test_a_body_damaged_after_its_row_was_indexed_never_makes_the_index_unreadable(
    tmp_path: Path,
) -> None:
    """The index must be told to remove a row with the words it indexed. A body whose text
    changed since (a flipped byte, a hand edit) no longer gives them: the row is left in the
    index, where a search never finds it (it is closed), instead of the index being told other
    words, which left every later search failing ("database disk image is malformed")."""
    path = tmp_path / "state.db"
    with Ledger(f"sqlite:///{path}") as ledger:
        ledger.save("s", [_said(f"tok{i}x", f"m{i}") for i in range(3)])
        assert len(ledger.search("shared")) == 3  # indexed
    body = _sql(path, "SELECT body FROM messages WHERE msg_id = 'm1'")[0][0]
    assert isinstance(body, bytes) and b"tok1x" in body
    damaged = body.replace(b"tok1x", b"bad1x")
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("UPDATE messages SET body = ? WHERE msg_id = 'm1'", (damaged,))
        conn.commit()
    with Ledger(f"sqlite:///{path}") as ledger:
        m0, _damaged, m2 = ledger.messages("s")  # not read: loads stay lazy
        ledger.save("s", [m0, m2, _said("tok3x", "m3")])  # closes the damaged row
        ledger.purge_history("s", keep_last=1)
        assert {h.msg_id for h in ledger.search("shared")} == {"m0", "m2", "m3"}
        assert ledger.search("tok1x") == [] and ledger.search("bad1x") == []
        problems = ledger.store.check_integrity()  # type: ignore[attr-defined]
        assert problems and all("full-text index" in p for p in problems)  # reported, not raised
        ledger.save("s", [m0, m2, _said("tok3x", "m3"), _said("tok4x", "m4")])
        assert {h.msg_id for h in ledger.search("shared")} == {"m0", "m2", "m3", "m4"}


_OPS = st.lists(
    st.tuples(
        st.sampled_from(["append", "edit", "drop", "call", "purge", "search"]), st.integers(0, 9)
    ),
    max_size=14,
)


@settings(max_examples=25, deadline=None)
@given(old=st.integers(0, 4), flushed=st.booleans(), ops=_OPS)
def test_every_row_leaves_the_index_with_the_text_it_entered_it_with(
    old: int, flushed: bool, ops: list[tuple[str, int]]
) -> None:
    """Rows from before step 6 (indexed or still queued) and after it, edited, dropped, purged
    and deleted in any order, with the queue flushed every few rows: the index stays sound and
    finds exactly the live messages."""
    tokens = iter(f"tok{n}x" for n in range(1000))
    with tempfile.TemporaryDirectory() as tmp, mock.patch.object(sqlite_module, "FTS_BATCH", 3):
        path = Path(tmp) / "state.db"
        url = f"sqlite:///{path}"
        live = [_said(next(tokens), f"m{i}") for i in range(old)]
        with Ledger(url) as ledger:
            ledger.save("s", live)
            if flushed:
                ledger.search("shared")
        if old:
            as_before_body_text(path)
        said: dict[str, str] = {m.id: m.text.split()[0] for m in live}
        with Ledger(url) as ledger:
            for n, (op, i) in enumerate(ops):
                if op == "append":
                    token = next(tokens)
                    live.append(_said(token, f"a{n}"))
                    said[f"a{n}"] = token
                elif op == "edit" and live:
                    token, at = next(tokens), i % len(live)
                    live[at] = live[at].replace(content=f"{token} shared")
                    said[live[at].id] = token
                elif op == "drop" and live:
                    del live[i % len(live)]
                elif op == "call":
                    live.append(_tool_call(f"c{n}"))
                elif op == "purge":
                    ledger.purge_history("s", keep_last=1)
                elif op == "search":
                    ledger.search("shared")
                ledger.save("s", live)
            for msg_id, token in said.items():
                hits = {h.msg_id for h in ledger.search(token)}
                alive = any(m.id == msg_id and m.text.startswith(token) for m in live)
                assert hits == ({msg_id} if alive else set()), token
            assert ledger.store.check_integrity() == []  # type: ignore[attr-defined]
