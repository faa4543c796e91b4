"""Decoding a loaded message's stored bytes: checked against its digest, strictly, once.

A message loaded from a store starts *deferred* (see ``msg``): its id and digest come from the
row, its body waits. On the first read of any other field the body is checked before it is
used, and a body that fails any check raises ``CorruptStoreError`` (on every read, so damage
never turns into a default value):

1. BLAKE2b-128 of the body must equal the digest stored with it. The digest is what the planner
   compares and what equality uses, so a body that does not match it would make a damaged
   message compare equal to the original, and saving it back would be a no-op.
2. It must decode strictly (``record``): no unknown or missing keys, every field checked.
3. It must be canonical: re-encoding the decoded message gives exactly the body. Every writer
   stores canonical bytes, so this only fails for bytes agentledger did not write; it makes
   the digest of the decoded message provably the digest it was loaded with.
4. It must hold the message the row names (the same id).

Checking at first read rather than at load keeps a reload at the cost of fetching the rows:
comparing, re-saving or exporting a loaded list never needs the fields (an export checks the
digest of the bytes it passes on, in ``record.encode_with_digest``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agentledger.errors import CodecError, CorruptStoreError
from agentledger.messages.canonical import digest_of, encode_struct
from agentledger.messages.record import MsgRecord, decode_record, decode_records
from agentledger.messages.slots import set_fields

__all__ = ["decode_deferred", "fill"]


def _corrupt(msg: Any, problem: str) -> CorruptStoreError:
    return CorruptStoreError(f"stored message {msg.id!r} cannot be decoded: {problem}")


def _check_digest(msg: Any, body: bytes) -> None:
    if digest_of(body) != msg._digest:
        raise _corrupt(msg, "its bytes do not match the digest stored with them")


def _apply(msg: Any, rec: MsgRecord, body: bytes) -> None:
    if rec.id != msg.id:
        raise _corrupt(msg, f"its bytes hold message {rec.id!r}")
    if encode_struct(rec) != body:
        raise _corrupt(msg, "its bytes are not the canonical encoding of a message")
    set_fields(msg, rec)


def fill(msg: Any) -> None:
    """Decode a deferred message's stored bytes into its fields, after checking them.

    Safe to race: two threads decode the same bytes and set the same values; the stored bytes
    are dropped only after every field is set.
    """
    body = msg._stored
    if body is None:
        return
    _check_digest(msg, body)
    try:
        rec = decode_record(body)
    except CodecError as exc:
        raise _corrupt(msg, str(exc)) from None
    _apply(msg, rec, body)


def decode_deferred(msgs: Iterable[Any]) -> None:
    """Decode every still-deferred message of ``msgs`` now, in one decoder call.

    For code that wants the decoding done at a time and on a thread of its choosing, such as
    ``AsyncLedger``, which decodes in its worker thread so that an event loop never does.
    Raises ``CorruptStoreError`` for a message whose stored bytes fail a check.
    """
    pending = [(m, m._stored) for m in msgs]
    pending = [(m, body) for m, body in pending if body is not None]
    if not pending:
        return
    for m, body in pending:
        _check_digest(m, body)
    try:
        records = decode_records([body for _, body in pending])
    except CodecError as exc:
        for m, _ in pending:  # one at a time, so the error names the message
            fill(m)
        raise CorruptStoreError(f"stored messages cannot be decoded: {exc}") from None
    for (m, body), rec in zip(pending, records, strict=True):
        _apply(m, rec, body)
