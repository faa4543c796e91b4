"""Hypothesis strategies for messages, and the checks that a message reads back exactly.

Four families:

- ``messages`` / ``blocks`` / ``json_values``: ordinary valid messages, every block type, bytes
  nested anywhere in metadata.
- ``hostile_messages`` / ``hostile_values``: messages and session values that are accepted but
  odd: integers at the 64-bit bounds, ``-0.0``, the smallest and largest floats, text with NUL,
  astral and line-separator characters, strings and metadata shaped like the codec's own tags
  (``$bytes``, ``$map``) or like stored-media references (``{"$blob": ...}``, NUL + ``blob:``),
  nesting at ``MAX_DEPTH``, media at and above the storage threshold, timestamps in years 1 and
  9999. Every one must come back from any store equal, with the same types and digest.
- ``every_damage(value)`` / ``damaged(value)``: a wire dict with one thing changed anyhow (all
  of them, or one drawn), for the properties that a converter reads it back exactly or refuses
  it with a typed error.
- ``wild_values`` / ``constructor_calls``: anything at all (None, bools, floats, huge ints,
  bytes, lists, dicts, lone surrogates, enum members, naive datetimes, nested ``FrozenMap``\\ s
  holding lists) for the property that a constructor either refuses a value or keeps it exactly.

The store leg, for any backend::

    from hypothesis import given
    from tests.messages.strategies import assert_saved_and_loaded, hostile_messages

    @given(msgs=st.lists(hostile_messages, max_size=4, unique_by=lambda m: m.id))
    def test_hostile_round_trip(msgs):
        with Ledger(url) as ledger:
            assert_saved_and_loaded(ledger, msgs)

``assert_same`` compares two values field by field with exact types; ``assert_round_trip``
checks one message through the codec and the deferred (stored) path.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import msgspec
from hypothesis import strategies as st

from agentledger.messages import (
    AudioBlock,
    FileBlock,
    FrozenMap,
    ImageBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    VideoBlock,
    decode,
    encode,
)
from agentledger.messages.msg import deferred_messages
from agentledger.messages.values import MAX_DEPTH

# -- ordinary valid messages ----------------------------------------------------------------
text = st.text(max_size=30)
keys = st.text(max_size=8)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | text
    | st.binary(max_size=16)
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(keys | st.sampled_from(["$bytes", "$map"]), children, max_size=3)
    ),
    max_leaves=10,
)
metadata = st.dictionaries(keys | st.just("_private"), json_values, max_size=3)


#: What ``every_damage`` puts in place of a value: each JSON kind, and bytes.
JUNK: tuple[Any, ...] = (None, True, 0, -1, 1.5, "", "x", b"b", [], ["a", 1], {}, {"a": [1]})
#: ``JUNK`` without bytes: what a client's JSON can hold.
JSON_JUNK = tuple(junk for junk in JUNK if not isinstance(junk, bytes))


def every_damage(
    value: Any, junk: tuple[Any, ...] = JUNK, path: str = "$"
) -> Iterator[tuple[str, Any]]:
    """Every copy of ``value`` with one thing changed (``(where, copy)``): at every path of
    it, the value replaced by each of ``junk``, a key removed, a list entry repeated. Small
    wire dicts have a few hundred; a property can walk them all."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield f"{path}.{key} removed", {k: v for k, v in value.items() if k != key}
            for where, changed in every_damage(item, junk, f"{path}.{key}"):
                yield where, {**value, key: changed}
    elif isinstance(value, list):
        for at, item in enumerate(value):
            yield f"{path}[{at}] repeated", [*value[:at], item, *value[at:]]
            for where, changed in every_damage(item, junk, f"{path}[{at}]"):
                yield where, [*value[:at], changed, *value[at + 1 :]]
    for replacement in junk:
        yield f"{path} = {replacement!r}", replacement


def damaged(value: Any) -> st.SearchStrategy[tuple[str, Any]]:
    """One of ``every_damage(value)``, drawn (``(where, copy)``)."""
    return st.sampled_from(list(every_damage(value)))


media_type = st.sampled_from(["image/png", "audio/wav", "video/mp4", "application/pdf"])


def _media(cls: type) -> st.SearchStrategy:
    inline = st.builds(cls, media_type=media_type, data=st.binary(max_size=64), metadata=metadata)
    linked = st.builds(cls, media_type=media_type, url=st.just("https://example.com/x"))
    return inline | linked


