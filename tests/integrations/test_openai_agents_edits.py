"""``LedgerSession.set_items`` edits a history at the cost of what it changes, by any means.

An item equal to one the session holds keeps that one's message wherever it moved, so a window
that drops the oldest turn, an insert at the front, a delete in the middle or a summary in place
of a prefix writes only the items that are new. The property below checks that against a small
spec (equal items, counted as multisets, and a call output named after its call in its own
list), on every way a session is changed, and checks that nothing is lost on the way: the
session gives back exactly what it was given, a new session on the ledger too, and every
earlier version stays as it was.
"""

from __future__ import annotations

import asyncio
import datetime
import decimal
import enum
import json
import uuid
from collections import Counter
from typing import Any

import pytest

pytest.importorskip("agents")

from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger import Ledger, Msg, SaveReport
from agentledger.errors import AgentLedgerError, ConflictError
from agentledger.integrations.openai_agents import LedgerSession
from agentledger.wire.responses import to_responses

from ..messages.strategies import every_damage
from ..wire.shapes import ITEM_SHAPES

_TEXT = st.sampled_from(["hi", "ok", "done", "a longer message about the weather"])
_CALLS = st.sampled_from(["c1", "c2", "c3"])
_TOOLS = st.sampled_from(["lookup", "search"])
_ITEMS = st.one_of(
    st.builds(lambda t: {"role": "user", "content": t}, _TEXT),  # no id, as the SDK adds input
    st.builds(
        lambda t, n: {
            "type": "message",
            "role": "assistant",
            "id": f"msg_{n}",
            "content": [{"type": "output_text", "text": t, "annotations": []}],
        },
        _TEXT,
        st.integers(0, 3),
    ),
    st.builds(
        lambda c, tool: {
            "type": "function_call",
            "id": f"fc_{c}",
            "call_id": c,
            "name": tool,
            "arguments": "{}",
        },
        _CALLS,
        _TOOLS,
    ),
    st.builds(
        lambda c, t: {"type": "function_call_output", "call_id": c, "output": t}, _CALLS, _TEXT
    ),
)
_AT = st.integers(0, 40)
_EDITS = st.one_of(
    st.tuples(st.just("add"), st.lists(_ITEMS, min_size=1, max_size=3)),
    st.tuples(st.just("pop")),
    st.tuples(st.just("drop_first"), st.integers(1, 3)),
    st.tuples(st.just("insert"), _AT, _ITEMS),
    st.tuples(st.just("delete"), _AT),
    st.tuples(st.just("move"), _AT, _AT),
    st.tuples(st.just("edit"), _AT, _TEXT),
    st.tuples(st.just("summary"), _AT, _TEXT),
    st.tuples(st.just("repeat"), _AT),
    st.tuples(st.just("same")),
)


def _edited(items: list[dict[str, Any]], edit: tuple[Any, ...]) -> list[dict[str, Any]]:
    """``items`` after a ``set_items`` edit (a new list; the dicts are shared)."""
    out = list(items)
    at = edit[1] % len(out) if len(edit) > 1 and out and isinstance(edit[1], int) else 0
    kind = edit[0]
    if kind == "drop_first":
        del out[: edit[1]]
    elif kind == "insert":
        out.insert(at, edit[2])
    elif kind == "delete" and out:
        del out[at]
    elif kind == "move" and out:
        out.insert(edit[2] % len(out), out.pop(at))
    elif kind == "edit" and out:
        item = out[at]
        field = "output" if item.get("type") == "function_call_output" else "content"
        if isinstance(item.get(field), str):
            out[at] = {**item, field: item[field] + " " + edit[2]}
    elif kind == "summary":
        out[: at + 1] = [{"role": "user", "content": "summary: " + edit[2]}]
    elif kind == "repeat" and out:
        out.append(out[at])
    return out


