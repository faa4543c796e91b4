"""``TrackedList``: a session's list that knows which of its messages changed since it was saved.

A save of a plain list compares it with what was committed, and the part that did not change
still costs a comparison per message (C-level, but each one touches the message's memory: about
5 µs per thousand messages). That is what keeps a 12,000-message append from costing what a
12-message one does. A ``TrackedList`` (from ``Ledger.tracked``) records what each of its methods
changed: where, how many messages it took out and how many it put in. From that record the
ledger knows which runs of the list still hold the messages it last saved, and where they moved
(``kept``), and compares only the rest: appending, editing the last message, saving an
unchanged list, dropping the oldest message (a window), inserting one at the front or deleting
one in the middle cost the same at any length. Past ``MAX_CHANGES`` changes between two saves,
or after a sort, a reverse or a slice with a step, only the lowest position changed is kept,
and the list is compared from there.

The record is only trusted where it is exact. Every way to change the list goes through its
methods (it wraps a list it never hands out; slices and copies are new lists, and a ``Msg`` never
changes), and the ledger uses the record only when the list was last saved by that very ledger,
to that session and list, and the session is still at the version that save committed with the
messages it then remembered. Anything else (another writer's commit, a save of another list in
between, a forgotten cache entry, a change made while a save was planning) falls back to the
full comparison, which finds every change.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, MutableSequence
from typing import Any, overload

from agentledger.messages import Msg

__all__ = ["MAX_CHANGES", "TrackedList"]

#: Changes recorded one by one between two saves (beyond them, the lowest position changed).
MAX_CHANGES = 16
#: A change: at ``position`` (of the list as it stood), ``removed`` messages taken out and
#: ``added`` put in their place.
_Change = tuple[int, int, int]


class TrackedList(MutableSequence[Msg]):
    """A mutable list of ``Msg`` that records where it changed (see the module docstring)."""

    __slots__ = ("_changed_from", "_changes", "_edits", "_items", "_saved_as")

    def __init__(self, items: Iterable[Msg] = ()) -> None:
        self._items: list[Msg] = list(items)
        self._changed_from = 0  # positions before it are as last saved
        self._changes: list[_Change] | None = []  # since the last save, in order (None: too many)
        self._edits = 0  # counts changes, so a save can tell one made while it planned
        self._saved_as: tuple[Any, ...] | None = None  # what the last save committed it as

    # -- reading ------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> Msg: ...
    @overload
    def __getitem__(self, index: slice) -> list[Msg]: ...
    def __getitem__(self, index: int | slice) -> Msg | list[Msg]:
        return self._items[index]

    def __iter__(self) -> Iterator[Msg]:
        return iter(self._items)

    def __contains__(self, value: object) -> bool:
        return value in self._items

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TrackedList):
            return self._items == other._items
        if isinstance(other, list | tuple):
            return self._items == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"TrackedList({self._items!r})"

    def copy(self) -> list[Msg]:
        return list(self._items)

    @property
    def changed_from(self) -> int:
        """The lowest position changed since the list was last saved (its length when nothing
        was): the messages before it are the ones that save committed. Before any save it is
        0, as for a list whose saves all failed since it was made."""
        return self._changed_from

    @property
    def edits(self) -> int:
        """How many changes the list has had since it was made: the same count at two moments
        means it did not change between them (a caller that notes it at each save can tell
        whether anything is left to save)."""
        return self._edits

    # -- changing -----------------------------------------------------------------------------
    def _touch(self, position: int, removed: int, added: int) -> None:
        """Record a change just made (a ``_Change``)."""
        self._edits += 1
        if position < self._changed_from:
            self._changed_from = max(position, 0)
        changes = self._changes
        if changes is not None:
            if len(changes) < MAX_CHANGES:
                changes.append((position, removed, added))
            else:
                self._changes = None

    def _reshaped(self, position: int) -> None:
        """Record a change from ``position`` on that moved or replaced messages in a pattern
        no ``_Change`` describes (a sort, a reverse, a slice with a step)."""
        self._touch(position, 0, 0)
        self._changes = None

    def _position(self, index: int) -> int:
        return index + len(self._items) if index < 0 else index

    @overload
    def __setitem__(self, index: int, value: Msg) -> None: ...
    @overload
    def __setitem__(self, index: slice, value: Iterable[Msg]) -> None: ...
    def __setitem__(self, index: int | slice, value: Any) -> None:
        before = len(self._items)
        if not isinstance(index, slice):
            position = self._position(index)
            self._items[index] = value
            self._touch(position, 1, 1)
            return
        start, stop, step = index.indices(before)
        self._items[index] = value
        if step == 1:
            removed = max(stop - start, 0)
            self._touch(start, removed, len(self._items) - before + removed)
        elif len(range(start, stop, step)):
            self._reshaped(min(start, stop + 1) if step < 0 else start)

    def __delitem__(self, index: int | slice) -> None:
        before = len(self._items)
        if not isinstance(index, slice):
            position = self._position(index)
            del self._items[index]
            self._touch(position, 1, 0)
            return
        start, stop, step = index.indices(before)
        del self._items[index]
        if step == 1:
            self._touch(start, max(stop - start, 0), 0)
        elif len(range(start, stop, step)):
            self._reshaped(min(start, stop + 1) if step < 0 else start)

    def insert(self, index: int, value: Msg) -> None:
        position = min(max(self._position(index), 0), len(self._items))
        self._items.insert(index, value)
        self._touch(position, 0, 1)

    def append(self, value: Msg) -> None:
        self._items.append(value)
        self._touch(len(self._items) - 1, 0, 1)

    def extend(self, values: Iterable[Msg]) -> None:
        if values is self:  # read whole first, as ``list.extend`` does: it doubles the list
            values = list(self._items)
        start = len(self._items)
        try:
            self._items.extend(values)
        finally:  # an iterator that fails midway leaves what it gave appended
            self._touch(start, 0, len(self._items) - start)

    def __iadd__(self, values: Iterable[Msg]) -> TrackedList:  # type: ignore[override,misc]
        self.extend(values)
        return self

    def pop(self, index: int = -1) -> Msg:
        position = self._position(index)
        value = self._items.pop(index)
        self._touch(position, 1, 0)
        return value

    def clear(self) -> None:
        removed = len(self._items)
        self._items.clear()
        self._touch(0, removed, 0)

    def reverse(self) -> None:
        self._items.reverse()
        self._reshaped(0)

    def sort(self, **kwargs: Any) -> None:
        try:
            self._items.sort(**kwargs)
        finally:  # a comparison that fails midway leaves the list partly sorted
            self._reshaped(0)

    # -- for the ledger -----------------------------------------------------------------------
    def _kept(self, saved_as: tuple[Any, ...], saved_length: int) -> list[_Change] | None:
        """The runs of this list that hold, unchanged, the messages of the save described by
        ``saved_as`` (``saved_length`` of them), as ``(old_start, new_start, count)``
        ascending in both; None when this list was last saved as anything else."""
        if self._saved_as != saved_as:
            return None
        changes = self._changes
        if changes is None or saved_length + sum(a - r for _, r, a in changes) != len(self):
            unchanged = min(self._changed_from, saved_length, len(self))
            return [(0, 0, unchanged)] if unchanged else []
        runs = [(0, 0, saved_length)] if saved_length else []
        for change in changes:
            runs = _after(runs, *change)
        return runs

    def _mark_saved(self, saved_as: tuple[Any, ...], edits: int) -> None:
        """Record a save that read the list when it had had ``edits`` changes: unless it has
        changed since, every position is now as saved."""
        if self._edits == edits:
            self._saved_as = saved_as
            self._changed_from = len(self._items)
            self._changes = []
        else:
            self._saved_as = None


def _after(runs: list[_Change], position: int, removed: int, added: int) -> list[_Change]:
    """``runs`` (``(old_start, new_start, count)``) after a change at ``position``: the runs
    before it stay, those after it move by what it added less what it removed, and a run it
    cuts keeps its two ends."""
    out = []
    cut = position + removed
    for old, new, count in runs:
        end = new + count
        if end <= position:
            out.append((old, new, count))
        elif new >= cut:
            out.append((old, new + added - removed, count))
        else:
            if new < position:
                out.append((old, new, position - new))
            if end > cut:
                out.append((old + cut - new, position + added, end - cut))
    return out
