"""Converting a caller's live list again and again (``Ledger.sync``) at the cost of what changed.

A loop that keeps its conversation as chat dicts or Responses items hands ``sync`` the whole
list every turn. Converting every dict again (checking and freezing it, hashing its content
for its id) cost 226 ms a call at 12,000 messages, and the messages it made were new objects,
so the save then digested every one of them again. A ``LiveConverter`` remembers, for one list,
what its last call made, and reuses a message for a dict that converts to it again.

What decides a dict's message, and so the key it is remembered by:

- the dict itself, by its *fingerprint*: its ``pickle``, which holds every key in order and
  every value with its exact type (``1``, ``1.0`` and ``True`` differ, as do a ``str`` and a
  ``str`` subclass, a list and a tuple), so a dict the caller changed in place, in any way,
  never finds the message it converted to before. A dict pickle refuses is converted every
  time;
- which occurrence of its content it is (the id of a dict without one; ``Occurrences``);
- for a tool result, the name its call gave (a call earlier in the list, in any format).

Nothing is decided by object identity, and nothing is trusted that the fingerprint does not
show: a list rebuilt from scratch, copied, or edited in place converts to exactly the messages
``from_live_items`` makes of it (a property test checks this). What it saves is the conversion:
each dict is still fingerprinted on every call, and the messages reused are the very objects
the ledger saved last, which its planner compares by identity. Because ids follow content and
occurrence, not position, a list whose oldest messages were dropped or summarised, or that had
one inserted at the front, converts to the messages it held, and a save writes what was added.

Dicts are pickled ``_CHUNK`` at a time where they can be (one pickle of 64 dicts costs about
half what 64 pickles do, and is one comparison): the converter keeps the pickles of its last
list's chunks by where they start, and walks the new list against the last one at an offset
(``_fingerprints``). Where a new item sits at the start of one of the last list's chunks, under
the offset, the chunk's items are pickled at once; an equal pickle means equal dicts, each with
the fingerprint it had then (a pickle records the whole graph of its objects, so equal pickles
of two chunks are equal pickles of each of their dicts). Anywhere else an item is pickled alone
and compared with the last list's item under the offset; two unequal in a row (dicts dropped,
inserted, replaced) move the offset to where the second sits in the last list, if it does. So
the chunks follow their dicts: after a window, an insert at the front or a delete they line up
again a chunk further on, and a list's new stretches are chunked for the next call. What is
counted over the unchanged items (occurrences of each content, the names of the calls made) is
carried from the last call, less what it dropped, not counted again.

The price is memory: a converter keeps the pickles of its list's dicts and of its chunks, about
twice the size of the list's JSON (``weight``).
"""

from __future__ import annotations

import pickle
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from itertools import chain, compress, repeat
from operator import or_
from typing import Any

from agentledger.errors import UserError
from agentledger.messages.msg import Msg
from agentledger.wire.openai import OPENAI_ID_PREFIX, from_dict
from agentledger.wire.private import Occurrences
from agentledger.wire.responses import RESPONSES_ID_PREFIX, from_item, is_responses_item

__all__ = ["LiveConverter"]

#: What a dict's fingerprint says about it: its content key if it took an id derived from it
#: (None: it brings its own id).
_Facts = bytes | None
#: What a converted dict is remembered by: fingerprint, occurrence (-1: its own id), the names
#: of the calls it may answer, by ``tool_call_id`` and by ``call_id``.
_Key = tuple[bytes, int, str | None, str | None]
#: The (call id, tool name) of the calls a message makes.
_Calls = tuple[tuple[str, str], ...]
#: Items compared at once when looking for where a list stopped being what it was.
_RUN = 256
#: Dicts pickled at once when looking for where a list stopped being what it was.
_CHUNK = 64

#: Items of this list looked at for where the last list's items went (``_moved_run``).
_SEEK = 8
#: Items looked up in the last list one by one (in C) before its positions are indexed.
_SEARCHES = 8
#: The shortest run of the last list's items whose state is taken whole once moved.
_MOVED_RUN = 64
_NO_REFS: frozenset[str] = frozenset()