def _keys(items: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Each item as the spec tells items apart: its JSON, and for a call output the tool of
    the call before it in the list with its ``call_id`` (``""`` if none)."""
    names: dict[str, str] = {}
    keys = []
    for item in items:
        if item.get("type") == "function_call":
            names[item["call_id"]] = item["name"]
        answered = names.get(item["call_id"], "") if "output" in item else ""
        keys.append((json.dumps(item, sort_keys=True), answered))
    return keys


def _kept(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> int:
    """How many items of ``new`` the session can keep from ``old``: equal items, as multisets."""
    return sum((Counter(_keys(old)) & Counter(_keys(new))).values())


def _in_order(held: list[Msg], stored: list[Msg]) -> bool:
    """Whether the messages ``stored`` kept from ``held`` are in the order they were."""
    where = {m.digest: i for i, m in enumerate(held)}
    kept = [where[m.digest] for m in stored if m.digest in where]
    return kept == sorted(kept) and len(set(kept)) == len(kept)


async def _check_edits(start: list[dict[str, Any]], edits: list[tuple[Any, ...]]) -> None:
    with Ledger("memory://") as ledger:
        session = LedgerSession("s", ledger)
        model: list[dict[str, Any]] = []
        versions: dict[int, list[dict[str, Any]]] = {}
        for edit in [("add", start) if start else ("same",), *edits]:
            before = ledger.version("s")
            if edit[0] == "add":
                await session.add_items(edit[1])
                new = [*model, *edit[1]]
            elif edit[0] == "pop":
                popped = await session.pop_item()
                assert popped == (model[-1] if model else None)
                new = model[:-1]
            else:
                new = _edited(model, edit)
                await session.set_items(new)
                if new == model:
                    assert ledger.version("s") == before  # nothing changed, nothing written
                elif ledger.version("s") != before:
                    kept = _kept(model, new)
                    held = ledger.messages("s", version=before) if before else []
                    stored = ledger.messages("s")
                    was = Counter(m.digest for m in held)
                    assert sum((was & Counter(m.digest for m in stored)).values()) == kept
                    report = ledger.history("s")[-1]
                    if _in_order(held, stored):  # else the store writes again what moved
                        assert report.appended + report.replaced == len(new) - kept
            model = new
            versions[ledger.version("s")] = model
            assert await session.get_items() == model
            stored = ledger.messages("s")
            given = [m.id for m, item in zip(stored, model, strict=True) if "id" not in item]
            assert len(set(given)) == len(given)  # ids given to id-less items are unique
            assert not set(given) & {item["id"] for item in model if "id" in item}
        assert await LedgerSession("s", ledger).get_items() == model
        for version, items in versions.items():
            if version:
                assert to_responses(ledger.messages("s", version=version)) == items


@settings(max_examples=300, deadline=None)
@given(st.lists(_ITEMS, max_size=12), st.lists(_EDITS, min_size=1, max_size=12))
def test_set_items_writes_only_the_items_it_cannot_keep(
    start: list[dict[str, Any]], edits: list[tuple[Any, ...]]
) -> None:
    asyncio.run(_check_edits(start, edits))


def _turns(n: int) -> list[dict[str, Any]]:
    """``n`` items of agent turns, ~400 bytes each: input and tool outputs carry no id."""
    out: list[dict[str, Any]] = []
    for i in range(n):
        pad = f" {i} " + "x" * 400
        out.append(
            [
                {"role": "user", "content": "question" + pad},
                {
                    "type": "function_call",
                    "id": f"fc_{i}",
                    "call_id": f"c{i}",
                    "name": "f",
                    "arguments": "{}",
                },
                {"type": "function_call_output", "call_id": f"c{i - 1}", "output": "result" + pad},
                {
                    "type": "message",
                    "role": "assistant",
                    "id": f"msg_{i}",
                    "content": [{"type": "output_text", "text": "answer" + pad, "annotations": []}],
                },
            ][i % 4]
        )
    return out


@pytest.mark.parametrize(
    "shift",
    [
        pytest.param(lambda items: [*items[1:], {"role": "user", "content": "next"}], id="window"),
        pytest.param(lambda items: [{"role": "user", "content": "first"}, *items], id="front"),
        pytest.param(lambda items: [*items[:200], *items[201:]], id="delete"),
        pytest.param(
            lambda items: [{"role": "user", "content": "summary"}, *items[300:]], id="summary"
        ),
    ],
)
@pytest.mark.parametrize("fresh", [False, True], ids=["same-session", "new-session"])
async def test_a_shift_writes_only_what_it_adds(
    shift: Any, fresh: bool, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shifts of a long history through ``set_items`` write under 1 KB, as an append does,
    whether the session made the history or a new session (another request) edits it."""
    url = f"sqlite:///{tmp_path / 'shift.db'}"
    items = _turns(400)
    with Ledger(url) as ledger, Ledger(url) as other:
        session = LedgerSession("s", ledger)
        await session.add_items(items)
        editor = LedgerSession("s", other) if fresh else session
        reports: list[SaveReport] = []
        save = editor.ledger.save

        def saving(*args: Any, **kwargs: Any) -> SaveReport:
            reports.append(save(*args, **kwargs))
            return reports[-1]

        monkeypatch.setattr(editor.ledger, "save", saving)
        await editor.set_items(shift(items))
        ((report,),) = [reports]
        assert report.version == 2 and report.bytes_written < 1024
        assert await LedgerSession("s", ledger).get_items() == shift(items)
        assert to_responses(ledger.messages("s", version=1)) == items


@pytest.mark.parametrize("url", ["memory://", "sqlite"])
async def test_an_edit_another_writer_overtook_is_refused_not_applied(
    url: str, tmp_path: Any
) -> None:
    """set_items writes what this session read, edited: an item another writer added between
    the read and the write was dropped (the edit was applied again to the newer version). Now
    ConflictError, nothing changed; read again, edit again."""
    url = url if url == "memory://" else f"sqlite:///{tmp_path / 'race.db'}"
    with Ledger(url) as ledger:
        editor, other = LedgerSession("s", ledger), LedgerSession("s", ledger)
        await editor.add_items(_turns(8))
        items = await editor.get_items()
        late = {"role": "user", "content": "added meanwhile"}
        await other.add_items([late])
        version = ledger.version("s")
        with pytest.raises(ConflictError):
            await editor.set_items([*items[:2], {**items[2], "output": "short"}, *items[3:]])
        assert ledger.version("s") == version and (await editor.get_items())[-1] == late
        items = await editor.get_items()
        await editor.set_items([*items[:2], {**items[2], "output": "short"}, *items[3:]])
        assert [i.get("output") for i in await other.get_items()][2] == "short"
        assert (await other.get_items())[-1] == late


def _foreign() -> list[Msg]:
    """A history written by other code: messages that give several items each (another
    provider's signed thinking, which no item shows; parallel calls; their results)."""
    from agentledger import TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock

    calls = Msg.assistant(
        [
            ThinkingBlock(thinking="plan", signature="SIG"),
            TextBlock(text="calling two tools"),
            ToolUseBlock(id="c1", name="f", input={"a": 1}),
            ToolUseBlock(id="c2", name="g", input={"b": 2}),
        ],
        id="turn-1",
        metadata={"model": "claude-x"},
    )
    results = Msg.tool(
        [
            ToolResultBlock(id="c1", name="f", output="one"),
            ToolResultBlock(id="c2", name="g", output="two", is_error=True),
        ],
        id="res-1",
    )
    return [Msg.user("hi", id="u1"), calls, results, Msg.assistant("done", id="a1")]


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(lambda items: items, id="unchanged"),
        pytest.param(lambda items: [*items, {"role": "user", "content": "next"}], id="append"),
        pytest.param(lambda items: items[1:], id="window"),
        pytest.param(lambda items: [{"role": "user", "content": "first"}, *items], id="front"),
        pytest.param(lambda items: [*items[:-1], {**items[-1], "id": "a2"}], id="last edited"),
    ],
)
async def test_messages_other_code_wrote_are_kept_whole_where_their_items_are(edit: Any) -> None:
    """set_items matched items one message each, so a message giving several was converted
    again from them: an unchanged list was a new version, the thinking, the metadata, an
    error flag and the ids lost. Such messages at either end of what changed are kept."""
    with Ledger("memory://") as ledger:
        original = _foreign()
        ledger.save("s", original)
        session = LedgerSession("s", ledger)
        items = await session.get_items()
        await session.set_items(edit(items))
        stored = ledger.messages("s")
        assert to_responses(stored) == edit(items)
        for kept in original[1:3]:
            assert kept in stored  # the same message: thinking, metadata, ids, flags
        assert ledger.version("s") == (1 if edit(items) == items else 2)


