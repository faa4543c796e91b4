"""``LiveConverter``: converting a live list again costs what changed, and never changes what it
converts to."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger import Ledger
from agentledger.errors import AgentLedgerError
from agentledger.messages import Msg
from agentledger.wire import live as live_module
from agentledger.wire.live import LiveConverter
from agentledger.wire.openai import from_live_list
from agentledger.wire.responses import from_live_items, is_responses_item

from ..messages.strategies import every_damage
from .shapes import CHAT_SHAPES, ITEM_SHAPES

# values equal to each other under ``==`` but converting to different messages, and NaN, which
# no conversion accepts
_PRIVATE = st.sampled_from([1, True, 1.0, 0, False, 0.0, -0.0, "1", None, float("nan")])
_CALLS = st.sampled_from(["c1", "c2", "c3"])
_TOOLS = st.sampled_from(["lookup", "search"])
_TEXT = st.sampled_from(["hi", "ok", "done", "a longer message about the weather"])


def _chat_call(call: str, tool: str) -> dict[str, Any]:
    function = {"name": tool, "arguments": "{}"}
    return {"id": call, "type": "function", "function": function}


_DICTS = st.one_of(
    st.builds(lambda t: {"role": "user", "content": t}, _TEXT),
    st.builds(lambda t, v: {"role": "user", "content": t, "_note": v}, _TEXT, _PRIVATE),
    st.builds(lambda t: {"role": "assistant", "content": t}, _TEXT),
    st.builds(
        lambda c, n: {"role": "assistant", "content": None, "tool_calls": [_chat_call(c, n)]},
        _CALLS,
        _TOOLS,
    ),
    st.builds(lambda c, t: {"role": "tool", "tool_call_id": c, "content": t}, _CALLS, _TEXT),
    st.builds(
        lambda c, n: {"type": "function_call", "call_id": c, "name": n, "arguments": "{}"},
        _CALLS,
        _TOOLS,
    ),
    st.builds(
        lambda c, t: {"type": "function_call_output", "call_id": c, "output": t}, _CALLS, _TEXT
    ),
    st.builds(lambda t: {"role": "user", "content": [{"type": "input_text", "text": t}]}, _TEXT),
    st.builds(lambda t: Msg.user(t, id=f"msg-{t}"), _TEXT),
)

_OPS = st.one_of(
    st.tuples(st.just("append"), _DICTS),
    st.tuples(st.just("front"), _DICTS),
    st.tuples(st.just("drop"), st.integers(0, 30)),
    st.tuples(st.just("repeat"), st.integers(0, 30)),  # the same dict object again, at the end
    st.tuples(st.just("copy"), st.integers(0, 30)),  # an equal copy in its place
    st.tuples(st.just("private"), st.integers(0, 30), _PRIVATE),  # changed in place
    st.tuples(st.just("text"), st.integers(0, 30), _TEXT),  # changed in place
    st.tuples(st.just("rename"), st.integers(0, 30), _TOOLS),  # a call's tool, in place
)


def _apply(live: list[Any], op: tuple[Any, ...]) -> None:
    kind, arg = op[0], op[1]
    if kind == "append":
        live.append(copy.deepcopy(arg))
    elif kind == "front":
        live.insert(0, copy.deepcopy(arg))
    if kind in ("append", "front") or not live:
        return
    at = arg % len(live)
    x = live[at]
    if kind == "drop":
        del live[at]
    elif kind == "repeat":
        live.append(x)
    elif kind == "copy":
        live[at] = copy.deepcopy(x)
    elif isinstance(x, Msg):
        return
    elif kind == "private":
        x["_note"] = op[2]
    elif kind == "text":
        for field in ("content", "output"):
            if isinstance(x.get(field), str):
                x[field] = op[2]
    elif kind == "rename":
        for call in x.get("tool_calls") or ():
            call["function"]["name"] = op[2]
        if x.get("type") == "function_call":
            x["name"] = op[2]


def _outcome(convert: Any, live: list[Any]) -> Any:
    """The messages (with their digests) or the type of the error."""
    try:
        msgs = convert(live)
    except AgentLedgerError as exc:
        return type(exc)
    return [(m, m.digest) for m in msgs]


@settings(max_examples=600, deadline=None)
@given(
    st.lists(_DICTS, max_size=12),
    st.lists(_OPS, min_size=1, max_size=25),
    st.sampled_from([1, 2, 3, 5, 64]),
    st.sampled_from([1, 2, 3, 64]),
    st.sampled_from([0, 1, 8]),
)
def test_a_list_converted_again_converts_as_a_fresh_converter_converts_it(
    start: list[Any], ops: list[tuple[Any, ...]], chunk: int, moved_run: int, searches: int
) -> None:
    """Whatever was done to the list and its dicts between calls (in place included, to
    values that compare equal but are not: ``1``, ``True``, ``1.0``), the converter that saw
    every earlier version converts it exactly as one that sees it for the first time, however
    many dicts it fingerprints at once, however short a moved run it takes whole, and however
    it looks items up in the last list."""
    real = live_module._CHUNK, live_module._MOVED_RUN, live_module._SEARCHES
    live_module._CHUNK, live_module._MOVED_RUN, live_module._SEARCHES = chunk, moved_run, searches
    try:
        _convert_again(start, ops)
    finally:
        live_module._CHUNK, live_module._MOVED_RUN, live_module._SEARCHES = real


def _convert_again(start: list[Any], ops: list[tuple[Any, ...]]) -> None:
    shared = LiveConverter()
    live = copy.deepcopy(start)
    assert _outcome(shared.convert, live) == _outcome(LiveConverter().convert, live)
    for op in ops:
        _apply(live, op)
        expected = _outcome(LiveConverter().convert, live)
        assert _outcome(shared.convert, live) == expected
        chat_only = not any(isinstance(x, dict) and is_responses_item(x) for x in live)
        if chat_only and isinstance(expected, list):
            assert _outcome(from_live_list, live) == expected  # no memory: an oracle


def test_converting_again_converts_only_what_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    converted: list[Any] = []
    real = live_module.from_dict

    def counting(d: Any, *args: Any) -> Msg:
        converted.append(d)
        return real(d, *args)

    monkeypatch.setattr(live_module, "from_dict", counting)
    live = [{"role": "user", "content": f"m{i}"} for i in range(100)]
    converter = LiveConverter()
    first = converter.convert(live)
    assert len(converted) == 100
    converted.clear()
    live.append({"role": "assistant", "content": "new"})
    again = converter.convert(live)
    assert converted == [live[-1]] and all(a is b for a, b in zip(first, again, strict=False))
    converted.clear()
    shifted = converter.convert(live[30:])  # the oldest 30 dropped: nothing new to convert
    assert converted == [] and all(a is b for a, b in zip(again[30:], shifted, strict=True))
    live[50]["content"] = "edited in place"
    converter.convert(live)
    assert converted == [live[50]]  # found by content, not by the object it was


@pytest.fixture
def pickled(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Fills with what ``LiveConverter`` pickles: a dict alone, or a chunk's list of them."""
    seen: list[Any] = []
    real = live_module._pickled

    def counting(x: Any) -> bytes:
        seen.append(x)
        return real(x)

    monkeypatch.setattr(live_module, "_pickled", counting)
    return seen


