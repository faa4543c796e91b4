"""``Conversions``: the ``Msg`` objects already made for a pydantic-ai message, by its content.

A capability saves the whole history after every step of a run, and a history of thousands of
messages costs far more to convert than to compare. Each message is still read in full (its
pydantic-ai JSON) on every save, so nothing is decided by object identity and a message changed
in place is converted anew; only the work for JSON seen before is skipped. Reusing the same
``Msg`` objects also lets the ledger's planner skip recomputing their digests.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from agentledger.messages import Msg

__all__ = ["Conversions"]


class Conversions:
    """A bounded, thread-safe map from a message's JSON digest to its ``Msg`` objects; the least
    recently used entries go first."""

    def __init__(self, size: int = 50_000) -> None:
        self._size = size
        self._items: OrderedDict[bytes, tuple[Msg, ...]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: bytes) -> tuple[Msg, ...] | None:
        with self._lock:
            msgs = self._items.get(key)
            if msgs is not None:
                self._items.move_to_end(key)
            return msgs

    def put(self, key: bytes, msgs: tuple[Msg, ...]) -> None:
        with self._lock:
            self._items[key] = msgs
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)