async def test_popping_a_call_of_a_message_with_several_keeps_the_rest_of_it() -> None:
    with Ledger("memory://") as ledger:
        original = _foreign()
        ledger.save("s", original[:2])
        popped = await LedgerSession("s", ledger).pop_item()
        assert popped is not None and popped["call_id"] == "c2"
        (_, rest) = ledger.messages("s")
        calls = original[1]
        assert rest.id == calls.id and rest.metadata == calls.metadata
        assert rest.content == calls.content[:3]  # the thinking and the first call kept


async def test_an_edited_item_without_an_id_keeps_its_id_after_a_shift() -> None:
    """An output shortened in the same call that drops the oldest turn is a new version of the
    same message: one row replaced, its id kept."""
    with Ledger("memory://") as ledger:
        session = LedgerSession("s", ledger)
        items = _turns(12)
        await session.add_items(items)
        ids = [m.id for m in ledger.messages("s")]
        edited = [*items[1:6], {**items[6], "output": "short"}, *items[7:]]
        await session.set_items(edited)
        report = ledger.history("s")[-1]
        assert (report.appended, report.replaced, report.truncated) == (0, 1, 1)
        assert [m.id for m in ledger.messages("s")] == ids[1:]


async def test_an_output_is_named_after_its_call_in_the_new_list() -> None:
    """An output kept as it was, whose call was renamed, is written again: its message names
    the tool the new list's call names (which other formats send with a result)."""
    call = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "c1",
        "name": "grep",
        "arguments": "{}",
    }
    output = {"type": "function_call_output", "call_id": "c1", "output": "3 lines"}
    with Ledger("memory://") as ledger:
        session = LedgerSession("s", ledger)
        await session.add_items([call, output])
        await session.set_items([{**call, "name": "find"}, output])
        assert [r.name for r in ledger.messages("s")[1].tool_results] == ["find"]
        await session.set_items([output])  # the call gone: the output answers no tool here
        assert [r.name for r in ledger.messages("s")[0].tool_results] == [""]


