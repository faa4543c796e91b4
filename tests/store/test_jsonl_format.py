"""``jsonl_format``: self-checked lines, and a save either written so every reader reads it
back, or refused before anything is written."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger.errors import UserError
from agentledger.store import CommitPlan, Ledger, ListWrite, SessionKey, StoredMsg
from agentledger.store.jsonl import JsonlStore
from agentledger.store.jsonl_format import Commit, Purge, seal, sealed
from tests.store.test_jsonl import _log, _msgs

KEY = SessionKey("t", "s")


# -- self-checked lines -------------------------------------------------------------------------
def test_every_changed_byte_of_a_sealed_line_fails_its_check() -> None:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    for record in (Commit(v=12, at=at, title="tïtle", message_count=3, sum="0badf00d"),
                   Purge(oldest=4, at=at)):  # fmt: skip
        line = seal(record)
        assert line.endswith(b'"}\n') and b',"crc":"' in line and sealed(line[:-1])
        body = line[:-1]
        for i in range(len(body)):
            for mask in (0x01, 0x10, 0x80, 0xFF):
                damaged = body[:i] + bytes([body[i] ^ mask]) + body[i + 1 :]
                assert not sealed(damaged), (i, mask)
        assert not sealed(body[:-1]) and not sealed(body + b" ")


# -- titles: stored so every reader reads them, or refused --------------------------------------
def _plan(title: Any, base: int = 0) -> CommitPlan:
    row = StoredMsg("m", b"\x01" * 16, b'{"id":"m"}')
    return CommitPlan(
        KEY, base, datetime.now(UTC), [ListWrite("context", [(0, row)], 1)], title=title
    )


@pytest.mark.parametrize("title", [{"a": 1}, ["x"], 7, 1.5, True, b"bytes", "bad \ud800"])
def test_a_title_the_log_cannot_hold_is_refused_before_writing(root: Path, title: Any) -> None:
    store = JsonlStore(root)
    store.commit(_plan("kept"))
    before = _log(root, "s", "t").read_bytes()
    with pytest.raises(UserError, match=r"title|cannot store"):
        store.commit(_plan(title, base=1))
    assert _log(root, "s", "t").read_bytes() == before
    for reader in (store, JsonlStore(root)):
        assert reader.read_version(KEY) == 1
        assert [i.title for i in reader.list_sessions("t")] == ["kept"]
    store.commit(_plan("next", base=1))  # the session goes on
    assert [(i.title, i.version) for i in JsonlStore(root).list_sessions("t")] == [("next", 2)]


@pytest.mark.parametrize("title", [{"text": "a dict"}, ["a", "list"], 7, None, "a title"])
def test_any_title_value_a_ledger_accepts_reads_back_everywhere(
    ledgers: Callable[[], Ledger], root: Path, title: Any
) -> None:
    """Whatever the ledger makes of a ``title`` value, every reader agrees with what it said."""
    writer = ledgers()
    writer.save("s", _msgs(2))
    try:
        report = writer.save_state("s", lists={"context": _msgs(3)}, values={"title": title})
    except UserError:
        report = None
    reader = ledgers()
    expected = 2 if report is not None else 1
    assert reader.version("s") == expected and len(reader.messages("s")) == expected + 1
    if report is not None:
        assert reader.load("s").values.get("title") == title
    assert [i.version for i in ledgers().list_sessions()] == [expected]
    ledgers().save("s", _msgs(5))  # another reader's next save keeps what was committed
    assert ledgers().version("s") == expected + 1
    assert ledgers().messages("s", version=expected) == _msgs(expected + 1)


# -- a property: any plan is written so it reads back exactly, or refused -----------------------
_anything = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True),
    st.text(max_size=6),
    st.binary(max_size=6),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
)
_bodies = st.one_of(
    st.binary(max_size=6),
    st.sampled_from([b'{"id":"m"}', b' {"a":1}', b"[1,2]\n", b'"x"', b"\xff\x00", b"", b"1 "]),
)
_times = st.one_of(
    st.datetimes(timezones=st.just(UTC)),
    st.datetimes(timezones=st.just(timezone(timedelta(hours=5)))),
    st.datetimes(),
)


@st.composite
def _plans(draw: st.DrawFn) -> CommitPlan:
    def field(usual: st.SearchStrategy[Any], odd: st.SearchStrategy[Any] = _anything) -> Any:
        """Mostly a value of the usual type, sometimes anything else."""
        return draw(odd if draw(st.integers(0, 5)) == 0 else usual)

    rows = [
        StoredMsg(
            field(st.text(max_size=4)),
            field(st.binary(min_size=16, max_size=16)),
            field(_bodies),
        )
        for _ in range(draw(st.integers(0, 2)))
    ]
    return CommitPlan(
        KEY,
        0,
        draw(_times),
        [ListWrite(field(st.sampled_from(["context", "x"])), list(enumerate(rows)), len(rows))],
        values={
            field(st.text(max_size=3), st.integers() | st.binary(max_size=2)): field(
                st.none() | _bodies
            )
        },
        title=field(st.one_of(st.none(), st.text(max_size=5))),
        message_count=field(st.one_of(st.none(), st.integers(0, 9))),
        appended=field(st.integers(0, 9)),
    )


@settings(max_examples=300, deadline=None)
@given(plan=_plans())
def test_every_plan_reads_back_exactly_or_is_refused(plan: CommitPlan) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        try:
            JsonlStore(tmp).commit(plan)
        except UserError:
            assert not list(Path(tmp).rglob("*.jsonl")), "a refused save left a log"
            return
        reader = JsonlStore(tmp)
        state = reader.load(KEY)
        assert state is not None and state.version == 1
        (write,) = plan.lists
        rows = [m for _, m in write.puts]
        if rows:
            loaded = state.lists[write.name]
            assert list(loaded.ids) == [m.msg_id for m in rows]
            assert list(loaded.digests) == [bytes(m.digest) for m in rows]
            assert list(loaded.bodies) == [m.body for m in rows]
        assert state.values == {n: v for n, v in plan.values.items() if v is not None}
        (info,) = reader.list_sessions("t")
        assert info.title == (plan.title or None)
        assert info.message_count == (plan.message_count or 0)
        assert info.updated_at == plan.committed_at
        assert reader.history(KEY)[0].appended == plan.appended


# -- list writes: positional ones as ever, moves as one keep record -----------------------------
def _rows(tag: str, n: int) -> list[StoredMsg]:
    names = [f"{tag}{i}".encode() for i in range(n)]
    return [StoredMsg(m.decode(), m.ljust(16, b"-"), b'{"id":"%s"}' % m) for m in names]


def _write(root: Path, base: int, write: ListWrite) -> None:
    JsonlStore(root).commit(CommitPlan(KEY, base, datetime.now(UTC), [write]))


def _ops_added(root: Path, before: int) -> list[str]:
    data = _log(root, "s", "t").read_bytes()[before:]
    return [line.split(b'"', 4)[3].decode() for line in data.splitlines()]


def test_runs_that_keep_every_row_in_place_are_written_as_puts_and_a_trunc(root: Path) -> None:
    old, new = _rows("a", 5), _rows("b", 2)
    _write(root, 0, ListWrite("context", list(enumerate(old)), 5))
    size = _log(root, "s", "t").stat().st_size
    # the same positional write, once without runs and once with the runs it implies
    _write(root, 1, ListWrite("context", [(1, new[0])], 3, runs=[(0, 0, 1), (2, 2, 1)]))
    assert _ops_added(root, size) == ["put", "trunc", "commit"]
    size = _log(root, "s", "t").stat().st_size
    _write(root, 2, ListWrite("context", [(3, new[1])], 4, runs=[(0, 0, 3)]))
    assert _ops_added(root, size) == ["put", "commit"]
    loaded = JsonlStore(root).load(KEY)
    assert loaded is not None
    assert list(loaded.lists["context"].ids) == ["a0", "b0", "a2", "b1"]


def test_a_keep_record_is_as_long_as_its_runs_not_its_list(root: Path) -> None:
    rows = _rows("a", 200)
    _write(root, 0, ListWrite("context", list(enumerate(rows)), 200))
    size = _log(root, "s", "t").stat().st_size
    summary = _rows("s", 1)[0]
    _write(root, 1, ListWrite("context", [(0, summary)], 51, runs=[(150, 1, 50)]))
    data = _log(root, "s", "t").read_bytes()[size:]
    assert _ops_added(root, size) == ["keep", "put", "commit"]
    assert (
        data.splitlines()[0]
        == b'{"op":"keep","v":2,"list":"context","runs":[150,1,50],"length":51}'
    )
    loaded = JsonlStore(root).load(KEY)
    assert loaded is not None
    assert list(loaded.lists["context"].ids) == ["s0", *(r.msg_id for r in rows[150:])]
    at_1 = JsonlStore(root).load(KEY, version=1)
    assert at_1 is not None and list(at_1.lists["context"].ids) == [r.msg_id for r in rows]


@pytest.mark.parametrize(
    ("puts", "length", "runs"),
    [
        ([(0, 0)], 3, [(1, 0, 2)]),  # a put over a kept row
        ([], 3, [(0, 0, 2)]),  # a position left empty
        ([(0, 0)], 3, [(2, 1, 1), (1, 2, 1)]),  # runs out of order
        ([(0, 0)], 4, [(1, 1, 3)]),  # a run past the old list
        ([(0, 0)], 2, [(1, 1, 0)]),  # an empty run
    ],
)
def test_runs_that_do_not_make_the_list_are_refused_before_writing(
    root: Path, puts: list[tuple[int, int]], length: int, runs: list[tuple[int, int, int]]
) -> None:
    rows, new = _rows("a", 3), _rows("b", 2)
    _write(root, 0, ListWrite("context", list(enumerate(rows)), 3))
    before = _log(root, "s", "t").read_bytes()
    write = ListWrite("context", [(p, new[i]) for p, i in puts], length, runs=runs)
    with pytest.raises(UserError, match="list 'context'"):
        _write(root, 1, write)
    assert _log(root, "s", "t").read_bytes() == before
    assert JsonlStore(root).read_version(KEY) == 1
