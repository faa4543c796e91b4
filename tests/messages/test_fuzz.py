"""Fuzzing ``decode``, ``decode_value`` and deferred (stored) decoding with mutated real data.

Inputs are canonical encodings of real messages and values, mutated: bit flips, byte
replacements, insertions of JSON tokens, deletions, key renames (misspelled, unknown, duplicated
and the codec's own tags), and deep nesting (50 to 2,000 levels). For every input:

- only typed errors: ``CodecError`` from ``decode``/``decode_value``, ``CorruptStoreError`` from
  a deferred message's first read;
- nothing accepted whose meaning changed: an accepted input must mean, to an independent reader
  (Python's ``json`` with duplicate keys refused, plus the layout's defaults and tags), exactly
  what its re-encoding means, and must round-trip with the same types and digest;
- a stored body is accepted only if it is exactly the canonical bytes of what it decodes to,
  and only with the digest of those bytes.

Quick mode (the default) runs a few thousand inputs in a few seconds. Long mode runs at least
100,000 inputs per decoder and prints the counts::

    AGENTLEDGER_FUZZ=long PYTHONPATH=$PWD/src python -m pytest -s tests/messages/test_fuzz.py
"""

from __future__ import annotations

import base64
import json
import os
import random
import re
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest
from reliability import record

from agentledger.errors import CodecError, CorruptStoreError
from agentledger.messages import (
    Msg,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    decode,
    decode_value,
    digest_of,
    encode,
    encode_value,
)
from agentledger.messages.codec import decode_deferred
from agentledger.messages.msg import deferred_messages
from agentledger.testing.samples import every_block_message, sample_conversation
from tests.messages.strategies import assert_round_trip, assert_same

LONG = os.environ.get("AGENTLEDGER_FUZZ", "quick") == "long"
COUNT = 100_000 if LONG else 2_000

# -- the corpus ------------------------------------------------------------------------------
_MESSAGES = [
    *every_block_message(),
    *sample_conversation(2, result_size=60),
    Msg.assistant(
        [ToolUseBlock(id="c", name="f", input={"a": [1, -2.5, None, True, {"$bytes": "x"}]})],
        id="odd",
        name="bot",
        metadata={"k": b"\x00", "n": 2**64 - 1, "m": {"$map": {}}, "e": {}},
        usage=Usage(input_tokens=1, reasoning_tokens=2),
    ),
    Msg.tool(ToolResultBlock(id="c", name="f", output="x", is_error=True), id="r"),
]
MESSAGE_CORPUS = [encode(m) for m in _MESSAGES]
VALUE_CORPUS = [
    encode_value(v)
    for v in (
        {"title": "t", "n": [1, 2.5, None, True, b"\x01"], "m": {"$bytes": "q"}},
        [{"a": {"b": [[]]}}, "s", -0.0],
        "plain",
        {"deep": [[[{"x": 1}]]]},
        b"bytes",
    )
]

# -- mutations -------------------------------------------------------------------------------
_TOKENS = [
    b" ", b",", b":", b'"', b"{", b"}", b"[", b"]", b"null", b"true", b"0", b"-1", b"1e400",
    b"1.5", b'"x"', b'"a":1,', b"\\u0000", b"\\ud800", b"\\", b"\x00", b"\xff", b"\xc3",
    b'{"$bytes":"AA=="}', b'{"$map":1}', b'{"$blob":"' + b"0" * 32 + b'"}',
]  # fmt: skip
_KEYS = [
    b"id", b"role", b"content", b"cOntent", b"name", b"metadata", b"usage", b"created_at",
    b"type", b"text", b"thinking", b"signature", b"redacted", b"data", b"url", b"media_type",
    b"filename", b"input", b"output", b"is_error", b"input_tokens", b"x", b"", b"$bytes",
    b"$map", b"$blob", b"Id", b"contents",
]  # fmt: skip
_KEY = re.compile(rb'"((?:[^"\\]|\\.)*)":')


def _nest(data: bytes, rng: random.Random) -> bytes:
    depth = rng.choice([50, 98, 99, 100, 101, 102, 500, 2000])
    starts = [m.end() for m in re.finditer(rb":", data)] or [0]
    at = rng.choice(starts)
    end = at
    while end < len(data) and data[end : end + 1] not in (b",", b"}", b"]"):
        end += 1
    value = data[at:end] or b"1"
    opener, closer = rng.choice([(b"[", b"]"), (b'{"k":', b"}"), (b'{"$map":{"k":', b"}}")])
    return data[:at] + opener * depth + value + closer * depth + data[end:]