media = _media(ImageBlock) | _media(AudioBlock) | _media(VideoBlock) | _media(FileBlock)
text_block = st.builds(TextBlock, text=text, metadata=metadata)
blocks = (
    text_block
    | st.builds(ThinkingBlock, thinking=text, signature=st.none() | text, redacted=st.booleans())
    | media
    | st.builds(ToolUseBlock, id=text, name=text, input=metadata, metadata=metadata)
    | st.builds(ToolUseBlock, id=text, name=text, arguments=text, metadata=metadata)
    | st.builds(
        ToolResultBlock,
        id=text,
        name=text,
        output=st.lists(text_block | media, max_size=3).map(tuple),
        is_error=st.booleans(),
        metadata=metadata,
    )
)
usage = st.none() | st.builds(
    Usage, input_tokens=st.integers(0, 10**6), output_tokens=st.integers(0, 10**6)
)
timestamps = st.none() | st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)
messages = st.builds(
    Msg,
    role=st.sampled_from(["system", "user", "assistant", "tool"]),
    content=st.lists(blocks, max_size=4),
    id=st.none() | st.text(min_size=1, max_size=12),
    name=st.none() | text,
    metadata=metadata,
    usage=usage,
    created_at=timestamps,
)

# -- hostile but valid ----------------------------------------------------------------------
_HEX = "0123456789abcdef" * 2
odd_text = st.sampled_from(
    [
        "",
        "\x00",
        "\x00blob:" + _HEX,
        '{"$blob":"' + _HEX + '"}',
        '"data":{"$blob":"' + _HEX + '"}',
        '{"$bytes":"AAE="}',
        "\\u0000blob:",
        "\u2028\u2029\x7f\x85",
        "\U0001f600\U00010000",
        "\u05d0\u200f",
        "\ufeff",
        "\ufffd",
    ]
) | st.text(max_size=12)
_json_scalar = st.sampled_from(
    [
        "1",
        "-0",
        "1.0e2",
        "1E-7",
        "18446744073709551616",
        "-123456789012345678901234567890",
        "1.5",
        "true",
        "null",
        '"\\u00fc"',
        '"\u00fc"',
        '"\\ud83d\\ude00"',
        '"a\\/b"',
        '"\\u0000"',
        "NaN",
        "[1 , 2]",
        '{"_raw_arguments": "x"}',
    ]
)
_json_key = st.sampled_from(['"a"', '"b"', '"\\u0061"', '"_raw_arguments"', '""', '"$bytes"'])
_json_space = st.sampled_from(["", " ", "\n  ", "\t"])
json_texts = st.builds(
    lambda pairs, sp: "{" + sp + ("," + sp).join(f"{k}:{sp}{v}" for k, v in pairs) + sp + "}",
    st.lists(st.tuples(_json_key, _json_scalar), max_size=4),
    _json_space,
) | st.sampled_from(["", "   ", "{", '{"a": tru', "[1]", '"x"', "{}", "null", "{} {}"])
"""Tool-argument texts a model may write: big integers, escapes, exponents, duplicate keys,
odd spacing, NaN, and texts that are not a JSON object at all."""

odd_scalars = st.sampled_from(
    [
        -(2**63),
        2**64 - 1,
        2**63,
        -0.0,
        0.0,
        5e-324,
        1.7976931348623157e308,
        -1.7976931348623157e308,
        1e16,
        True,
        False,
        None,
        b"",
        b"\x00\xff",
    ]
)
odd_keys = st.sampled_from(["", "$bytes", "$map", "$blob", "data", "url", "type", "\x00"]) | keys


def _nested(depth: int, leaf: Any) -> Any:
    value = leaf
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


def _deep(depth: int) -> st.SearchStrategy:
    """Values nested exactly ``depth`` levels (the most a value at that position may have)."""
    return st.builds(_nested, st.just(depth), odd_scalars | odd_text)


odd_json = st.recursive(
    odd_scalars | odd_text,
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(odd_keys, children, max_size=3)
        | st.builds(lambda v: {"$blob": v}, children)
        | st.builds(lambda v: {"data": {"$blob": v}}, children)
    ),
    max_leaves=8,
)
hostile_values = odd_json | _deep(MAX_DEPTH)
odd_metadata = st.dictionaries(odd_keys, odd_json | _deep(MAX_DEPTH - 1), max_size=3)
odd_urls = st.sampled_from(
    [
        "https://example.com/\u00e9\U0001f600",
        "data:image/png;base64,AAAA",
        "blob:" + _HEX,
        "$blob:" + _HEX,
        "",
        " ",
    ]
)
_sizes = st.sampled_from([0, 1, 4095, 4096, 6000])


