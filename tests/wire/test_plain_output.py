"""Every writer gives plain values for any message it writes, whatever its metadata holds.

A message is frozen: its metadata holds ``FrozenMap`` s and tuples. A writer that copies a
metadata value into what it returns without thawing it (an image's ``detail`` did, in the chat
and Responses writers, and a file's provider in the AG-UI writer) hands the caller an object
that ``json.dumps`` and the provider SDKs refuse: a session holding such a message fails on
every later request. The domain is small enough to walk whole: every metadata key the
converters read (``READ_KEYS``), holding an object, a list or a scalar, on the message and on
each kind of block a message of each role may hold, through every writer.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest

from agentledger import (
    AudioBlock,
    FileBlock,
    ImageBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from agentledger.errors import AgentLedgerError
from agentledger.wire import to_anthropic, to_openai, to_responses
from agentledger.wire.agui import to_agui

#: The metadata keys the converters read: a wire format's kept keys, an image's detail, a
#: refusal, a provider's file, a context edit's marks.
READ_KEYS = (
    "detail",
    "refusal",
    "_source_role",
    "_provider_file",
    "_openai",
    "_anthropic",
    "_responses",
    "_responses_item",
    "_reasoning_source",
    "_raw_arguments",
    "_agui",
    "_pydantic_ai",
    "_preview",
    "_summary",
    "_omitted",
    "_offloaded",
)
_JSON = (str, int, float, bool, type(None))
#: What a writer may return besides JSON: bytes a caller's item held (kept as given, key for key).
_PLAIN = (*_JSON, bytes)

WRITERS: dict[str, Callable[[list[Msg]], Any]] = {
    "openai": to_openai,
    "openai, reasoning": lambda msgs: to_openai(msgs, reasoning=True, include_ids=True),
    "responses": to_responses,
    "anthropic": to_anthropic,
    "agui": to_agui,
}
_VALUES = ({"a": [1, {"b": "c"}]}, ["x", {"y": None}], "auto", "", 0, True, None)
_PNG = b"\x89PNG\r\n"


def _blocks(meta: dict[str, Any]) -> list[Any]:
    """One block of each kind and source, carrying ``meta``."""
    media = [
        ImageBlock(media_type="image/png", data=_PNG, metadata=meta),
        ImageBlock(media_type="image/png", url="https://example.com/a.png", metadata=meta),
        FileBlock(media_type="application/pdf", data=_PNG, filename="a.pdf", metadata=meta),
        FileBlock(media_type="application/pdf", url="file-123", metadata=meta),
        AudioBlock(media_type="audio/wav", data=_PNG, metadata=meta),
    ]
    text = TextBlock(text="hi", metadata=meta)
    return [
        text,
        *media,
        ThinkingBlock(thinking="hmm", metadata=meta),
        ToolUseBlock(id="c1", name="f", input={"q": 1}, metadata=meta),
        *(ToolResultBlock(id="c1", name="f", output=(text, part), metadata=meta) for part in media),
    ]


def _messages() -> list[Msg]:
    out = []
    for key, value in itertools.product(READ_KEYS, _VALUES):
        meta = {key: value}
        for role, block in itertools.product(
            ("system", "user", "assistant", "tool"), _blocks(meta)
        ):
            for on_message in (meta, {}):
                try:
                    out.append(Msg(role, [block], metadata=on_message))
                except AgentLedgerError:
                    continue  # a block the role cannot hold
    return out


def assert_plain(value: Any, scalars: tuple[type, ...], path: str = "$") -> None:
    """``value`` is made of dicts with string keys, lists and ``scalars`` only (a writer's own
    result may be a tuple: ``to_anthropic``'s ``(system, messages)``)."""
    if type(value) is dict:
        for key, item in value.items():
            assert type(key) is str, f"{path}: key {key!r}"
            assert_plain(item, scalars, f"{path}.{key}")
    elif type(value) is list or (type(value) is tuple and path == "$"):
        for i, item in enumerate(value):
            assert_plain(item, scalars, f"{path}[{i}]")
    else:
        assert type(value) in scalars, f"{path}: a {type(value).__name__} ({value!r})"


@pytest.mark.parametrize("writer", list(WRITERS))
def test_a_writer_gives_plain_values(writer: str) -> None:
    written = 0
    for msg in _messages():
        try:
            out = WRITERS[writer]([msg])
        except AgentLedgerError:
            continue  # a message the format cannot carry, refused with a typed error
        scalars = _JSON if writer == "agui" else _PLAIN  # AG-UI goes to a client as JSON
        try:
            assert_plain(out, scalars)
        except AssertionError as exc:
            raise AssertionError(f"{msg.metadata} / {msg.content[0]!r}: {exc}") from None
        written += 1
    assert written > 1000  # most of them are written, not refused