_pickled = partial(pickle.dumps, protocol=5)


class LiveConverter:
    """Converts one live list (``Msg``, chat dicts and Responses items, mixed), call after call,
    reusing what the previous calls made for each dict that converts to it again (see the
    module docstring). Safe to share between threads: calls take turns.

    Two ways to reuse, both by fingerprint: the items up to the first one that differs from
    the last call's list keep that call's messages at once (an append converts only what it
    appended); each item after it finds its message by what decides it (``_Key``).
    """

    __slots__ = (
        "_calls",
        "_chunks",
        "_entries",
        "_facts",
        "_keys",
        "_lock",
        "_made",
        "_marks",
        "_names",
        "_out",
        "_seen",
        "_weight",
    )

    def __init__(self) -> None:
        # per item of the last call's list:
        self._marks: list[Any] = []  # fingerprint (the Msg itself for a message)
        self._out: list[Msg] = []  # message
        self._keys: list[bytes | None] = []  # content key of its derived id
        self._calls: list[_Calls] = []  # the calls it makes
        self._entries: list[_Key | None] = []  # where ``_made`` has it
        # the last call's list's chunks, by the position they start at: their pickles
        self._chunks: dict[int, bytes] = {}
        # over the whole of the last call's list: occurrences of each content key, and the tool
        # name of each call id (the last call to use it)
        self._seen: Mapping[bytes, int] = {}
        self._names: dict[str, str] = {}
        self._weight = 0
        # by fingerprint, from the calls so far (pruned to the last call's list when large):
        self._facts: dict[bytes, _Facts] = {}
        self._made: dict[_Key, tuple[Msg, _Calls]] = {}
        self._lock = threading.Lock()

    def convert(self, items: Iterable[Msg | Mapping[str, Any]]) -> list[Msg]:
        """The messages of ``items``, in order: exactly ``from_live_items(items)``."""
        items = list(items)
        with self._lock:
            return self._convert(items)

    @property
    def weight(self) -> int:
        """About how many bytes this converter holds (the fingerprints of its list)."""
        return self._weight

    def _convert(self, items: list[Msg | Mapping[str, Any]]) -> list[Msg]:
        marks, chunks = _fingerprints(items, self._marks, self._chunks)
        same = _common_prefix(marks, self._marks)
        out, keys, calls = self._out[:same], self._keys[:same], self._calls[:same]
        entries = self._entries[:same]
        occurrences = Occurrences(self._seen_before(same))
        names = self._names_before(same)  # call id -> tool name, over the list so far
        moved = _moved_run(marks, self._marks, same)
        names_at_same = dict(names) if moved is not None else names
        parts: list[tuple[int, int, int]] = []  # of the moved run, to take whole
        index = same
        while index < len(items):
            if moved is not None and index == moved[0]:
                parts = self._unchanged_parts(
                    items, moved, same, (keys, calls), names, names_at_same
                )
                moved = None
            if parts and index == parts[0][0]:
                _, there, length = parts.pop(0)
                end = there + length
                out += self._out[there:end]
                keys += self._keys[there:end]
                calls += self._calls[there:end]
                entries += self._entries[there:end]
                occurrences.add(filter(None, self._keys[there:end]))
                _name_calls(names, self._calls[there:end])
                index += length
                continue
            x, mark = items[index], marks[index]
            entry: _Key | None = None
            if isinstance(x, Msg):
                msg, key, made = x, None, tuple((c.id, c.name) for c in x.tool_calls)
            elif not isinstance(x, Mapping):
                raise UserError(f"message {index} is a {type(x).__name__}, not a Msg or a mapping")
            else:
                msg, key, made, entry = self._message(x, index, mark, names, occurrences)
            out.append(msg)
            keys.append(key)
            calls.append(made)
            entries.append(entry)
            if made:
                names.update(made)
            index += 1
        self._marks, self._out, self._keys, self._calls = marks, out, keys, calls
        self._entries = entries
        self._chunks, self._seen, self._names = chunks, occurrences.seen, names
        self._weight = _weight(marks, chunks)
        if len(self._made) > 2 * len(items) + _RUN:
            self._prune()
        return list(out)

    def _seen_before(self, same: int) -> Mapping[bytes, int]:
        """How many of the last list's first ``same`` items took each content key: its
        counts less those of the items after them (counted afresh, in C, unless those are
        few)."""
        dropped = self._keys[same:]
        if 4 * len(dropped) > same:  # counting afresh is in C, taking away is not
            return Counter(filter(None, self._keys[:same]))
        seen = dict(self._seen)
        for key in dropped:
            if key is not None:
                left = seen.pop(key) - 1
                if left:
                    seen[key] = left
        return seen

    def _names_before(self, same: int) -> dict[str, str]:
        """The tool name of each call id made by the last list's first ``same`` items (the
        last call to use an id names it)."""
        if not any(self._calls[same:]):  # the items after them made no calls
            return dict(self._names)
        return _name_calls({}, self._calls[:same])

    def _unchanged_parts(
        self,
        items: list[Any],
        moved: tuple[int, int, int],
        same: int,
        made: tuple[list[bytes | None], list[_Calls]],
        names: dict[str, str],
        names_at_same: dict[str, str],
    ) -> list[tuple[int, int, int]]:
        """The parts of ``moved`` (``_moved_run``: the last list's items from index ``there``,
        ``length`` of them, now from ``here``) whose items convert to the messages they did,
        as ``(index here, index there, length)``. ``items`` is this list, ``same`` how many
        items it begins with as the last one did; ``made`` the content keys and calls of its
        items before ``here``, ``names`` their call names, ``names_at_same`` those of the first
        ``same``.

        An item converts as before unless what left or came before the run changes what it
        takes: the occurrence of its content (its derived id), or the tool of a call it
        answers. A content counted differently before the run stays so along it (each item of
        it adds one on both sides), and so does a call id named differently, so the items they
        touch are found at once and converted one by one; the parts between are taken whole.
        Both lists begin with the same ``same`` items, so the counts and names before the run
        differ only by what stands between those and the run: what left (the last list's
        items ``same .. there``) and what came (this list's ``same .. here``).
        """
        here, there, length = moved
        keys, calls = made
        left = Counter(filter(None, self._keys[same:there]))
        came = Counter(filter(None, keys[same:here]))
        counted = {k for k in left.keys() | came.keys() if left[k] != came[k]}
        named_then = _name_calls({}, self._calls[same:there])
        named_now = _name_calls({}, calls[same:here])
        renamed = {
            c
            for c in named_then.keys() | named_now.keys()
            if names.get(c) != named_then.get(c, names_at_same.get(c))
        }
        touched: list[int] = []
        if counted:
            run_keys = self._keys[there : there + length]
            touched += compress(range(length), map(counted.__contains__, run_keys))
        if renamed:
            touched += _answering(items[here : here + length], renamed)
        parts, start = [], 0
        for i in [*sorted(set(touched)), length]:
            if i > start:
                parts.append((here + start, there + start, i - start))
            start = i + 1
        return parts

    def _message(
        self,
        x: Mapping[str, Any],
        index: int,
        mark: Any,
        names: dict[str, str],
        occurrences: Occurrences,
    ) -> tuple[Msg, bytes | None, _Calls, _Key | None]:
        """Dict ``x``'s message: the one made before of it, where it makes the same again, else
        converted now; with the content key of its derived id, the calls it makes and where
        ``_made`` keeps it (None: it cannot be fingerprinted)."""
        chat, responses = x.get("tool_call_id"), x.get("call_id")
        answers = (
            names.get(chat) if isinstance(chat, str) else None,
            names.get(responses) if isinstance(responses, str) else None,
        )
        fingerprinted = isinstance(mark, bytes)
        known = self._facts.get(mark) if fingerprinted else None  # its content key, if seen
        if fingerprinted and mark in self._facts:
            entry: _Key = (mark, -1 if known is None else occurrences.next_of(known), *answers)
            found = self._made.get(entry)
            if found is not None:
                if known is not None:
                    occurrences.take(known)
                return found[0], known, found[1], entry
        taken: list[tuple[bytes, int]] = []
        is_item = is_responses_item(x)
        prefix, kind = (RESPONSES_ID_PREFIX, "item") if is_item else (OPENAI_ID_PREFIX, "message")

        def derived_id() -> str:
            made_id, key, n = occurrences.derive(prefix, x, f"{kind} {index}", known)
            taken.append((key, n))
            return made_id

        msg = (from_item if is_item else from_dict)(x, index, names, derived_id)
        made = tuple((call.id, call.name) for call in msg.tool_calls)
        key, occurrence = taken[0] if taken else (None, -1)
        if not fingerprinted:
            return msg, key, made, None
        entry = (mark, occurrence, *answers)
        self._facts[mark] = key
        self._made[entry] = (msg, made)
        return msg, key, made, entry

    def _prune(self) -> None:
        """Forget what no item of the last call's list holds."""
        self._made = {e: self._made[e] for e in self._entries if e is not None}
        self._facts = {e[0]: self._facts[e[0]] for e in self._made}


