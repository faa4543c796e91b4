"""Sortable message ids: 48 bits of milliseconds then 80 random bits, Crockford base32 (ULID).

Ids sort by creation time, and within one millisecond by a counter, so ids made in one process
are strictly increasing. Order in a session is still decided by position, never by id or time.
"""

from __future__ import annotations

import os
import threading
import time

__all__ = ["new_id"]

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_lock = threading.Lock()
_last_ms = -1
_last_rand = 0


def _b32(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def new_id() -> str:
    """A new 26-character id, strictly greater than the previous one made in this process."""
    global _last_ms, _last_rand
    with _lock:
        now_ms = time.time_ns() // 1_000_000
        if now_ms <= _last_ms:
            now_ms = _last_ms
            rand = (_last_rand + 1) & ((1 << 80) - 1)
        else:
            rand = int.from_bytes(os.urandom(10), "big") >> 1  # leave room to count up
        _last_ms, _last_rand = now_ms, rand
    return _b32(now_ms, 10) + _b32(rand, 16)
