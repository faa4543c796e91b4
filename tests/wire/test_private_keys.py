"""A key starting with ``_`` in a dict given to a converter is the caller's private metadata:
kept on the message or the block the dict becomes (never sent, not written back), whatever
the dict (a message, an item, a part, a tool call); the names the converters write themselves
(``RESERVED_KEYS``) are refused, since one was read as what a converter wrote: a
``_responses_item`` replaced the item it sat in, a ``_source_role`` changed its role. A part's
private key was dropped."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agentledger.errors import UserError
from agentledger.messages import Msg, encode
from agentledger.wire.anthropic import from_anthropic
from agentledger.wire.openai import from_openai
from agentledger.wire.private import RESERVED_KEYS
from agentledger.wire.responses import from_responses, to_responses

from .shapes import ANTHROPIC_SHAPES, CHAT_SHAPES, ITEM_SHAPES

CONVERTERS: dict[str, tuple[list[dict[str, Any]], Callable[[list[Any]], list[Msg]]]] = {
    "responses": (ITEM_SHAPES, from_responses),
    "chat": (CHAT_SHAPES, from_openai),
    "anthropic": (ANTHROPIC_SHAPES, lambda d: from_anthropic(d)),
}


def _with_key(value: Any, key: str, path: str = "$") -> Iterator[tuple[str, Any]]:
    """Copies of ``value`` with ``key`` added to one of its objects, each object in turn."""
    if isinstance(value, dict):
        yield path, {**value, key: {"mine": [1, "two"]}}
        for name, item in value.items():
            for where, changed in _with_key(item, key, f"{path}.{name}"):
                yield where, {**value, name: changed}
    elif isinstance(value, list):
        for at, item in enumerate(value):
            for where, changed in _with_key(item, key, f"{path}[{at}]"):
                yield where, [*value[:at], changed, *value[at + 1 :]]


def _cases(key: str) -> Iterator[Any]:
    for name, (shapes, _) in CONVERTERS.items():
        for number, shape in enumerate(shapes):
            for where, changed in _with_key(shape, key):
                yield pytest.param(name, shape, changed, id=f"{name}-{number}-{where}")


def _converted(name: str, value: dict[str, Any]) -> list[Msg] | None:
    try:
        return CONVERTERS[name][1]([value])
    except UserError:
        return None


def _kept(msgs: list[Msg], key: str) -> bool:
    return any(key.encode() in encode(msg) for msg in msgs)


@pytest.mark.parametrize(("name", "shape", "changed"), list(_cases("_mine")))
def test_a_private_key_of_the_callers_is_kept(
    name: str, shape: dict[str, Any], changed: dict[str, Any]
) -> None:
    before, after = _converted(name, shape), _converted(name, changed)
    assert before is not None and after is not None, (name, changed)
    assert _kept(after, "_mine") and [m.role for m in after] == [m.role for m in before]


@pytest.mark.parametrize("key", sorted(RESERVED_KEYS))
def test_a_key_the_converters_write_is_refused_where_they_would_read_it(key: str) -> None:
    """Refused in any object a converter reads keys of; kept, as a value, inside one it keeps
    whole (an annotation, a tool's input, an item of a kind it does not know)."""
    refused = 0
    for param in _cases(key):
        name, shape, changed = param.values
        after = _converted(name, changed)
        if after is None:
            refused += 1
            continue
        assert _kept(after, key), (name, changed)
        assert [m.role for m in after] == [m.role for m in _converted(name, shape) or []]
        if name == "responses":  # every item comes back key for key
            assert to_responses(after) == [changed]
    assert refused