def _name_calls(names: dict[str, str], calls: list[_Calls]) -> dict[str, str]:
    """``names`` with the tool of each call id the items of ``calls`` made (the last to use an
    id names it)."""
    names.update(chain.from_iterable(calls))  # (call id, tool) pairs, in C
    return names


def _answering(run: list[Any], ids: set[str]) -> list[int]:
    """The positions in ``run`` of the items that may answer a call of ``ids`` (``_answers``):
    looked up in C when every item is a plain dict (a run can be the whole list), else item
    by item."""
    if set(map(type, run)) == {dict}:
        try:
            chat = map(ids.__contains__, map(dict.get, run, repeat("tool_call_id")))
            responses = map(ids.__contains__, map(dict.get, run, repeat("call_id")))
            return list(compress(range(len(run)), map(or_, chat, responses)))
        except TypeError:  # a value a set cannot look up (unhashable): ``_answers`` decides
            pass
    return [i for i, x in enumerate(run) if _answers(x) & ids]


def _answers(x: Any) -> frozenset[str]:
    """The call ids an item may answer (a dict, as a chat tool message or a Responses output;
    a ``Msg`` is taken as it is)."""
    if not isinstance(x, Mapping):
        return _NO_REFS
    chat, responses = x.get("tool_call_id"), x.get("call_id")
    if not isinstance(chat, str) and not isinstance(responses, str):
        return _NO_REFS
    return frozenset(c for c in (chat, responses) if isinstance(c, str))


