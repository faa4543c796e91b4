"""The store conformance suite. A backend is done when it passes it.

Subclass ``StoreConformance`` in a test module and provide one fixture, ``open_ledger``: a
function that opens a *new* ``Ledger`` (fresh cache) on the same underlying storage each time it
is called, so the suite can tell what was really persisted from what a handle remembers::

    class TestMyStore(StoreConformance):
        @pytest.fixture
        def open_ledger(self, tmp_path):
            ledgers = []
            def open_() -> Ledger:
                ledgers.append(Ledger(MyStore(tmp_path)))
                return ledgers[-1]
            yield open_
            for ledger in ledgers:
                ledger.close()
"""

from __future__ import annotations

import copy
import gc
import io
from collections.abc import Callable
from typing import Any

import pytest

from agentledger.errors import (
    ClosedError,
    CodecError,
    ConflictError,
    InvalidIdError,
    SessionBusyError,
    SessionNotFoundError,
    StoreError,
    VersionNotFoundError,
)
from agentledger.messages import Msg, decode, encode
from agentledger.store import Ledger
from agentledger.testing.conformance_paging import PagingConformance
from agentledger.testing.conformance_trust import TrustConformance
from agentledger.testing.samples import every_block_message, sample_conversation

__all__ = ["StoreConformance"]

OpenLedger = Callable[[], Ledger]


def _rebuilt(msgs: list[Msg]) -> list[Msg]:
    """Equal messages that share no objects with ``msgs`` (as after a reload)."""
    return [decode(encode(m)) for m in msgs]


def _texts(msgs: list[Msg]) -> list[str]:
    return [m.text for m in msgs]


def _random_shift(rng: Any, current: list[Msg], fresh: list[Msg]) -> list[Msg]:
    """``current`` after one random edit that adds ``fresh``: an append, an insert, a deletion,
    a moved range, a sliding window, a summary over a prefix, an edit in place, or emptying."""
    new = list(current)
    at, count = rng.randint(0, len(new)), rng.randint(1, 8)
    kind = rng.choice(["append", "insert", "delete", "move", "window", "summary", "edit", "clear"])
    if kind == "append":
        new += fresh
    elif kind == "insert":
        new[at:at] = fresh
    elif kind == "delete":
        del new[at : at + count]
    elif kind == "move":
        moved = new[at : at + count]
        del new[at : at + count]
        to = rng.randint(0, len(new))
        new[to:to] = moved
    elif kind == "window":
        new = [*new[count:], *fresh]
    elif kind == "summary":
        new[: count * 3] = fresh[:1]
    elif kind == "edit" and new:
        at = min(at, len(new) - 1)
        new[at] = new[at].replace(content=f"edited {fresh[0].id}")
    elif kind == "clear":
        new = []
    return new