async def test_an_output_added_after_its_call_is_named_after_it() -> None:
    """The SDK may add a call and its output in different ``add_items`` (a run paused for an
    approval): the output is still named after the call the session holds."""
    call = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "c1",
        "name": "grep",
        "arguments": "{}",
    }
    output = {"type": "function_call_output", "call_id": "c1", "output": "3 lines"}
    with Ledger("memory://") as ledger:
        session = LedgerSession("s", ledger)
        await session.add_items([call, {"role": "user", "content": "approve"}])
        await LedgerSession("s", ledger).add_items([output])
        assert [r.name for r in ledger.messages("s")[2].tool_results] == ["grep"]


class _Shade(enum.Enum):
    RED = "red"


#: (a JSON value, a Python value whose JSON is the same text, or nearly): an item holding the
#: second is not the item holding the first, and converts to another message or none.
_LOOKALIKES = st.sampled_from(
    [
        (None, float("nan")),
        (None, float("inf")),
        (None, float("-inf")),
        ("aGk=", b"hi"),
        ("2026-01-01T00:00:00", datetime.datetime(2026, 1, 1)),
        ("1.5", decimal.Decimal("1.5")),
        (str(uuid.UUID(int=1)), uuid.UUID(int=1)),
        ("red", _Shade.RED),
        ([1], {1}),
        ([1], frozenset([1])),
        ([1, 2], (1, 2)),
        ({"1": 2}, {1: 2}),
        (1, True),
        (1, 1.0),
    ]
)