def _moved_run(new: list[Any], old: list[Any], same: int) -> tuple[int, int, int] | None:
    """Where, past their common start (``same`` items), a run of at least ``_MOVED_RUN`` of the
    last list's items reappears in this one: ``(start here, start there, length)``, looked for
    from each of this list's next ``_SEEK`` items (an insert before the run, an edit, a front
    dropped: a window, a summary); None if none does."""
    for start in range(same, min(same + _SEEK, len(new))):
        mark = new[start]
        if not isinstance(mark, bytes):
            continue
        try:
            there = old.index(mark, same)  # compared in C
        except ValueError:
            continue
        length = _common_prefix(new[start:], old[there:])
        if length >= _MOVED_RUN:
            return start, there, length
    return None


def _fingerprints(
    items: list[Any], old: list[Any], chunks: dict[int, bytes]
) -> tuple[list[Any], dict[int, bytes]]:
    """Each item's fingerprint (``_mark``), and the pickles of this list's chunks by where they
    start, found by walking ``items`` against the last list (its fingerprints ``old``, its
    chunks ``chunks``) at an offset, as the module docstring says. The chunks are those found
    equal, and new ones over every stretch of ``_CHUNK`` or more items that none covers."""
    n, size = len(items), _CHUNK
    marks: list[Any] = []
    found: dict[int, bytes] = {}
    offset = 0  # the last list's position of this list's item ``here``, less ``here``
    positions: dict[Any, int] | None = None  # of the last list's fingerprints, when needed
    missed = False  # the item before was unequal to the last list's under the offset
    searches = 0
    here = 0
    while here < n:
        there = here + offset
        was = chunks.get(there)
        if was is not None and here + size <= n:
            chunk = _chunk(items[here : here + size])
            if chunk == was:
                marks += old[there : there + size]
                found[here] = chunk
                here += size
                missed = False
                continue
        mark = _mark(items[here])
        marks.append(mark)
        if there >= len(old):  # past the last list's end: new items, nothing to line up
            pass
        elif there >= 0 and old[there] == mark:
            missed = False
        elif missed and isinstance(mark, bytes):
            searches += 1
            if searches <= _SEARCHES:  # a shift is found at once: look it up in C
                seen_at = _index(old, mark)
            else:  # many: index the last list once (the last of repeats)
                if positions is None:
                    positions = dict(zip(old, range(len(old))))
                seen_at = positions.get(mark)
            if seen_at is not None:
                offset, missed = seen_at - here, False
        else:
            missed = True
        here += 1
    return marks, _with_new_chunks(items, found)


