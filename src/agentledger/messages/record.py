"""How a message is laid out in JSON, and the strict decoders for that layout.

``MsgRecord`` is the message as the codec writes it. Decoding is strict: a key the layout does
not have (a misspelled ``"cOntent"``) is refused rather than dropped, the role must be one of
the four, the id non-empty and ``created_at`` timezone-aware (msgspec checks all of that in C),
and every block is checked as a caller's block is (``checked`` says how: msgspec's types, then
``blocks.check_decoded``). Every failure, deep nesting included, is a ``CodecError``.
``encode_with_digest`` is the one place a message becomes bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import partial
from typing import Annotated, Any, Literal

import msgspec

from agentledger.errors import CodecError, CorruptStoreError
from agentledger.messages.blocks import Block, check_decoded
from agentledger.messages.canonical import digest_of, encode_struct
from agentledger.messages.slots import set_digest
from agentledger.messages.usage import Usage
from agentledger.messages.values import EMPTY, FrozenMap, json_dec_hook

__all__ = [
    "DECODE_ERRORS",
    "LARGE_BODY",
    "MsgRecord",
    "decode_large",
    "decode_raw",
    "decode_record",
    "decode_records",
    "encode_with_digest",
    "record_of",
]


class MsgRecord(
    msgspec.Struct, omit_defaults=True, kw_only=True, gc=False, forbid_unknown_fields=True
):
    """How a message is laid out in JSON."""

    id: Annotated[str, msgspec.Meta(min_length=1)]
    role: Literal["system", "user", "assistant", "tool"]
    content: tuple[Block, ...] = ()
    name: str | None = None
    metadata: FrozenMap = EMPTY
    usage: Usage | None = None
    created_at: Annotated[datetime, msgspec.Meta(tz=True)] | None = None


#: What a decoder call may raise for bad input (RecursionError: nesting past msgspec's limit).
DECODE_ERRORS = (
    msgspec.DecodeError,
    msgspec.ValidationError,
    CodecError,
    ValueError,
    RecursionError,
)

_decoder = msgspec.json.Decoder(MsgRecord, dec_hook=json_dec_hook)
_many_decoder = msgspec.json.Decoder(list[MsgRecord], dec_hook=json_dec_hook)

#: The typed decoder's own method, for a loop that runs ``check_decoded`` and catches
#: ``DECODE_ERRORS`` itself (``decode_record`` is it, with both).
decode_raw = _decoder.decode

_plain_decode = msgspec.json.Decoder().decode
_to_record = partial(msgspec.convert, type=MsgRecord, dec_hook=json_dec_hook)


def decode_large(data: bytes) -> MsgRecord:
    """``decode_raw`` for a large body, in two C calls: JSON to builtins, then to a record.

    Canonical bytes sort each block's ``type`` tag after its other keys, so the typed
    decoder scans a block's text once to find its tag and again to read it (and a tool
    result's text three times, nested in two tagged unions); converting already-parsed
    builtins finds the tag by lookup. Past ``LARGE_BODY`` bytes that is faster; below, the
    extra objects cost more. The result, and every refusal, is the same as ``decode_raw``'s.
    """
    return _to_record(_plain_decode(data))  # type: ignore[no-any-return]


#: Body size from which ``decode_large`` beats ``decode_raw`` (measured on 0.3-4 KB bodies).
LARGE_BODY = 2048


def decode_record(data: bytes | bytearray | memoryview | str) -> MsgRecord:
    """One encoded message as a record; ``CodecError`` if it is not one."""
    try:
        rec = _decoder.decode(data)
        check_decoded(rec.content)
    except DECODE_ERRORS as exc:
        raise CodecError(f"not an encoded message: {exc}") from None
    return rec


def decode_records(items: Sequence[bytes | bytearray | memoryview | str]) -> list[MsgRecord]:
    """Many encoded messages in one decoder call; ``CodecError`` naming the first bad item."""
    try:
        joined = b",".join(items)  # type: ignore[arg-type]  # bytes-like items: joined in C
    except TypeError:  # some are str
        joined = b",".join(i.encode() if isinstance(i, str) else i for i in items)
    try:
        records = _many_decoder.decode(b"[" + joined + b"]")
        if len(records) == len(items):
            for rec in records:
                check_decoded(rec.content)
            return records
    except DECODE_ERRORS:
        pass
    for i, item in enumerate(items):  # find and name the bad one
        try:
            check_decoded(_decoder.decode(item).content)
        except DECODE_ERRORS as exc:
            raise CodecError(f"item {i} is not an encoded message: {exc}") from None
    raise CodecError("the items do not form a list of encoded messages")


def record_of(msg: Any) -> MsgRecord:
    return MsgRecord(
        id=msg.id,
        role=msg.role,
        content=msg.content,
        name=msg.name,
        metadata=msg.metadata,
        usage=msg.usage,
        created_at=msg.created_at,
    )


def encode_with_digest(msg: Any) -> tuple[bytes, bytes]:
    """A message's canonical bytes and digest in one pass; caches the digest on the message.

    A loaded message's stored bytes leave here undecoded (into an export, or another row), so
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
    data = encode_struct(record_of(msg))
    digest = digest_of(data)
    if msg._digest is None:
        set_digest(msg, digest)
    return data, digest