def _odd_media(cls: type) -> st.SearchStrategy:
    inline = st.builds(
        cls,
        media_type=odd_text,
        data=st.builds(lambda n, b: bytes([b]) * n, _sizes, st.integers(0, 255)),
        metadata=odd_metadata,
    )
    linked = st.builds(cls, media_type=odd_text, url=odd_urls, metadata=odd_metadata)
    return inline | linked


odd_media = _odd_media(ImageBlock) | _odd_media(AudioBlock) | _odd_media(FileBlock)
odd_text_block = st.builds(TextBlock, text=odd_text, metadata=odd_metadata)
hostile_blocks = (
    odd_text_block
    | st.builds(ThinkingBlock, thinking=odd_text, signature=st.none() | odd_text)
    | odd_media
    | st.builds(ToolUseBlock, id=odd_text, name=odd_text, input=odd_metadata)
    | st.builds(ToolUseBlock, id=odd_text, name=odd_text, arguments=odd_text | json_texts)
    | st.builds(
        ToolResultBlock,
        id=odd_text,
        name=odd_text,
        output=st.lists(odd_text_block | odd_media, max_size=2),
        is_error=st.booleans(),
        metadata=odd_metadata,
    )
)
_counts = st.sampled_from([0, 1, 2**31, 2**63 - 1])
hostile_messages = st.builds(
    Msg,
    role=st.sampled_from(["system", "user", "assistant", "tool"]),
    content=st.lists(hostile_blocks, max_size=3),
    id=st.builds(lambda t, u: t + "\U0001f600" + u.hex, odd_text, st.uuids()),
    name=st.none() | odd_text,
    metadata=odd_metadata,
    usage=st.none() | st.builds(Usage, input_tokens=_counts, reasoning_tokens=_counts),
    created_at=st.none()
    | st.sampled_from(
        [
            datetime(1, 1, 1, tzinfo=UTC),
            datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
            datetime(2026, 1, 1, 12, 0, 0, 1, tzinfo=timezone(timedelta(hours=-11))),
        ]
    ),
)


# -- anything at all ------------------------------------------------------------------------
class Colour(enum.StrEnum):
    RED = "red"


class Count(enum.IntEnum):
    THREE = 3


surrogate_text = st.builds(
    lambda a, s, b: a + s + b,
    text,
    st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=2),
    text,
)
wild_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from([2**64, -(2**63) - 1, 10**40])
    | st.floats()
    | text
    | surrogate_text
    | st.binary(max_size=8)
    | st.binary(max_size=8).map(bytearray)
    | st.binary(max_size=8).map(memoryview)
    | st.datetimes()
    | st.datetimes(timezones=st.just(UTC))
    | st.sampled_from([Colour.RED, Count.THREE, object(), {1, 2}, 1j, Ellipsis, type])
)


def _frozen_or_plain(value: dict[Any, Any]) -> Any:
    """A FrozenMap of ``value`` when one can be built (holding the caller's lists until it
    copies them), else ``value`` itself."""
    try:
        return FrozenMap(value)
    except Exception:
        return value


wild_values = st.recursive(
    wild_scalars,
    lambda children: (
        st.lists(children, max_size=3)
        | st.lists(children, max_size=3).map(tuple)
        | st.dictionaries(keys | st.integers() | surrogate_text | st.none(), children, max_size=3)
        | st.dictionaries(keys, children, max_size=3).map(_frozen_or_plain)
    ),
    max_leaves=8,
)
_good: dict[str, st.SearchStrategy] = {
    "text": text,
    "optional_text": st.none() | text,
    "bool": st.booleans(),
    "count": st.integers(0, 1000),
    "data": st.binary(max_size=16),
    "map": metadata,
    "output": st.lists(text_block | media, max_size=2),
    "content": st.lists(blocks, max_size=2) | text,
    "role": st.sampled_from(["user", "assistant"]),
    "id": st.none() | st.text(min_size=1, max_size=8),
    "created_at": timestamps,
    "usage": usage,
}
_MEDIA_FIELDS = {"media_type": "text", "data": "data", "url": "optional_text", "metadata": "map"}
_FIELDS: dict[Callable[..., Any], dict[str, str]] = {
    TextBlock: {"text": "text", "metadata": "map"},
    ThinkingBlock: {
        "thinking": "text",
        "signature": "optional_text",
        "redacted": "bool",
        "metadata": "map",
    },
    ImageBlock: _MEDIA_FIELDS,
    AudioBlock: _MEDIA_FIELDS,
    VideoBlock: _MEDIA_FIELDS,
    FileBlock: {**_MEDIA_FIELDS, "filename": "optional_text"},
    ToolUseBlock: {
        "id": "text",
        "name": "text",
        "input": "map",
        "arguments": "optional_text",
        "metadata": "map",
    },
    ToolResultBlock: {
        "id": "text",
        "name": "text",
        "output": "output",
        "is_error": "bool",
        "metadata": "map",
    },
    Usage: {f: "count" for f in Usage.__struct_fields__},
    Msg: {
        "role": "role",
        "content": "content",
        "id": "id",
        "name": "optional_text",
        "metadata": "map",
        "usage": "usage",
        "created_at": "created_at",
    },
}


