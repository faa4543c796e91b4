"""``same_json``: whether a client's JSON is the JSON the server holds.

The server decides by comparison whether a client changed something: a user message it
resends (an edit forks the thread), its ``state``, its activity messages. Python's ``==`` is
not JSON's equality: it takes ``true`` for ``1`` and ``false`` for ``0`` (a bool is an int),
so a client that changed ``{"done": 1}`` to ``{"done": true}`` had its change skipped as
"unchanged". JSON's own rules are kept otherwise: numbers compare by value (``1`` is ``1.0``,
as it is to a JavaScript client, which cannot tell them apart and resends ``1.0`` as ``1``),
objects by keys whatever their order, and a stored (frozen) value equals its plain form (a
tuple is an array, a ``FrozenMap`` an object).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

__all__ = ["same_json"]

_encode = msgspec.json.Encoder(order="sorted").encode


def same_json(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are the same JSON value (see the module docstring)."""
    if type(a) is dict and type(b) is dict:  # two documents off the wire: compared in C
        try:
            if a == b and _encode(a) == _encode(b):
                return True  # equal, with the same types throughout
        except (TypeError, ValueError):
            pass
    return _same(a, b)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, Mapping):
        return (
            isinstance(b, Mapping)
            and len(a) == len(b)
            and all(key in b and _same(value, b[key]) for key, value in a.items())
        )
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(b, (Mapping, list, tuple)):
        return False
    return bool(a == b)