def _alone(pickled: list[Any]) -> int:
    """How many dicts were pickled alone (not in a chunk)."""
    return sum(isinstance(x, dict) for x in pickled)


def test_converting_again_pickles_dicts_one_by_one_only_where_they_changed(
    pickled: list[Any],
) -> None:
    """Chunks of dicts equal to the last list's are pickled once each, as one pickle; a dict
    is pickled alone only in a chunk that changed, or where no chunk of the last list lines up
    with it, and the chunks line up again after a shift (they follow their dicts)."""
    chunk = live_module._CHUNK
    live = [{"role": "user", "content": f"m{i}"} for i in range(20 * chunk + 5)]
    converter = LiveConverter()
    converter.convert(live)
    pickled.clear()
    live.append({"role": "assistant", "content": "new"})
    converter.convert(live)
    assert _alone(pickled) == 6  # the dicts after the last full chunk: 5 and the new one
    assert len(pickled) - _alone(pickled) == 20  # each full chunk once
    pickled.clear()
    live[10 * chunk + 3]["content"] = "edited in place"
    assert converter.convert(live)[10 * chunk + 3].text == "edited in place"
    assert _alone(pickled) == chunk + 6  # the edited dict's chunk, and the 6 after the chunks
    assert len(pickled) - _alone(pickled) == 20 + 1  # the edited chunk again, for the next call
    for shifted in (
        live[chunk + 1 :],  # a window: the oldest dropped
        [{"role": "user", "content": "first"}, *live],  # an insert at the front
        live[: 7 * chunk] + live[7 * chunk + 1 :],  # a delete in the middle
    ):
        expected = LiveConverter().convert(shifted)
        converter.convert(live)
        pickled.clear()
        assert converter.convert(shifted) == expected
        # alone: up to a chunk where the shift leaves none lined up, and the dicts at the end
        assert _alone(pickled) <= 2 * chunk + 8
        assert len(pickled) - _alone(pickled) <= 20 + 2


def test_a_window_slid_turn_after_turn_keeps_its_chunks(pickled: list[Any]) -> None:
    """A loop that drops its oldest dicts and appends new ones every call pickles, each call,
    about one chunk's dicts alone, however long the list: its chunks move with their dicts."""
    chunk = live_module._CHUNK
    stream = [{"role": "user", "content": f"m{i}"} for i in range(40 * chunk)]
    converter = LiveConverter()
    converter.convert(stream[: 30 * chunk])
    for start in range(3, 3 * chunk, 3):  # three in, three out, for three chunks' worth
        window = stream[start : start + 30 * chunk]
        expected = LiveConverter().convert(window)
        pickled.clear()
        assert converter.convert(window) == expected
        assert _alone(pickled) <= 2 * chunk + 6, start
        assert len(pickled) - _alone(pickled) <= 30 + 2, start


