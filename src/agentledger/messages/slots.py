"""The slots a ``Msg`` keeps, and the setters that fill them past ``Msg.__setattr__``.

``Msg`` refuses every assignment, so its constructor, the codec and deferred decoding fill its
slots with these setters (the slot descriptors' own ``__set__``: the codec's fast path pays no
Python call per field, and ``deferred_messages`` maps them over whole lists in C). They live in
this small module, below ``msg``, ``record`` and ``deferred``, so that each of those reaches them
without importing the others.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "MsgSlots",
    "set_batch",
    "set_content",
    "set_created_at",
    "set_digest",
    "set_fields",
    "set_id",
    "set_metadata",
    "set_name",
    "set_role",
    "set_stored",
    "set_usage",
]


class MsgSlots:
    """Storage for ``Msg``: every persisted field, the cached digest and, while a loaded
    message is not decoded yet, its stored bytes (``_stored``) and the messages loaded with it
    that are decoded together with it on first read (``_batch``, see ``deferred``)."""

    __slots__ = (
        "_batch",
        "_digest",
        "_stored",
        "content",
        "created_at",
        "id",
        "metadata",
        "name",
        "role",
        "usage",
    )


(
    set_id,
    set_role,
    set_content,
    set_name,
    set_metadata,
    set_usage,
    set_created_at,
    set_digest,
    set_stored,
    set_batch,
) = (
    MsgSlots.__dict__[name].__set__
    for name in (
        "id",
        "role",
        "content",
        "name",
        "metadata",
        "usage",
        "created_at",
        "_digest",
        "_stored",
        "_batch",
    )
)
get_stored = MsgSlots.__dict__["_stored"].__get__


def set_fields(msg: MsgSlots, rec: Any) -> None:
    """Every field but the id from a decoded record; then no stored bytes remain (set last,
    so a thread racing a deferred decode sees either the bytes or every field)."""
    set_role(msg, rec.role)
    set_content(msg, rec.content)
    set_name(msg, rec.name)
    set_metadata(msg, rec.metadata)
    set_usage(msg, rec.usage)
    set_created_at(msg, rec.created_at)
    set_stored(msg, None)
