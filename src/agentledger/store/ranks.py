"""Order keys that never renumber: how a store keeps a list's order at the cost of a change.

A list's live rows, sorted by their ``rank``, are the list. Ranks are byte strings compared
byte by byte (as SQLite compares BLOBs and Postgres ``bytea``), read as base-256 fractions
``0.b0 b1 b2 …``: between any two there is always room for more, so inserting, deleting or
moving messages writes the rows that changed and never renumbers the rows around them. A row's
rank is fixed for its life; each version's order is that of the rows live at it.

- An append takes the next 8-byte integer after the last rank, a prepend the one before the
  first: a list grown at its ends keeps 8-byte ranks.
- A run of ``k`` messages between two rows takes ``k`` evenly spaced ranks between theirs, one
  byte longer than both only when the gap has no room. Repeated inserts at one spot lengthen
  ranks by about one byte per eight inserts.
- Dropping a prefix is one *floor*, not a row update per message: rows ranked at or below the
  list's floor are not live. A store records the floor per version and leaves those rows as
  they are until ``purge_history`` removes them, so a sliding window or a summary replacing
  10,000 messages costs what an append costs.

Ranks that end in a zero byte are never made, so the byte order of the ranks made here is their
order as fractions. The first rank is ``START``, in the middle of the 8-byte range.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["START", "RankPlan", "after", "before", "between", "plan_ranks", "position_rank"]

_WIDTH = 8
START = (1 << 62).to_bytes(_WIDTH, "big")


def _prefix_int(rank: bytes) -> int:
    return int.from_bytes(rank[:_WIDTH].ljust(_WIDTH, b"\0"), "big")


def _trim(rank: bytes) -> bytes:
    return rank.rstrip(b"\0") or b"\0"


def after(rank: bytes | None, count: int = 1) -> list[bytes]:
    """``count`` ascending ranks above ``rank`` (above nothing: from ``START``)."""
    first = (1 << 62) if rank is None else _prefix_int(rank) + 1
    return [(first + i).to_bytes(_WIDTH, "big") for i in range(count)]


def before(rank: bytes, count: int = 1) -> list[bytes]:
    """``count`` ascending ranks below ``rank``, with no lower bound."""
    last = _prefix_int(rank) - 1
    if last - count < 1:  # the 8-byte range is used up (2**62 prepends): go between
        return between(b"\0", rank, count)
    return [(last - count + 1 + i).to_bytes(_WIDTH, "big") for i in range(count)]


def between(low: bytes, high: bytes, count: int = 1) -> list[bytes]:
    """``count`` evenly spaced ascending ranks strictly between ``low`` and ``high``."""
    width = max(len(low), len(high))
    while True:
        a = int.from_bytes(low.ljust(width, b"\0"), "big")
        b = int.from_bytes(high.ljust(width, b"\0"), "big")
        if b - a > count:
            step = (b - a) // (count + 1)
            return [_trim((a + step * i).to_bytes(width, "big")) for i in range(1, count + 1)]
        if b <= a:
            raise ValueError(f"no rank between {low.hex()} and {high.hex()}: not ascending")
        width += 1


def position_rank(position: int) -> bytes:
    """The rank a row stored before ranks existed gets for its ``position`` (a migration
    maps every position this way, which keeps the order of every past version)."""
    return ((1 << 62) + position).to_bytes(_WIDTH, "big")


@dataclass(frozen=True, slots=True)
class RankPlan:
    """What one list write does to ranked rows.

    ``put_ranks[i]`` is the rank of the ``i``-th put (puts in ascending position order);
    ``closed`` the indexes (old positions) of live rows that leave other than through the floor,
    ``closed_ranks`` their ranks; ``floor`` the new floor (None: kept), at or below which the
    old rows ``0 .. dropped - 1`` leave all at once. The new list's ranks are the old ones with
    the same runs kept and the puts' ranks put (``planner.splice_into``).
    """

    put_ranks: list[bytes]
    closed: list[int]
    closed_ranks: list[bytes]
    floor: bytes | None
    dropped: int


def plan_ranks(
    old: Sequence[bytes],
    floor: bytes | None,
    runs: Sequence[tuple[int, int, int]],
    put_positions: Sequence[int],
    new_length: int,
) -> RankPlan:
    """Ranks for a list write: the old list's ranks ``old`` (and its floor), the kept ``runs``
    ``(old_start, new_start, count)`` and the new positions written, ascending.

    Each stretch of puts between two kept rows gets ranks between theirs. The old rows before
    the first kept one leave through a new floor (all of them, when nothing is kept); every
    other old row that leaves is closed. The cost is that of the runs and puts, not of the list.
    """
    if sum(count for _, _, count in runs) + len(put_positions) != new_length:
        raise ValueError("the kept runs and the puts do not cover the new list exactly")
    # Runs ascend in both lists, so the old rows before the first run are never kept.
    dropped = runs[0][0] if runs else len(old)
    new_floor = old[dropped - 1] if dropped else None
    closed: list[int] = []
    next_old = dropped
    for old_start, _, count in runs:
        closed.extend(range(next_old, old_start))
        next_old = old_start + count
    closed.extend(range(next_old, len(old)))
    put_ranks: list[bytes] = []
    last = new_floor if new_floor is not None else floor  # the rank before the next new row
    at = 0  # index into put_positions
    for old_start, new_start, count in [*runs, (len(old), new_length, 0)]:
        stretch = 0  # the puts before this run fill new positions up to its start
        while at + stretch < len(put_positions) and put_positions[at + stretch] < new_start:
            stretch += 1
        if stretch:
            high = old[old_start] if count else None
            if high is None:
                made = after(last, stretch)
            elif last is None:
                made = before(high, stretch)
            else:
                made = between(last, high, stretch)
            put_ranks += made
            last = made[-1]
            at += stretch
        if count:
            last = old[old_start + count - 1]
    return RankPlan(put_ranks, closed, [old[i] for i in closed], new_floor, dropped)