def _index(items: list[Any], item: Any) -> int | None:
    """Where ``item`` first is in ``items`` (None: nowhere), compared in C."""
    try:
        return items.index(item)
    except ValueError:
        return None


def _with_new_chunks(items: list[Any], found: dict[int, bytes]) -> dict[int, bytes]:
    """``found`` (chunk start -> pickle) with chunks pickled over each stretch of ``items`` it
    does not cover, as many full chunks as fit, from the stretch's start."""
    size = _CHUNK
    out: dict[int, bytes] = {}
    start = 0
    for begin in [*sorted(found), len(items)]:
        while start + size <= begin:
            chunk = _chunk(items[start : start + size])
            if chunk is not None:
                out[start] = chunk
            start += size
        if begin < len(items):
            out[begin] = found[begin]
            start = begin + size
    return out


def _weight(marks: list[Any], chunks: dict[int, bytes]) -> int:
    """About the bytes a converter holds: its chunks' pickles and the fingerprints of the
    items they cover (about as large), and those of the items no chunk covers."""
    covered = 2 * sum(map(len, chunks.values()))
    size, loose, start = _CHUNK, 0, 0
    for begin in [*sorted(chunks), len(marks)]:
        loose += sum(len(m) for m in marks[start:begin] if isinstance(m, bytes))
        start = begin + size
    return covered + loose


def _mark(x: Any) -> Any:
    """An item's fingerprint: its pickle (every key in order, every value with its exact type)
    for a dict, the ``Msg`` itself for a message, and for a dict pickle refuses an object equal
    to nothing, so it is converted every time."""
    if isinstance(x, Msg):
        return x
    try:
        return _pickled(x)
    except Exception:  # any object pickle refuses
        return object()


def _chunk(items: Sequence[Any]) -> bytes | None:
    """One pickle of a run of dicts; None, equal to nothing, for a run holding a message (a
    ``Msg`` is compared by content, not pickled) or one pickle refuses."""
    if any(issubclass(kind, Msg) for kind in set(map(type, items))):
        return None
    try:
        return _pickled(items)
    except Exception:  # any object pickle refuses
        return None


def _common_prefix(new: list[Any], old: list[Any]) -> int:
    """How many leading items of ``new`` and ``old`` are equal (fingerprints compared as bytes,
    messages by content), compared ``_RUN`` at a time in C."""
    limit = min(len(new), len(old))
    done = 0
    while done < limit:
        step = min(_RUN, limit - done)
        if new[done : done + step] == old[done : done + step]:
            done += step
            continue
        while new[done] == old[done]:
            done += 1
        return done
    return done
