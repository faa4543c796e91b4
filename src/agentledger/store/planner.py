"""The one diff planner every backend shares.

Every position of the new list is compared, by content digest, with what the store last
committed. Nothing is sampled and nothing is decided by object identity: an edit anywhere is
found, and an equal list rebuilt from scratch (or reloaded) plans no write at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import compress
from operator import ne

from agentledger.messages import Msg

__all__ = ["ListDiff", "diff_list", "digests_of"]


@dataclass(frozen=True, slots=True)
class ListDiff:
    """Positions whose content changed (or are new), and the list's old and new lengths."""

    changed: list[int]
    old_length: int
    new_length: int

    @property
    def empty(self) -> bool:
        return not self.changed and self.old_length == self.new_length

    @property
    def appended(self) -> int:
        return sum(1 for i in self.changed if i >= self.old_length)

    @property
    def replaced(self) -> int:
        return sum(1 for i in self.changed if i < self.old_length)

    @property
    def truncated(self) -> int:
        return max(0, self.old_length - self.new_length)


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


def diff_list(committed: Sequence[bytes], new: Sequence[Msg]) -> ListDiff:
    """Compare ``new`` with the committed digests at every position."""
    old_length, new_length = len(committed), len(new)
    common = min(old_length, new_length)
    ours = digests_of(new[:common])
    theirs = committed[:common] if common < old_length else committed
    # both branches run in C: the list comparison (the usual case: nothing before the tail
    # changed), then the positions that differ
    changed = [] if ours == list(theirs) else list(compress(range(common), map(ne, ours, theirs)))
    changed.extend(range(common, new_length))
    return ListDiff(changed, old_length, new_length)
