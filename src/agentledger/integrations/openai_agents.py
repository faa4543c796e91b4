"""``LedgerSession``: an OpenAI Agents SDK session kept in a ledger.

The SDK (``openai-agents``) keeps a conversation as a list of Responses-API items and asks a
``Session`` for four things: ``get_items(limit)``, ``add_items``, ``pop_item`` and
``clear_session``. ``LedgerSession`` answers them from a ``Ledger`` (or an ``AsyncLedger``'s),
one message per item (``wire.responses``), so:

- every item comes back as it went in, key for key: message, call and reasoning ids,
  ``call_id`` s, ``encrypted_content``, the model's argument strings, item kinds this code does
  not know; but for keys starting with ``_`` at the top of an item or a content part, which
  are the caller's private metadata: kept with the message (``ledger.messages``), never given
  back, since the SDK would send them to the API (the converters' own such names are refused);
- ``add_items`` goes through the ledger's incremental save: it writes only the new rows, and
  does no work per item already stored (the session keeps its list as a ``TrackedList``, so the
  save compares only what it added);
- ``get_items`` converts each message to its items once: the session keeps the items' JSON by
  message digest and decodes it on later calls (fresh dicts every time, so a caller may change
  what it gets). The Runner reads the whole session on every turn; at 12,000 items that read is
  msgspec decoding, not 12,000 conversions. It costs about the items' JSON size in memory.
  The sessions on one ledger also share what they converted, up to 64 MiB (``_Conversions``),
  so a session made for each request, on a ledger the process keeps open (which remembers the
  messages it loaded, decoded), does not convert the whole conversation again;
- ``set_items`` (beyond the protocol) edits a history at the cost of what it changes: an item
  equal to one the session holds keeps that one's message wherever it moved, so a shift (a
  window, an insert, a delete, a summary) writes only the new items, with ids or without; a
  message that gives no item (another provider's thinking alone), which no caller can give
  back, goes with the item before it, as it does in ``pop_item``;
- ``pop_item`` and ``clear_session`` commit a new version rather than delete: what they remove
  stays readable with ``ledger.load(session_id, version=v)`` (and ``ledger.history``) until the
  session's history is purged;
- several sessions, processes or hosts may share one session id: each change is planned against
  the version it read and re-applied to a newer one if another writer committed first.

Every call runs in a worker thread, so the event loop never waits on the store; a call whose
caller is cancelled once its work started in the thread still finishes its commit, and the
session's view follows it (one cancelled while it waited for a thread does nothing). After
``close()`` every call raises ``ClosedError`` (a ``RuntimeError``, as the SDK's sessions raise).
"""

from __future__ import annotations

import asyncio
import bisect
import hashlib
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import msgspec

from agentledger._optional import require
from agentledger.errors import ClosedError, ConflictError, UserError
from agentledger.messages import Msg
from agentledger.store.aio import AsyncLedger
from agentledger.store.ledger import Ledger
from agentledger.store.state import CONTEXT
from agentledger.store.tracked import TrackedList
from agentledger.wire.responses import (
    RESPONSES_EXTRA_KEY,
    answered_tools,
    from_responses,
    to_responses,
)

__all__ = ["LedgerSession"]

_T = TypeVar("_T")
_sorted_json = msgspec.json.Encoder(order="sorted")
_items_json = msgspec.json.Encoder()
_decode_items = msgspec.json.Decoder(list[dict[str, Any]]).decode
_decode_json = msgspec.json.Decoder().decode
#: How often one change is re-planned after losing a race with another writer.
_MAX_ATTEMPTS = 50


