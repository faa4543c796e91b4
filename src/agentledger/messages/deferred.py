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

Why a matching digest does not let checks 2-4 go: the digest sits in the same row as the body,
so it is a checksum against damage, not a proof that agentledger wrote the bytes. Whoever can
write the row (another program, a hand edit, an import of a foreign file) can write a digest
that matches any bytes: a message of an unknown role, a non-canonical spelling whose digest
is not the digest of the message it decodes to. So every body is still decoded strictly and
re-encoded. What the checks cost is kept down instead: decoded blocks skip the constructors'
Python checks, which msgspec's types and ``blocks.check_decoded`` cover (``checked`` says why
that is exact), large bodies take ``record.decode_large``, and ``fill`` is one Python frame.
What remains is three passes over every byte, each in C: for the benchmark's 12,000 messages
(16 MB) about 22 ms of BLAKE2b, 22 ms of decoding and 12 ms of re-encoding and comparing,
against 35-44 ms for ``json.load`` of a file of the same messages on the same machine.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from itertools import compress, repeat
from operator import attrgetter, is_
from typing import Any

from agentledger.errors import CorruptStoreError
from agentledger.messages.blocks import check_decoded
from agentledger.messages.canonical import ENCODE_ERRORS, encode_raw, hasher
from agentledger.messages.record import DECODE_ERRORS, LARGE_BODY, decode_large, decode_raw
from agentledger.messages.slots import (
    set_batch,
    set_content,
    set_created_at,
    set_fields,
    set_metadata,
    set_name,
    set_role,
    set_stored,
    set_usage,
)

__all__ = ["BATCH", "all_decoded", "decode_deferred", "fill", "fill_one"]

#: Messages of one load decoded together, on the first read of any of them (see ``fill``).
BATCH = 64


def _corrupt(msg: Any, problem: str) -> CorruptStoreError:
    return CorruptStoreError(f"stored message {msg.id!r} cannot be decoded: {problem}")


def _record(msg: Any, body: bytes) -> Any:
    """The record of ``msg``'s stored ``body``, after every check of the module docstring, in
    that order; ``CorruptStoreError`` for the first that fails."""
    if hasher(body).digest() != msg._digest:
        raise _corrupt(msg, "its bytes do not match the digest stored with them")
    try:
        rec = decode_raw(body) if len(body) < LARGE_BODY else decode_large(body)
        check_decoded(rec.content)
    except DECODE_ERRORS as exc:
        raise _corrupt(msg, f"not an encoded message: {exc}") from None
    if rec.id != msg.id:
        raise _corrupt(msg, f"its bytes hold message {rec.id!r}")
    try:
        canonical = encode_raw(rec)
    except ENCODE_ERRORS as exc:
        raise _corrupt(msg, f"it cannot be encoded again: {exc}") from None
    if canonical != body:
        raise _corrupt(msg, "its bytes are not the canonical encoding of a message")
    return rec


def fill(msg: Any) -> None:
    """Decode a deferred message's stored bytes into its fields, after checking them, and
    those of the still-deferred messages after it in its batch (the ``BATCH`` messages of its
    list it was loaded with): reading a list in order decodes each batch at its first message.
    Never those before it, so reading one message decodes nothing a reader of the messages
    before it has not asked for.

    A list that is read is read whole far more often than not, and the first read of each
    message costs a trip through ``Msg.__getattr__``; one trip per batch instead, and the
    fields set by ``map`` over the batch, saves about 6% of reading a whole reload. A message
    of the batch whose bytes fail a check stays deferred (its own read raises); the rest are
    decoded. Safe to race: two threads decode the same bytes and set equal values; the stored
    bytes are dropped only after every field is set.

    The price: until a batch is decoded its messages refer to each other, so one message kept
    keeps its batch's bytes alive, and a list dropped unread is freed by the cycle collector
    rather than at once.
    """
    if msg._stored is None:
        return
    batch = msg._batch
    if batch is None:  # being finished by another thread, or built without one
        body = msg._stored
        if body is not None:
            set_fields(msg, _record(msg, body))
        return
    done: list[Any] = []
    records: list[Any] = []
    failed: CorruptStoreError | None = None
    # the messages from ``msg`` on, found by identity (``==`` would compare digests)
    for m in batch[list(map(is_, batch, repeat(msg))).index(True) :]:
        body = m._stored
        if body is None:
            continue
        try:
            records.append(_record(m, body))
        except CorruptStoreError as exc:
            if m is msg:
                failed = exc
            continue
        done.append(m)
    for setter, field in _SETTERS:
        deque(map(setter, done, map(field, records)), maxlen=0)
    deque(map(set_batch, done, repeat(None)), maxlen=0)  # no reference cycle left behind
    deque(map(set_stored, done, repeat(None)), maxlen=0)  # last: every field is set
    if failed is not None:
        raise failed


def fill_one(msg: Any) -> None:
    """Decode a deferred message's stored bytes into its fields, after checking them, and
    nothing else of its batch.

    For a reader that needs one message of a list it will not read on: the first save after a
    session is reopened looks for the title's source, the first user message, and decoding the
    64 messages loaded with it would cost that save more than the rest of its work. The batch
    still holds the message; a later ``fill`` of the batch skips it, as it skips any message
    already decoded.
    """
    body = msg._stored
    if body is not None:
        set_fields(msg, _record(msg, body))


_SETTERS = tuple(
    (setter, attrgetter(name))
    for setter, name in (
        (set_role, "role"),
        (set_content, "content"),
        (set_name, "name"),
        (set_metadata, "metadata"),
        (set_usage, "usage"),
        (set_created_at, "created_at"),
    )
)


_pending = attrgetter("_stored")


def all_decoded(msgs: Sequence[Any]) -> bool:
    """Whether no message of ``msgs`` still waits to be decoded."""
    return not any(map(_pending, msgs))


def decode_deferred(msgs: Sequence[Any]) -> None:
    """Decode every still-deferred message of ``msgs`` now.

    For code that wants the decoding done at a time and on a thread of its choosing, such as
    ``AsyncLedger``, which decodes in its worker thread so that an event loop never does.
    Raises ``CorruptStoreError`` for a message whose stored bytes fail a check.
    """
    # only those whose bytes are still pending, picked at C speed: a list held in memory (a
    # ledger's remembered messages) is mostly decoded already, and calling ``fill`` for each
    # of 12,000 messages to find that out cost 0.7 ms
    for m in compress(msgs, map(_pending, msgs)):
        fill(m)  # one decoder call per message: faster than one for a joined list