async def _outcome(session: LedgerSession, change: Any) -> Any:
    """What ``change`` leaves the session holding, or the type of the error it raised."""
    try:
        await change
    except Exception as exc:  # the type is the outcome compared
        return type(exc)
    return await session.get_items()


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(_ITEMS, _LOOKALIKES), min_size=1, max_size=6),
    st.lists(st.booleans(), min_size=6, max_size=6),
    st.sampled_from(["extra", "nested"]),
)
def test_set_items_keeps_a_held_message_only_for_the_very_item(
    given_items: list[tuple[dict[str, Any], tuple[Any, Any]]], swapped: list[bool], where: str
) -> None:
    """An item whose JSON reads like a held item's (NaN or infinity for null, bytes for their
    base64 text, a datetime, a Decimal or a UUID for its text, a set or a tuple for a list, an
    enum for its value, an int key for its text) is not that item: ``set_items`` does what
    ``add_items`` does with it on a new session (the same error, or the same items back), and a
    refused call leaves the session as it was."""

    def holding(item: dict[str, Any], value: Any) -> dict[str, Any]:
        return {**item, "x": value} if where == "extra" else {**item, "x": {"in": [value]}}

    held = [holding(item, plain) for item, (plain, _) in given_items]
    new = [
        holding(item, look if swap else plain)
        for (item, (plain, look)), swap in zip(given_items, swapped, strict=False)
    ]

    async def check() -> None:
        with Ledger("memory://") as ledger:
            session = LedgerSession("s", ledger)
            await session.add_items(held)
            version = ledger.version("s")
            fresh = LedgerSession("fresh", ledger)
            expected = await _outcome(fresh, fresh.add_items(new))
            assert await _outcome(session, session.set_items(new)) == expected
            if isinstance(expected, type):
                assert ledger.version("s") == version
                assert await LedgerSession("s", ledger).get_items() == held

    asyncio.run(check())


@pytest.mark.parametrize("shape", ITEM_SHAPES, ids=lambda item: str(item.get("type", "easy")))
async def test_every_damage_of_an_item_is_kept_exactly_or_refused(shape: dict[str, Any]) -> None:
    """Each item shape changed in every way ``every_damage`` knows (any JSON at any path, a key
    removed, a part repeated), added after a history or set in its place: given back exactly,
    to this session and to a new one, or refused with a typed error that leaves the session
    as it was."""
    history = [*ITEM_SHAPES[:3], ITEM_SHAPES[3]]  # ends with the call outputs answer
    with Ledger("memory://") as ledger:
        for n, (where, item) in enumerate(every_damage(shape)):
            for how in ("add_items", "set_items"):
                session_id = f"{how}-{n}"
                session = LedgerSession(session_id, ledger)
                await session.add_items(history)
                version = ledger.version(session_id)
                items = [*history, item] if how == "add_items" else [item, *history[1:]]
                try:
                    if how == "add_items":
                        await session.add_items([item])
                    else:
                        await session.set_items(items)
                except AgentLedgerError:
                    assert ledger.version(session_id) == version, where
                    assert await LedgerSession(session_id, ledger).get_items() == history, where
                    continue
                assert await session.get_items() == items, where
                assert await LedgerSession(session_id, ledger).get_items() == items, where


