"""Session, tenant and list names: what is accepted, and how an id becomes a file name.

Ids are any printable text up to 256 characters, so callers can use their own keys (emails, URLs,
UUIDs) unchanged. Anything that reaches a file path goes through ``path_component``, an injective
encoding that keeps only ``[a-z0-9_-]`` and writes every other byte as ``%XX``: ``..``, ``/``,
``A`` vs ``a`` on a case-insensitive disk, all map to distinct, harmless names.

A name that comes back in an error message goes through ``shown``: a name as given (a session
id before it is checked, a list name, a store URL) can be a megabyte long, and an error line
echoing it whole floods the terminal or the log it was meant to explain.
"""

from __future__ import annotations

import hashlib
import re

from agentledger.errors import InvalidIdError

__all__ = [
    "DEFAULT_TENANT",
    "SHOWN_CHARS",
    "check_id",
    "check_list_name",
    "path_component",
    "shown",
]

DEFAULT_TENANT = "default"
MAX_ID_LENGTH = 256
_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789_-")
_LIST_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_MAX_COMPONENT = 200
#: How much of a name an error message shows (see ``shown``).
SHOWN_CHARS = 80


def shown(name: str) -> str:
    """``name`` quoted for a message (its ``repr``); past ``SHOWN_CHARS`` characters, only its
    start, then how long it is, as in ``'aaaa'… (100,000 characters)``."""
    if len(name) <= SHOWN_CHARS:
        return repr(name)
    return f"{name[:SHOWN_CHARS]!r}… ({len(name):,} characters)"


def check_id(value: object, kind: str = "session id") -> str:
    """Return ``value`` if it is a usable id, else raise ``InvalidIdError`` saying why."""
    if not isinstance(value, str):
        raise InvalidIdError(f"{kind} must be a string, got {type(value).__name__}")
    if not value:
        raise InvalidIdError(f"{kind} must not be empty")
    if len(value) > MAX_ID_LENGTH:
        raise InvalidIdError(f"{kind} is longer than {MAX_ID_LENGTH} characters")
    if not value.isprintable():
        raise InvalidIdError(f"{kind} {shown(value)} contains control or non-printable characters")
    return value


def check_list_name(value: object) -> str:
    """List names (``context``, ``scratch`` ...) are short identifiers."""
    if not isinstance(value, str):
        raise InvalidIdError(f"list name must be a string, got {type(value).__name__}")
    if not _LIST_NAME.fullmatch(value):
        raise InvalidIdError(f"list name must match [A-Za-z0-9_.-]{{1,64}}, got {shown(value)}")
    return value


def path_component(value: str) -> str:
    """An injective, file-system-safe name for an id (see module docstring)."""
    encoded = "".join(chr(b) if b in _SAFE else f"%{b:02X}" for b in value.encode("utf-8"))
    if len(encoded) <= _MAX_COMPONENT:
        return encoded
    # Too long for a file name: a digest keeps names unique; '~' cannot appear in the other form.
    return "~" + hashlib.blake2b(value.encode("utf-8"), digest_size=32).hexdigest()
