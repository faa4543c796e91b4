"""Derived ids follow content and occurrence, in every converter, so a shifted list keeps them.

``from_openai``, ``from_responses`` and ``from_anthropic`` with ``ids="derived"`` (and
``Ledger.sync``) give a wire dict without an id the id of its public content and of how many
id-less dicts of that content come before it. Dropping, inserting or moving other dicts
therefore leaves a dict's id as it was, unless the dict is a later repeat of content that was
dropped or inserted before it; and a store that saves the shifted list writes only what was
added. Before, ``from_responses`` and ``from_anthropic`` derived ids from positions: a window
that dropped its oldest turn gave every later message a new id, and each save rewrote them all.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentledger import Ledger, encode
from agentledger.messages import Msg
from agentledger.wire import from_anthropic, from_openai, from_responses
from agentledger.wire.private import content_key
from agentledger.wire.responses import from_live_items

# Small pools, so that repeats of the same content are common.
CHAT = [
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": "hello"},
    {"role": "user", "content": "and again"},
    {"role": "assistant", "content": "ok"},
]
RESPONSES = [
    {"role": "user", "content": "hi"},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]},
    {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c1", "output": "42"},
    {"type": "item_reference", "id": "ref_1"},  # derives an id although it carries one
]
ANTHROPIC = [
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": "hello"},
    {"role": "user", "content": [{"type": "text", "text": "and again"}]},
    {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
]


def _anthropic_ids(turns: list[dict[str, Any]]) -> list[str]:
    return [m.id for m in from_anthropic(turns, ids="derived")]  # text turns: one message each


CONVERTERS: dict[str, tuple[list[dict[str, Any]], Callable[[list[Any]], list[str]]]] = {
    "openai": (CHAT, lambda ds: [m.id for m in from_openai(ds, ids="derived")]),
    "responses": (RESPONSES, lambda ds: [m.id for m in from_responses(ds, ids="derived")]),
    "anthropic": (ANTHROPIC, _anthropic_ids),
}


def _places(dicts: list[dict[str, Any]]) -> list[tuple[bytes, int]]:
    """Each dict's content and which occurrence of it it is: what its derived id follows."""
    seen: dict[bytes, int] = {}
    out = []
    for d in dicts:
        key = content_key(d, "test")
        out.append((key, seen.get(key, 0)))
        seen[key] = seen.get(key, 0) + 1
    return out


def _shifted(draw: st.DrawFn, base: list[dict[str, Any]], pool: list[Any]) -> list[Any]:
    kind = draw(st.sampled_from(["drop", "insert", "delete", "move", "summary"]))
    out = list(base)
    if kind == "drop":
        del out[: draw(st.integers(0, len(out)))]
    elif kind == "insert":
        out[:0] = draw(st.lists(st.sampled_from(pool), max_size=3))
    elif kind == "delete" and out:
        del out[draw(st.integers(0, len(out) - 1))]
    elif kind == "move" and out:
        out.insert(draw(st.integers(0, len(out) - 1)), out.pop(draw(st.integers(0, len(out) - 1))))
    elif kind == "summary":
        out = [draw(st.sampled_from(pool)), *out[draw(st.integers(0, len(out))) :]]
    return out


@pytest.mark.parametrize("name", sorted(CONVERTERS))
@given(data=st.data())
def test_a_dict_keeps_its_derived_id_wherever_the_others_moved(
    name: str, data: st.DataObject
) -> None:
    pool, ids_of = CONVERTERS[name]
    before = data.draw(st.lists(st.sampled_from(pool), max_size=12))
    after = data.draw(st.composite(lambda draw: _shifted(draw, before, pool))())
    old = dict(zip(_places(before), ids_of(before), strict=True))
    new_ids = ids_of(after)
    assert len(set(new_ids)) == len(new_ids)  # repeats get ids of their own
    for place, new_id in zip(_places(after), new_ids, strict=True):
        if place in old:  # the same content, the same occurrence: the same id
            assert new_id == old[place]
        else:
            assert new_id not in old.values()


@given(st.lists(st.sampled_from(RESPONSES[1:]), max_size=12))
def test_from_responses_derives_the_ids_sync_derives(items: list[dict[str, Any]]) -> None:
    """Items ``sync`` reads as Responses items (a typed item; a bare role-and-text dict is a
    chat message to it) convert to the same messages either way."""
    assert from_responses(items, ids="derived") == from_live_items(items)
    chat = [d for d in CHAT for _ in range(2)]
    assert from_openai(chat, ids="derived") == from_live_items(chat)


WITH_IDS = [{"role": "user", "content": "hi", "id": "u1"}, {**RESPONSES[1], "id": "m1"}]


@given(st.lists(st.sampled_from(RESPONSES + WITH_IDS), max_size=12), st.sets(st.integers(0, 11)))
def test_known_messages_count_as_the_occurrences_they_are(
    items: list[dict[str, Any]], reused: set[int]
) -> None:
    """A message ``known`` gives back still takes its occurrence (unless its item brings its
    own id), so later repeats get the ids a fresh conversion gives them."""
    fresh = from_responses(items, ids="derived")
    again = from_responses(
        items, ids="derived", known=lambda i, _: fresh[i] if i in reused else None
    )
    assert again == fresh


@pytest.mark.parametrize("name", ["openai", "responses", "anthropic"])
def test_a_window_saved_from_derived_ids_writes_only_what_it_added(name: str) -> None:
    """A window of 40 turns slides by one each save: one row is written (the turn added),
    never the 39 that only moved (before, the Anthropic and Responses windows rewrote all 40:
    their derived ids followed positions)."""
    if name == "anthropic":
        turns = [{"role": ("user", "assistant")[i % 2], "content": f"turn {i}"} for i in range(60)]

        def convert(ds: list[Any]) -> list[Msg]:
            return from_anthropic(ds, ids="derived")
    elif name == "responses":
        turns = [{"role": ("user", "assistant")[i % 2], "content": f"turn {i}"} for i in range(60)]

        def convert(ds: list[Any]) -> list[Msg]:
            return from_responses(ds, ids="derived")
    else:
        turns = [{"role": ("user", "assistant")[i % 2], "content": f"turn {i}"} for i in range(60)]

        def convert(ds: list[Any]) -> list[Msg]:
            return from_openai(ds, ids="derived")

    ledger = Ledger("memory://")
    ledger.save("s", convert(turns[:40]))
    for start in range(1, 20):
        window = convert(turns[start : start + 40])
        report = ledger.save("s", window)
        # the oldest row closed, one put in its stead: the turn added, and nothing else
        assert report.appended + report.replaced == 1, start
        assert report.bytes_written == len(encode(window[-1])), start
    assert ledger.messages("s") == convert(turns[19:59])
