"""Paging ``list_sessions`` with ``after`` (keyset cursors): the conformance tests.

``StoreConformance`` inherits these. Paging with ``after`` must list exactly the unpaged list,
in its order, at any page size; a session that stays unchanged while a caller pages is listed
exactly once whatever happens to the others between two pages (offset paging skips or repeats
one then); a cursor round-trips its row's key exactly, positions only within the tenant it was
taken from, and a bad one is a ``UserError``, never a crash or a wrong page.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentledger.errors import UserError
from agentledger.messages import Msg
from agentledger.store import Ledger, SessionInfo
from agentledger.store.cursor import decode_cursor

__all__ = ["PagingConformance"]

OpenLedger = Callable[[], Ledger]
_MOST_PAGES = 500  # more than any test here needs: a cursor that does not advance loops


def _fresh_tenant() -> str:
    """Each example lists a tenant of its own, so examples sharing a store do not meet."""
    return f"paging-{uuid.uuid4().hex[:12]}"


def _save(ledger: Ledger, session: str, tenant: str, text: str = "hi") -> None:
    ledger.save(session, [Msg.user(text, id=f"m-{uuid.uuid4().hex[:8]}")], tenant=tenant)


def _paged(ledger: Ledger, tenant: str, size: int, between: Callable[[], None] = lambda: None):
    """Every page of ``tenant``'s listing read with ``after``, calling ``between`` after each
    page that may have a successor."""
    pages: list[list[SessionInfo]] = []
    after: SessionInfo | str | None = None
    while True:
        page = ledger.list_sessions(tenant=tenant, limit=size, after=after)
        pages.append(page)
        if len(page) < size:
            return pages
        assert len(pages) < _MOST_PAGES, "paging with after never reached the end"
        # alternate the two spellings of a position: the row itself and its cursor
        after = page[-1] if len(pages) % 2 else page[-1].cursor
        between()


def _key(info: SessionInfo) -> tuple[datetime, str]:
    return info.updated_at, info.session_id


class _FrozenClock(datetime):
    """``datetime`` whose ``now`` is one fixed instant: many sessions updated at once."""

    @classmethod
    def now(cls, tz: Any = None) -> Any:
        return datetime(2026, 5, 4, 3, 2, 1, 123456, tzinfo=UTC)


_changes = st.lists(
    st.tuples(st.sampled_from(["update", "create", "delete", "other tenant", "none"]),
              st.integers(0, 50)),
    max_size=3,
)  # fmt: skip


def _check_paging(ledger: Ledger, sessions: int, size: int, data: st.DataObject) -> None:
    """Page through a fresh tenant of ``sessions`` sessions at ``size`` per page: unchanged,
    then with the changes ``data`` draws made between pages."""
    tenant = _fresh_tenant()
    names = [f"s{i:02d}" for i in range(sessions)]
    for name in names:
        _save(ledger, name, tenant)
    unpaged = ledger.list_sessions(tenant=tenant)
    listed = [i for page in _paged(ledger, tenant, size) for i in page]
    assert listed == unpaged  # nothing changed: exactly the unpaged list, in its order

    touched: set[str] = set()
    live, created = list(names), 0

    def change() -> None:
        nonlocal created
        for kind, pick in data.draw(_changes, label="changes before the next page"):
            if kind == "update" and live:
                touched.add(name := live[pick % len(live)])
                _save(ledger, name, tenant, "updated")
            elif kind == "delete" and live:
                touched.add(name := live.pop(pick % len(live)))
                ledger.delete(name, tenant=tenant)
            elif kind == "create":
                created += 1
                live.append(f"new{created:02d}")
                _save(ledger, live[-1], tenant)
            elif kind == "other tenant":
                _save(ledger, f"s{pick % 13:02d}", f"{tenant}-other")

    listed = [i for page in _paged(ledger, tenant, size, change) for i in page]
    ids = [i.session_id for i in listed]
    assert len(ids) == len(set(ids)), f"a session was listed twice: {ids}"
    assert set(names) - touched <= set(ids), "an unchanged session was skipped"
    assert all(i.tenant == tenant for i in listed)
    keys = [_key(i) for i in listed]
    assert keys == sorted(keys, reverse=True) and len(set(keys)) == len(keys)


class PagingConformance:
    """Mixed into ``StoreConformance``; needs its ``open_ledger`` fixture."""

    def test_paging_with_after_lists_every_untouched_session_once(
        self, open_ledger: OpenLedger
    ) -> None:
        ledger = open_ledger()

        # defined per run: Hypothesis refuses one test method shared by several classes
        @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(sessions=st.integers(0, 12), size=st.integers(1, 6), data=st.data())
        def check(sessions: int, size: int, data: st.DataObject) -> None:
            _check_paging(ledger, sessions, size, data)

        check()

    def test_a_session_updated_between_pages_does_not_shift_the_next_page(
        self, open_ledger: OpenLedger
    ) -> None:
        ledger = open_ledger()
        for name in ("a", "b", "c", "d", "e"):
            _save(ledger, name, "t")
        first = ledger.list_sessions(tenant="t", limit=2)
        assert [i.session_id for i in first] == ["e", "d"]
        _save(ledger, "b", "t", "moved to the front")  # offset=2 would now skip "c"
        rest = ledger.list_sessions(tenant="t", after=first[-1].cursor)
        assert [i.session_id for i in rest] == ["c", "a"]
        assert [i.session_id for i in ledger.list_sessions(tenant="t", after=rest[0])] == ["a"]

    def test_a_cursor_holds_its_rows_key_exactly(self, open_ledger: OpenLedger) -> None:
        ledger = open_ledger()
        for name in ("x", "ünï 码 🚀", "a/b", "x" * 256):
            _save(ledger, name, "t")
        infos = open_ledger().list_sessions(tenant="t")
        for at, info in enumerate(infos):
            assert decode_cursor(info.cursor, "t") == _key(info)
            assert isinstance(info.cursor, str) and info.cursor.isascii()
            after = open_ledger().list_sessions(tenant="t", after=info.cursor)
            assert after == infos[at + 1 :]
            assert open_ledger().list_sessions(tenant="t", after=info, limit=1) == after[:1]

    def test_sessions_updated_at_one_instant_page_by_session_id(
        self, open_ledger: OpenLedger, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        import agentledger.store.ledger as ledger_module

        monkeypatch.setattr(ledger_module, "datetime", _FrozenClock)
        ledger = open_ledger()
        for name in ("b", "d", "a", "e", "c"):
            _save(ledger, name, "t")
        assert len({i.updated_at for i in ledger.list_sessions(tenant="t")}) == 1
        pages = _paged(open_ledger(), "t", 2)
        assert [[i.session_id for i in page] for page in pages] == [["e", "d"], ["c", "b"], ["a"]]

    def test_a_cursor_positions_only_within_its_tenant(self, open_ledger: OpenLedger) -> None:
        ledger = open_ledger()
        for name in ("a", "b", "c"):
            _save(ledger, name, "mine")
            _save(ledger, name, "theirs")
            _save(ledger, f"{name}-theirs", "theirs")
        mine = ledger.list_sessions(tenant="mine")
        pages = _paged(ledger, "mine", 1)
        assert [i for page in pages for i in page] == mine
        theirs = ledger.list_sessions(tenant="theirs")
        for row in theirs:
            for after in (row, row.cursor):
                with pytest.raises(UserError, match="another tenant"):
                    ledger.list_sessions(tenant="mine", after=after)
        with pytest.raises(UserError, match="another tenant"):
            ledger.list_sessions(after=mine[0])  # the ledger's own tenant is not "mine"

    @pytest.mark.parametrize(
        "bad",
        [
            "",
            "not a cursor",
            "AAAA",
            "A",
            "%2F..%2F",
            "AcUitTkABmG_Jls9gXM2=",
            "x" * 5000,
            "AcUitTkABmG_Jls9gXM2\n",
            "Ac\u0130tTkABmG_Jls9gXM2",
            42,
            b"AcUitTkABmG_Jls9gXM2",
            ["a"],
        ],
    )
    def test_a_bad_cursor_is_a_user_error(self, open_ledger: OpenLedger, bad: object) -> None:
        ledger = open_ledger()
        _save(ledger, "s", "t")
        with pytest.raises(UserError):
            ledger.list_sessions(tenant="t", after=bad)  # type: ignore[arg-type]
        assert [i.session_id for i in ledger.list_sessions(tenant="t")] == ["s"]

    def test_damaged_cursors_are_user_errors(self, open_ledger: OpenLedger) -> None:
        """Every cursor one character away from a good one is refused or names a real
        position; none crashes."""
        ledger = open_ledger()
        for name in ("a", "b"):
            _save(ledger, name, "t")
        good = ledger.list_sessions(tenant="t")[0].cursor
        alphabet = "AZaz09-_"
        for at in range(len(good)):
            for char in alphabet:
                damaged = good[:at] + char + good[at + 1 :]
                try:
                    page = ledger.list_sessions(tenant="t", after=damaged)
                except UserError:
                    continue
                assert damaged == good or all(i.tenant == "t" for i in page)
        for cut in range(len(good)):
            with pytest.raises(UserError):
                ledger.list_sessions(tenant="t", after=good[:cut])

    @pytest.mark.parametrize(
        "args",
        [{"offset": 1, "after": "cursor"}, {"limit": -1}, {"offset": -1}, {"limit": "5"},
         {"offset": None}, {"limit": True}],
    )  # fmt: skip
    def test_bad_page_arguments_are_user_errors(
        self, open_ledger: OpenLedger, args: dict[str, Any]
    ) -> None:
        ledger = open_ledger()
        _save(ledger, "s", "t")
        if args.get("after") == "cursor":
            args["after"] = ledger.list_sessions(tenant="t")[0].cursor
        with pytest.raises(UserError):
            ledger.list_sessions(tenant="t", **args)
