"""Keyset cursors for ``list_sessions``: where a page ends, as a short URL-safe string.

Sessions are listed most recently updated first, in ``(updated_at, session_id)`` order,
descending. The page after a session is the keyset ``(updated_at, session) < (its updated_at,
its session)``: every store answers it from the index it lists by, so a page deep in the list
costs what the first one does; and a session updated between two page reads moves to the front
instead of shifting every later page by one (with offsets that skips or repeats a session).

A cursor holds that key exactly: ``updated_at`` in integer microseconds since the epoch (the
precision every store keeps) and the session id's UTF-8, behind a format byte and a 4-byte tag
of the tenant, as unpadded base64url. The tag is no secret and grants nothing (every store
filters by the tenant asked for); it turns a cursor taken from another tenant's listing, which
would position nowhere in particular, into a ``UserError`` instead of a silently wrong page.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import heapq
import re
import struct
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from operator import attrgetter
from typing import NamedTuple, Protocol, TypeVar

from agentledger.errors import InvalidIdError, UserError
from agentledger.messages import checks
from agentledger.store.ids import MAX_ID_LENGTH, check_id, shown

__all__ = ["Keyset", "check_page", "decode_cursor", "encode_cursor", "newest_first"]

_FORMAT = 1
_HEAD = struct.Struct(">B4sq")  # format, tenant tag, updated_at in microseconds
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
_BASE64URL = re.compile(r"[A-Za-z0-9_-]+")
#: The longest cursor: the head and a session id of MAX_ID_LENGTH 4-byte characters.
_MAX_LENGTH = (4 * (_HEAD.size + 4 * MAX_ID_LENGTH) + 2) // 3


class Keyset(NamedTuple):
    """The position a page starts after: the sessions that sort below it come next."""

    updated_at: datetime
    session_id: str


def _tag(tenant: str) -> bytes:
    return hashlib.blake2b(tenant.encode("utf-8"), digest_size=4).digest()


def encode_cursor(tenant: str, updated_at: datetime, session_id: str) -> str:
    """The cursor of a listed session (``SessionInfo.cursor``)."""
    micros = (updated_at - _EPOCH) // _US
    raw = _HEAD.pack(_FORMAT, _tag(tenant), micros) + session_id.encode("utf-8")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def decode_cursor(cursor: object, tenant: str) -> Keyset:
    """The keyset ``cursor`` names in ``tenant``'s listing, or ``UserError`` saying why it is
    not one: not a string, not a cursor this library made, or made for another tenant."""
    if not isinstance(cursor, str):
        raise UserError(f"a cursor is a string, got {type(cursor).__name__}")
    bad = UserError(f"{shown(cursor)} is not a list_sessions cursor")
    if len(cursor) > _MAX_LENGTH or not _BASE64URL.fullmatch(cursor):
        raise bad
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    except (binascii.Error, ValueError):
        raise bad from None
    if len(raw) <= _HEAD.size or raw[0] != _FORMAT:
        raise bad
    _, tag, micros = _HEAD.unpack_from(raw)
    try:
        session_id = check_id(raw[_HEAD.size :].decode("utf-8"))
        updated_at = _EPOCH + micros * _US
    except (UnicodeDecodeError, InvalidIdError, OverflowError):
        raise bad from None
    if encode_cursor(tenant, updated_at, session_id) != cursor:
        if tag != _tag(tenant):
            raise UserError(f"the cursor {shown(cursor)} is from another tenant's listing")
        raise bad  # the same key spelled another way: not a string this module wrote
    return Keyset(updated_at, session_id)


def check_page(limit: object, offset: object, after: object, tenant: str) -> Keyset | None:
    """The keyset a ``list_sessions`` call pages after (None without ``after``), once its
    arguments are known good: ``limit`` None or a count, ``offset`` a count, not both an
    ``offset`` and ``after`` (a cursor already says where the page starts)."""
    if limit is not None:
        checks.count("list_sessions", "limit", limit)
    checks.count("list_sessions", "offset", offset)
    if after is None:
        return None
    if offset:
        raise UserError("give after or offset, not both: the cursor says where the page starts")
    return decode_cursor(after, tenant)


class _Listed(Protocol):
    @property
    def updated_at(self) -> datetime: ...
    @property
    def session_id(self) -> str: ...


Listed = TypeVar("Listed", bound=_Listed)
_ORDER = attrgetter("updated_at", "session_id")


def newest_first(
    infos: Iterable[Listed], *, limit: int | None, offset: int, after: Keyset | None
) -> list[Listed]:
    """One page of a listing, for the stores that list in Python (memory, JSONL): the rows
    below ``after``, most recently updated first, the first ``offset`` skipped, at most
    ``limit``. A page with a limit keeps only its rows as it goes (a heap), not a sorted copy
    of the whole tenant."""
    if after is not None:
        infos = [i for i in infos if _ORDER(i) < after]
    if limit is None:
        return sorted(infos, key=_ORDER, reverse=True)[offset:]
    return heapq.nlargest(offset + limit, infos, key=_ORDER)[offset:]
