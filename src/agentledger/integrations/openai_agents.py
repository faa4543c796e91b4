"""``LedgerSession``: an OpenAI Agents SDK session kept in a ledger.

The SDK (``openai-agents``) keeps a conversation as a list of Responses-API items and asks a
``Session`` for four things: ``get_items(limit)``, ``add_items``, ``pop_item`` and
``clear_session``. ``LedgerSession`` answers them from a ``Ledger`` (or an ``AsyncLedger``'s),
one message per item (``wire.responses``), so:

- every item comes back as it went in, key for key: message, call and reasoning ids,
  ``call_id`` s, ``encrypted_content``, the model's argument strings, item kinds this code does
  not know;
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
- ``pop_item`` and ``clear_session`` commit a new version rather than delete: what they remove
  stays readable with ``ledger.load(session_id, version=v)`` (and ``ledger.history``) until the
  session's history is purged;
- several sessions, processes or hosts may share one session id: each change is planned against
  the version it read and re-applied to a newer one if another writer committed first.

Every call runs in a worker thread, so the event loop never waits on the store; a call whose
caller is cancelled still finishes its commit, and the session's view follows it.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec

from agentledger._optional import require
from agentledger.errors import ConflictError, UserError
from agentledger.messages import Msg
from agentledger.store.aio import AsyncLedger
from agentledger.store.ledger import Ledger
from agentledger.store.state import CONTEXT
from agentledger.store.tracked import TrackedList
from agentledger.wire.responses import RESPONSES_EXTRA_KEY, from_responses, to_responses

__all__ = ["LedgerSession"]

_T = TypeVar("_T")
_sorted_json = msgspec.json.Encoder(order="sorted")
_items_json = msgspec.json.Encoder()
_decode_items = msgspec.json.Decoder(list[dict[str, Any]]).decode
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
    session then owns the ledger it opens and ``close()`` closes it). ``tenant`` defaults to the
    ledger's; ``list_name`` is the session list that holds the items. ``session_settings`` is the
    SDK's ``SessionSettings`` (or a dict of it); its ``limit`` applies when ``get_items`` is
    given none.
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
        self._owns_ledger = not isinstance(ledger, (Ledger, AsyncLedger))
        if isinstance(ledger, AsyncLedger):
            ledger = ledger.sync
        self.ledger: Ledger = ledger if isinstance(ledger, Ledger) else Ledger(ledger)
        self.tenant = self.ledger.key(session_id, tenant).tenant  # validates both ids
        self.session_id = session_id
        self.list_name = list_name
        self.session_settings = (
            None if session_settings is None else memory.coerce_session_settings(session_settings)
        )
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

    # -- the Session protocol --------------------------------------------------------------
    async def get_items(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The session's items, oldest first; with ``limit``, only the latest ``limit``."""
        limit = self._resolve_limit(limit, self.session_settings)
        return await asyncio.to_thread(self._locked, lambda: self._tail(limit))

    async def add_items(self, items: list[Any]) -> None:
        """Append ``items`` (written as new rows only)."""
        if not items:
            return
        items = list(items)

        def append(msgs: TrackedList) -> None:
            new = from_responses(items, ids="derived", start=len(msgs))
            self._remember(new, items)
            msgs.extend(new)

        await asyncio.to_thread(self._change, append)

    async def pop_item(self) -> dict[str, Any] | None:
        """Remove and return the latest item (None if there is none), as a new version."""
        return await asyncio.to_thread(self._change, _pop)

    async def clear_session(self) -> None:
        """Empty the session, as a new version (earlier versions stay readable)."""
        await asyncio.to_thread(self._change, TrackedList.clear)

    # -- beyond the protocol ---------------------------------------------------------------
    async def set_items(self, items: list[Any]) -> None:
        """Make the session hold exactly ``items``, writing only the items that changed.

        The SDK's protocol can only append, pop and clear, so an edit in the middle of a
        history (a shortened tool output, a redacted message) otherwise means clearing and
        adding everything again. Items without an id keep the id ``add_items`` gave them as
        long as they stay in the same place, edited or not (an item inserted or removed before
        them moves them, and they are rewritten); what is replaced stays readable at the
        previous version.
        """
        items = list(items)

        def replace(live: TrackedList) -> None:
            msgs = live.copy()
            hashes = [_item_hash(item) for item in items]

            def unchanged(i: int, item: Any) -> Msg | None:
                if i >= len(msgs) or hashes[i] is None:
                    return None
                return msgs[i] if self._hash_of(msgs[i]) == hashes[i] else None

            new = from_responses(items, ids="derived", known=unchanged)
            for i, (msg, old) in enumerate(zip(new, msgs, strict=False)):
                if msg.id != old.id and _id_less(msg) and _id_less(old):
                    new[i] = msg.replace(id=old.id)  # the item at that place, edited
            self._remember(new, items, hashes)
            live[:] = new

        await asyncio.to_thread(self._change, replace)

    # -- conveniences ----------------------------------------------------------------------
    @property
    def version(self) -> int:
        """The ledger version this session last read or wrote (0: nothing stored yet)."""
        return max(self._version, 0)

    def close(self) -> None:
        """Close the ledger if this session opened it."""
        if self._owns_ledger:
            self.ledger.close()

    # -- plumbing --------------------------------------------------------------------------
    def _locked(self, read: Callable[[], _T]) -> _T:
        with self._lock:
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
        for msg, digest in zip(msgs, digests, strict=True):
            if digest is not None:
                self._hashes[msg.digest] = digest
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
        if limit is None:
            return [item for msg in self._msgs for item in self._items_of(msg)]
        if limit <= 0:
            return []
        items: list[dict[str, Any]] = []
        for msg in reversed(self._msgs):  # a message from another format may give several
            items[:0] = self._items_of(msg)
            if len(items) >= limit:
                break
        return items[-limit:]

    def _change(self, change: Callable[[TrackedList], _T]) -> _T:
        """Apply ``change`` to the list as this session last saw it, in place, and commit the
        result at that version; if another writer committed since, the commit is refused, and
        the list is read again and the change applied again. ``change`` changes the list only
        once nothing it does can fail. A commit that fails for any other reason leaves the
        list to be read again by the next call: it may hold what was not committed."""
        with self._lock:
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


def _item_hash(item: Any) -> bytes | None:
    """A hash of an item's JSON with sorted keys (None for a value JSON cannot hold)."""
    try:
        raw = _sorted_json.encode(item)
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
    shows, go with the item before them.
    """
    end = len(msgs)
    while end:
        items = to_responses([msgs[end - 1]])
        if items:
            rest = from_responses(items[:-1]) if len(items) > 1 else []
            msgs[end - 1 :] = rest
            return items[-1]
        end -= 1
    msgs.clear()
    return None
