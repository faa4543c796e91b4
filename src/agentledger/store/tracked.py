"""``TrackedList``: a session's list that knows which of its messages changed since it was saved.

A save of a plain list compares it with what was committed, and the part that did not change
still costs a comparison per message (C-level, but each one touches the message's memory: about
5 µs per thousand messages). That is what keeps a 12,000-message append from costing what a
12-message one does. A ``TrackedList`` (from ``Ledger.tracked``) records the lowest position any
of its methods changed; the ledger then compares only from there, so appending, editing the
last message or saving an unchanged list costs the same at any length.

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

__all__ = ["TrackedList"]


class TrackedList(MutableSequence[Msg]):
    """A mutable list of ``Msg`` that records where it changed (see the module docstring)."""

    __slots__ = ("_changed_from", "_edits", "_items", "_saved_as")

    def __init__(self, items: Iterable[Msg] = ()) -> None:
        self._items: list[Msg] = list(items)
        self._changed_from = 0  # positions before it are as last saved
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

    # -- changing -----------------------------------------------------------------------------
    def _touch(self, position: int) -> None:
        self._edits += 1
        if position < self._changed_from:
            self._changed_from = max(position, 0)

    def _first(self, index: int | slice) -> int:
        """The lowest position ``index`` addresses now."""
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self._items))
            return min(start, stop) if step > 0 else min(stop + 1, start)
        return index + len(self._items) if index < 0 else index

    @overload
    def __setitem__(self, index: int, value: Msg) -> None: ...
    @overload
    def __setitem__(self, index: slice, value: Iterable[Msg]) -> None: ...
    def __setitem__(self, index: int | slice, value: Any) -> None:
        first = self._first(index)
        self._items[index] = value
        self._touch(first)

    def __delitem__(self, index: int | slice) -> None:
        first = self._first(index)
        del self._items[index]
        self._touch(first)

    def insert(self, index: int, value: Msg) -> None:
        first = min(max(self._first(index), 0), len(self._items))
        self._items.insert(index, value)
        self._touch(first)

    def append(self, value: Msg) -> None:
        self._items.append(value)
        self._touch(len(self._items) - 1)

    def extend(self, values: Iterable[Msg]) -> None:
        start = len(self._items)
        self._items.extend(values)
        self._touch(start)

    def __iadd__(self, values: Iterable[Msg]) -> TrackedList:  # type: ignore[override,misc]
        self.extend(values)
        return self

    def pop(self, index: int = -1) -> Msg:
        first = self._first(index)
        value = self._items.pop(index)
        self._touch(first)
        return value

    def clear(self) -> None:
        self._items.clear()
        self._touch(0)

    def reverse(self) -> None:
        self._items.reverse()
        self._touch(0)

    def sort(self, **kwargs: Any) -> None:
        self._items.sort(**kwargs)
        self._touch(0)

    # -- for the ledger -----------------------------------------------------------------------
    def _unchanged_prefix(self, saved_as: tuple[Any, ...]) -> int:
        """How many leading messages are as the save described by ``saved_as`` left them (0
        when this list was last saved as anything else)."""
        return self._changed_from if self._saved_as == saved_as else 0

    def _mark_saved(self, saved_as: tuple[Any, ...], edits: int) -> None:
        """Record a save that read the list when it had had ``edits`` changes: unless it has
        changed since, every position is now as saved."""
        if self._edits == edits:
            self._saved_as = saved_as
            self._changed_from = len(self._items)
        else:
            self._saved_as = None
