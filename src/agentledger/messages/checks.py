"""The scalar rules every message field follows, so that what is built can be read back.

A value a constructor accepts must come back from ``decode(encode(...))`` with the same type
and the same digest; anything else is refused where it is built, naming the field. So each
check returns the value to keep or raises ``UserError``:

- ``str`` fields take exact ``str`` (a subclass such as a ``StrEnum`` member becomes the plain
  string) without lone surrogates, which UTF-8 cannot encode. Bytes are refused: they would be
  written as base64 text and read back as a different value with an equal digest.
- ``bool`` fields take only ``bool`` (``0`` would be written as ``0`` and refused on the way
  back); token counts take ``int`` but not ``bool``, from 0 to 2**63 - 1.
- ``bytes`` fields take any bytes-like object and keep a ``bytes`` copy, never the caller's
  buffer.
- URLs may not hold control characters: no real URL does, and NUL once marked internal
  references (see ``store/media.py``).
- Timestamps must be timezone-aware and are kept in UTC as a plain ``datetime``.

Constructors run these in ``__post_init__``, which msgspec also calls for every decoded block,
so callers test the common case (an exact, ASCII ``str``) inline and only the rest comes here.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from agentledger.errors import UserError

__all__ = [
    "MAX_COUNT",
    "count",
    "flag",
    "lone_surrogate_at",
    "optional_text",
    "raw_bytes",
    "text",
    "timestamp",
    "url",
]

MAX_COUNT = 2**63 - 1
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _kind(value: object) -> str:
    return type(value).__name__


def lone_surrogate_at(value: str) -> int | None:
    """The index of the first lone surrogate in ``value``, or None (ASCII is checked in O(1))."""
    if value.isascii():
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def text(owner: str, field: str, value: Any, *, optional: bool = False) -> str:
    """``value`` as an exact ``str`` that UTF-8 can encode."""
    if type(value) is not str:
        if not isinstance(value, str):
            wanted = "a str or None" if optional else "a str"
            raise UserError(f"{owner}.{field} must be {wanted}, got {_kind(value)}")
        value = str.__str__(value)  # a str subclass: its plain text
    at = lone_surrogate_at(value)
    if at is not None:
        raise UserError(
            f"{owner}.{field} holds a lone surrogate at index {at}, which UTF-8 cannot encode"
        )
    return value


def optional_text(owner: str, field: str, value: Any) -> str | None:
    return None if value is None else text(owner, field, value, optional=True)


def url(owner: str, field: str, value: Any) -> str | None:
    """An optional URL: text without control characters."""
    if value is None:
        return None
    value = text(owner, field, value, optional=True)
    found = _CONTROL.search(value)
    if found is not None:
        raise UserError(
            f"{owner}.{field} holds the control character {found.group()!r} at index "
            f"{found.start()}; a URL cannot"
        )
    return value


def url_ok(value: str) -> bool:
    """True when a ``str`` URL has no control characters (the decode-time fast check)."""
    return _CONTROL.search(value) is None


def flag(owner: str, field: str, value: Any) -> bool:
    if type(value) is not bool:
        raise UserError(f"{owner}.{field} must be a bool, got {_kind(value)}")
    return value


def count(owner: str, field: str, value: Any, *, minimum: int = 0) -> int:
    """A count (tokens, a limit, a version): an ``int`` (not a ``bool``) from ``minimum`` to
    ``MAX_COUNT``, what SQLite's INTEGER and Postgres's bigint hold, so that every backend reads
    it the same way (a float search limit once reached SQLite as a number it read back as
    damage)."""
    if type(value) is not int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise UserError(f"{owner}.{field} must be an int, got {_kind(value)}")
        value = int.__int__(value)  # an int subclass such as an IntEnum member: its number
    if not minimum <= value <= MAX_COUNT:
        raise UserError(f"{owner}.{field} must be from {minimum} to 2**63 - 1, got {value}")
    return value


def raw_bytes(owner: str, field: str, value: Any) -> bytes:
    """Bytes-like data as a ``bytes`` copy (never the caller's mutable buffer)."""
    if type(value) is bytes:
        return value
    try:
        return bytes(memoryview(value))
    except TypeError:
        raise UserError(f"{owner}.{field} must be bytes-like, got {_kind(value)}") from None


def timestamp(owner: str, field: str, value: Any) -> datetime:
    """A timezone-aware datetime as a plain UTC ``datetime``."""
    if not isinstance(value, datetime):
        raise UserError(f"{owner}.{field} must be a datetime, got {_kind(value)}")
    if value.utcoffset() is None:
        raise UserError(
            f"{owner}.{field} must be timezone-aware (naive datetimes are refused), got {value}"
        )
    try:
        value = value.astimezone(UTC)
    except OverflowError:
        raise UserError(f"{owner}.{field} is out of range in UTC: {value}") from None
    if type(value) is not datetime or value.fold or value.tzinfo is not UTC:
        value = datetime(
            value.year,
            value.month,
            value.day,
            value.hour,
            value.minute,
            value.second,
            value.microsecond,
            tzinfo=UTC,
        )
    return value
