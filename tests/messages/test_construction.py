"""One rule at construction: a value is refused where it is built, or it reads back exactly.

Every public constructor (``Msg``, each block, ``Usage``, ``FrozenMap``, ``freeze`` and
``encode_value``) either raises ``UserError``/``CodecError`` naming the field, or keeps a value
that ``decode(encode(...))`` returns with the same types and digest, sharing nothing mutable
with its caller.
"""

from __future__ import annotations

import copy
import json
import pickle
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentledger import CodecError, Ledger, UserError
from agentledger.messages import (
    Bytes,
    FileBlock,
    FrozenMap,
    ImageBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    decode,
    decode_value,
    encode,
    encode_value,
    freeze,
    thaw,
)
from agentledger.messages.values import MAX_DEPTH, from_json, json_dec_hook
from agentledger.wire.private import metadata_from_json
from tests.messages.strategies import (
    Colour,
    Count,
    assert_round_trip,
    assert_same,
    constructor_calls,
    metadata,
    wild_values,
)

REFUSED = (UserError, CodecError)


def _as_message(obj: Any) -> Msg:
    if isinstance(obj, Msg):
        return obj
    if isinstance(obj, Usage):
        return Msg.user("x", usage=obj, id="u", created_at=None)
    return Msg.assistant([obj], id="b", created_at=None)


