"""Turning the rows a store loaded into the messages a ledger returns.

Every row is checked at C speed (types, digest size, a body framed as a JSON object), then
becomes a *deferred* ``Msg``: id and digest set, body decoded on first read (see
``agentledger.messages.msg``). A reload therefore costs what fetching the rows costs. The one
exception is a body that references media stored apart from it: that message is decoded now
and its media put back, since only the store can supply them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import itemgetter

from agentledger.errors import CodecError, CorruptStoreError
from agentledger.messages import Msg
from agentledger.messages.codec import DIGEST_SIZE
from agentledger.messages.msg import deferred_messages
from agentledger.store import media
from agentledger.store.base import StoredList

__all__ = ["loaded_messages"]

_first, _last = itemgetter(0), itemgetter(-1)
_OPEN_BRACE, _CLOSE_BRACE = ord("{"), ord("}")


def loaded_messages(
    rows: StoredList,
    *,
    where: str,
    may_have_media: bool,
    read_media: Callable[[Sequence[bytes]], dict[bytes, bytes]],
) -> list[Msg]:
    """The messages of one loaded list. ``where`` names it in errors; ``read_media`` fetches
    stored media by digest (called only for bodies that reference some)."""
    ids, digests, bodies = rows.ids, rows.digests, rows.bodies
    if _malformed(ids, digests, bodies):
        raise CorruptStoreError(
            f"{where} holds a malformed row (an id, digest or body of the wrong type or shape)",
            location=where,
        )
    msgs = deferred_messages(ids, digests, bodies)
    if may_have_media and any(map(media.has_refs, bodies)):
        for position, body in enumerate(bodies):
            if media.has_refs(body):
                try:
                    msgs[position] = media.internalize(body, digests[position], read_media)
                except (CodecError, KeyError, ValueError) as exc:
                    raise CorruptStoreError(
                        f"{where} position {position} cannot be decoded: {exc}", location=where
                    ) from None
    return msgs


def _malformed(ids: Sequence[str], digests: Sequence[bytes], bodies: Sequence[bytes]) -> bool:
    """True unless every row has a str id, a digest of the right size and a body framed as a
    JSON object (a truncated or foreign body fails here; bytes that are framed but still
    undecodable fail when the message is first read)."""
    try:
        return bool(
            not len(ids) == len(digests) == len(bodies)
            or set(map(type, ids)) - {str}
            or set(map(type, digests)) - {bytes}
            or set(map(len, digests)) - {DIGEST_SIZE}
            or set(map(type, bodies)) - {bytes}
            or set(map(_first, bodies)) - {_OPEN_BRACE}
            or set(map(_last, bodies)) - {_CLOSE_BRACE}
        )
    except IndexError:  # an empty body
        return True