def mutate(data: bytes, rng: random.Random) -> bytes:
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        kind = rng.randrange(7)
        at = rng.randrange(len(data) + 1)
        if kind == 0 and data:
            at = min(at, len(data) - 1)
            data = data[:at] + bytes([data[at] ^ (1 << rng.randrange(8))]) + data[at + 1 :]
        elif kind == 1 and data:
            at = min(at, len(data) - 1)
            data = data[:at] + rng.choice(_TOKENS)[:1] + data[at + 1 :]
        elif kind == 2:
            data = data[:at] + rng.choice(_TOKENS) + data[at:]
        elif kind == 3:
            data = data[:at] + data[at + rng.randint(1, 8) :]
        elif kind in (4, 5):
            keys = list(_KEY.finditer(data))
            if keys:
                key = rng.choice(keys)
                new = b'"' + rng.choice(_KEYS) + b'":'
                if kind == 5:  # duplicate: the key again, with the value of another
                    new = new + b'"v",' + key.group()
                data = data[: key.start()] + new + data[key.end() :]
        else:
            data = _nest(data, rng)
    return data


# -- an independent reader of what JSON means ------------------------------------------------
class Ambiguous(Exception):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    if len({k for k, _ in pairs}) != len(pairs):
        raise Ambiguous("duplicate key")
    return dict(pairs)


def _reject_constant(name: str) -> Any:
    raise Ambiguous(name)


def _json(data: bytes) -> Any:
    return json.loads(data, object_pairs_hook=_pairs, parse_constant=_reject_constant)


def _scalar(v: Any) -> Any:
    if type(v) is float:
        return ("float", v.hex())
    return (type(v).__name__, v)


def _tree(v: Any) -> Any:
    """A JSON-like value with the codec's tags read: typed, order-free."""
    if type(v) is dict:
        if len(v) == 1 and "$bytes" in v:
            return ("bytes", base64.b64decode(v["$bytes"], validate=True))
        if len(v) == 1 and "$map" in v:
            v = v["$map"]
            assert type(v) is dict
        return ("map", {k: _tree(x) for k, x in v.items()})
    if type(v) is list:
        return ("list", [_tree(x) for x in v])
    return _scalar(v)


_MEDIA = {"image", "audio", "video", "file"}
_BLOCK_DEFAULTS = {
    "metadata": ("map", {}),
    "signature": _scalar(None),
    "redacted": _scalar(False),
    "data": _scalar(None),
    "url": _scalar(None),
    "filename": _scalar(None),
    "input": ("map", {}),
    "name": _scalar(""),
    "output": ("list", []),
    "is_error": _scalar(False),
}


