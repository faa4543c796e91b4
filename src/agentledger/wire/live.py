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
each dict is still pickled on every call (about 2 ms per 1,000 chat messages here), and the
messages reused are the very objects the ledger saved last, which its planner compares by
identity. Because ids follow content and occurrence, not position, a list whose oldest
messages were dropped or summarised, or that had one inserted at the front, converts to the
messages it held, and a save writes what was added. The price is memory: a converter keeps the
pickles of its list's dicts, about the size of the list's JSON.
"""

from __future__ import annotations

import pickle
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
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

_pickled = partial(pickle.dumps, protocol=5)


class LiveConverter:
    """Converts one live list (``Msg``, chat dicts and Responses items, mixed), call after call,
    reusing what the previous calls made for each dict that converts to it again (see the
    module docstring). Safe to share between threads: calls take turns.

    Two ways to reuse, both by fingerprint: the items up to the first one that differs from
    the last call's list keep that call's messages at once (an append converts only what it
    appended); each item after it finds its message by what decides it (``_Key``).
    """

    __slots__ = ("_calls", "_entries", "_facts", "_keys", "_lock", "_made", "_marks", "_out")

    def __init__(self) -> None:
        # per item of the last call's list:
        self._marks: list[Any] = []  # fingerprint (the Msg itself for a message)
        self._out: list[Msg] = []  # message
        self._keys: list[bytes | None] = []  # content key of its derived id
        self._calls: list[_Calls] = []  # the calls it makes
        self._entries: list[_Key | None] = []  # where ``_made`` has it
        # by fingerprint, from the calls so far (pruned to the last call's list when large):
        self._facts: dict[bytes, _Facts] = {}
        self._made: dict[_Key, tuple[Msg, _Calls]] = {}
        self._lock = threading.Lock()

    def convert(self, items: Iterable[Msg | Mapping[str, Any]]) -> list[Msg]:
        """The messages of ``items``, in order: exactly ``from_live_items(items)``."""
        items = list(items)
        with self._lock:
            return self._convert(items)

    def _convert(self, items: list[Msg | Mapping[str, Any]]) -> list[Msg]:
        marks = _marks(items)
        same = _common_prefix(marks, self._marks)
        out, keys, calls = self._out[:same], self._keys[:same], self._calls[:same]
        entries = self._entries[:same]
        occurrences = Occurrences(Counter(key for key in keys if key is not None))
        names: dict[str, str] = {}  # call id -> tool name, over the list so far
        for made in calls:
            if made:
                names.update(made)
        for index in range(same, len(items)):
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
        self._marks, self._out, self._keys, self._calls, self._entries = (
            marks,
            out,
            keys,
            calls,
            entries,
        )
        if len(self._made) > 2 * len(items) + _RUN:
            self._prune()
        return list(out)

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


def _marks(items: Sequence[Any]) -> list[Any]:
    """Each item's fingerprint: its pickle (every key in order, every value with its exact
    type) for a dict, the ``Msg`` itself for a message, and for a dict pickle refuses an
    object equal to nothing, so it is converted every time."""
    try:
        return [x if isinstance(x, Msg) else _pickled(x) for x in items]
    except Exception:  # some dict cannot be pickled: find which, item by item
        return [_mark(x) for x in items]


def _mark(x: Any) -> Any:
    if isinstance(x, Msg):
        return x
    try:
        return _pickled(x)
    except Exception:  # any object pickle refuses
        return object()


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