class _Conversions:
    """What the ``LedgerSession`` s on one ledger have converted, by message digest: the JSON of
    the items a message gives, and the hash of the item a message was made from or gives.

    A message's items depend on nothing but the message, which its digest names, so sessions
    (of any tenant) can share them. A server that makes a session for each request, on one
    ledger it keeps open, finds the messages already decoded by the ledger and their items
    here: at 12,000 items the first ``get_items`` of such a session decodes kept JSON instead of
    converting every message. Kept up to ``budget`` bytes (the JSON, plus ``ENTRY_BYTES`` an
    entry), the oldest dropped first; a session keeps its own entries for as long as it holds
    their messages, so a conversation larger than the budget is still converted once a session.
    """

    #: What an entry costs besides its JSON: the digest, the dict slot, the bytes header.
    ENTRY_BYTES = 160
    #: The budget of a ledger's ``_Conversions``.
    BUDGET = 64 * 2**20

    def __init__(self, budget: int = BUDGET) -> None:
        self.budget = budget
        self.size = 0
        self._lock = threading.Lock()
        self._items: OrderedDict[bytes, bytes] = OrderedDict()
        self._hashes: OrderedDict[bytes, bytes] = OrderedDict()

    @classmethod
    def of(cls, ledger: Ledger) -> _Conversions:
        """The conversions shared by the sessions on ``ledger`` (made on first use)."""
        with _shared_lock:
            found = _shared.get(ledger)
            if found is None:
                found = _shared[ledger] = cls()
            return found

    def items(self, digest: bytes) -> bytes | None:
        return self._items.get(digest)

    def item_hash(self, digest: bytes) -> bytes | None:
        return self._hashes.get(digest)

    def keep_items(self, digest: bytes, raw: bytes) -> None:
        self._keep(self._items, digest, raw)

    def keep_hash(self, digest: bytes, item_hash: bytes) -> None:
        self._keep(self._hashes, digest, item_hash)

    def _keep(self, kept: OrderedDict[bytes, bytes], digest: bytes, value: bytes) -> None:
        with self._lock:
            if digest in kept:
                return
            kept[digest] = value
            self.size += len(value) + self.ENTRY_BYTES
            while self.size > self.budget:
                oldest = self._items or self._hashes  # the JSON first: it is most of the size
                _, dropped = oldest.popitem(last=False)
                self.size -= len(dropped) + self.ENTRY_BYTES


_shared: weakref.WeakKeyDictionary[Ledger, _Conversions] = weakref.WeakKeyDictionary()
_shared_lock = threading.Lock()


