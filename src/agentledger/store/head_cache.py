"""``HeadCache``: the sessions a ledger remembers, bounded by how many and by how much memory.

A ledger remembers, per session it used recently, what it last committed or loaded: the
digests (``Head.lists``) and, for the lists it loaded or saved, the ``Msg`` objects themselves.
That is what makes the next save cost the change and the next load of an unchanged session a
stamp read. Bounding it by a count of sessions alone bounds nothing: 64 sessions of 12,000
messages of ~1.3 KB each hold about 1.3 GB. So the cache also weighs what it holds, and forgets
the least recently used sessions until both bounds hold (the session kept last always stays, so
one session larger than the budget still saves at the cost of its change). A session forgotten
is read back from the store when next used; nothing is lost, only that shortcut.

The weight is an estimate, made in constant time per list, never by walking messages:

- a remembered message weighs its stored body plus ``PER_MESSAGE`` (the ``Msg`` object, its
  digest and id, and the list slots that hold them: 330-480 bytes measured over the body on
  the benchmark workload, lazy and decoded);
- a digest without its message (a head read back for a save) weighs ``PER_DIGEST``;
- bodies are counted exactly when a load brings them (``loaded``), and after a save as the
  bytes it wrote plus the rows it kept at the session's mean body size before (``committed``);
  messages a no-op save remembers from the caller's list are counted at that mean too, or at
  ``DEFAULT_BODY`` for a session never loaded or written through this ledger.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

from agentledger.messages import checks
from agentledger.store.base import Head, SessionKey, StoredState

__all__ = [
    "DEFAULT_BODY",
    "DEFAULT_BYTES",
    "DEFAULT_SESSIONS",
    "PER_DIGEST",
    "PER_MESSAGE",
    "HeadCache",
]

#: A ledger's default bounds: how many sessions it remembers, and about how many bytes of them.
DEFAULT_SESSIONS = 64
DEFAULT_BYTES = 256 * 2**20

#: Bytes a remembered message costs beyond its body.
PER_MESSAGE = 400
#: Bytes a digest (and its rank) costs in a head without the message.
PER_DIGEST = 128
#: The body size assumed for messages whose bodies this ledger never saw.
DEFAULT_BODY = 1024


@dataclass(slots=True)
class _Entry:
    head: Head
    mean_body: float  # mean stored body size of the session's messages
    weight: int


class HeadCache:
    """Heads by session key, least recently kept first, within ``max_sessions`` sessions and
    ``max_bytes`` of estimated memory (see the module docstring). Not locked: the ledger
    calls it under its guard (a ``get`` alone is one dict lookup)."""

    __slots__ = ("_entries", "max_bytes", "max_sessions", "weight")

    def __init__(self, max_sessions: int, max_bytes: int) -> None:
        self.max_sessions = checks.count("Ledger", "cached_sessions", max_sessions, minimum=1)
        self.max_bytes = checks.count("Ledger", "cached_bytes", max_bytes)
        self._entries: OrderedDict[SessionKey, _Entry] = OrderedDict()
        self.weight = 0  # of every entry

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[SessionKey]:
        return iter(self._entries)

    def get(self, key: SessionKey) -> Head | None:
        entry = self._entries.get(key)
        return entry.head if entry is not None else None

    def weight_of(self, key: SessionKey) -> int:
        entry = self._entries.get(key)
        return entry.weight if entry is not None else 0

    def loaded(self, key: SessionKey, head: Head, stored: StoredState) -> None:
        """Keep ``head``, made by a load of ``stored`` (its bodies counted exactly)."""
        count = sum(len(rows) for rows in stored.lists.values())
        body = sum(sum(map(len, rows.bodies)) for rows in stored.lists.values())
        self._keep(key, head, body / count if count else self._mean(key))

    def committed(self, key: SessionKey, head: Head, written: int, body: int) -> None:
        """Keep ``head`` after a save that wrote ``written`` rows and ``body`` bytes in all
        (``CommitPlan.bytes_written``; the messages it kept are counted at the session's mean
        body size before the save)."""
        kept = max(sum(map(len, head.messages.values())) - written, 0)
        before = self._entries.get(key)
        if before is not None:
            mean_kept = before.mean_body
        else:
            mean_kept = body / written if written else DEFAULT_BODY
        count = kept + written
        self._keep(key, head, (kept * mean_kept + body) / count if count else mean_kept)

    def kept(self, key: SessionKey, head: Head) -> None:
        """Keep ``head`` as the most recently used, its bodies at the size known for the
        session (a head read back from the store, or one a no-op save added messages to)."""
        self._keep(key, head, self._mean(key))

    def forget(self, key: SessionKey) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self.weight -= entry.weight

    def _mean(self, key: SessionKey) -> float:
        entry = self._entries.get(key)
        return entry.mean_body if entry is not None else DEFAULT_BODY

    def _keep(self, key: SessionKey, head: Head, mean_body: float) -> None:
        self.forget(key)
        weight = _weigh(head, mean_body)
        self._entries[key] = _Entry(head, mean_body, weight)
        self.weight += weight
        while len(self._entries) > 1 and (
            len(self._entries) > self.max_sessions or self.weight > self.max_bytes
        ):
            _, oldest = self._entries.popitem(last=False)
            self.weight -= oldest.weight


def _weigh(head: Head, mean_body: float) -> int:
    remembered = sum(map(len, head.messages.values()))
    digests = sum(map(len, head.lists.values()))
    return int(remembered * (mean_body + PER_MESSAGE) + max(digests - remembered, 0) * PER_DIGEST)