def _other_code(kind: str) -> list[Msg]:
    """Messages of ``kind`` as other code writes them through the ledger (new ones each
    time): one that gives no item (``thinking`` alone, an ``empty`` answer, a tool message
    with ``no results``), ones that give several (a ``turn``: parallel calls, then their
    results), or one that gives one."""
    from agentledger import TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock

    if kind == "thinking":
        return [Msg.assistant([ThinkingBlock(thinking="plan", signature="SIG")])]
    if kind == "empty":
        return [Msg.assistant([])]
    if kind == "no results":
        return [Msg("tool", [])]
    if kind == "text":
        return [Msg.user("said elsewhere")]
    calls = Msg.assistant(
        [
            ThinkingBlock(thinking="plan", signature="SIG"),
            TextBlock(text="calling two tools"),
            ToolUseBlock(id="c1", name="lookup", input={"a": 1}),
            ToolUseBlock(id="c2", name="search", input={}),
        ],
        metadata={"model": "claude-x"},
    )
    results = Msg.tool(
        [
            ToolResultBlock(id="c1", name="lookup", output="one"),
            ToolResultBlock(id="c2", name="search", output="two", is_error=True),
        ]
    )
    return [calls, results]


_OTHER_KINDS = ["thinking", "empty", "no results", "turn", "text"]
_WRITES = st.lists(
    st.one_of(
        st.tuples(st.just("session"), st.lists(_ITEMS, min_size=1, max_size=3)),
        st.tuples(
            st.just("other"), st.lists(st.sampled_from(_OTHER_KINDS), min_size=1, max_size=3)
        ),
    ),
    max_size=6,
)


def _gives_none(msg: Msg) -> bool:
    return not to_responses([msg])


def _owner(msgs: list[Msg], at: int) -> tuple[Msg | None, bool]:
    """The message ``msgs[at]`` (one that gives no item) goes with: the nearest before it that
    gives items, else the nearest after it (None if no message gives items); and whether it
    is after it."""
    before = [m for m in msgs[:at] if not _gives_none(m)]
    after = [m for m in msgs[at + 1 :] if not _gives_none(m)]
    return (before[-1], False) if before else (after[0] if after else None, True)


def _next_to(msgs: list[Msg], at: int, after: bool) -> Msg | None:
    """The nearest message that gives items before ``msgs[at]``, or after it."""
    side = msgs[at + 1 :] if after else msgs[:at][::-1]
    return next((m for m in side if not _gives_none(m)), None)


def _check_companions(held: list[Msg], stored: list[Msg]) -> None:
    """Each message that gives no item is stored exactly when the message it went with is kept
    whole, and it is still next to that message, on the same side (or next to one equal to
    it: of equal messages, which one is kept is not said)."""
    for at, msg in enumerate(held):
        if _gives_none(msg):
            owner, _ = _owner(held, at)
            if owner is None or held.count(owner) == 1:
                assert (msg in stored) == (owner is not None and owner in stored), msg
    for at, msg in enumerate(stored):
        if _gives_none(msg):
            assert msg in held
            owner, after = _owner(held, held.index(msg))
            assert owner is not None and _next_to(stored, at, after) == owner


async def _check_mixed(writes: list[tuple[str, Any]], edits: list[tuple[Any, ...]]) -> None:
    with Ledger("memory://") as ledger:
        session = LedgerSession("s", ledger)
        for who, what in writes:
            if who == "session":
                await session.add_items(what)
            else:
                written = [msg for kind in what for msg in _other_code(kind)]
                ledger.save("s", [*ledger.messages("s"), *written])
        model = await session.get_items()
        for edit in edits:
            before, held = ledger.version("s"), ledger.messages("s") if ledger.version("s") else []
            if edit[0] == "add":
                await session.add_items(edit[1])
                new = [*model, *edit[1]]
            elif edit[0] == "pop":
                assert await session.pop_item() == (model[-1] if model else None)
                new = model[:-1]
            else:
                new = _edited(model, edit)
                await session.set_items(new)
                if new == model and model:
                    assert ledger.version("s") == before  # nothing changed, nothing written
                _check_companions(held, ledger.messages("s"))
            model = new
            assert await session.get_items() == model
            if not model:
                assert ledger.messages("s") == []  # no item given back, no message kept
        assert await LedgerSession("s", ledger).get_items() == model