class LedgerSession:
    """An Agents SDK ``Session`` over a ledger (see the module docstring).

    ``ledger`` is a ``Ledger``, an ``AsyncLedger`` or a store URL (``"sqlite:///chat.db"``; the
    session then owns the ledger it opens and ``close()`` closes it; a ledger passed in stays
    open for its other users). ``tenant`` defaults to the
    ledger's; ``list_name`` is the session list that holds the items. ``session_settings`` is the
    SDK's ``SessionSettings`` (or a dict of it; default: ``SessionSettings()``, as for the SDK's
    sessions); its ``limit`` applies when ``get_items`` is given none.
    """

    def __init__(
        self,
        session_id: str,
        ledger: Ledger | AsyncLedger | str | None = None,
        *,
        tenant: str | None = None,
        list_name: str = CONTEXT,
        session_settings: Any = None,
    ) -> None:
        memory = require("agents.memory.session_settings", "openai-agents")
        if ledger is not None and not isinstance(ledger, (Ledger, AsyncLedger, str)):
            raise UserError(
                "ledger must be a Ledger, an AsyncLedger or a store URL, "
                f"got {type(ledger).__name__}"
            )
        self._owns_ledger = not isinstance(ledger, (Ledger, AsyncLedger))
        if isinstance(ledger, AsyncLedger):
            ledger = ledger.sync
        self.ledger: Ledger = ledger if isinstance(ledger, Ledger) else Ledger(ledger)
        self.tenant = self.ledger.key(session_id, tenant).tenant  # validates both ids
        self.session_id = session_id
        self.list_name = list_name
        self.session_settings = _settings(memory, session_settings)
        self._resolve_limit = memory.resolve_session_limit
        self._lock = threading.Lock()
        self._msgs = TrackedList()  # as last committed, changed only by ``_change``
        self._shared = _Conversions.of(self.ledger)
        # message digest -> hash of the item it was made from or written as, so ``set_items``
        # recognises unchanged items without converting them (16 bytes an item)
        self._hashes: dict[bytes, bytes] = {}
        # message digest -> the JSON of the items it gives (see the module docstring)
        self._items: dict[bytes, bytes] = {}
        self._version = -1  # nothing read yet
        self._closed = False
        self._ledger_closed = False  # set once ``close()`` closed the ledger this session owns

    # -- the Session protocol --------------------------------------------------------------
    async def get_items(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The session's items, oldest first; with ``limit``, only the latest ``limit`` (a
        negative one is no limit, as for the SDK's ``SQLiteSession``)."""
        self._check_open()
        if limit is not None and not isinstance(limit, int):
            raise UserError(f"get_items: limit must be an int or None, got {type(limit).__name__}")
        limit = self._resolve_limit(limit, self.session_settings)
        return await asyncio.to_thread(self._locked, lambda: self._tail(limit))

    async def add_items(self, items: list[Any]) -> None:
        """Append ``items`` (written as new rows only). An item without an id gets a new one;
        an output added after its call, by an earlier call, is named after that call."""
        self._check_open()  # before the empty list's shortcut, as the SDK's sessions do
        items = _item_list(items, "add_items")
        if not items:
            return

        def append(msgs: TrackedList) -> None:
            new = from_responses(items, names=_earlier_calls(items, msgs))
            self._remember(new, items)
            msgs.extend(new)

        await asyncio.to_thread(self._change, append)

    async def pop_item(self) -> dict[str, Any] | None:
        """Remove and return the latest item (None if there is none), as a new version."""
        self._check_open()
        return await asyncio.to_thread(self._change, _pop)

    async def clear_session(self) -> None:
        """Empty the session, as a new version (earlier versions stay readable)."""
        self._check_open()
        await asyncio.to_thread(self._change, TrackedList.clear)

    # -- beyond the protocol ---------------------------------------------------------------
    async def set_items(self, items: list[Any]) -> None:
        """Make the session hold exactly ``items``, writing only the items that changed.

        The SDK's protocol can only append, pop and clear, so an edit in the middle of a
        history (a shortened tool output, a redacted message, a window that drops the oldest
        turn, a summary in place of a prefix) otherwise means clearing and adding everything
        again. Each item equal to one the session holds keeps that one's message, wherever it
        moved (the ``n``-th of equal items takes the ``n``-th), so the save writes only the
        items that are new or edited. An edited item without an id of its own keeps the id of
        the item it replaces in place. What is replaced stays readable at the previous version.

        A message that gives no item (another provider's thinking alone, an empty answer),
        which ``get_items`` never shows and so no caller can give back, goes with the item
        before it (those before the first item, with the first), as in ``pop_item``: it is
        kept, beside that item's message, when that message is kept whole, and dropped with
        it otherwise. So an unchanged list writes nothing, and ``set_items([])`` empties the
        session.

        It is a write of what this session last read, edited: if another writer committed
        since (an item added by another process between the ``get_items`` the edit started
        from and this call), it raises ``ConflictError`` and changes nothing, where ``add_items``
        and the other calls apply their change again to the newer version. Read the items
        again and redo the edit.
        """
        self._check_open()
        items = _item_list(items, "set_items")

        def replace(live: TrackedList) -> None:
            hashes = [_item_hash(item) for item in items]
            keys = [_key(h, tool) for h, tool in zip(hashes, answered_tools(items), strict=True)]
            owners, spans, groups = _grouped(live, [self._span(m) for m in live])
            # the messages at each end whose items are given again as they were, kept whole:
            # one that gives several items (written by other code) too, which converting its
            # items again would lose part of (another provider's thinking, its metadata)
            (head, first), (tail, last) = _unchanged_ends(spans, keys)
            middle, mid_keys = items[first:last], keys[first:last]
            held_mid = owners[head : len(owners) - tail]
            held = _HeldItems(
                held_mid, [_key(self._hash_of(m), _answered(m)) for m in held_mid], mid_keys
            )
            new = from_responses(
                middle,
                start=first,
                names=_call_names(items[:first]),
                known=lambda i, _: held.take(i - first, mid_keys[i - first]),
            )
            held.lend_ids(new)
            self._remember(new, middle, hashes[first:last])
            live[:] = [
                *_flat(groups[:head]),
                *held.with_companions(new, groups[head : len(groups) - tail]),
                *_flat(groups[len(groups) - tail :]),
            ]

        await asyncio.to_thread(self._change, replace, False)

    # -- conveniences ----------------------------------------------------------------------
    @property
    def version(self) -> int:
        """The ledger version this session last read or wrote (0: nothing stored yet)."""
        return max(self._version, 0)

    def close(self) -> None:
        """Close the session: every later call raises ``ClosedError``, as the SDK's sessions
        do after ``close()``, rather than write to a store its owner thinks closed. The ledger
        is closed too if this session opened it (a ledger passed in stays open for its other
        users). It waits for a call already at work in its thread; closing again does nothing,
        but for closing an owned ledger whose first close failed."""
        with self._lock:
            self._closed = True
            if self._owns_ledger and not self._ledger_closed:
                self.ledger.close()
                self._ledger_closed = True

    # -- plumbing --------------------------------------------------------------------------
    def _check_open(self) -> None:
        """Refuse a call on a closed session (checked again under the lock, for a call that
        waited there while ``close()`` ran)."""
        if self._closed:
            raise ClosedError(f"LedgerSession {self.session_id!r} is closed")

    def _locked(self, read: Callable[[], _T]) -> _T:
        with self._lock:
            self._check_open()
            self._refresh()
            return read()

    def _refresh(self) -> None:
        """Re-read the list when another writer moved the session since we last saw it."""
        version = self.ledger.version(self.session_id, tenant=self.tenant)
        if version != self._version:
            state, self._msgs = self.ledger.load_tracked(
                self.session_id, self.list_name, tenant=self.tenant
            )
            self._version = state.version
            self._trim()

    def _remember(
        self, msgs: list[Msg], items: list[Any], hashes: list[bytes | None] | None = None
    ) -> None:
        """Note which item each message was made from (see ``_hashes``)."""
        digests = hashes if hashes is not None else map(_item_hash, items)
        known = self._hashes
        for msg, digest in zip(msgs, digests, strict=True):
            if digest is not None and known.get(msg.digest) != digest:
                known[msg.digest] = digest
                self._shared.keep_hash(msg.digest, digest)

    def _hash_of(self, msg: Msg) -> bytes | None:
        """The hash of the item ``msg`` gives (None if it gives several, none, or cannot be
        written as one), remembered: a message read from the store is converted once, by the
        first ``get_items`` or ``set_items`` that needs it, not by every reload."""
        digest = msg.digest
        known = self._hashes.get(digest)
        if known is not None:
            return known
        known = self._shared.item_hash(digest)
        if known is None:
            try:
                items = self._items_of(msg)
            except UserError:  # stored by other code; ``set_items`` may still replace it
                return None
            if len(items) != 1:
                return None
            known = _item_hash(items[0])
            if known is None:
                return None
            self._shared.keep_hash(digest, known)
        self._hashes[digest] = known
        return known

    def _span(self, msg: Msg) -> tuple[_Key, ...] | None:
        """The keys of the items ``msg`` gives (``_Key``), or None when one has none (an item
        JSON would not give back; a message no item can say)."""
        known = self._hash_of(msg)
        if known is not None:
            return (_key(known, _answered(msg)),)  # type: ignore[return-value]
        try:
            items = self._items_of(msg)
        except UserError:
            return None
        named = {r.id: r.name for r in msg.tool_results}  # what its outputs are named after
        keys = [_key(_item_hash(i), t) for i, t in zip(items, answered_tools(items, named))]
        return None if None in keys else tuple(keys)  # type: ignore[arg-type]

    def _items_of(self, msg: Msg) -> list[dict[str, Any]]:
        """The items ``msg`` gives, as new dicts: converted the first time, decoded from the
        JSON kept of them after that, when that JSON gives them back exactly (not when they
        hold bytes, say, from a message other code stored: JSON would give them as text)."""
        digest = msg.digest
        kept = self._items.get(digest)
        if kept is None:
            kept = self._shared.items(digest)
            if kept is not None:
                self._items[digest] = kept
        if kept is not None:
            return _decode_items(kept)
        items = to_responses([msg])
        raw = _items_json.encode(items)
        if _decode_items(raw) == items:
            self._items[digest] = raw
            self._shared.keep_items(digest, raw)
        return items

    def _tail(self, limit: int | None) -> list[dict[str, Any]]:
        if limit is None or limit < 0:
            return [item for msg in self._msgs for item in self._items_of(msg)]
        if limit <= 0:
            return []
        items: list[dict[str, Any]] = []
        for msg in reversed(self._msgs):  # a message from another format may give several
            items[:0] = self._items_of(msg)
            if len(items) >= limit:
                break
        return items[-limit:]

    def _change(self, change: Callable[[TrackedList], _T], again: bool = True) -> _T:
        """Apply ``change`` to the list as this session last saw it, in place, and commit the
        result at that version; if another writer committed since, the commit is refused, and
        the list is read again and the change applied again (``again``; else the refusal is
        raised). ``change`` changes the list only once nothing it does can fail. A commit that
        fails for any other reason leaves the list to be read again by the next call: it may
        hold what was not committed."""
        with self._lock:
            self._check_open()
            for _ in range(_MAX_ATTEMPTS):
                if self._version < 0:  # never read, or refused: the store is asked first
                    self._refresh()
                msgs = self._msgs
                result = change(msgs)
                try:
                    report = self.ledger.save(
                        self.session_id,
                        msgs,
                        name=self.list_name,
                        tenant=self.tenant,
                        expected_version=self._version,
                    )
                except ConflictError:
                    self._version = -1
                    if not again:
                        raise
                    continue
                except BaseException:
                    self._version = -1
                    raise
                self._version = report.version
                self._trim()
                return result
        raise ConflictError(
            f"session {self.session_id!r} kept changing under this writer "
            f"({_MAX_ATTEMPTS} attempts)"
        )

    def _trim(self) -> None:
        """Forget what is kept for messages the list let go, once they could be most of it."""
        if len(self._hashes) + len(self._items) <= 4 * len(self._msgs) + 128:
            return
        live = {m.digest for m in self._msgs}
        self._hashes = {k: v for k, v in self._hashes.items() if k in live}
        self._items = {k: v for k, v in self._items.items() if k in live}


def _settings(memory: Any, given: Any) -> Any:
    """The SDK's ``SessionSettings`` for ``given`` (one, a dict of one, or None: the defaults),
    with a ``UserError`` for anything else (the SDK raises ``TypeError`` or pydantic's error)."""
    if given is None:
        return memory.SessionSettings()
    try:
        return memory.coerce_session_settings(given)
    except (TypeError, ValueError) as exc:
        raise UserError(f"session_settings: {exc}") from exc


def _item_list(items: Any, method: str) -> list[Any]:
    """``items`` as a list, or a ``UserError`` naming ``method`` for what is not a list of
    items: None, one item (a dict), text. The SDK's sessions skip None and store a dict's keys
    or a string's characters as items."""
    if isinstance(items, (str, bytes, bytearray, Mapping)) or not isinstance(items, Iterable):
        raise UserError(f"{method}: items must be a list of items, got {type(items).__name__}")
    return list(items)


#: How ``set_items`` tells items apart: the hash of the item (``_item_hash``) and, for a call
#: output, the tool it answers in its list (``answered_tools``), which its message names.
_Key = tuple[bytes, str | None]


def _key(item_hash: bytes | None, tool: str | None) -> _Key | None:
    return None if item_hash is None else (item_hash, tool)


def _answered(msg: Msg) -> str | None:
    """The tool ``msg`` names as the one it answers, if it holds a call's output."""
    if msg.role != "tool":  # the one role whose messages hold outputs
        return None
    results = msg.tool_results
    return results[0].name if len(results) == 1 else None


class _HeldItems:
    """The messages a session holds, matched to the items ``set_items`` is given.

    ``take`` gives each item a message not yet taken whose key is the item's (``_Key``), so
    equal items keep their messages wherever the items around them moved. Equal items at the
    head and at the tail of both lists are matched in place first; in between, an item takes
    the first equal message after the one the previous match took, else the first, so repeated
    items keep their order where they can (the store writes again a message moved past
    others). ``lend_ids`` then gives an item without an id that matched nothing the id of the
    message that held its place, when that one is also id-less and unmatched: an item edited
    in place is a new version of the same message.
    """

    def __init__(self, msgs: list[Msg], held: list[_Key | None], keys: list[_Key | None]) -> None:
        """``msgs``: the messages held, ``held`` their keys; ``keys``: the items' keys."""
        self.msgs = msgs
        new_end, old_end = len(keys), len(held)
        head = 0
        while head < min(new_end, old_end) and _same(keys[head], held[head]):
            head += 1
        while head < min(new_end, old_end) and _same(keys[new_end - 1], held[old_end - 1]):
            new_end, old_end = new_end - 1, old_end - 1
        # item position -> position of the message it took
        self._taken = {i: i for i in range(head)}
        self._taken.update(zip(range(new_end, len(keys)), range(old_end, len(held))))
        self._waiting: dict[_Key, list[int]] = {}  # positions not taken yet, ascending
        for index in range(head, old_end):
            key = held[index]
            if key is not None:
                self._waiting.setdefault(key, []).append(index)
        self._last = head - 1  # the position of the message the last match took

    def take(self, position: int, key: _Key | None) -> Msg | None:
        """The held message for the item at ``position`` (None: convert the item)."""
        index = self._taken.get(position)
        if index is not None:
            return self.msgs[index]
        waiting = self._waiting.get(key) if key is not None else None
        if not waiting:
            return None
        after = bisect.bisect_right(waiting, self._last)
        index = waiting.pop(after if after < len(waiting) else 0)
        self._last = self._taken[position] = index
        return self.msgs[index]

    def with_companions(self, new: list[Msg], groups: list[list[Msg]]) -> list[Msg]:
        """``new`` with each held message it kept in its group (``groups``: each held
        message's, see ``_grouped``); the messages of held ones it did not keep are dropped."""
        out: list[Msg] = []
        for position, msg in enumerate(new):
            index = self._taken.get(position)
            if index is not None and msg is self.msgs[index]:
                out.extend(groups[index])
            else:
                out.append(msg)
        return out

    def lend_ids(self, new: list[Msg]) -> None:
        """Give id-less items edited in place the ids of the messages they replace (``new``
        is changed in place)."""
        given = {msg.id for msg in new}
        used = set(self._taken.values())
        cursor = 0  # the held message after the one the last matched item took
        for position, msg in enumerate(new):
            taken = self._taken.get(position)
            if taken is not None and new[position] is self.msgs[taken]:
                cursor = taken + 1
                continue
            if cursor >= len(self.msgs) or cursor in used:
                continue
            replaced = self.msgs[cursor]
            if _id_less(msg) and _id_less(replaced) and replaced.id not in given:
                new[position] = msg.replace(id=replaced.id)
                used.add(cursor)
                cursor += 1


def _grouped(
    msgs: list[Msg], spans: list[tuple[_Key, ...] | None]
) -> tuple[list[Msg], list[tuple[_Key, ...] | None], list[list[Msg]]]:
    """The messages of ``msgs`` that give items (or that no item can say), their ``spans``,
    and for each its group: itself and the messages that give no item (an empty ``span``)
    that go with it, those after it up to the next one (and, for the first, those before it).
    Messages that give no item, in a list where none gives one, are in no group."""
    owners: list[Msg] = []
    owner_spans: list[tuple[_Key, ...] | None] = []
    groups: list[list[Msg]] = []
    leading: list[Msg] = []
    for msg, span in zip(msgs, spans, strict=True):
        if span == ():
            (groups[-1] if groups else leading).append(msg)
            continue
        owners.append(msg)
        owner_spans.append(span)
        groups.append([*leading, msg])
        leading = []
    return owners, owner_spans, groups


def _flat(groups: list[list[Msg]]) -> list[Msg]:
    return [msg for group in groups for msg in group]


def _unchanged_ends(
    spans: list[tuple[_Key, ...] | None], keys: list[_Key | None]
) -> tuple[tuple[int, int], tuple[int, int]]:
    """How many held messages, and the items they give (``spans``), are given again as they
    were (``keys``) at the head, and how many at the tail, without overlapping: as
    ``(messages, end of their items)`` for the head and ``(messages, start of their items)``
    for the tail."""
    head = first = 0
    while head < len(spans):
        span = spans[head]
        if span is None or tuple(keys[first : first + len(span)]) != span:
            break
        head, first = head + 1, first + len(span)
    tail, last = 0, len(keys)
    while head + tail < len(spans):
        span = spans[len(spans) - 1 - tail]
        if span is None or last - len(span) < first or tuple(keys[last - len(span) : last]) != span:
            break
        tail, last = tail + 1, last - len(span)
    return (head, first), (tail, last)


def _call_names(items: list[Any]) -> dict[str, str]:
    """The tools the function calls among ``items`` name, by call id (as ``from_responses``
    names the outputs that answer them)."""
    names: dict[str, str] = {}
    for item in items:
        if isinstance(item, Mapping) and item.get("type") == "function_call":
            call_id = item.get("call_id")
            if isinstance(call_id, str):
                names[call_id] = str(item.get("name") or "")
    return names


def _same(key: _Key | None, held: _Key | None) -> bool:
    return key is not None and key == held


def _earlier_calls(items: list[Any], msgs: list[Msg]) -> dict[str, str]:
    """The tools of the calls in ``msgs`` that outputs among ``items`` answer, when no call
    before the output among ``items`` does (an output added after its call, by another
    ``add_items``): the latest call with the output's ``call_id``, looked for from the end."""
    called: set[Any] = set()
    wanted: set[str] = set()
    for item in items:
        if not isinstance(item, Mapping):
            continue
        call_id, kind = item.get("call_id"), item.get("type")
        if not isinstance(call_id, str):
            continue  # no call's id (the item's conversion says what is wrong with it)
        if kind == "function_call":
            called.add(call_id)
        elif kind == "function_call_output" and call_id not in called:
            wanted.add(call_id)
    found: dict[str, str] = {}
    for msg in reversed(msgs):
        if not wanted:
            break
        for call in msg.tool_calls:
            if call.id in wanted:
                found[call.id] = call.name
                wanted.discard(call.id)
    return found


def _item_hash(item: Any) -> bytes | None:
    """A hash of an item's JSON with sorted keys, for an item that JSON gives back exactly
    (None for any other, which is then converted).

    Items with equal hashes must convert to the same message, or ``set_items`` would keep a
    held message for an item that is not the one it was made from. JSON text alone does not
    tell them apart: msgspec writes NaN and the infinities as ``null``, bytes as their base64
    text, a datetime, a ``Decimal`` or a ``UUID`` as text, a set as an array, an enum as its
    value and an int key as text, all of which the conversion refuses or keeps as something
    else. Reading the JSON back gives a value equal to the item exactly when it holds none of
    them (a tuple, which reads back as a list, is converted too: it would convert alike).
    """
    try:
        raw = _sorted_json.encode(item)
        if _decode_json(raw) != item:
            return None
    except (TypeError, ValueError, OverflowError):
        return None
    return hashlib.blake2b(raw, digest_size=16).digest()


def _id_less(msg: Msg) -> bool:
    """Whether ``msg`` came from a Responses item that had no id of its own."""
    extras = msg.metadata.get(RESPONSES_EXTRA_KEY)
    return extras is not None and "id" not in extras


def _pop(msgs: TrackedList) -> dict[str, Any] | None:
    """Remove the latest item from ``msgs`` and return it (None if there is none).

    A message that gives several items (one written in another format) loses only its last
    one; messages that give none (thinking from another provider), which ``get_items`` never
    shows, go with the item before them (those before the first item, with the first), as in
    ``set_items``.
    """
    end = len(msgs)
    while end:
        items = to_responses([msgs[end - 1]])
        if items:
            rest = _without_last_item(msgs[end - 1], items) if len(items) > 1 else []
            msgs[end - 1 :] = rest
            if not rest and not any(_gives_items(msgs[i]) for i in range(end - 2, -1, -1)):
                msgs.clear()  # the first item went: those before it go with it
            return items[-1]
        end -= 1
    msgs.clear()
    return None


def _gives_items(msg: Msg) -> bool:
    """Whether ``msg`` gives an item, or is one that no item can say (which ``set_items``
    replaces as it does an item's message)."""
    try:
        return bool(to_responses([msg]))
    except UserError:
        return True


def _without_last_item(msg: Msg, items: list[dict[str, Any]]) -> list[Msg]:
    """``msg`` (which gives ``items``) without what gives its last item: the same message
    less the block that gives it (its id, metadata and every other block kept, thinking the
    items do not show included), found by trying each block from the end; else the messages
    of the other items (a message whose blocks do not map one by one to its items)."""
    for at in range(len(msg.content) - 1, -1, -1):
        rest = msg.replace(content=[*msg.content[:at], *msg.content[at + 1 :]])
        if rest.content and to_responses([rest]) == items[:-1]:
            return [rest]
    return from_responses(items[:-1])
