"""The one diff planner every backend shares: which messages of a list changed, found in linear
time, aligned by content so that a shift writes only what it adds.

Every message of the new list is compared with what the store last committed, by content digest
(which covers the id). Nothing is sampled: an edit anywhere is found, and an equal list rebuilt
from scratch (or reloaded) plans no write at all.

The old and new lists are aligned, not compared position by position: the common prefix and
suffix are matched first, then the middle is walked, each mismatch resolved by looking the new
message up among the old ones (an insert if it is not there, a deletion of the old messages
before it if it is, unless the old message at hand comes back sooner in the new list). The
result (``ListDiff.runs``) says which old messages stay and where: a sliding window, an insert
near the front, a deletion in the middle or a summary replacing a prefix keep every other row.
Duplicated content can make the alignment longer than the shortest one; it is always exact.

One shortcut keeps this cheap. The ledger remembers the ``Msg`` objects it last saved or loaded;
a message that is still that very object holds the same content (a ``Msg`` never changes), so its
digest need not be read. Runs of such messages are compared by C-level list comparison, which
tries identity before ``__eq__``, ``_RUN`` at a time; lookups scan the committed digests in C.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from agentledger.messages import Msg

__all__ = ["ListDiff", "diff_list", "digests_of", "splice", "splice_into"]

#: Positions compared per C-level list comparison before falling back to a Python walk.
_RUN = 256


@dataclass(frozen=True, slots=True)
class ListDiff:
    """How a new list differs from the committed one.

    ``runs`` are the committed messages kept, as ``(old_start, new_start, count)`` ascending in
    both lists; ``changed`` the new positions that hold a message to write (every position no
    run covers), ascending.
    """

    changed: list[int]
    old_length: int
    new_length: int
    runs: list[tuple[int, int, int]]

    @property
    def kept(self) -> int:
        return sum(count for _, _, count in self.runs)

    @property
    def empty(self) -> bool:
        return not self.changed and self.kept == self.old_length

    @property
    def closed(self) -> int:
        """Committed messages that leave the list."""
        return self.old_length - self.kept

    @property
    def replaced(self) -> int:
        """Messages written in the place of ones that left (as many as both allow)."""
        return min(self.closed, len(self.changed))

    @property
    def appended(self) -> int:
        return len(self.changed) - self.replaced

    @property
    def truncated(self) -> int:
        return self.closed - self.replaced


def splice_into(
    target: list[Any],
    runs: Sequence[tuple[int, int, int]],
    puts: Sequence[tuple[int, Any]],
    new_length: int,
) -> None:
    """Turn ``target`` (the old list) into the new one in place: the items ``runs`` keep, and
    each ``(position, item)`` of ``puts`` (ascending) put.

    One slice assignment per gap between runs: kept items are moved by ``memmove``, never
    copied one by one, so the cost of a save's bookkeeping stays near the size of its change
    (copying a list touches every item's reference count, a cache miss per message).
    """
    old_length = len(target)
    at = old_at = taken = 0  # target[:at] is final; target[at:] is old[old_at:]
    for old_start, new_start, count in [*runs, (old_length, new_length, 0)]:
        gap = new_start - at
        target[at : at + old_start - old_at] = [item for _, item in puts[taken : taken + gap]]
        taken += gap
        at, old_at = new_start + count, old_start + count
    if len(target) != new_length or taken != len(puts):
        raise ValueError("the kept runs and the puts do not make the new list")


def splice(
    old: Sequence[Any],
    runs: Sequence[tuple[int, int, int]],
    puts: Iterable[tuple[int, Any]],
    new_length: int,
) -> list[Any]:
    """The new list made from a copy of ``old`` (see ``splice_into``)."""
    out = list(old)
    splice_into(out, runs, sorted(puts, key=lambda put: put[0]), new_length)
    return out


def digests_of(msgs: Sequence[Msg]) -> list[bytes]:
    """Every message's digest: the cached ones read directly, the rest computed."""
    digests = [m._digest for m in msgs]  # measured faster than map(attrgetter) here
    at = 0
    while True:  # messages never digested yet (new or edited ones) are few: find them in C
        try:
            at = digests.index(None, at)
        except ValueError:
            return digests
        digests[at] = msgs[at].digest
        at += 1


def diff_list(
    committed: Sequence[bytes],
    new: Sequence[Msg],
    known: Sequence[Msg] = (),
    *,
    kept: Sequence[tuple[int, int, int]] = (),
) -> ListDiff:
    """Align ``new`` with the committed digests (see the module docstring).

    ``known``, when given, holds the committed messages themselves (``known[i].digest ==
    committed[i]``); it must then be as long as ``committed``. ``kept`` runs (``(old_start,
    new_start, count)``, ascending in both, within both lists) are known to hold committed
    messages where they moved (a ``TrackedList``'s record): they are not compared, and only
    what lies between them is aligned.
    """
    if not isinstance(committed, list):
        committed = list(committed)
    if known and len(known) == len(committed):
        old: list[Any] = known if isinstance(known, list) else list(known)
        ours: list[Any] = new if isinstance(new, list) else list(new)
        digest_at = _digest_reader(ours)
    else:
        old = committed
        ours = digests_of(new)
        digest_at = ours.__getitem__
    return _Aligner(committed, old, ours, digest_at).diff(kept)


def _digest_reader(msgs: list[Msg]) -> Any:
    def digest_at(i: int) -> bytes:
        return msgs[i].digest

    return digest_at


#: Lookups by scanning before the aligner indexes the committed digests of the middle.
_SCANS = 16
#: How far ahead in the new list an old message is looked for before its rows are dropped.
_LOOKAHEAD = 64


class _Aligner:
    """One alignment: ``old`` and ``new`` are compared item by item (objects or digests);
    ``committed`` are the old digests and ``digest_at(i)`` the new message ``i``'s."""

    def __init__(
        self, committed: list[bytes], old: list[Any], new: list[Any], digest_at: Any
    ) -> None:
        self.committed, self.old, self.new, self.digest_at = committed, old, new, digest_at
        self.scans = 0
        self.index: dict[bytes, list[int]] | None = None

    def same(self, i: int, j: int) -> bool:
        a, b = self.new[i], self.old[j]
        return a is b or self.digest_at(i) == self.committed[j]

    def run(self, i: int, j: int, limit: int) -> int:
        """How many items match from new ``i`` and old ``j`` on (at most ``limit``).

        When that is the whole old list (a plain list's prefix, at every append) it is tried
        first in one comparison that copies only the new slice: a slice's copy touches every
        message it holds, which is most of what comparing costs. A list that differs pays
        the try once (an edit in the middle of 12,000 messages: about 25 us), unless it
        differs at once (a window that slid, a message put in front): then it is not tried."""
        new, old = self.new, self.old
        if (
            limit > _RUN
            and j == 0
            and limit == len(old)
            and self.same(i, j)
            and new[i : i + limit] == old
        ):
            return limit
        done = 0
        while done < limit:
            step = min(_RUN, limit - done)
            if new[i + done : i + done + step] == old[j + done : j + done + step]:
                done += step
                continue
            for k in range(step):
                if not self.same(i + done + k, j + done + k):
                    return done + k
            done += step
        return done

    def back_run(self, i_end: int, j_end: int, limit: int) -> int:
        """How many items match backwards from new ``i_end - 1`` and old ``j_end - 1``."""
        new, old = self.new, self.old
        done = 0
        while done < limit:
            step = min(_RUN, limit - done)
            if new[i_end - done - step : i_end - done] == old[j_end - done - step : j_end - done]:
                done += step
                continue
            for k in range(1, step + 1):
                if not self.same(i_end - done - k, j_end - done - k):
                    return done + k - 1
            done += step
        return done

    def find_old(self, digest: bytes, start: int, stop: int) -> int:
        """The first old position in ``start .. stop - 1`` holding ``digest``, or -1."""
        if self.index is None and self.scans < _SCANS:
            self.scans += 1
            try:
                return self.committed.index(digest, start, stop)
            except ValueError:
                return -1
        if self.index is None:  # many lookups: index the committed digests once
            self.index = {}
            for position, d in enumerate(self.committed):
                self.index.setdefault(d, []).append(position)
        for position in self.index.get(digest, ()):
            if start <= position < stop:
                return position
        return -1

    def find_new(self, digest: bytes, start: int, stop: int) -> int:
        for i in range(start, min(stop, start + _LOOKAHEAD)):
            if self.digest_at(i) == digest:
                return i
        return -1

    def diff(self, kept: Sequence[tuple[int, int, int]] = ()) -> ListDiff:
        """The diff of the two lists, given runs already known to be ``kept``: each stretch
        between them is aligned on its own."""
        n, m = len(self.old), len(self.new)
        runs: list[tuple[int, int, int]] = []
        changed: list[int] = []
        i = j = 0
        for old_start, new_start, count in kept:
            self._align(i, new_start, j, old_start, runs, changed)
            if count:
                runs.append((old_start, new_start, count))
            i, j = new_start + count, old_start + count
        self._align(i, m, j, n, runs, changed)
        return ListDiff(changed, n, m, _merged(runs))

    def _align(
        self,
        i: int,
        i_end: int,
        j: int,
        j_end: int,
        runs: list[tuple[int, int, int]],
        changed: list[int],
    ) -> None:
        """Align new ``i .. i_end - 1`` with old ``j .. j_end - 1``: the runs kept and the new
        positions changed are added to ``runs`` and ``changed``, in order."""
        common = min(i_end - i, j_end - j)
        prefix = self.run(i, j, common)
        if prefix:
            runs.append((j, i, prefix))
        suffix = self.back_run(i_end, j_end, common - prefix)
        i, j, i_end, j_end = i + prefix, j + prefix, i_end - suffix, j_end - suffix
        while i < i_end:
            if j < j_end and self.same(i, j):
                count = self.run(i, j, min(i_end - i, j_end - j))
                runs.append((j, i, count))
                i, j = i + count, j + count
                continue
            found = self.find_old(self.digest_at(i), j, j_end) if j < j_end else -1
            if found > j + 1:  # keep old j if it comes back sooner than found - j rows away
                ahead = self.find_new(self.committed[j], i + 1, i_end)
                # ... and only old j can give it back: not a copy of it at or after found
                if (
                    0 <= ahead - i < found - j
                    and self.find_old(self.committed[j], found, j_end) < 0
                ):
                    found = -1
            if found < 0:
                changed.append(i)
                i += 1
            else:
                j = found  # old j .. found - 1 leave the list
        if suffix:
            runs.append((j_end, i_end, suffix))


def _merged(runs: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """``runs`` with adjacent ones joined (a prefix and a suffix that meet, say)."""
    out: list[tuple[int, int, int]] = []
    for old_start, new_start, count in runs:
        if out and out[-1][0] + out[-1][2] == old_start and out[-1][1] + out[-1][2] == new_start:
            out[-1] = (out[-1][0], out[-1][1], out[-1][2] + count)
        else:
            out.append((old_start, new_start, count))
    return out