def _mutate_everything(value: Any, seen: set[int] | None = None) -> None:
    """Change every list, dict and bytearray reachable from ``value``, in place."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return
    seen.add(id(value))
    if isinstance(value, dict):
        for item in list(value.values()):
            _mutate_everything(item, seen)
        value["__mutated__"] = 1
    elif isinstance(value, list):
        for item in value:
            _mutate_everything(item, seen)
        value.append("__mutated__")
    elif isinstance(value, tuple):
        for item in value:
            _mutate_everything(item, seen)
    elif isinstance(value, bytearray):
        value.append(0)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(constructor_calls())
def test_a_constructor_refuses_a_value_or_keeps_it_exactly(call: Any) -> None:
    ctor, kwargs = call
    try:
        obj = ctor(**kwargs)
    except REFUSED:
        return
    msg = _as_message(obj)
    before = encode(msg)
    _mutate_everything(kwargs)
    assert encode(msg) == before and _as_message(obj) == msg  # nothing of the caller's kept
    assert_round_trip(msg)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(wild_values)
def test_a_value_is_refused_or_reads_back_with_its_types(value: Any) -> None:
    try:
        frozen = freeze(value)
    except CodecError:
        with pytest.raises(CodecError):
            encode_value(value)
        with pytest.raises(CodecError):
            Msg.user("x", metadata={"v": value})
        return
    data = encode_value(value)
    assert_same(decode_value(data), thaw(frozen))
    assert encode_value(decode_value(data)) == data
    msg = Msg.user("x", metadata={"v": value})
    _mutate_everything(value)
    assert_same(msg.metadata["v"], frozen)
    assert_round_trip(msg)
    if isinstance(frozen, FrozenMap):
        assert_same(FrozenMap(thaw(frozen)), frozen)


_FROZEN_TYPES = (str, int, float, bool, type(None), Bytes)


def _assert_frozen(value: Any, path: str = "$") -> None:
    """Nothing mutable and nothing the codec would write as another type, at any depth."""
    kind = type(value)
    if kind is FrozenMap:
        for key, item in value.items():
            assert type(key) is str, f"{path}: key {key!r}"
            _assert_frozen(item, f"{path}.{key}")
    elif kind is tuple:
        for i, item in enumerate(value):
            _assert_frozen(item, f"{path}[{i}]")
    else:
        assert kind in _FROZEN_TYPES, f"{path}: a {kind.__name__} inside a frozen value"


_tag_shaped = st.recursive(
    st.none() | st.integers(-5, 5) | st.text(max_size=4) | st.sampled_from(["cQ==", "", "=="]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)  # what ``strip_private`` gives for a list
        | st.dictionaries(st.sampled_from(["$bytes", "$map", "k"]), inner, max_size=2)
    ),
    max_leaves=8,
)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(wild_values | _tag_shaped)
def test_a_value_read_as_json_is_refused_or_frozen_all_the_way_down(value: Any) -> None:
    """``from_json`` (how a decoded or a client's JSON value becomes metadata: the AG-UI reader
    calls it on a client's part metadata) keeps no mutable container, no tag it did not undo,
    and nothing the codec would read back as another value."""
    try:
        frozen = from_json(value)
    except CodecError:
        return
    _assert_frozen(frozen)
    assert_round_trip(Msg.user("x", metadata={"v": frozen}, id="m", created_at=None))
    if type(frozen) is FrozenMap:  # the ways a JSON object becomes metadata give the same
        assert_same(json_dec_hook(FrozenMap, value), frozen)
        assert_same(metadata_from_json(value), frozen)


def _nested(depth: int, inner: Any, kind: str) -> Any:
    for _ in range(depth):
        inner = [inner] if kind == "list" else {"k": inner}
    return inner


_json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from([2**64 - 1, 2**64, -(2**63), -(2**63) - 1])  # msgspec decodes them all
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(exclude_categories=("Cs",)), max_size=4)
    | st.sampled_from(["cQ==", "", "==", "é"])
)
_json_trees = st.recursive(
    _json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["$bytes", "$map", "k", "ü"]), inner, max_size=2)
    ),
    max_leaves=10,
) | st.builds(
    _nested,
    st.integers(MAX_DEPTH - 2, MAX_DEPTH + 1),
    st.sampled_from([1, [], {}, {"$bytes": "cQ=="}]),
    st.sampled_from(["list", "map"]),
)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(["a", "$bytes", "$map"]), _json_trees, max_size=3))
def test_metadata_msgspec_decoded_is_frozen_as_from_json_freezes_it(value: dict[str, Any]) -> None:
    """The decoders' hook trusts what msgspec already checked (text, floats) and nothing else:
    for any JSON object it gives what ``from_json`` gives, or refuses what it refuses."""
    decoded = msgspec.json.decode(json.dumps(value))
    try:
        expected = from_json(json.loads(json.dumps(value)))
    except CodecError:
        expected = None
    if type(expected) is not FrozenMap:
        with pytest.raises(CodecError):
            json_dec_hook(FrozenMap, decoded)
        return
    assert_same(json_dec_hook(FrozenMap, decoded), expected)


# -- the cases found, each refused naming its field ------------------------------------------
@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: Usage(reasoning_tokens=None), "Usage.reasoning_tokens must be an int"),
        (lambda: Usage(input_tokens=1.0), "Usage.input_tokens must be an int, got float"),
        (lambda: Usage(input_tokens=True), "Usage.input_tokens must be an int, got bool"),
        (lambda: Usage(output_tokens=-1), "Usage.output_tokens must be from 0"),
        (lambda: Usage(cache_read_tokens=2**63), "Usage.cache_read_tokens must be from 0"),
        (lambda: ToolUseBlock(id=None, name="f"), "ToolUseBlock.id must be a str, got NoneType"),
        (lambda: ToolUseBlock(id="c", name=b".."), "ToolUseBlock.name must be a str, got bytes"),
        (lambda: ToolResultBlock(id="c", output=["a"]), r"ToolResultBlock.output\[0\]"),
        (lambda: ToolResultBlock(id="c", is_error=0), "ToolResultBlock.is_error must be a bool"),
        (lambda: ToolResultBlock(id="c", name=None), "ToolResultBlock.name must be a str"),
        (lambda: Msg("user", "x", name=7), "Msg.name must be a str or None, got int"),
        (lambda: Msg("user", "x", id=7), "Msg.id must be a str"),
        (lambda: Msg("user", None), "Msg.content must be"),
        (lambda: Msg("user", ["x"]), r"Msg.content\[0\] must be a block, got str"),
        (lambda: Msg("user", "x", usage={"input_tokens": 1}), "Msg.usage must be a Usage"),
        (lambda: ThinkingBlock(thinking="t", signature=b".."), "ThinkingBlock.signature"),
        (lambda: ThinkingBlock(thinking="t", redacted=1), "ThinkingBlock.redacted must be a bool"),
        (lambda: TextBlock(text=None), "TextBlock.text must be a str"),
        (lambda: ImageBlock(media_type=None, url="u"), "ImageBlock.media_type must be a str"),
        (lambda: ImageBlock(media_type="m", data="text"), "ImageBlock.data must be bytes-like"),
        (lambda: FileBlock(media_type="m", url="u", filename=3), "FileBlock.filename"),
    ],
)
def test_a_wrong_type_is_refused_naming_the_field(build: Any, field: str) -> None:
    with pytest.raises(UserError, match=field):
        build()


@pytest.mark.parametrize(
    "build",
    [
        lambda s: Msg.user(s),
        lambda s: Msg.user("x", id=s),
        lambda s: Msg.user("x", name=s),
        lambda s: ThinkingBlock(thinking="t", signature=s),
        lambda s: ToolUseBlock(id=s, name="f"),
        lambda s: ImageBlock(media_type="image/png", url="https://x/" + s),
        lambda s: FileBlock(media_type="m", data=b"", filename=s),
    ],
)
def test_a_lone_surrogate_is_refused_where_it_is_built(build: Any) -> None:
    with pytest.raises(UserError, match="lone surrogate"):
        build("a\ud800b")


@pytest.mark.parametrize(
    "value",
    [{"k": "\udc00"}, {"\ud83d": 1}, [2**64], [-(2**63) - 1], [float("nan")], {1: "a"}, {3}],
)
def test_a_value_json_cannot_hold_is_a_codec_error(value: Any) -> None:
    for build in (freeze, encode_value, FrozenMap, lambda v: Msg.user("x", metadata={"m": v})):
        if build is FrozenMap and not isinstance(value, dict):
            continue
        with pytest.raises(CodecError):
            build(value)


def test_the_64_bit_bounds_and_odd_floats_read_back_exactly() -> None:
    value = [-(2**63), 2**64 - 1, -0.0, 5e-324, 1.7976931348623157e308, True, 1, 1.0]
    assert_same(decode_value(encode_value(value)), value)
    assert_round_trip(Msg.user("x", metadata={"v": value}, usage=Usage(input_tokens=2**63 - 1)))


class _NoOffset(tzinfo):
    def utcoffset(self, dt: datetime | None) -> None:
        return None


@pytest.mark.parametrize(
    "when",
    [
        datetime(2026, 1, 1),
        datetime(2026, 1, 1, tzinfo=_NoOffset()),
        datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=1))),  # before year 1 in UTC
        "2026-01-01T00:00:00Z",
        1767225600,
    ],
)
def test_a_timestamp_that_cannot_be_read_back_is_refused(when: Any) -> None:
    with pytest.raises(UserError, match=r"Msg\.created_at"):
        Msg.user("x", created_at=when)


def test_bytes_for_a_str_field_no_longer_read_back_as_base64_text() -> None:
    with pytest.raises(UserError):
        ThinkingBlock(thinking="t", signature=b"sig")
    as_text = ThinkingBlock(thinking="t", signature="c2ln")
    assert_round_trip(Msg.assistant([as_text]))


def test_media_urls_refuse_control_characters() -> None:
    for url in ("\x00blob:" + "0" * 32, "https://x/\n", "https://x/\x7f", "a\x85"):
        with pytest.raises(UserError, match="control character"):
            ImageBlock(media_type="image/png", url=url)
    fine = ImageBlock(media_type="image/png", url="https://x/\u00e9 \U0001f600")
    assert_round_trip(Msg.user([fine]))


# -- conveniences that convert, then read back exactly ----------------------------------------
def test_conveniences_convert_to_values_that_read_back() -> None:
    data = bytearray(b"\x89PNG")
    image = ImageBlock(media_type="image/png", data=data)
    data.append(0)
    assert type(image.data) is bytes and image.data == b"\x89PNG"
    assert type(ImageBlock(media_type="m", data=memoryview(b"ab")).data) is bytes
    assert type(ImageBlock(media_type="m", data=Bytes(b"ab")).data) is bytes
    result = ToolResultBlock(id="c", output="done")
    assert result.output == (TextBlock(text="done"),)
    assert ToolResultBlock(id="c", output=TextBlock(text="one")).output == (TextBlock(text="one"),)
    msg = Msg(
        "user",
        "hi",
        id="m",
        name=Colour.RED,
        metadata={Colour.RED: Count.THREE, "t": (1, [2])},
        usage=Usage(input_tokens=Count.THREE),
        created_at=datetime(2026, 1, 1, 1, tzinfo=timezone(timedelta(hours=1))),
    )
    assert type(msg.name) is str and type(msg.metadata["red"]) is int
    assert type(msg.usage.input_tokens) is int  # type: ignore[union-attr]
    assert msg.metadata["t"] == (1, (2,))
    assert msg.created_at == datetime(2026, 1, 1, tzinfo=UTC) and msg.created_at.tzinfo is UTC
    assert_round_trip(msg)


def test_a_str_enum_role_is_kept_as_its_plain_string() -> None:
    class Role(str):
        pass

    msg = Msg(Role("user"), "x")
    assert type(msg.role) is str and msg.role == "user"


def test_a_block_subclass_is_refused() -> None:
    class Mine(TextBlock, tag="text"):
        pass

    with pytest.raises(UserError, match=r"Msg\.content"):
        Msg.user([Mine(text="x")])
    with pytest.raises(UserError, match=r"output\[0\]"):
        ToolResultBlock(id="c", output=[Mine(text="x")])


# -- deep freeze: nothing of the caller's inside a message ------------------------------------
def test_a_frozen_map_built_directly_keeps_no_list_of_its_caller() -> None:
    tags = ["a"]
    meta = FrozenMap({"tags": tags, "nested": {"l": [1]}})
    tags.append("b")
    assert meta["tags"] == ("a",) and meta["nested"]["l"] == (1,)
    assert type(meta["nested"]) is FrozenMap
    assert freeze(meta) is meta  # already frozen: passed through, safely


@given(metadata)
def test_a_frozen_map_reads_like_the_dict_it_froze(value: dict[str, Any]) -> None:
    frozen = FrozenMap(value)
    assert thaw(frozen) == value and type(thaw(frozen)) is dict
    assert len(frozen) == len(value) and list(frozen.keys()) == list(value)
    assert list(frozen.items()) == [(key, frozen[key]) for key in value]
    assert list(frozen.values()) == [frozen[key] for key in value]
    for key in [*value, "absent"]:
        assert (key in frozen) == (key in value)
        assert frozen.get(key, "default") == (frozen[key] if key in value else "default")
    for view in (frozen.keys(), frozen.values(), frozen.items()):
        with pytest.raises(TypeError):
            view.mapping["added"] = 1  # type: ignore[attr-defined]
    assert len(frozen) == len(value)


def test_seed_000_an_edit_after_a_save_is_never_a_stale_no_op() -> None:
    tags = ["a"]
    msg = Msg.user("x", id="m", metadata=FrozenMap({"tags": tags}))
    with Ledger("memory://") as ledger:
        ledger.save("s", [msg])
        tags.append("b")  # the caller's list, not the message's
        assert msg.metadata["tags"] == ("a",) and decode(encode(msg)).digest == msg.digest
        assert ledger.save("s", [msg]).noop
        edited = msg.replace(metadata={"tags": tags})
        assert not ledger.save("s", [edited]).noop
        with Ledger(ledger.store) as fresh:
            assert fresh.messages("s") == [edited]
            assert fresh.messages("s")[0].metadata["tags"] == ("a", "b")


def test_frozen_maps_and_messages_cannot_be_changed_in_place() -> None:
    meta = FrozenMap({"k": 1})
    meta.__init__({"k": 2})  # type: ignore[misc]
    assert meta == {"k": 1}
    with pytest.raises(AttributeError):
        meta._data = {}  # type: ignore[misc]
    msg = Msg.user("x", id="m")
    with pytest.raises(AttributeError, match="immutable"):
        msg.__init__("user", "y")  # type: ignore[misc]
    assert msg.text == "x"
    for copied in (pickle.loads(pickle.dumps(meta)), copy.deepcopy(meta), copy.copy(meta)):
        assert_same(copied, meta)


def test_a_frozen_map_subclass_becomes_a_plain_frozen_map() -> None:
    class Mine(FrozenMap):
        pass

    msg = Msg.user("x", metadata=Mine({"a": [1]}))
    assert type(msg.metadata) is FrozenMap and msg.metadata["a"] == (1,)


def test_nesting_is_limited_to_max_depth_everywhere() -> None:
    def nested(depth: int) -> Any:
        value: Any = 1
        for _ in range(depth):
            value = [value]
        return value

    assert decode_value(encode_value(nested(MAX_DEPTH))) == nested(MAX_DEPTH)
    with pytest.raises(CodecError, match="deeper than"):
        encode_value(nested(MAX_DEPTH + 1))
    assert_round_trip(Msg.user("x", metadata={"v": nested(MAX_DEPTH - 1)}))
    with pytest.raises(CodecError, match="deeper than"):
        Msg.user("x", metadata={"v": nested(MAX_DEPTH)})
    deep_map = FrozenMap({"v": nested(MAX_DEPTH - 1)})  # as deep as a map may be
    with pytest.raises(CodecError, match="deeper than"):
        freeze([deep_map])  # a frozen map nested in a new value is checked again


def test_wrong_types_from_the_wire_are_refused_before_anything_is_saved() -> None:
    from agentledger.wire import from_agui

    with Ledger("memory://") as ledger:
        with pytest.raises(UserError, match=r"Msg\.name must be a str or None, got int"):
            ledger.sync("s", [{"role": "user", "content": "hi", "name": 7}])
        assert not ledger.exists("s")
    with pytest.raises(UserError, match=r"message 0 .*user\.name"):  # checked as AG-UI first
        from_agui([{"id": "a", "role": "user", "content": "hi", "name": 7}])
    with pytest.raises(UserError, match=r"message 0 .*reasoning\.content"):
        from_agui([{"id": "r", "role": "reasoning", "content": 5}])
