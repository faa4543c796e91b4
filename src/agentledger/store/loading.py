"""Turning the rows a store loaded into the messages a ledger returns.

Every row is checked at C speed (types, digest size, a body that opens a JSON object), then
becomes a *deferred* ``Msg``: id and digest set, body checked against the digest and decoded on
first read (see ``agentledger.messages.deferred``). A reload therefore costs what fetching the
rows costs. The one exception is a body that references media stored apart from it
(``media``): its media are fetched now, in one call for the whole list, since only the store
can supply them, and put back into the canonical bytes the message is then deferred on (the
digest check at first read covers them too).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any

from agentledger.errors import CodecError, CorruptStoreError
from agentledger.messages import Msg
from agentledger.messages.codec import DIGEST_SIZE
from agentledger.messages.msg import deferred_messages
from agentledger.store import media
from agentledger.store.base import StoredList

__all__ = ["loaded_messages"]

_first = itemgetter(0)
_OPEN_BRACE = ord("{")


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
    if may_have_media and any(map(media.has_refs, bodies)):
        bodies = _with_media(bodies, where, read_media)
    return deferred_messages(ids, digests, bodies)


def _with_media(
    bodies: Sequence[bytes],
    where: str,
    read_media: Callable[[Sequence[bytes]], dict[bytes, bytes]],
) -> list[bytes]:
    """``bodies`` with every media reference replaced by the media (one fetch for all)."""
    found: dict[int, tuple[Any, list[Any]]] = {}
    for position, body in enumerate(bodies):
        try:
            tree, refs = media.references(body)
        except CodecError as exc:
            raise CorruptStoreError(
                f"{where} position {position} cannot be decoded: {exc}", location=where
            ) from None
        if refs:
            found[position] = (tree, refs)
    if not found:
        return list(bodies)
    wanted = list(dict.fromkeys(d for _, refs in found.values() for _, d in refs))
    blobs = read_media(wanted)
    out = list(bodies)
    for position, (tree, refs) in found.items():
        try:
            out[position] = media.restore(out[position], tree, refs, blobs)
        except CodecError as exc:
            raise CorruptStoreError(
                f"{where} position {position} cannot be decoded: {exc}", location=where
            ) from None
    return out


def _malformed(ids: Sequence[str], digests: Sequence[bytes], bodies: Sequence[bytes]) -> bool:
    """True unless every row has a non-empty str id, a bytes digest of the right size and a
    bytes body that opens a JSON object (a foreign or emptied body fails here; damage further
    in fails when the message is first read, or when its bytes are passed on undecoded).

    One C-level pass per column: after a fetch of many megabytes each pass over the rows costs
    about a cache miss per row. ``str.__len__`` and ``bytes.__len__`` raise TypeError for a
    value of another type, so one pass checks type and size; indexing a body gives an int for
    bytes, a str for a str (which then fails the comparison) and a TypeError for the rest.
    """
    try:
        return bool(
            not len(ids) == len(digests) == len(bodies)
            or 0 in set(map(str.__len__, ids))
            or set(map(bytes.__len__, digests)) - {DIGEST_SIZE}
            or set(map(_first, bodies)) - {_OPEN_BRACE}
        )
    except (IndexError, TypeError):  # an empty body, or a value of the wrong type
        return True
