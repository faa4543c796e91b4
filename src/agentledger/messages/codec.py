"""The one JSON codec for messages: canonical, exact, strict, fast.

``encode(msg)`` gives the canonical bytes of a message (``canonical``): compact JSON with every
object's keys sorted and bytes tagged (see ``values``), on one line, so it serves as a JSONL
record as is. The same bytes define equality: ``msg.digest`` is BLAKE2b-128 of them.
``decode(encode(m)) == m`` holds for every message that can be built, with the same field types
and the same digest.

``decode`` accepts exactly the messages a constructor accepts, and nothing whose meaning it
would change: an unknown key is refused, never dropped (``record``), and input that is not
canonical (keys reordered, spaces, escapes, a ``created_at`` with an offset, which is kept in
UTC) is accepted only when a second parser finds no duplicate key in it, since the first of two
equal keys would otherwise vanish unseen. Every failure is a ``CodecError``. Stored bodies take
the stricter path in ``deferred`` (digest, then canonical bytes only).

msgspec does the work (typed decoding straight into the block structs); the figures that chose it
are in docs/benchmarks.md.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC
from typing import Any

import msgspec

from agentledger.errors import CodecError, UserError
from agentledger.messages import checks
from agentledger.messages.canonical import DIGEST_SIZE, digest_of, encode_struct
from agentledger.messages.deferred import decode_deferred
from agentledger.messages.msg import Msg
from agentledger.messages.record import (
    DECODE_ERRORS,
    MsgRecord,
    decode_record,
    decode_records,
    encode_with_digest,
)
from agentledger.messages.values import freeze, from_json, thaw

__all__ = [
    "DIGEST_SIZE",
    "canonical_bytes",
    "decode",
    "decode_deferred",
    "decode_list",
    "decode_many",
    "decode_value",
    "digest_of",
    "encode",
    "encode_many",
    "encode_value",
    "encode_with_digest",
]

_Data = bytes | bytearray | memoryview | str


def canonical_bytes(obj: Any) -> bytes:
    """Canonical JSON for a message, block or frozen value."""
    if isinstance(obj, Msg):
        return encode_with_digest(obj)[0]
    return encode_struct(obj)


def encode(msg: Msg) -> bytes:
    """The canonical JSON bytes of ``msg`` (one line, no trailing newline)."""
    return encode_with_digest(msg)[0]


def decode(data: _Data, *, digest: bytes | None = None) -> Msg:
    """Rebuild a message from ``encode`` output (or the same JSON reformatted).

    Raises ``CodecError`` for anything else. ``digest``, when given, must be the digest of the
    message's canonical encoding (a store's record of it), or ``CodecError`` is raised.
    """
    return _message(decode_record(data), data, digest)


def _message(rec: MsgRecord, data: _Data, digest: bytes | None) -> Msg:
    created = rec.created_at
    if created is not None and created.tzinfo is not UTC:  # an offset: the instant, in UTC
        try:
            rec.created_at = checks.timestamp("Msg", "created_at", created)
        except UserError as exc:
            raise CodecError(str(exc)) from None
    canonical = encode_struct(rec)
    raw = data.encode() if isinstance(data, str) else data
    if canonical != raw:
        _one_meaning(raw)
    if digest is not None and digest != digest_of(canonical):
        raise CodecError(f"message {rec.id!r} does not match the digest given with it")
    return Msg._from_record(rec, digest)


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> None:
    if len(pairs) > 1 and len({key for key, _ in pairs}) != len(pairs):
        raise CodecError("a JSON object has the same key twice")


def _one_meaning(data: bytes | bytearray | memoryview) -> None:
    """Refuse non-canonical JSON that a second parser (Python's) reads otherwise: with a
    duplicate key, or not at all."""
    try:
        json.loads(bytes(data), object_pairs_hook=_no_duplicate_keys)
    except (ValueError, RecursionError, CodecError) as exc:
        raise CodecError(f"ambiguous JSON: {exc}") from None


def encode_many(msgs: Iterable[Msg]) -> bytes:
    """JSONL: one canonical message per line, each line ending in a newline."""
    return b"".join(encode(m) + b"\n" for m in msgs)


def decode_many(data: bytes | str) -> list[Msg]:
    """Decode ``encode_many`` output (blank lines ignored)."""
    if isinstance(data, str):
        data = data.encode()
    lines = [line for line in data.split(b"\n") if line.strip()]
    return decode_list(lines)


def decode_list(items: Sequence[_Data], digests: Sequence[bytes] | None = None) -> list[Msg]:
    """Decode many encoded messages at once (one decoder call), each as ``decode`` does.

    ``digests``, when given, are checked as in ``decode``.
    """
    if not items:
        return []
    records = decode_records(items)
    wanted: Sequence[bytes | None] = [None] * len(items) if digests is None else digests
    if len(wanted) != len(items):
        raise CodecError(f"{len(items)} messages but {len(wanted)} digests")
    out = []
    for i, (rec, item, digest) in enumerate(zip(records, items, wanted, strict=True)):
        try:
            out.append(_message(rec, item, digest))
        except CodecError as exc:
            raise CodecError(f"item {i}: {exc}") from None
    return out


_value_decoder = msgspec.json.Decoder()


def encode_value(value: Any) -> bytes:
    """Canonical JSON for a named session value (summary, settings ...); bytes allowed anywhere.

    ``CodecError`` (naming the path) for a value that could not be read back exactly.
    """
    return encode_struct(freeze(value))


def decode_value(data: _Data) -> Any:
    """Inverse of ``encode_value``, as plain Python (dicts, lists, bytes); strict as ``decode``."""
    try:
        frozen = from_json(_value_decoder.decode(data))
    except DECODE_ERRORS as exc:
        raise CodecError(f"not an encoded value: {exc}") from None
    raw = data.encode() if isinstance(data, str) else data
    if encode_struct(frozen) != raw:
        _one_meaning(raw)
    return thaw(frozen)