def test_a_moved_run_is_taken_whole_unless_what_moved_renumbers_or_renames_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After a window, an insert at the front or a delete, the run of the last list's dicts
    found again keeps its messages with no step per dict; a dict of the run whose occurrence
    or call's tool changed with what left is converted again, and the run resumes after it."""
    steps: list[int] = []
    real = LiveConverter._message

    def counting(self: LiveConverter, x: Any, index: int, *args: Any) -> Any:
        steps.append(index)
        return real(self, x, index, *args)

    monkeypatch.setattr(LiveConverter, "_message", counting)
    live: list[Any] = [{"role": "user", "content": f"m{i}"} for i in range(200)]
    converter = LiveConverter()
    first = converter.convert(live)
    steps.clear()
    window = [*live[1:], {"role": "assistant", "content": "new"}]
    moved = converter.convert(window)
    assert steps == [199] and all(a is b for a, b in zip(first[1:], moved, strict=False))
    steps.clear()
    front = [{"role": "user", "content": "m150"}, *window]  # a repeat of m150's content
    got = converter.convert(front)
    assert steps == [0, 150]  # the new dict, and m150, now the content's second occurrence
    assert got == LiveConverter().convert(front)
    call = {"role": "assistant", "content": None, "tool_calls": [_chat_call("c1", "lookup")]}
    answer = {"role": "tool", "tool_call_id": "c1", "content": "found"}
    calls = [call, *front, answer]
    converter.convert(calls)
    steps.clear()
    got = converter.convert(calls[1:])
    assert steps == [len(calls) - 2]  # the answer alone: its call left with the front
    assert got == LiveConverter().convert(calls[1:])
    again = [call, {**answer}, *front, {**answer}]  # a call answered twice, far apart
    converter.convert(again)
    steps.clear()
    repeated = [*again[:2], copy.deepcopy(call), *again[2:]]  # the same call made again
    got = converter.convert(repeated)
    assert steps == [2]  # the repeat alone: it names the call's tool as the call before did
    assert got == LiveConverter().convert(repeated)


def test_a_dict_pickle_refuses_is_converted_every_time() -> None:
    class Opaque(str):
        def __reduce__(self) -> Any:
            raise TypeError("not picklable")

    live = [{"role": "user", "content": "hi"}, {"role": "user", "content": Opaque("x")}]
    converter = LiveConverter()
    assert [m.text for m in converter.convert(live)] == ["hi", "x"]
    live[1]["content"] = Opaque("y")
    assert [m.text for m in converter.convert(live)] == ["hi", "y"]


def test_values_equal_under_eq_but_not_the_same_are_told_apart() -> None:
    """``1 == True == 1.0`` and ``0 == False == 0.0 == -0.0``, but each is stored as itself:
    a dict changed in place from one to another converts to its own message."""
    d: dict[str, Any] = {"role": "user", "content": "x", "_n": 1}
    live = [d, {"role": "assistant", "content": "y", "_n": 0}]
    converter = LiveConverter()
    for one, zero in [(1, 0), (True, False), (1.0, 0.0), (1, -0.0), ("1", None)]:
        d["_n"], live[1]["_n"] = one, zero
        got = converter.convert(live)
        assert [(m, m.digest) for m in got] == [(m, m.digest) for m in from_live_list(live)]
        assert [type(m.metadata["_n"]) for m in got] == [type(one), type(zero)]


@pytest.mark.parametrize(
    "shape",
    [*CHAT_SHAPES, *ITEM_SHAPES],
    ids=lambda d: str(d.get("type") or d.get("role")),
)
def test_every_damage_of_a_dict_converts_as_a_fresh_list_or_is_refused(
    shape: dict[str, Any],
) -> None:
    """Each chat message and Responses item changed in every way ``every_damage`` knows, at
    the end of a list ``sync`` already holds: converted to what a fresh conversion gives, or
    refused with a typed error that writes nothing (a content part's type holding a list
    crashed the check of which format a dict is in)."""
    history: list[Any] = [*CHAT_SHAPES[:3], ITEM_SHAPES[3]]
    with Ledger("memory://") as ledger:
        ledger.sync("s", history)
        version = ledger.version("s")
        for where, d in every_damage(shape):
            try:
                fresh = from_live_items([*history, d])
            except AgentLedgerError:
                with pytest.raises(AgentLedgerError):
                    ledger.sync("s", [*history, d])
                assert ledger.version("s") == version, where
                continue
            ledger.sync("s", [*history, d])
            assert ledger.messages("s") == fresh, where
            ledger.sync("s", history)
            version = ledger.version("s")
