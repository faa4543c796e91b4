"""The codec's round trip is exact, canonical and digest-stable."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import given

from agentledger import CodecError, Msg, decode, encode
from agentledger.messages import decode_list, decode_many, decode_value, encode_many, encode_value
from agentledger.testing.samples import every_block_message
from tests.messages.strategies import json_values, messages


@given(messages)
def test_round_trip_is_exact(msg: Msg) -> None:
    data = encode(msg)
    back = decode(data)
    assert back == msg
    assert back.digest == msg.digest
    assert encode(back) == data  # canonical: re-encoding gives the same bytes
    assert b"\n" not in data  # one message per JSONL line


@given(messages)
def test_round_trip_through_plain_json(msg: Msg) -> None:
    """A JSON tool that reorders keys and re-serialises does not change the message."""
    reordered = json.dumps(dict(reversed(json.loads(encode(msg)).items())))
    assert decode(reordered) == msg


@given(json_values)
def test_values_round_trip(value: object) -> None:
    assert decode_value(encode_value(value)) == _plain(value)


def _plain(value: object) -> object:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    return value


def test_every_block_type_round_trips_with_equal_digest() -> None:
    msgs = every_block_message()
    assert decode_many(encode_many(msgs)) == msgs
    assert [m.digest for m in decode_list([encode(m) for m in msgs])] == [m.digest for m in msgs]
    kinds = (bytes, bytearray, memoryview, lambda b: b.decode())
    mixed = [kind(encode(m)) for kind, m in zip(kinds * len(msgs), msgs, strict=False)]
    assert decode_list(mixed) == msgs


def test_bytes_are_tagged_and_colliding_shapes_escaped() -> None:
    msg = Msg.user("x", metadata={"sig": b"\x00\x01", "fake": {"$bytes": "AAE="}})
    raw = json.loads(encode(msg))
    assert raw["metadata"]["sig"] == {"$bytes": "AAE="}
    assert raw["metadata"]["fake"] == {"$map": {"$bytes": "AAE="}}
    back = decode(encode(msg))
    assert back.metadata["sig"] == b"\x00\x01"
    assert back.metadata["fake"] == {"$bytes": "AAE="}


@pytest.mark.parametrize(
    "bad",
    [
        b"",
        b"not json",
        b"[]",
        b'{"id":"x"}',
        b'{"id":"x","role":"robot"}',
        b'{"id":"x","role":"user","content":[{"type":"nope"}]}',
        b'{"id":"x","role":"user","metadata":{"a":{"$bytes":"!!"}}}',
        b'{"id":"","role":"user"}',
        b'{"id":"x","role":"user","created_at":"2020-01-01T00:00:00"}',
    ],
)
def test_garbage_is_a_codec_error(bad: bytes) -> None:
    with pytest.raises(CodecError):
        decode(bad)


def test_decode_list_names_the_bad_item() -> None:
    good = encode(Msg.user("ok"))
    with pytest.raises(CodecError, match="item 1"):
        decode_list([good, b"{broken", good])


# -- strict decoding: refused, typed, never read with a meaning changed -----------------------
_NEST = 500


def _user(fields: bytes) -> bytes:
    return b'{"id":"x","role":"user",' + fields + b"}"


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        (_user(b'"cOntent":[{"text":"hi","type":"text"}]'), "cOntent"),
        (_user(b'"content":[{"text":"hi","type":"text","x":1}]'), "`x`"),
        (_user(b'"usage":{"input_tokens":1,"tokens":2}'), "tokens"),
        (_user(b'"metadata":{"a":{"$map":5}}'), r"\$map"),
        (_user(b'"metadata":{"$map":5}'), r"\$map"),
        (_user(b'"metadata":{"$bytes":"AAE="}'), "non-mapping"),
        (_user(b'"metadata":{"a":' + b"[" * _NEST + b"]" * _NEST + b"}"), "deeper"),
        (_user(b'"metadata":{"a":' + b"[" * 5000 + b"]" * 5000 + b"}"), "recursion"),
        (_user(b'"metadata":{"n":18446744073709551616}'), "64 bits"),
        (_user(b'"usage":{"input_tokens":-1}'), "input_tokens"),
        (_user(b'"usage":{"input_tokens":true}'), "bool"),
        (_user(b'"content":[{"id":"c","is_error":0,"type":"tool_result"}]'), "int"),
        (_user(b'"name":7'), "int"),
        (_user(b'"id":"y"'), "same key twice"),
        (_user(b'"metadata":{"a":1,"a":2}'), "same key twice"),
        (_user(b'"content":[{"type":"image","media_type":"m","url":"\\u0000b"}]'), "control"),
        (_user(b'"content":[{"text":"\\ud800","type":"text"}]'), "escape"),
        (_user(b'"created_at":"0001-01-01T00:00:00+01:00"'), "range"),
    ],
)
def test_decode_refuses_what_it_would_misread(bad: bytes, why: str) -> None:
    with pytest.raises(CodecError, match=why):
        decode(bad)
    with pytest.raises(CodecError):
        decode_list([encode(Msg.user("ok")), bad])


@pytest.mark.parametrize(
    "bad",
    [
        b'{"$map":5}',
        b'{"a":{"$map":[1]}}',
        b'{"$bytes":5}',
        b"[" * _NEST + b"]" * _NEST,
        b"[" * 5000 + b"]" * 5000,
        b'{"a":1,"a":2}',
        b"18446744073709551616",
        b"NaN",
        b"1e400",
        b'"\\ud800"',
    ],
)
def test_decode_value_refuses_what_it_would_misread(bad: bytes) -> None:
    with pytest.raises(CodecError):
        decode_value(bad)


def test_reformatted_input_with_one_meaning_is_read_as_it_means() -> None:
    msg = decode(
        b' {"role":"user", "id":"x", "name":null, "content":[], "metadata":{"$map":{"a":1}},'
        b' "created_at":"2026-01-01T02:00:00+02:00"} '
    )
    at = datetime(2026, 1, 1, tzinfo=UTC)
    assert msg == Msg("user", id="x", metadata={"a": 1}, created_at=at)
    assert msg.created_at.tzinfo is UTC  # type: ignore[union-attr]
    assert decode_value(b' {"$map" : {"b" : [1, 2.0]}} ') == {"b": [1, 2.0]}


def test_a_digest_given_to_decode_is_checked() -> None:
    msg = Msg.user("x")
    assert decode(encode(msg), digest=msg.digest).digest == msg.digest
    with pytest.raises(CodecError, match="digest"):
        decode(encode(msg), digest=b"\x00" * 16)
    with pytest.raises(CodecError, match="digest"):
        decode_list([encode(msg)], [b"\x00" * 16])


def test_items_that_splice_together_are_refused() -> None:
    one, two = encode(Msg.user("a", id="a")), encode(Msg.user("b", id="b"))
    with pytest.raises(CodecError):
        decode_list([one + b"," + two])
    with pytest.raises(CodecError):
        decode_list([one[:-1], b"}," + two])


def _block(block: bytes) -> bytes:
    return _user(b'"content":[' + block + b"]")


def _in_result(block: bytes) -> bytes:
    return _block(b'{"id":"c","output":[' + block + b'],"type":"tool_result"}')


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        (_block(b'{"data":"AAE=","media_type":"m","type":"image","url":"u"}'), "exactly one"),
        (_block(b'{"media_type":"m","type":"audio"}'), "exactly one"),
        (_in_result(b'{"media_type":"m","type":"file"}'), "exactly one"),
        (_in_result(b'{"media_type":"m","type":"video","url":"a\\u007fb"}'), "control"),
        (
            _block(
                b'{"id":"c","input":{"a":2},"name":"f","arguments":"{\\"a\\":1}","type":"tool_use"}'
            ),
            "does not match",
        ),
        (_user(b'"usage":{"output_tokens":9223372036854775808}'), "output_tokens"),
        (_user(b'"usage":{"reasoning_tokens":1.0}'), "float"),
        (_block(b'{"text":"\\udc00x","type":"text"}'), "surrogate"),
    ],
)
def test_decoded_blocks_pass_the_checks_a_constructor_runs(bad: bytes, why: str) -> None:
    """Decoding builds blocks without their constructor (``messages.checked``): each check
    that msgspec's types cannot express still refuses a decoded block, wherever it sits."""
    with pytest.raises(CodecError, match=why):
        decode(bad)
    with pytest.raises(CodecError, match="item 1"):
        decode_list([encode(Msg.user("ok")), bad])


def test_every_way_a_caller_builds_a_block_runs_its_checks() -> None:
    import copy
    import pickle

    from agentledger import ImageBlock, TextBlock, Usage
    from agentledger.errors import UserError

    text = TextBlock(text="a")
    with pytest.raises(UserError, match="lone surrogate"):
        text.replace(text="\ud800")
    with pytest.raises(UserError, match="exactly one"):
        ImageBlock(media_type="m", url="u").replace(data=b"x")
    with pytest.raises(UserError, match="input_tokens"):
        Usage(input_tokens=-1)
    with pytest.raises(UserError, match="must be an int"):
        Usage(output_tokens=True)
    kept = TextBlock(text="a", metadata={"k": [1]})
    for back in (copy.copy(kept), pickle.loads(pickle.dumps(kept)), kept.replace()):
        assert back == kept and type(back.metadata).__name__ == "FrozenMap"