class StoreConformance(TrustConformance, PagingConformance):
    """Behaviour every backend must show; see the module docstring."""

    @pytest.fixture
    def open_ledger(self) -> OpenLedger:  # pragma: no cover - must be overridden
        raise NotImplementedError("subclasses provide an open_ledger fixture")

    # -- basics ------------------------------------------------------------------------
    def test_missing_session_loads_empty(self, open_ledger: OpenLedger) -> None:
        ledger = open_ledger()
        state = ledger.load("nobody")
        assert state.version == 0 and state.lists == {} and state.values == {}
        assert not ledger.exists("nobody")
        assert ledger.history("nobody") == []

    def test_round_trip_every_block_type(self, open_ledger: OpenLedger) -> None:
        msgs = every_block_message()
        report = open_ledger().save("s", msgs)
        assert report.version == 1 and report.appended == len(msgs)
        loaded = open_ledger().messages("s")
        assert loaded == msgs
        assert [m.digest for m in loaded] == [m.digest for m in msgs]
        assert loaded[1].metadata["client"]["ip_hash"] == b"\x00\xffhash"

    def test_versions_count_commits(self, open_ledger: OpenLedger) -> None:
        ledger = open_ledger()
        msgs = sample_conversation(2, result_size=100)
        assert ledger.save("s", msgs[:4]).version == 1
        assert ledger.save("s", msgs).version == 2
        assert open_ledger().version("s") == 2
        assert [v.version for v in ledger.history("s")] == [1, 2]
        assert ledger.history("s")[1].appended == 4

    # -- seed 000: every element compared, by content --------------------------------------
    @pytest.mark.parametrize(
        ("size", "positions"), [(10, [3]), (1000, [3, 251, 749])], ids=["10", "1000"]
    )
    def test_edit_anywhere_is_persisted(
        self, open_ledger: OpenLedger, size: int, positions: list[int]
    ) -> None:
        msgs = [Msg.user(f"m{i}", id=f"m{i}") for i in range(size)]
        open_ledger().save("s", msgs)
        edited = open_ledger().messages("s")
        for p in positions:
            edited[p] = edited[p].replace(content="EDITED")
        report = open_ledger().save("s", edited)
        assert report.replaced == len(positions) and report.appended == 0
        reloaded = open_ledger().messages("s")
        for p in positions:
            assert reloaded[p].text == "EDITED"
        assert reloaded == edited

    def test_equal_rebuilt_list_writes_nothing(self, open_ledger: OpenLedger) -> None:
        msgs = sample_conversation(5, result_size=200)
        open_ledger().save("s", msgs)
        for ledger in (open_ledger(), open_ledger()):
            fresh = ledger.messages("s")
            report = ledger.save("s", _rebuilt(fresh))
            assert report.noop and report.bytes_written == 0 and report.version == 1
        # a handle that never loaded the session must also find nothing to write
        report = open_ledger().save("s", _rebuilt(msgs))
        assert report.noop and report.version == 1
        assert open_ledger().version("s") == 1

    def test_rebuilt_different_list_is_written(self, open_ledger: OpenLedger) -> None:
        msgs = sample_conversation(3, result_size=200)
        open_ledger().save("s", msgs)
        changed = _rebuilt(msgs)
        changed[5] = changed[5].replace(metadata={"note": b"\x00"})
        report = open_ledger().save("s", changed)
        assert not report.noop and report.replaced == 1
        assert open_ledger().messages("s")[5].metadata["note"] == b"\x00"

    # -- shapes of change ------------------------------------------------------------------
    def test_append_writes_only_new_messages(self, open_ledger: OpenLedger) -> None:
        msgs = sample_conversation(50, result_size=1000)
        ledger = open_ledger()
        ledger.save("s", msgs[:-4])
        report = ledger.save("s", msgs)
        assert report.appended == 4 and report.replaced == 0 and report.truncated == 0
        assert report.bytes_written == sum(len(encode(m)) for m in msgs[-4:])
        assert open_ledger().messages("s") == msgs

    def test_insert_delete_truncate(self, open_ledger: OpenLedger) -> None:
        msgs = [Msg.user(f"m{i}", id=f"m{i}") for i in range(8)]
        ledger = open_ledger()
        ledger.save("s", msgs)
        inserted = [*msgs[:2], Msg.user("new", id="new"), *msgs[2:]]
        ledger.save("s", inserted)
        assert _texts(open_ledger().messages("s")) == _texts(inserted)
        deleted = inserted[:4] + inserted[5:]
        ledger.save("s", deleted)
        assert _texts(open_ledger().messages("s")) == _texts(deleted)
        report = ledger.save("s", deleted[:3])
        assert report.truncated == len(deleted) - 3
        assert open_ledger().messages("s") == deleted[:3]
        report = ledger.save("s", [])
        assert report.truncated == 3 and open_ledger().messages("s") == []

    def test_named_lists_and_values(self, open_ledger: OpenLedger) -> None:
        ledger = open_ledger()
        a = [Msg.user("a", id="a")]
        b = [Msg.user("b", id="b")]
        ledger.save_state(
            "s",
            lists={"context": a, "scratch": b},
            values={"summary": "so far", "settings": {"k": [1, b"\x01"]}},
        )
        state = open_ledger().load("s")
        assert state.lists == {"context": a, "scratch": b}
        assert state.values == {"summary": "so far", "settings": {"k": [1, b"\x01"]}}
        report = ledger.save_state("s", values={"summary": "so far"})
        assert report.noop
        report = ledger.save_state("s", values={"summary": None, "other": 3})
        assert report.values_changed == 2
        state = open_ledger().load("s")
        assert state.values == {"settings": {"k": [1, b"\x01"]}, "other": 3}
        assert open_ledger().load("s", version=1).values["summary"] == "so far"
        ledger.save("s", b, name="context")
        assert open_ledger().load("s").lists == {"context": b, "scratch": b}

    # -- history -----------------------------------------------------------------------
    def test_replaced_and_truncated_messages_stay_in_history(self, open_ledger: OpenLedger) -> None:
        msgs = [Msg.user(f"m{i}", id=f"m{i}") for i in range(6)]
        ledger = open_ledger()
        ledger.save("s", msgs)  # v1
        v2 = [*msgs[:2], msgs[2].replace(content="two"), *msgs[3:]]
        ledger.save("s", v2)  # v2
        ledger.save("s", v2[:2])  # v3
        other = open_ledger()
        assert other.messages("s", version=1) == msgs
        assert other.messages("s", version=2) == v2
        assert other.messages("s", version=3) == v2[:2]
        assert other.messages("s") == v2[:2]
        with pytest.raises(VersionNotFoundError):
            other.load("s", version=4)
        with pytest.raises(VersionNotFoundError):
            other.load("s", version=-1)

    def test_fork_at_version(self, open_ledger: OpenLedger) -> None:
        msgs = every_block_message()
        ledger = open_ledger()
        ledger.save_state("s", lists={"context": msgs[:2]}, values={"summary": "x"})
        ledger.save("s", msgs)
        report = ledger.fork("s", "branch", at_version=1)
        assert report.version == 1
        assert open_ledger().load("branch").lists == {"context": msgs[:2]}
        assert open_ledger().load("branch").values == {"summary": "x"}
        assert open_ledger().messages("s") == msgs  # the source is untouched
        with pytest.raises(ConflictError):
            ledger.fork("s", "branch")
        with pytest.raises(SessionNotFoundError):
            ledger.fork("nothing-here", "x")

    def test_purge_history_keeps_recent_versions(self, open_ledger: OpenLedger) -> None:
        ledger = open_ledger()
        versions = []
        msgs: list[Msg] = []
        for i in range(5):
            msgs = [*msgs[:-1], Msg.user(f"edit{i}", id=f"e{i}"), Msg.user(f"tail{i}", id=f"t{i}")]
            ledger.save("s", msgs)
            versions.append(list(msgs))
        removed = ledger.purge_history("s", keep_last=2)
        assert removed > 0
        other = open_ledger()
        assert other.messages("s") == versions[4]
        assert other.messages("s", version=4) == versions[3]
        with pytest.raises(VersionNotFoundError):
            other.load("s", version=3)
        assert [v.version for v in other.history("s")] == [4, 5]
        ledger.save("s", [*msgs, Msg.user("after purge", id="ap")])
        assert open_ledger().messages("s")[-1].text == "after purge"

    # -- shifts --------------------------------------------------------------------------
    def test_shifts_write_only_what_they_add(self, open_ledger: OpenLedger) -> None:
        """A sliding window, an insert at the front, a deletion in the middle, a moved range
        and a summary replacing a prefix each write the messages they add, nothing more."""
        msgs = [Msg.user(f"m{i} " + "x" * 200, id=f"m{i}") for i in range(60)]
        ledger = open_ledger()
        ledger.save("s", msgs)
        summary = Msg.system("summary of m0..m49", id="summary")
        front = Msg.user("at the front", id="front")
        window = [*msgs[1:], Msg.user("next", id="next")]
        steps = [
            (window, [window[-1]]),
            ([front, *window], [front]),
            ([front, *window[:20], *window[21:]], []),
            ([front, *window[:10], *window[15:20], *window[10:15], *window[21:]], window[10:15]),
            ([summary, *window[50:]], [summary]),
            ([summary, *window[50:], *msgs[:3]], msgs[:3]),
        ]
        for new, added in steps:
            report = ledger.save("s", new)
            assert report.bytes_written == sum(len(encode(m)) for m in added), new
            assert open_ledger().messages("s") == new
        other = open_ledger()
        versions = [msgs, *(new for new, _ in steps)]
        for version, expected in enumerate(versions, start=1):
            assert other.messages("s", version=version) == expected

    def test_random_shifts_keep_every_version_exact(self, open_ledger: OpenLedger) -> None:
        """Shifts of every kind on two lists at once, lists emptied and refilled, fresh
        handles planning from what the store returns, purges: every kept version loads
        exactly, and the next save works."""
        import random

        rng = random.Random(1729)
        ledger = open_ledger()
        current: dict[str, list[Msg]] = {"context": [], "notes": []}
        versions: list[dict[str, list[Msg]]] = []
        oldest, made = 1, 0
        for step in range(60):
            new = dict(current)
            for name in rng.sample(sorted(new), rng.randint(1, 2)):
                count = rng.randint(1, 6)
                fresh = [Msg.user(f"n{made + k}", id=f"n{made + k}") for k in range(count)]
                made += count
                new[name] = _random_shift(rng, new[name], fresh)
            if new == current:
                continue
            ledger.save_state("s", lists=new)
            versions.append(new)
            current = new
            if rng.random() < 0.3:  # a fresh handle plans from what the store says
                ledger = open_ledger()
            if step % 25 == 24:
                ledger.purge_history("s", keep_last=4)
                oldest = len(versions) - 3
        other = open_ledger()
        for version in range(oldest, len(versions) + 1):
            state = other.load("s", version=version)
            got = {name: state.lists.get(name, []) for name in current}
            assert got == versions[version - 1], version
        after = [*current["context"], Msg.user("after", id="after")]
        ledger.save("s", after)
        assert open_ledger().messages("s") == after

    def test_a_tracked_list_saves_exactly_what_it_holds(self, open_ledger: OpenLedger) -> None:
        import random

        rng = random.Random(99)
        ledger = open_ledger()
        ledger.save("s", [Msg.user(f"m{i}", id=f"m{i}") for i in range(30)])
        live = ledger.tracked("s")
        for step in range(60):
            fresh = Msg.user(f"n{step}", id=f"n{step}")
            kind = rng.choice(["append", "insert", "set", "del", "pop", "slice", "other"])
            at = rng.randrange(len(live) + 1)
            if kind == "append":
                live.append(fresh)
            elif kind == "insert":
                live.insert(at, fresh)
            elif kind == "set" and live:
                live[at % len(live)] = fresh
            elif kind == "del" and live:
                del live[at % len(live)]
            elif kind == "pop" and live:
                live.pop(0)
            elif kind == "slice":
                live[at : at + 3] = [fresh]
            elif kind == "other":  # another writer: the next save compares everything
                other = open_ledger()
                other.save("s", [*other.messages("s"), Msg.user(f"o{step}", id=f"o{step}")])
            if step % 3 == 2:
                ledger.save("s", live)
                assert open_ledger().messages("s") == list(live)

    # -- concurrency -------------------------------------------------------------------
    def test_expected_version_conflict(self, open_ledger: OpenLedger) -> None:
        a, b = open_ledger(), open_ledger()
        base = [Msg.user("base", id="base")]
        a.save("s", base)
        b.load("s")
        a.save("s", [*base, Msg.user("from a", id="fa")], expected_version=1)
        with pytest.raises(ConflictError) as info:
            b.save("s", [*base, Msg.user("from b", id="fb")], expected_version=1)
        assert info.value.expected == 1 and info.value.actual == 2
        assert _texts(open_ledger().messages("s")) == ["base", "from a"]
        with pytest.raises(ConflictError):
            b.save("new", base, expected_version=3)
        assert not open_ledger().exists("new")

    def test_save_without_expected_version_replans_after_other_writer(
        self, open_ledger: OpenLedger
    ) -> None:
        a, b = open_ledger(), open_ledger()
        base = [Msg.user(f"m{i}", id=f"m{i}") for i in range(4)]
        a.save("s", base)
        b.save("s", base)  # noop: b plans against a's commit
        a.save("s", [*base, Msg.user("a", id="a")])
        report = b.save("s", [*base, Msg.user("b", id="b")])
        assert report.version == 3 and report.replaced == 1
        assert _texts(open_ledger().messages("s")) == ["m0", "m1", "m2", "m3", "b"]
        assert _texts(open_ledger().messages("s", version=2))[-1] == "a"  # kept in history

    def test_delete_and_recreate_is_never_planned_against_stale_digests(
        self, open_ledger: OpenLedger
    ) -> None:
        a, b = open_ledger(), open_ledger()
        old = [Msg.user(f"old{i}", id=f"o{i}") for i in range(3)]
        a.save("s", old)
        assert b.messages("s") == old  # b caches the first life of "s" at version 1
        a.delete("s")
        new = [Msg.user(f"new{i}", id=f"n{i}") for i in range(3)]
        a.save("s", new)  # the second life of "s", at version 1 again
        report = b.save("s", old)
        assert not report.noop and report.replaced == 3
        assert open_ledger().messages("s") == old
        assert open_ledger().messages("s", version=1) == new

    def test_create_only_when_absent(self, open_ledger: OpenLedger) -> None:
        ledger = open_ledger()
        ledger.save("s", [Msg.user("x", id="x")], expected_version=0)
        with pytest.raises(ConflictError):
            open_ledger().save("s", [Msg.user("y", id="y")], expected_version=0)

    def test_run_lease_is_exclusive(self, open_ledger: OpenLedger) -> None:
        a, b = open_ledger(), open_ledger()
        with a.lease("s"):
            with pytest.raises(SessionBusyError), b.lease("s"):
                pass
            with b.lease("other"):
                pass
        with b.lease("s"):
            pass

    def test_a_closed_store_refuses_every_call(self, open_ledger: OpenLedger) -> None:
        """Once its store is closed, the store and every ledger over it raise ``ClosedError``
        (a misuse, never a ``StoreError`` that callers would retry); closing again is fine."""
        ledger = open_ledger()
        ledger.save("s", [Msg.user("x", id="x")])
        store, key = ledger.store, ledger.key("s")
        store.close()
        store.close()
        calls: list[Callable[[], Any]] = [
            lambda: ledger.load("s"),
            lambda: ledger.save("s", [Msg.user("y", id="y")]),
            lambda: ledger.list_sessions(),
            lambda: ledger.lease("s").__enter__(),
            lambda: Ledger(store),
            lambda: store.read_version(key),
            lambda: store.load(key),
            lambda: store.delete(key),
        ]
        for call in calls:
            with pytest.raises(ClosedError) as info:
                call()
            assert not isinstance(info.value, StoreError)

    # -- sessions, tenants, ids --------------------------------------------------------
    def test_list_sessions_and_delete(self, open_ledger: OpenLedger) -> None:
        ledger = open_ledger()
        ledger.save("one", [Msg.user("What is the capital of France?", id="q")])
        ledger.save("two", sample_conversation(2, result_size=50))
        ledger.save("other-tenant", [Msg.user("hidden", id="h")], tenant="t2")
        infos = open_ledger().list_sessions()
        assert [i.session_id for i in infos] == ["two", "one"]
        assert infos[1].title == "What is the capital of France?"
        assert infos[1].message_count == 1 and infos[0].message_count == 8
        assert infos[0].version == 1 and infos[0].updated_at.tzinfo is not None
        assert [i.session_id for i in open_ledger().list_sessions(limit=1)] == ["two"]
        assert [i.session_id for i in open_ledger().list_sessions(offset=1)] == ["one"]
        assert [i.session_id for i in open_ledger().list_sessions(tenant="t2")] == ["other-tenant"]
        assert ledger.delete("one") is True
        assert ledger.delete("one") is False
        other = open_ledger()
        assert not other.exists("one") and other.load("one").version == 0
        assert [i.session_id for i in other.list_sessions()] == ["two"]
        ledger.save("one", [Msg.user("reborn", id="r")])
        assert open_ledger().messages("one")[0].text == "reborn"

    def test_tenants_are_isolated(self, open_ledger: OpenLedger) -> None:
        ledger = open_ledger()
        ledger.save("s", [Msg.user("alpha", id="x")], tenant="alpha")
        ledger.save("s", [Msg.user("beta", id="x")], tenant="beta")
        other = open_ledger()
        assert other.messages("s", tenant="alpha")[0].text == "alpha"
        assert other.messages("s", tenant="beta")[0].text == "beta"
        assert other.messages("s") == []
        other.delete("s", tenant="alpha")
        assert open_ledger().messages("s", tenant="beta")[0].text == "beta"

    @pytest.mark.parametrize(
        "hostile",
        [
            "../../etc/passwd",
            "a/b",
            "A",
            "a",
            "%41",
            "..",
            ".",
            "~x",
            "x" * 256,
            "ünï 码 🚀",
            "C:\\windows",
            "con",
            "a\\b",
            "-rf",
        ],
    )
    def test_hostile_ids_round_trip(self, open_ledger: OpenLedger, hostile: str) -> None:
        ledger = open_ledger()
        ledger.save(hostile, [Msg.user(hostile, id="m")], tenant=hostile)
        ledger.save("A" if hostile != "A" else "B", [Msg.user("other", id="o")], tenant=hostile)
        assert open_ledger().messages(hostile, tenant=hostile)[0].text == hostile
        ids = {i.session_id for i in open_ledger().list_sessions(tenant=hostile)}
        assert hostile in ids and len(ids) == 2

    @pytest.mark.parametrize("bad", ["", "x" * 257, "a\x00b", "line\nbreak", 42, None])
    def test_invalid_ids_are_refused(self, open_ledger: OpenLedger, bad: object) -> None:
        ledger = open_ledger()
        with pytest.raises(InvalidIdError):
            ledger.save(bad, [Msg.user("x")])  # type: ignore[arg-type]
        if bad is not None:  # tenant=None means "this ledger's default tenant"
            with pytest.raises(InvalidIdError):
                ledger.load("ok", tenant=bad)  # type: ignore[arg-type]

    # -- search and media --------------------------------------------------------------
    def test_search_live_text(self, open_ledger: OpenLedger) -> None:
        ledger = open_ledger()
        ledger.save("s1", [Msg.user("The quick brown fox", id="a"), Msg.user("lazy dog", id="b")])
        ledger.save("s2", [Msg.user("quick thinking", id="c")], tenant="t2")
        hits = open_ledger().search("quick fox")
        assert [(h.session_id, h.msg_id, h.position) for h in hits] == [("s1", "a", 0)]
        assert "fox" in hits[0].snippet.lower()
        assert [h.session_id for h in open_ledger().search("quick", tenant="t2")] == ["s2"]
        ledger.save("s1", [Msg.user("replaced", id="a2")])
        assert open_ledger().search("fox") == []
        assert open_ledger().search('"(*") AND NEAR') == []

    def test_large_media_stored_once_and_restored(self, open_ledger: OpenLedger) -> None:
        msgs = every_block_message()
        ledger = open_ledger()
        first = ledger.save("s", msgs)
        # the 10 KB image is referenced, not inlined, in the stored body
        assert first.bytes_written < sum(len(encode(m)) for m in msgs)
        edited = [*msgs[:-1], msgs[-1].replace(content="changed")]
        second = ledger.save("s", edited)
        assert second.bytes_written < 1000
        ledger.fork("s", "copy")
        for name in ("s", "copy"):
            loaded = open_ledger().messages(name)
            assert loaded == edited
            assert loaded[1].content[1].data == msgs[1].content[1].data
        assert open_ledger().messages("s", version=1) == msgs

    def test_text_that_looks_like_a_blob_reference(self, open_ledger: OpenLedger) -> None:
        msgs = [
            Msg.user("look: \x00blob:not-hex", id="a"),
            Msg.user("x \x00blob:" + "a" * 32 + '"', id="b"),
            Msg.user("\\u0000blob:" + "b" * 32, id="c"),
        ]
        open_ledger().save("s", msgs)
        assert open_ledger().messages("s") == msgs

    # -- seed 004: persistence decided by content and position, never by object identity ---
    def test_sync_survives_recycled_objects(self, open_ledger: OpenLedger) -> None:
        ledger = open_ledger()
        live: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}]
        for i in range(20):
            live.append({"role": "user", "content": f"question {i}"})
            live.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": f"c{i}",
                            "type": "function",
                            "function": {"name": "lookup", "arguments": f'{{"q": {i}}}'},
                        }
                    ],
                }
            )
            live.append(
                {"role": "tool", "tool_call_id": f"c{i}", "content": f"r{i}", "_db_persisted": True}
            )
        ledger.sync("s", live)
        # drop persisted dicts (as scaffolding cleanup and compaction do), collect them, then
        # make many new dicts so that CPython hands their addresses to new messages
        del live[-6:]
        gc.collect()
        fresh = [{"role": "user", "content": f"new {i}"} for i in range(200)]
        live.extend(fresh)
        before = copy.deepcopy(live)
        report = ledger.sync("s", live)
        assert live == before  # the caller's dicts are untouched (no markers stamped)
        assert report.appended == 194 and report.truncated == 0
        stored = open_ledger().messages("s")
        assert [m.text for m in stored[-200:]] == [f"new {i}" for i in range(200)]
        assert len(stored) == len(live) and len({m.id for m in stored}) == len(stored)
        assert stored[3].metadata["_db_persisted"] is True  # private keys kept in storage
        assert ledger.sync("s", copy.deepcopy(live)).noop  # equal rebuilt dicts: no write

    def test_sync_msg_objects_reused_at_new_positions(self, open_ledger: OpenLedger) -> None:
        ledger = open_ledger()
        ok = Msg.user("ok", id="ok")
        ledger.sync("s", [ok])
        other = Msg.user("ok", id="ok2")
        report = ledger.sync("s", [ok, other, ok.replace(id="ok3")])
        assert report.appended == 2
        assert [m.id for m in open_ledger().messages("s")] == ["ok", "ok2", "ok3"]

    def test_sync_shifts_write_only_what_they_add(self, open_ledger: OpenLedger) -> None:
        """Dicts without ids get ids by content and occurrence, not position: dropping the
        oldest dicts, putting one in front, deleting one or replacing a prefix with a summary
        keeps every other row, on a ledger that synced the list before and on a new one."""
        live = [
            {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " * 40}
            for i in range(40)
        ]
        ledger = open_ledger()
        ledger.sync("s", live)
        added = {"role": "user", "content": "a new first message"}
        summary = {"role": "assistant", "content": "summary of what came before"}
        shifts = [
            live[1:],  # the oldest dropped
            [added, *live[1:]],  # one put in front
            [added, *live[1:20], *live[21:]],  # one deleted in the middle
            [summary, *live[-8:]],  # a prefix replaced by a summary
        ]
        for k, shifted in enumerate(shifts):
            syncing = ledger if k % 2 == 0 else open_ledger()  # conversions remembered or not
            report = syncing.sync("s", shifted)
            assert report.bytes_written < 1_000  # the added dict at most, never the rest
            texts = [m.text for m in open_ledger().messages("s")]
            assert texts == [d["content"] for d in shifted]
            assert open_ledger().sync("s", copy.deepcopy(shifted)).noop
        stored = open_ledger().messages("s")
        assert len({m.id for m in stored}) == len(stored)

    # -- export and import -----------------------------------------------------------------
    def test_export_import_is_lossless(self, open_ledger: OpenLedger) -> None:
        msgs = every_block_message()
        ledger = open_ledger()
        ledger.save_state(
            "s", lists={"context": msgs, "notes": msgs[:1]}, values={"summary": {"b": b"\x00"}}
        )
        buf = io.BytesIO()
        assert ledger.export("s", buf) == len(msgs) + 1
        report = open_ledger().import_(buf.getvalue(), session="copy")
        assert report.version == 1
        copied = open_ledger().load("copy")
        assert copied.lists["context"] == msgs and copied.lists["notes"] == msgs[:1]
        assert [m.digest for m in copied.lists["context"]] == [m.digest for m in msgs]
        assert copied.values == {"summary": {"b": b"\x00"}}
        with pytest.raises(ConflictError):
            open_ledger().import_(buf.getvalue(), session="copy")
        broken = buf.getvalue().replace(b'"kind":"message"', b'"kind":"mess', 1)
        with pytest.raises(CodecError, match="line 2"):
            open_ledger().import_(broken, session="other")
        assert not open_ledger().exists("other")
        with pytest.raises(SessionNotFoundError):
            ledger.export("missing", io.BytesIO())

    def test_import_openai_transcript(self, open_ledger: OpenLedger) -> None:
        transcript = [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
        ]
        open_ledger().import_openai("s", transcript)
        assert [m.text for m in open_ledger().messages("s")] == ["hi", "hello"]