def _block(b: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in b.items():
        if k in ("metadata", "input"):
            t = _tree(v)
        elif k == "data" and b.get("type") in _MEDIA and type(v) is str:
            t = ("bytes", base64.b64decode(v, validate=True))
        elif k == "output" and type(v) is list:
            t = ("list", [_block(x) for x in v])
        else:
            t = _scalar(v) if type(v) not in (dict, list) else _tree(v)
        if _BLOCK_DEFAULTS.get(k) != t:
            out[k] = t
    return out


def message_meaning(data: bytes) -> Any:
    obj = _json(data)
    out = {}
    for k, v in obj.items():
        if k == "content":
            t: Any = ("list", [_block(b) for b in v])
            if t == ("list", []):
                continue
        elif k == "metadata":
            t = _tree(v)
            if t == ("map", {}):
                continue
        elif k == "usage" and v is not None:
            t = {kk: _scalar(vv) for kk, vv in v.items() if _scalar(vv) != _scalar(0)}
        elif k == "created_at" and v is not None:
            t = msgspec.convert(v, datetime).astimezone(UTC)
        elif v is None and k in ("name", "usage", "created_at"):
            continue
        else:
            t = _scalar(v)
        out[k] = t
    return out


def value_meaning(data: bytes) -> Any:
    return _tree(_json(data))


# -- the runs --------------------------------------------------------------------------------
def _run(
    corpus: list[bytes], check: Callable[[bytes, bytes], str], seed: int
) -> tuple[Counter[str], list[str]]:
    rng = random.Random(seed)
    seen: Counter[str] = Counter()
    problems: list[str] = []
    for _ in range(COUNT):
        original = rng.choice(corpus)
        data = mutate(original, rng)
        try:
            seen[check(original, data)] += 1
        except AssertionError as exc:
            problems.append(f"{data[:300]!r}: {exc}")
        except Exception as exc:  # any untyped error is a finding
            problems.append(f"{data[:300]!r}: {type(exc).__name__}: {exc}")
        if len(problems) >= 5:
            break
    if LONG:
        print(f"\n{COUNT:,} inputs (seed {seed}): {dict(seen)}; problems: {len(problems)}")
    return seen, problems


def _same_meaning(reader: Callable[[bytes], Any], data: bytes, again: bytes) -> None:
    """``data`` was accepted: a second reader must find it means what ``again`` (its
    re-encoding) means."""
    try:
        meaning = reader(data)
    except (ValueError, Ambiguous, AssertionError) as exc:
        raise AssertionError(f"accepted, but a second reader says {exc!r}") from None
    assert meaning == reader(again), "accepted with its meaning changed"


def _check_decode(original: bytes, data: bytes) -> str:
    try:
        msg = decode(data)
    except CodecError:
        return "refused"
    _same_meaning(message_meaning, data, encode(msg))
    assert_round_trip(msg)
    return "same" if data == original else "accepted"


def _check_value(original: bytes, data: bytes) -> str:
    try:
        value = decode_value(data)
    except CodecError:
        return "refused"
    again = encode_value(value)
    _same_meaning(value_meaning, data, again)
    assert_same(decode_value(again), value)
    return "same" if data == original else "accepted"


def _first_read(msg: Msg) -> bool:
    try:
        msg.content  # noqa: B018
    except CorruptStoreError:
        return False
    return True


def _check_stored(original: bytes, data: bytes) -> str:
    good = decode(original)
    # the row's digest is the original's: only the original bytes pass
    (row,) = deferred_messages([good.id], [good.digest], [data])
    assert _first_read(row) == (data == original), "a damaged body passed its digest check"
    # a store consistent with the damaged body (its own digest): only canonical bytes pass
    (row,) = deferred_messages([good.id], [digest_of(data)], [data])
    if not _first_read(row):
        return "refused"
    assert encode(row) == data and row.digest == digest_of(data)
    assert_same(decode(data), row)
    return "same" if data == original else "accepted"


@pytest.mark.parametrize(
    ("name", "corpus", "check"),
    [
        ("decode", MESSAGE_CORPUS, _check_decode),
        ("decode_value", VALUE_CORPUS, _check_value),
        ("deferred", MESSAGE_CORPUS, _check_stored),
    ],
)
def test_mutated_input_is_refused_typed_or_read_exactly(
    name: str, corpus: list[bytes], check: Callable[[bytes, bytes], str]
) -> None:
    seen, problems = _run(corpus, check, seed=sum(name.encode()))
    record(
        "hostile input",
        f"mutated input to {name}",
        inputs=COUNT,
        outcomes=seen,
        problems=len(problems),
    )
    assert not problems, f"{name}: {len(problems)} problems, first: " + "\n".join(problems)
    assert seen["refused"] > COUNT // 4  # the mutations do reach the checks
    assert seen["accepted"] > 0  # and some meaning-preserving ones are read


def test_the_reader_itself_tells_changed_meaning_apart() -> None:
    """The oracle is not blind: a dropped key, a changed default and a duplicate are seen."""
    data = MESSAGE_CORPUS[1]
    dropped = data.replace(b'"content":', b'"cOntent":')
    assert message_meaning(dropped) != message_meaning(encode(Msg.user("", id="u0")))
    with pytest.raises(Ambiguous):
        message_meaning(b'{"id":"a","id":"b","role":"user"}')
    assert message_meaning(b'{"id":"a","role":"user","name":null,"content":[]}') == (
        message_meaning(b'{"id":"a","role":"user"}')
    )
    assert value_meaning(b"1") != value_meaning(b"1.0") != value_meaning(b"true")


def test_decode_deferred_refuses_a_batch_with_one_mutated_body() -> None:
    rng = random.Random(3)
    for _ in range(200 if not LONG else 5000):
        msgs = _MESSAGES[:6]
        bodies = [encode(m) for m in msgs]
        i = rng.randrange(len(bodies))
        bodies[i] = mutate(bodies[i], rng)
        loaded = deferred_messages([m.id for m in msgs], [m.digest for m in msgs], bodies)
        if bodies[i] == encode(msgs[i]):
            decode_deferred(loaded)
            continue
        with pytest.raises(CorruptStoreError, match=repr(msgs[i].id)):
            decode_deferred(loaded)
