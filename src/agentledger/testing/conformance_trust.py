"""The trust-boundary half of the store conformance suite: what a backend is given, it gives back.

``StoreConformance`` inherits these tests. Each pins a way a store was once made to acknowledge
something that later could not be read, or to lose what it had acknowledged: a value a reader
cannot decode, an import that merged where it should have replaced, a derived title that read
the whole session on every save.
"""

from __future__ import annotations

import io
from collections.abc import Callable

import pytest

from agentledger.errors import UserError
from agentledger.messages import ImageBlock, Msg
from agentledger.store import Ledger, SessionState

__all__ = ["TrustConformance"]

OpenLedger = Callable[[], Ledger]


def _title(ledger: Ledger, session: str) -> str | None:
    return next(i.title for i in ledger.list_sessions() if i.session_id == session)


class TrustConformance:
    """Mixed into ``StoreConformance``; needs its ``open_ledger`` fixture."""

    def test_a_title_value_must_be_text(self, open_ledger: OpenLedger) -> None:
        ledger = open_ledger()
        first = Msg.user("first words", id="u")
        ledger.save("s", [first])
        for bad in ({"a": 1}, ["x"], 7, b"bytes", True):
            with pytest.raises(UserError, match="title"):
                ledger.save_state("s", values={"title": bad})
        assert open_ledger().version("s") == 1
        ledger.save_state("s", values={"title": "Chosen"})
        assert _title(open_ledger(), "s") == "Chosen"
        ledger.save_state("s", values={"title": None})
        assert _title(open_ledger(), "s") == "first words"
        report = open_ledger().save("s", [first, Msg.user("more")])
        assert report.appended == 1 and _title(open_ledger(), "s") == "first words"

    def test_the_derived_title_follows_the_first_user_text(self, open_ledger: OpenLedger) -> None:
        ledger = open_ledger()
        image = ImageBlock(media_type="image/png", data=b"\x89PNG")
        msgs = [Msg.system("rules", id="s"), Msg.user(image, id="img"), Msg.assistant("a", id="a")]
        ledger.save("t", msgs)
        assert _title(open_ledger(), "t") is None
        msgs.append(Msg.user("  the   question  ", id="q"))
        ledger.save("t", msgs)
        assert _title(open_ledger(), "t") == "the question"
        msgs.insert(1, Msg.user("an earlier one", id="e"))
        ledger.save("t", msgs)
        assert _title(open_ledger(), "t") == "an earlier one"
        other = open_ledger()  # plans from the stored head, not from a remembered source
        del msgs[1]
        other.save("t", msgs)
        assert _title(open_ledger(), "t") == "the question"
        other.save("t", msgs[:2])
        assert _title(open_ledger(), "t") is None
        other.save_state("t", lists={"context": msgs}, values={"title": "Set with the context"})
        assert _title(open_ledger(), "t") == "Set with the context"

    def test_ids_and_titles_with_nul_or_its_stand_in_come_back_exactly(
        self, open_ledger: OpenLedger
    ) -> None:
        """NUL and U+FFFD in message ids, titles and search hits. PostgreSQL text cannot hold
        NUL, and a store that kept U+FFFD in its place gave back a search hit naming another
        message (``m\ufffd1`` for ``m\x001``) and a title that was never set."""
        ledger = open_ledger()
        nul, stand_in = Msg.user("needle one", id="m\x001"), Msg.user("needle two", id="m\ufffd1")
        title = "Q\x003 \ufffd report"
        ledger.save_state("set", lists={"context": [nul, stand_in]}, values={"title": title})
        ledger.save("derived", [Msg.user("a\x00b \ufffd c", id="q\x00")])
        fresh = open_ledger()
        assert [m.id for m in fresh.messages("set")] == [nul.id, stand_in.id]
        assert (_title(fresh, "set"), _title(fresh, "derived")) == (title, "a\x00b \ufffd c")
        hits = [(h.session_id, h.msg_id, h.position) for h in fresh.search("needle")]
        assert sorted(hits) == [("set", nul.id, 0), ("set", stand_in.id, 1)]
        assert [(h.msg_id, h.position) for h in fresh.search("one")] == [(nul.id, 0)]
        assert [(h.msg_id, h.position) for h in fresh.search("two")] == [(stand_in.id, 1)]
        assert [h.msg_id for h in fresh.search("a b c")] == ["q\x00"]
        for changed in ("Q\ufffd3 \ufffd report", "Q\x003 \x00 report", "plain"):
            ledger.save_state("set", values={"title": changed})
            assert _title(open_ledger(), "set") == changed
        ledger.save_state("set", values={"title": None})  # derived from the context again
        assert _title(open_ledger(), "set") == "needle one"

    def test_import_with_overwrite_makes_the_session_equal_the_export(
        self, open_ledger: OpenLedger
    ) -> None:
        ledger = open_ledger()
        exported = [Msg.user("exported", id="x")]
        ledger.save_state("src", lists={"context": exported}, values={"kept": 1})
        buf = io.BytesIO()
        ledger.export("src", buf)
        ledger.save_state(
            "dst",
            lists={"context": [Msg.user("old", id="o")], "scratch": [Msg.user("gone", id="g")]},
            values={"kept": 2, "stale": "gone"},
        )
        report = open_ledger().import_(buf.getvalue(), session="dst", overwrite=True)
        assert report.version == 2
        assert open_ledger().load("dst") == SessionState(2, {"context": exported}, {"kept": 1})
        before = open_ledger().load("dst", version=1)
        assert set(before.lists) == {"context", "scratch"} and before.values["stale"] == "gone"