@settings(max_examples=300, deadline=None)
@given(_WRITES, st.lists(_EDITS, min_size=1, max_size=8))
def test_set_items_keeps_messages_that_give_no_item_only_with_their_item(
    writes: list[tuple[str, Any]], edits: list[tuple[Any, ...]]
) -> None:
    """A history mixing items this session added with messages other code wrote (several
    items a message, or none: thinking alone, an empty answer), edited in every way: the
    session gives back what it was set to, an unchanged list writes nothing, and a message
    that gives no item (which no caller can give back) stays only beside the message it goes
    with (the one before it; the first, for those before it), kept whole. set_items([]) kept
    such messages at the head (an unchanged end of nothing), so the session was not empty."""
    asyncio.run(_check_mixed(writes, edits))


def _with_unsaid() -> list[Msg]:
    """A history other code wrote whose messages ``t0``, ``t1``, ``t2`` give no item."""
    from agentledger import ThinkingBlock

    def thinking(msg_id: str) -> Msg:
        return Msg.assistant([ThinkingBlock(thinking="plan", signature="SIG")], id=msg_id)

    return [
        thinking("t0"),
        Msg.user("hi", id="u"),
        Msg.assistant([], id="t1"),
        Msg.assistant("yo", id="a"),
        thinking("t2"),
    ]


_NEXT = {"role": "user", "content": "next"}


@pytest.mark.parametrize(
    ("edit", "ids"),
    [
        pytest.param(lambda items: items, ["t0", "u", "t1", "a", "t2"], id="unchanged"),
        pytest.param(lambda items: [], [], id="emptied"),
        pytest.param(lambda items: [*items, _NEXT], ["t0", "u", "t1", "a", "t2", "*"], id="append"),
        pytest.param(lambda items: [_NEXT, *items], ["*", "t0", "u", "t1", "a", "t2"], id="front"),
        pytest.param(lambda items: items[1:], ["a", "t2"], id="window"),
        pytest.param(lambda items: items[:1], ["t0", "u", "t1"], id="last dropped"),
        pytest.param(lambda items: [items[0], _NEXT], ["t0", "u", "t1", "*"], id="last edited"),
        pytest.param(lambda items: [_NEXT, items[1]], ["*", "a", "t2"], id="first edited"),
    ],
)
async def test_a_message_that_gives_no_item_goes_with_the_item_before_it(
    edit: Any, ids: list[str]
) -> None:
    """set_items([]) left such messages at the head: they were an unchanged end of an empty
    list. Now each goes with the item before it (those before the first, with the first): kept
    beside it when its message is kept whole, dropped with it otherwise."""
    with Ledger("memory://") as ledger:
        ledger.save("s", _with_unsaid())
        session = LedgerSession("s", ledger)
        items = await session.get_items()
        await session.set_items(edit(items))
        assert await session.get_items() == edit(items)
        stored = [
            m.id if m.id in {"t0", "u", "t1", "a", "t2"} else "*" for m in ledger.messages("s")
        ]
        assert stored == ids
        assert ledger.version("s") == (1 if edit(items) == items else 2)


async def test_popping_the_first_item_takes_the_messages_before_it() -> None:
    with Ledger("memory://") as ledger:
        ledger.save("s", _with_unsaid()[:3])
        session = LedgerSession("s", ledger)
        assert await session.pop_item() == {"role": "user", "content": "hi"}
        assert ledger.messages("s") == []
        ledger.save("s", _with_unsaid()[:1])  # nothing gives an item: there is nothing to pop
        assert await session.pop_item() is None
        assert ledger.messages("s") == []