_REQUIRED: dict[Callable[..., Any], tuple[str, ...]] = {
    TextBlock: ("text",),
    ThinkingBlock: ("thinking",),
    ImageBlock: ("media_type",),
    AudioBlock: ("media_type",),
    VideoBlock: ("media_type",),
    FileBlock: ("media_type",),
    ToolUseBlock: ("id", "name"),
    ToolResultBlock: ("id",),
    Msg: ("role",),
}


@st.composite
def constructor_calls(draw: st.DrawFn) -> tuple[Callable[..., Any], dict[str, Any]]:
    """A public constructor and keyword arguments, each either valid or anything at all."""
    ctor = draw(st.sampled_from(list(_FIELDS)))
    kwargs = {}
    for field, kind in _FIELDS[ctor].items():
        required = field in _REQUIRED.get(ctor, ())
        choice = draw(st.sampled_from(["good", "good", "wild"] + ([] if required else ["omit"])))
        if choice == "good":
            kwargs[field] = draw(_good[kind])
        elif choice == "wild":
            kwargs[field] = draw(wild_values)
    return ctor, kwargs


# -- exact comparison -----------------------------------------------------------------------
def assert_same(a: Any, b: Any, path: str = "$") -> None:
    """``a`` and ``b`` are equal with the same type at every level (1 is not 1.0 nor True,
    -0.0 is not 0.0, a tuple is not a list)."""
    assert type(a) is type(b), f"{path}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, msgspec.Struct):
        for field in a.__struct_fields__:
            assert_same(getattr(a, field), getattr(b, field), f"{path}.{field}")
    elif isinstance(a, Msg):
        for field in ("id", "role", "content", "name", "metadata", "usage", "created_at"):
            assert_same(getattr(a, field), getattr(b, field), f"{path}.{field}")
    elif isinstance(a, FrozenMap | dict):
        assert list(a) == list(b) or sorted(a) == sorted(b), f"{path}: keys differ"
        for key in a:
            assert_same(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, tuple | list):
        assert len(a) == len(b), f"{path}: lengths differ"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, float):
        assert a == b and math.copysign(1, a) == math.copysign(1, b), f"{path}: {a} != {b}"
    elif isinstance(a, datetime):
        assert a == b and a.tzinfo == b.tzinfo, f"{path}: {a!r} != {b!r}"
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def assert_round_trip(msg: Msg) -> None:
    """``msg`` reads back exactly through the codec and through the stored (deferred) path."""
    data = encode(msg)
    back = decode(data)
    assert back == msg and back.digest == msg.digest
    assert encode(back) == data
    assert_same(back, msg)
    (stored,) = deferred_messages([msg.id], [msg.digest], [data])
    assert_same(stored, msg)
    assert encode(stored) == data


def assert_saved_and_loaded(ledger: Any, msgs: Sequence[Msg], session: str = "hostile") -> None:
    """Save ``msgs``, load them in a fresh ``Ledger`` over the same store: equal, same digests
    and field types; saving the loaded list back is a no-op."""
    from agentledger import Ledger

    ledger.save(session, list(msgs))
    with Ledger(ledger.store) as fresh:
        loaded = fresh.messages(session)
        assert [m.digest for m in loaded] == [m.digest for m in msgs]
        assert fresh.save(session, loaded).noop
        for got, want in zip(loaded, msgs, strict=True):
            assert_same(got, want)
            assert encode(got) == encode(want)
