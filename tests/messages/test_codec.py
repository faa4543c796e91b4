"""The codec's round trip is exact, canonical and digest-stable."""

from __future__ import annotations

import json

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
