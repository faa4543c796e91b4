"""The one JSON codec for messages: canonical, exact, fast.

``encode(msg)`` gives the canonical bytes of a message: compact JSON with every object's keys
sorted and bytes tagged (see ``values``), on one line, so it serves as a JSONL record as is. The
same bytes define equality: ``msg.digest`` is BLAKE2b-128 of them. ``decode(encode(m)) == m``
holds for every message, bytes nested in metadata included.

msgspec does the work (typed decoding straight into the block structs); the figures that chose it
are in docs/benchmarks.md.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import msgspec

from agentledger.errors import CodecError, CorruptStoreError
from agentledger.messages.blocks import Block
from agentledger.messages.msg import (
    ROLES,
    Msg,
    Usage,
    _set_content,
    _set_created_at,
    _set_metadata,
    _set_name,
    _set_role,
    _set_stored,
    _set_usage,
)
from agentledger.messages.values import (
    EMPTY,
    FrozenMap,
    _from_json,
    freeze,
    json_dec_hook,
    json_enc_hook,
    thaw,
)

__all__ = [
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

DIGEST_SIZE = 16


class _MsgRecord(msgspec.Struct, omit_defaults=True, kw_only=True, gc=False):
    """How a message is laid out in JSON."""

    id: str
    role: str
    content: tuple[Block, ...] = ()
    name: str | None = None
    metadata: FrozenMap = EMPTY
    usage: Usage | None = None
    created_at: datetime | None = None


_encoder = msgspec.json.Encoder(enc_hook=json_enc_hook, order="sorted")
_decoder = msgspec.json.Decoder(_MsgRecord, dec_hook=json_dec_hook)
_many_decoder = msgspec.json.Decoder(list[_MsgRecord], dec_hook=json_dec_hook)


def _record(msg: Msg) -> _MsgRecord:
    return _MsgRecord(
        id=msg.id,
        role=msg.role,
        content=msg.content,
        name=msg.name,
        metadata=msg.metadata,
        usage=msg.usage,
        created_at=msg.created_at,
    )


def _problem(rec: _MsgRecord) -> str | None:
    """What makes a decoded record not a message, if anything."""
    if rec.role not in ROLES:
        return f"unknown role {rec.role!r} in message {rec.id!r}"
    if not rec.id:
        return "message without an id"
    created = rec.created_at
    if created is not None and created.tzinfo is None:
        return f"naive created_at in message {rec.id!r}"
    return None


def _from_record(rec: _MsgRecord, digest: bytes | None = None) -> Msg:
    problem = _problem(rec)
    if problem is not None:
        raise CodecError(problem)
    return Msg._trusted(
        rec.id,
        rec.role,
        rec.content,
        rec.name,
        rec.metadata,
        rec.usage,
        rec.created_at,
        digest,  # type: ignore[arg-type]
    )


def canonical_bytes(obj: Any) -> bytes:
    """Canonical JSON for a message, block or frozen value."""
    if isinstance(obj, Msg):
        stored = obj._stored
        if stored is not None:  # deferred: its stored bytes are the canonical encoding
            return stored
        obj = _record(obj)
    try:
        return _encoder.encode(obj)
    except (TypeError, ValueError, NotImplementedError, OverflowError) as exc:
        raise CodecError(f"cannot encode {type(obj).__name__}: {exc}") from None


def digest_of(data: bytes) -> bytes:
    """The digest agentledger uses for canonical bytes."""
    return hashlib.blake2b(data, digest_size=DIGEST_SIZE).digest()


def encode_with_digest(msg: Msg) -> tuple[bytes, bytes]:
    """Canonical bytes and digest in one pass; caches the digest on the message.

    A deferred message's stored bytes leave here undecoded (into an export, or another row), so
    they are checked against the digest stored beside them: damage that still parses would
    otherwise be copied on as if it were the message.
    """
    stored = msg._stored
    if stored is not None:
        digest = digest_of(stored)
        if digest != msg._digest:
            raise CorruptStoreError(
                f"stored message {msg.id!r} does not match the digest stored with it"
            )
        return stored, digest
    data = canonical_bytes(msg)
    digest = digest_of(data)
    if msg._digest is None:
        msg._set_digest(digest)
    return data, digest


def encode(msg: Msg) -> bytes:
    """The canonical JSON bytes of ``msg`` (one line, no trailing newline)."""
    return encode_with_digest(msg)[0]


def decode(data: bytes | bytearray | memoryview | str, *, digest: bytes | None = None) -> Msg:
    """Rebuild a message from ``encode`` output. Raises ``CodecError`` on anything else.

    ``digest`` may be passed when the caller already knows it (a store that kept it beside the
    bytes); it is trusted, so pass only a digest computed by agentledger from these bytes.
    """
    try:
        rec = _decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError, CodecError, ValueError) as exc:
        raise CodecError(f"not an encoded message: {exc}") from None
    return _from_record(rec, digest)


def _fill_deferred(msg: Msg) -> None:
    """Decode a deferred message's stored bytes into its fields (see ``Msg``).

    Safe to race: two threads decode the same bytes and set the same values; the stored bytes
    are dropped only after every field is set.
    """
    body = msg._stored
    if body is None:
        return
    try:
        rec = _decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError, CodecError, ValueError) as exc:
        raise CorruptStoreError(f"stored message {msg.id!r} cannot be decoded: {exc}") from None
    _fill_from_record(msg, rec)


def _fill_from_record(msg: Msg, rec: _MsgRecord) -> None:
    problem = _problem(rec)
    if problem is None and rec.id != msg.id:
        problem = f"its bytes hold message {rec.id!r}"
    if problem is not None:
        raise CorruptStoreError(f"stored message {msg.id!r} cannot be decoded: {problem}")
    _set_role(msg, rec.role)
    _set_content(msg, rec.content)
    _set_name(msg, rec.name)
    _set_metadata(msg, rec.metadata)
    _set_usage(msg, rec.usage)
    _set_created_at(msg, rec.created_at)
    _set_stored(msg, None)  # last: a racing reader sees either the bytes or every field


def decode_deferred(msgs: Iterable[Msg]) -> None:
    """Decode every still-deferred message of ``msgs`` now, in one decoder call.

    For code that wants the decoding done at a time and on a thread of its choosing, such as
    ``AsyncLedger``, which decodes in its worker thread so that an event loop never does.
    Raises ``CorruptStoreError`` for a message whose stored bytes cannot be decoded.
    """
    pending = [(m, m._stored) for m in msgs]
    pending = [(m, body) for m, body in pending if body is not None]
    if not pending:
        return
    try:
        records = _decode_records([body for _, body in pending])
    except (msgspec.DecodeError, msgspec.ValidationError, CodecError, ValueError):
        for m, _ in pending:  # one at a time, so the error names the message
            _fill_deferred(m)
        raise
    for (m, _), rec in zip(pending, records, strict=True):
        _fill_from_record(m, rec)


def encode_many(msgs: Iterable[Msg]) -> bytes:
    """JSONL: one canonical message per line, each line ending in a newline."""
    return b"".join(encode(m) + b"\n" for m in msgs)


def decode_many(data: bytes | str) -> list[Msg]:
    """Decode ``encode_many`` output (blank lines ignored)."""
    if isinstance(data, str):
        data = data.encode()
    lines = [line for line in data.split(b"\n") if line.strip()]
    return decode_list(lines)


def decode_list(
    items: Sequence[bytes | bytearray | memoryview | str],
    digests: Sequence[bytes] | None = None,
) -> list[Msg]:
    """Decode many encoded messages at once (one decoder call: the fast path for loads).

    ``digests``, when given, are trusted as in ``decode``.
    """
    if not items:
        return []
    if digests is not None:
        return [_from_record(r, d) for r, d in zip(_decode_records(items), digests, strict=True)]
    return [_from_record(r) for r in _decode_records(items)]


def _decode_records(items: Sequence[bytes | bytearray | memoryview | str]) -> list[_MsgRecord]:
    try:
        joined = b",".join(items)  # type: ignore[arg-type]  # bytes-like items: joined in C
    except TypeError:  # some are str
        joined = b",".join(i.encode() if isinstance(i, str) else i for i in items)
    blob = b"[" + joined + b"]"
    try:
        records = _many_decoder.decode(blob)
    except (msgspec.DecodeError, msgspec.ValidationError, CodecError, ValueError):
        for i, item in enumerate(items):  # find and name the bad one
            try:
                _decoder.decode(item)
            except (msgspec.DecodeError, msgspec.ValidationError, CodecError, ValueError) as exc:
                raise CodecError(f"item {i} is not an encoded message: {exc}") from None
        raise
    return records


_value_decoder = msgspec.json.Decoder()


def encode_value(value: Any) -> bytes:
    """Canonical JSON for a named session value (summary, settings ...); bytes allowed anywhere."""
    return canonical_bytes(freeze(value))


def decode_value(data: bytes) -> Any:
    """Inverse of ``encode_value``, as plain Python (dicts, lists, bytes)."""
    try:
        return thaw(_from_json(_value_decoder.decode(data)))
    except (msgspec.DecodeError, CodecError, ValueError) as exc:
        raise CodecError(f"not an encoded value: {exc}") from None
