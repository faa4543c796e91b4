"""``Ledger``: load and save sessions, writing only what changed.

The ledger keeps, per session, the digests it last committed (``Head``). A save aligns every
given list with them by content (``planner.diff_list``), encodes only the messages that are new
where they stand and hands the backend one atomic ``CommitPlan``. An equal list writes nothing; a
grown list appends; an edit writes the edited rows; an insert, a deletion or a dropped prefix
writes what it adds, and for a store that orders rows by rank keys the ledger assigns them
(``ranks``). The cached head is trusted only while the stored
version still matches it, so another process's commit is never planned against stale digests.
"""

from __future__ import annotations

import random
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from agentledger.errors import (
    ClosedError,
    CodecError,
    ConflictError,
    CorruptStoreError,
    SessionNotFoundError,
    UserError,
    VersionNotFoundError,
)
from agentledger.messages import Msg, checks, decode_value, digest_of, encode_value
from agentledger.messages.codec import encode_with_digest
from agentledger.messages.deferred import all_decoded, decode_deferred
from agentledger.store import media
from agentledger.store.base import (
    CommitPlan,
    Head,
    ListWrite,
    SearchHit,
    SessionInfo,
    SessionKey,
    Store,
    StoredMsg,
    StoredState,
    VersionInfo,
    check_wait,
    searchable_text,
)
from agentledger.store.closable import Closable
from agentledger.store.cursor import check_page
from agentledger.store.head_cache import DEFAULT_BYTES, DEFAULT_SESSIONS, HeadCache
from agentledger.store.ids import DEFAULT_TENANT, check_id, check_list_name, shown
from agentledger.store.loading import loaded_messages
from agentledger.store.planner import ListDiff, diff_list, splice_into
from agentledger.store.ranks import RankPlan, plan_ranks
from agentledger.store.state import CONTEXT, SaveReport, SessionState
from agentledger.store.title import UNKNOWN, title_after_change
from agentledger.store.tracked import TrackedList
from agentledger.store.urls import open_store

if TYPE_CHECKING:
    from agentledger.wire.live import LiveConverter

__all__ = ["Ledger"]

#: Upper bound of the jittered pause before re-planning a save that lost a race (seconds).
_MAX_BACKOFF = 0.05
_TITLE = "title"


def _stored(msg: Msg) -> tuple[StoredMsg, dict[bytes, bytes]]:
    canonical, digest = encode_with_digest(msg)
    body, blobs = media.externalize(msg, canonical)
    return StoredMsg(msg.id, digest, body, searchable_text(msg)), blobs


def _moved(title_at: int, diff: ListDiff) -> int:
    """Where the title's source is after ``diff`` (see ``title``): its new position if it was
    kept, the new length if the old list had none, else ``UNKNOWN``."""
    if title_at == UNKNOWN or title_at >= diff.old_length:
        return UNKNOWN if title_at == UNKNOWN else diff.new_length
    for old_start, new_start, count in diff.runs:
        if old_start <= title_at < old_start + count:
            return new_start + title_at - old_start
    return UNKNOWN


@dataclass(slots=True)
class _Planned:
    """A save's plan (None: nothing to write), and what the cached head needs once it commits:
    the messages written to each list (in the order of its puts), the lists that had no
    remembered messages (planned on a snapshot, remembered from now on), and where the title
    comes from."""

    plan: CommitPlan | None
    written: dict[str, list[Msg]] = field(default_factory=dict)
    snapshots: dict[str, list[Msg]] = field(default_factory=dict)
    title_at: int = UNKNOWN
    #: The ``TrackedList`` given for a list, and how many changes it had when the plan read it.
    tracked: dict[str, tuple[TrackedList, int]] = field(default_factory=dict)


def _advance_list(head: Head, write: ListWrite, planned: _Planned) -> None:
    """Apply one committed list write to ``head`` in place (see ``planner.splice_into``)."""
    name = write.name
    digests = head.lists.setdefault(name, [])
    old_length = len(digests)
    runs = write.kept_runs(old_length)
    positions = [p for p, _ in write.puts]
    known = head.messages.get(name)
    splice_into(digests, runs, [(p, row.digest) for p, row in write.puts], write.length)
    if name in planned.snapshots:
        head.messages[name] = planned.snapshots[name]
        head.decoded.discard(name)  # the caller's messages, not walked
    elif known is not None and len(known) == old_length:
        written = planned.written[name]
        splice_into(known, runs, list(zip(positions, written)), write.length)
        if not all_decoded(written):  # a message loaded elsewhere and not read yet
            head.decoded.discard(name)
    else:
        head.messages.pop(name, None)
        head.decoded.discard(name)
    if write.ranks is not None:
        ranks = head.ranks.setdefault(name, [])
        splice_into(ranks, runs, list(zip(positions, write.ranks.put_ranks)), write.length)
        if write.ranks.floor is not None:
            head.floors[name] = write.ranks.floor
    if not digests:
        for found in (head.lists, head.messages, head.ranks):
            found.pop(name, None)
        head.decoded.discard(name)


def _decodes(decode: bool | str, name: str) -> bool:
    """Whether a load asked to ``decode`` (see ``Ledger._load``) decodes the list ``name``."""
    return decode is True or name == decode


def _rank_plan(key: SessionKey, head: Head, name: str, diff: ListDiff) -> RankPlan:
    """The ranks of a list write to a ``ranked`` store (see ``ranks``)."""
    old = head.ranks.get(name, [])
    if len(old) != diff.old_length:
        raise CorruptStoreError(
            f"session {key.session!r} list {name!r}: {diff.old_length} live rows but "
            f"{len(old)} ranks"
        )
    return plan_ranks(old, head.floors.get(name), diff.runs, diff.changed, diff.new_length)


def _backoff(attempt: int) -> None:
    """Pause before re-planning after the ``attempt``-th lost race: none at first, then a
    random pause whose bound doubles up to ``_MAX_BACKOFF``, so racing writers spread out."""
    if attempt:
        time.sleep(random.uniform(0, min(_MAX_BACKOFF, 0.0005 * 2**attempt)))


def check_value(name: str, value: Any) -> bytes | None:
    """A value's canonical bytes (None deletes it). The title is shown as text by every store,
    so a ``title`` value must be a string."""
    if value is None:
        return None
    if name == _TITLE and not isinstance(value, str):
        raise UserError(f"the 'title' value must be a str or None, got {type(value).__name__}")
    return encode_value(value)


class Ledger(Closable):
    """Sessions in one store, keyed by ``(tenant, session_id)``.

    ``Ledger(url)`` opens ``memory://``, ``jsonl:///dir``, ``sqlite:///file.db`` or
    ``postgresql://...``; ``Ledger()`` opens SQLite in the user data directory. A ``Store``
    instance is accepted too (and left open by ``close``, since the caller owns it). ``tenant`` is
    the default for every call that does not name one. After ``close()`` (or the end of a
    ``with Ledger(...)`` block), and once its store is closed by anyone, every call raises
    ``ClosedError``; what was committed stays for a new ``Ledger`` on the same URL.

    The ledger remembers, for the sessions it used most recently, what it last committed or
    loaded (digests and the ``Msg`` objects), which is what makes the next save of such a
    session cheap, and the next load of its latest version too: while the stored session is
    still at the life and version remembered (one stamp read says so), a load hands out those
    messages instead of fetching and decoding them again. It remembers at most
    ``cached_sessions`` sessions and about ``cached_bytes`` of them (estimated, see
    ``head_cache``; the session used last is kept whatever its size). A session it has
    forgotten is read back from the store: memory stays bounded however many sessions, and
    however long, one ledger serves.
    """

    def __init__(
        self,
        url: str | Store | None = None,
        *,
        tenant: str = DEFAULT_TENANT,
        cached_sessions: int = DEFAULT_SESSIONS,
        cached_bytes: int = DEFAULT_BYTES,
    ) -> None:
        self._heads = HeadCache(cached_sessions, cached_bytes)
        self.tenant = check_id(tenant, "tenant id")
        self._owns_store = not isinstance(url, Store)
        self.store: Store = url if isinstance(url, Store) else open_store(url)
        self._converters: OrderedDict[tuple[SessionKey, str], LiveConverter] = OrderedDict()
        self._guard = threading.Lock()
        self._key_locks: dict[SessionKey, threading.Lock] = {}
        self._token = object()  # names this ledger in what a TrackedList was saved as
        try:
            self.store.setup()
        except BaseException:
            if self._owns_store:  # a failed open releases what it took (pools, connections)
                self.store.close()
            raise

    # -- plumbing ------------------------------------------------------------------------
    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close this ledger: every later call on it raises ``ClosedError``. The store is
        closed too if this ledger opened it (a ``Store`` passed in stays open for the other
        ledgers on it). Closing again does nothing, but finish a close that failed."""
        if self._owns_store:
            self.store.close()

    def _closed_error(self) -> ClosedError:
        return ClosedError(
            f"this Ledger on {self.store.location} is closed; open a new one (Ledger(url)) "
            "to go on using what it holds"
        )

    def key(self, session: str, tenant: str | None = None) -> SessionKey:
        """The validated key for a session id (and tenant, default: this ledger's)."""
        return SessionKey(
            check_id(tenant if tenant is not None else self.tenant, "tenant id"),
            check_id(session, "session id"),
        )

    def _lock_for(self, key: SessionKey) -> threading.Lock:
        with self._guard:
            lock = self._key_locks.get(key)
            if lock is None:
                lock = self._key_locks[key] = threading.Lock()
            return lock

    def _head(self, key: SessionKey, *, verify: bool = True) -> Head:
        """The committed digests to plan against: the cached ones while the stored session is
        still the same life at the same version, else read back from the store. Unless
        ``verify``, the cached ones as they are (the commit will check them)."""
        cached = self._heads.get(key)
        if cached is not None and (
            not verify or self.store.read_stamp(key) == (cached.incarnation, cached.version)
        ):
            return cached
        head = self.store.read_head(key) or Head(0, {}, {}, raw_values={})  # none: all known
        with self._guard:
            self._heads.kept(key, head)
        return head

    def _forget(self, key: SessionKey) -> None:
        with self._guard:
            self._heads.forget(key)

    # -- reading -------------------------------------------------------------------------
    def load(
        self, session: str, *, tenant: str | None = None, version: int | None = None
    ) -> SessionState:
        """The session's lists and values (at ``version``, default latest).

        A session that does not exist loads as an empty state at version 0.
        """
        key = self.key(session, tenant)  # first: the messages below echo a checked id
        return self._load(key, self._check_version(session, version))

    @staticmethod
    def _check_version(session: str, version: Any) -> int | None:
        """``version`` as a reader takes it: None (the latest) or a version some store may
        hold; ``UserError`` for a value that is not an integer (``True``, ``1.0``, ``"1"``).
        ``session`` is a checked id (it is echoed)."""
        if version is not None:
            if not isinstance(version, int) or isinstance(version, bool):
                raise UserError(f"version must be an integer, got {type(version).__name__}")
            if not 0 <= version <= checks.MAX_COUNT:  # read by no store: none has such a version
                raise VersionNotFoundError(f"session {shown(session)} has no version {version}")
        return version

    def _load(
        self, key: SessionKey, version: int | None = None, *, decode: bool | str = False
    ) -> SessionState:
        """``load``, and with ``decode`` (True: every list, a name: that list) the messages
        decoded before it returns: for ``AsyncLedger``, which decodes in its worker thread.

        Decoding a list the ledger remembers costs a walk over its messages to find any still
        deferred (about 0.4 ms at 12,000); once a list is known decoded (``Head.decoded``), a
        load of it walks nothing until a save puts a message that is not.
        """
        if version is None:
            remembered = self._remembered(key, decode)
            if remembered is not None:
                return remembered
        stored = self.store.load(key, version)
        if stored is None:
            if version not in (None, 0):
                raise SessionNotFoundError(f"no session {key.session!r} for tenant {key.tenant!r}")
            return SessionState()
        state = self._decode(key, stored)
        walked = {n for n in state.lists if _decodes(decode, n)}
        for name in walked:
            decode_deferred(state.lists[name])
        if version is None:
            head = Head(
                stored.version,
                {name: list(rows.digests) for name, rows in stored.lists.items()},
                {name: digest_of(raw) for name, raw in stored.values.items()},
                stored.incarnation,
                {name: list(msgs) for name, msgs in state.lists.items()},
                ranks={
                    name: list(rows.ranks)
                    for name, rows in stored.lists.items()
                    if rows.ranks is not None
                },
                floors=dict(stored.floors),
                raw_values=dict(stored.values),
                decoded=walked,
            )
            with self._guard:
                self._heads.loaded(key, head, stored)
        return state

    def _remembered(self, key: SessionKey, decode: bool | str = False) -> SessionState | None:
        """The latest state of the session from what this ledger remembers, when that is all
        of it and the stored session is still the same life at the same version; else None.

        A load of a session this ledger has just loaded or saved then costs one stamp read
        and a copy of each list, not the fetch and decoding of every message: the messages
        are the objects it loaded or committed (a ``Msg`` never changes), the values are
        decoded again from their committed bytes. The stamp is the one a save plans on, and
        the key's lock keeps a save from changing the remembered head while it is read. With
        ``decode`` (see ``_load``), the lists not known decoded are decoded outside the lock.
        """
        with self._lock_for(key):
            head = self._heads.get(key)
            if head is None or head.raw_values is None or head.messages.keys() != head.lists.keys():
                return None
            if any(len(head.messages[n]) != len(d) for n, d in head.lists.items()):
                return None
            if self.store.read_stamp(key) != (head.incarnation, head.version):
                return None
            lists = {name: list(msgs) for name, msgs in head.messages.items()}
            raw_values = dict(head.raw_values)
            walk = {
                name: head.messages[name]
                for name in lists
                if _decodes(decode, name) and name not in head.decoded
            }
        state = SessionState(head.version, lists, self._values(key, raw_values))
        for name in walk:
            decode_deferred(lists[name])
        if walk:
            self._remember_decoded(key, head, walk)
        return state

    def _remember_decoded(self, key: SessionKey, head: Head, walked: dict[str, list[Msg]]) -> None:
        """Note that the remembered lists ``walked`` (name -> the list copied) are decoded,
        unless a save changed them since they were copied: every save that commits replaces
        the head, and a no-op save remembers the lists it was given as new list objects."""
        with self._lock_for(key):
            if self._heads.get(key) is head:
                head.decoded.update(n for n, msgs in walked.items() if head.messages.get(n) is msgs)

    def messages(
        self,
        session: str,
        name: str = CONTEXT,
        *,
        tenant: str | None = None,
        version: int | None = None,
    ) -> list[Msg]:
        """One list of the session (empty if absent)."""
        name = check_list_name(name)
        return self.load(session, tenant=tenant, version=version).lists.get(name, [])

    def tracked(
        self, session: str, name: str = CONTEXT, *, tenant: str | None = None
    ) -> TrackedList:
        """One list of the session as a ``TrackedList``: change it with its methods and pass it
        to ``save``, which then compares only from the first position changed, so a save costs
        the same at 12 messages or 12,000 (see ``tracked``)."""
        return self.load_tracked(session, name, tenant=tenant)[1]

    def load_tracked(
        self, session: str, name: str = CONTEXT, *, tenant: str | None = None
    ) -> tuple[SessionState, TrackedList]:
        """The session's latest state and, from the same load, its list ``name`` as a
        ``TrackedList`` (see ``tracked``): for code that needs the values and the version too,
        such as the agent. The tracked list holds its own copy of the messages, so changing
        the state's lists leaves it as it is (and the next save still finds such changes only
        if they are made to the tracked list)."""
        return self._load_tracked(self.key(session, tenant), check_list_name(name))

    def _load_tracked(
        self, key: SessionKey, name: str, *, decode: bool | str = False
    ) -> tuple[SessionState, TrackedList]:
        """``load_tracked``, decoding as ``_load`` does."""
        state = self._load(key, decode=decode)
        live = TrackedList(state.lists.get(name, []))
        head = self._heads.get(key)
        if head is not None and head.version == state.version:
            live._mark_saved(self._saved_as(key, name, head), live._edits)
        return state, live

    def _decode(self, key: SessionKey, stored: StoredState) -> SessionState:
        lists = {
            name: loaded_messages(
                rows,
                where=f"{self.store.location} {key.tenant}/{key.session}/{name}",
                may_have_media=stored.may_have_media,
                read_media=lambda wanted: self.store.read_media(key, wanted),
            )
            for name, rows in stored.lists.items()
        }
        return SessionState(stored.version, lists, self._values(key, stored.values))

    @staticmethod
    def _values(key: SessionKey, raw_values: Mapping[str, bytes]) -> dict[str, Any]:
        values = {}
        for name, raw in raw_values.items():
            try:
                values[name] = decode_value(raw)
            except CodecError as exc:
                raise CorruptStoreError(
                    f"session {key.session!r} value {name!r} cannot be decoded: {exc}"
                ) from None
        return values

    def exists(self, session: str, *, tenant: str | None = None) -> bool:
        return self.store.read_version(self.key(session, tenant)) > 0

    def version(self, session: str, *, tenant: str | None = None) -> int:
        """The committed version (0 when the session does not exist)."""
        return self.store.read_version(self.key(session, tenant))

    def list_sessions(
        self,
        *,
        tenant: str | None = None,
        limit: int | None = None,
        offset: int = 0,
        after: SessionInfo | str | None = None,
    ) -> list[SessionInfo]:
        """Sessions of a tenant, most recently updated first (by ``updated_at``, then session
        id, descending), at most ``limit`` of them.

        Page with ``after``: the last row of the previous page, or its ``cursor`` string. Each
        page then costs what the first does, and a session updated between two page reads
        moves to the front rather than making a later page skip or repeat another. ``offset``
        (skip that many rows, at the cost of reading them) cannot be combined with it.
        """
        tenant = check_id(tenant if tenant is not None else self.tenant, "tenant id")
        keyset = check_page(
            limit, offset, after.cursor if isinstance(after, SessionInfo) else after, tenant
        )
        if keyset is None:  # stores written before cursors do not take ``after``
            return self.store.list_sessions(tenant, limit=limit, offset=offset)
        return self.store.list_sessions(tenant, limit=limit, after=keyset)

    def history(self, session: str, *, tenant: str | None = None) -> list[VersionInfo]:
        """Every version on record and what it changed, oldest first."""
        return self.store.history(self.key(session, tenant))

    def search(self, query: str, *, tenant: str | None = None, limit: int = 20) -> list[SearchHit]:
        """Live messages of a tenant whose text matches ``query``, at most ``limit`` of them.

        A message matches when each word of ``query`` starts one of its words, in any case and
        without Latin accents (``"caf CREME"`` finds "Café crème"); punctuation and operators
        in ``query`` are plain text. Every store matches by this rule (``search_words``). The
        order, and so which hits a ``limit`` keeps, is the store's: SQLite gives the best
        matches first (FTS5's ranking); the others give the most recently updated sessions'
        messages first, each session's by list and position."""
        tenant = check_id(tenant if tenant is not None else self.tenant, "tenant id")
        query = checks.text("search", "query", query)
        if checks.count("search", "limit", limit) == 0:
            return []
        return self.store.search(tenant, query, limit=limit)

    # -- writing -------------------------------------------------------------------------
    def save(
        self,
        session: str,
        messages: Sequence[Msg],
        *,
        name: str = CONTEXT,
        tenant: str | None = None,
        expected_version: int | None = None,
    ) -> SaveReport:
        """Make list ``name`` equal ``messages``, writing only the positions that changed.

        With ``expected_version``, raise ``ConflictError`` unless the session is still at that
        version (0 means "must not exist yet"). Without it, a concurrent commit by another
        writer is read back and the save re-planned against it (the other commit stays in
        history).
        """
        return self.save_state(
            session,
            lists={check_list_name(name): messages},
            tenant=tenant,
            expected_version=expected_version,
        )

    def save_state(
        self,
        session: str,
        *,
        lists: Mapping[str, Sequence[Msg]] | None = None,
        values: Mapping[str, Any] | None = None,
        tenant: str | None = None,
        expected_version: int | None = None,
        drop_unnamed: bool = False,
        create: bool = False,
    ) -> SaveReport:
        """Save several lists and values in one atomic commit.

        Lists and values not named are left as they are (with ``drop_unnamed``, they are
        emptied and deleted, so the session then holds exactly what was given); a value of
        ``None`` deletes it. A session that does not exist is made by the first save that gives
        it something to hold; with ``create``, also by one that gives it nothing (an empty
        state, which is what version 0 already loads as): what a fork or an import commits.
        """
        key = self.key(session, tenant)
        if expected_version is not None:
            checks.count("save", "expected_version", expected_version)
        drop_unnamed = checks.flag("save_state", "drop_unnamed", drop_unnamed)
        create = checks.flag("save_state", "create", create)
        # The caller's lists are read, not copied (a copy touches every message: see
        # ``planner.splice_into``). What is committed and remembered is what the plan read: the
        # committed messages it kept and the new ones it wrote, whatever another thread does to
        # the caller's list meanwhile.
        lists = {
            check_list_name(n): self._check_messages(m)
            for n, m in self._check_mapping("lists", lists).items()
        }
        encoded_values = {
            check_list_name(n): check_value(n, v)
            for n, v in self._check_mapping("values", values).items()
        }
        with self._lock_for(key):
            attempt = 0
            # From the cache alone only where the commit checks it; a refusal or a no-op is
            # only ever decided on a verified head.
            verify = self.store.stamp_before_commit
            while True:
                head = self._head(key, verify=verify)
                if drop_unnamed:
                    lists.update((n, []) for n in head.lists if n not in lists)
                    encoded_values.update((n, None) for n in head.values if n not in encoded_values)
                if expected_version is not None and head.version != expected_version:
                    if not verify:
                        verify = True
                        continue
                    raise ConflictError(
                        f"session {key.session!r} is at version {head.version}, "
                        f"not the expected {expected_version}",
                        expected=expected_version,
                        actual=head.version,
                    )
                try:
                    planned = self._plan(key, head, lists, encoded_values, create=create)
                except AttributeError:
                    self._explain_bad_item(lists)
                    raise
                plan = planned.plan
                if plan is None and not verify:
                    verify = True
                    if self._head(key) is not head:  # the cache was stale: plan again
                        continue
                if plan is None:
                    # the lists are equal to what is committed: remember them as messages
                    head.messages.update(planned.snapshots)
                    head.decoded.difference_update(planned.snapshots)
                    with self._guard:
                        self._heads.kept(key, head)
                    self._mark_tracked(key, planned, head)
                    return SaveReport(version=head.version, noop=True)
                try:
                    incarnation = self.store.commit(plan) or ""
                except ConflictError:
                    self._forget(key)
                    if expected_version is not None:
                        raise
                    # another writer committed first: re-plan against its commit
                    _backoff(attempt)
                    attempt += 1
                    continue
                except BaseException:
                    self._forget(key)  # unknown outcome: re-read next time
                    raise
                self._mark_tracked(key, planned, self._advance(key, head, planned, incarnation))
                return SaveReport(
                    version=plan.version,
                    noop=False,
                    appended=plan.appended,
                    replaced=plan.replaced,
                    truncated=plan.truncated,
                    values_changed=len(plan.values),
                    bytes_written=plan.bytes_written,
                )

    @staticmethod
    def _check_mapping(field: str, value: Any) -> Mapping[str, Any]:
        """A ``save_state`` argument of lists or values by name: a mapping, or None for none."""
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            kind = type(value).__name__
            raise UserError(f"save_state: {field} must be a mapping by name, got {kind}")
        return value

    @staticmethod
    def _check_messages(messages: Sequence[Msg]) -> Sequence[Msg]:
        """The list, once it is a sequence (items are checked when the plan reads their
        digests: an item that is not a ``Msg`` fails there and ``_explain_bad_item`` says
        which)."""
        if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
            raise UserError("messages must be a sequence of Msg (use sync() for dicts)")
        return messages

    @staticmethod
    def _explain_bad_item(lists: Mapping[str, Sequence[Msg]]) -> None:
        for name, messages in lists.items():
            for position, msg in enumerate(messages):
                if not isinstance(msg, Msg):
                    raise UserError(
                        f"save() takes Msg objects, got {type(msg).__name__} at position "
                        f"{position} of list {name!r}; use Ledger.sync() to persist "
                        "OpenAI chat dicts or Responses items"
                    )

    def _plan(
        self,
        key: SessionKey,
        head: Head,
        lists: Mapping[str, Sequence[Msg]],
        values: Mapping[str, bytes | None],
        *,
        create: bool = False,
    ) -> _Planned:
        """The commit that makes the session equal ``lists`` and ``values`` (None if it already
        is, unless ``create`` and the session does not exist: then the commit that makes it),
        and what the head becomes once it commits (see ``_Planned``)."""
        plan = CommitPlan(
            key=key,
            base_version=head.version,
            committed_at=datetime.now(UTC),
            base_incarnation=head.incarnation,
        )
        planned = _Planned(plan)
        context_changed: list[int] = []
        title_at = head.title_at
        for name, messages in lists.items():
            committed = head.lists.get(name, [])
            known = head.messages.get(name)
            kept: list[tuple[int, int, int]] | None = None
            if isinstance(messages, TrackedList):
                planned.tracked[name] = (messages, messages._edits)
                kept = messages._kept(self._saved_as(key, name, head), len(committed))
                messages = messages._items
            if known is None or len(known) != len(committed):
                # no messages to compare objects with: plan on a snapshot, which becomes them
                messages = planned.snapshots[name] = list(messages)
                known, kept = None, None
            diff = diff_list(committed, messages, known or (), kept=kept or ())
            if diff.empty:
                continue
            if name == CONTEXT:
                context_changed = diff.changed
                title_at = _moved(title_at, diff)
            puts = []
            written = planned.written[name] = [messages[p] for p in diff.changed]
            for position, msg in zip(diff.changed, written, strict=True):
                row, blobs = _stored(msg)
                puts.append((position, row))
                plan.media.update(blobs)
            write = ListWrite(name, puts, diff.new_length, diff.runs)
            if self.store.ranked:
                write.ranks = _rank_plan(key, head, name, diff)
            plan.lists.append(write)
            plan.appended += diff.appended
            plan.replaced += diff.replaced
            plan.truncated += diff.truncated
        for name, raw in values.items():
            current = head.values.get(name)
            if raw is None and current is not None:
                plan.values[name] = None
            elif raw is not None and current != digest_of(raw):
                plan.values[name] = raw
        if not plan.lists and not plan.values and not (create and head.version == 0):
            planned.plan = None
            planned.title_at = head.title_at
            return planned
        if _TITLE in plan.values:
            raw_title = plan.values[_TITLE]
            plan.title = decode_value(raw_title) if raw_title is not None else ""
        if CONTEXT in lists:
            plan.message_count = len(lists[CONTEXT])
        title_deleted = _TITLE in plan.values and plan.values[_TITLE] is None
        has_title_value = (
            plan.values[_TITLE] is not None if _TITLE in plan.values else (_TITLE in head.values)
        )
        if not has_title_value and (title_deleted or CONTEXT in lists):
            # no title value: the title is derived from the context
            context = lists.get(CONTEXT)
            if context is None:  # only the title value was deleted: read the committed context
                context = self._committed_context(key, head)
            if title_deleted:
                title_at = UNKNOWN
            title_at, derived = title_after_change(context, title_at, context_changed)
            if derived is not None:
                plan.title = derived
        planned.title_at = title_at
        return planned

    def _committed_context(self, key: SessionKey, head: Head) -> list[Msg]:
        known = head.messages.get(CONTEXT)
        if known is not None and len(known) == len(head.lists.get(CONTEXT, ())):
            return known
        stored = self.store.load(key, head.version) if head.version else None
        return self._decode(key, stored).lists.get(CONTEXT, []) if stored else []

    def _saved_as(self, key: SessionKey, name: str, head: Head) -> tuple[Any, ...]:
        """What a ``TrackedList`` saved as list ``name`` of ``head`` is recorded as."""
        return (self._token, key, name, head.version, head.incarnation)

    def _mark_tracked(self, key: SessionKey, planned: _Planned, head: Head | None) -> None:
        """Tell each ``TrackedList`` the save read that it is now saved (see ``tracked``)."""
        for name, (tracked, edits) in planned.tracked.items():
            if head is None:
                tracked._mark_saved((), -1)  # never matches: the next save compares it all
            else:
                tracked._mark_saved(self._saved_as(key, name, head), edits)

    def _advance(
        self, key: SessionKey, head: Head, planned: _Planned, incarnation: str
    ) -> Head | None:
        """Make the cached ``head`` what ``planned.plan`` committed, in place, at the cost of
        the change, and return it. Should that fail, the head is forgotten (read back on the
        next save) and None returned."""
        plan = planned.plan
        assert plan is not None
        try:
            for write in plan.lists:
                _advance_list(head, write, planned)
            for name, raw in plan.values.items():
                if raw is None:
                    head.values.pop(name, None)
                    if head.raw_values is not None:
                        head.raw_values.pop(name, None)
                else:
                    head.values[name] = digest_of(raw)
                    if head.raw_values is not None:
                        head.raw_values[name] = raw
        except Exception:
            self._forget(key)
            return None
        head = replace(
            head, version=plan.version, incarnation=incarnation, title_at=planned.title_at
        )
        written = sum(len(w.puts) for w in plan.lists)
        with self._guard:
            self._heads.committed(key, head, written, plan.bytes_written)
        return head

    def delete(self, session: str, *, tenant: str | None = None) -> bool:
        """Delete a session and all its history. True if it existed."""
        key = self.key(session, tenant)
        with self._lock_for(key):
            self._forget(key)
            return self.store.delete(key)

    def purge_history(self, session: str, *, keep_last: int = 1, tenant: str | None = None) -> int:
        """Forget what only versions older than the last ``keep_last`` need."""
        checks.count("purge_history", "keep_last", keep_last, minimum=1)  # the current one too
        return self.store.purge_history(self.key(session, tenant), keep_last)

    def fork(
        self,
        session: str,
        new_session: str,
        *,
        at_version: int | None = None,
        tenant: str | None = None,
        new_tenant: str | None = None,
    ) -> SaveReport:
        """Start ``new_session`` as a copy of ``session`` at ``at_version`` (default latest).

        The new session must not exist; large media is shared, not copied. A version that
        holds nothing (every list emptied) makes a session that holds nothing.
        """
        state = self.load(session, tenant=tenant, version=at_version)
        if not state.exists:
            raise SessionNotFoundError(f"no session {session!r} to fork")
        return self.save_state(
            new_session,
            lists=state.lists,
            values=state.values,
            tenant=new_tenant if new_tenant is not None else tenant,
            expected_version=0,
            create=True,
        )

    # -- moving data in and out (see ``transfer``) ------------------------------------------
    def sync(
        self,
        session: str,
        messages: Sequence[Msg | Mapping[str, Any]],
        *,
        name: str = CONTEXT,
        tenant: str | None = None,
    ) -> SaveReport:
        """Persist a caller-owned live list (``Msg``, OpenAI chat dicts or Responses-API items,
        mixed freely) by content diff.

        Nothing is decided by object identity and the caller's objects are never changed, so a
        list that drops, rebuilds, recycles or edits in place its dicts is still saved exactly.
        A dict without an id gets one from its content and occurrence, not its position, so
        dropping, inserting or summarising messages writes only what was added. The ledger
        remembers what it converted for the lists it synced last (as many as
        ``cached_sessions``, and about ``cached_bytes`` of them): a dict that converts to the
        same message is not converted again (``wire.live``).
        """
        from agentledger.store.transfer import as_messages

        converter = self._converter(self.key(session, tenant), check_list_name(name))
        converted = as_messages(messages, converter)
        self._trim_converters()
        return self.save(session, converted, name=name, tenant=tenant)

    def _converter(self, key: SessionKey, name: str) -> LiveConverter:
        """The ``LiveConverter`` of list ``name`` of session ``key`` (made on first use), as
        the most recently used."""
        from agentledger.wire.live import LiveConverter

        with self._guard:
            found = self._converters.pop((key, name), None) or LiveConverter()
            self._converters[(key, name)] = found
            return found

    def _trim_converters(self) -> None:
        """Forget the least recently used converters past ``cached_sessions`` of them or
        ``cached_bytes`` of what they hold (the one used last stays)."""
        bounds = self._heads
        with self._guard:
            held = sum(c.weight for c in self._converters.values())
            while len(self._converters) > 1 and (
                len(self._converters) > bounds.max_sessions or held > bounds.max_bytes
            ):
                held -= self._converters.popitem(last=False)[1].weight

    def import_openai(
        self,
        session: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        tenant: str | None = None,
        overwrite: bool = False,
    ) -> SaveReport:
        """Store an OpenAI chat-completions transcript as the session's context (an empty
        one makes a session that holds nothing, or empties an existing one's context)."""
        from agentledger.store.transfer import as_messages

        return self.save_state(
            session,
            lists={CONTEXT: as_messages(messages)},
            tenant=tenant,
            expected_version=None if overwrite else 0,
            create=True,
        )

    def export(self, session: str, target: Any, *, tenant: str | None = None) -> int:
        """Write the session to a JSONL file or binary stream; returns the message count."""
        from agentledger.store.transfer import export_session

        if not self.exists(session, tenant=tenant):
            raise SessionNotFoundError(f"no session {session!r} to export")
        return export_session(self, session, target, tenant=tenant)

    def import_(
        self,
        source: Any,
        *,
        session: str | None = None,
        tenant: str | None = None,
        overwrite: bool = False,
    ) -> SaveReport:
        """Load an ``export`` file (path, binary stream or bytes) as one commit."""
        from agentledger.store.transfer import import_session

        return import_session(self, source, session=session, tenant=tenant, overwrite=overwrite)

    @contextmanager
    def lease(
        self, session: str, *, tenant: str | None = None, wait: float = 0.0
    ) -> Iterator[None]:
        """Hold the session's run lease (one active run per session); see ``Store.lease``.
        ``wait`` is how many seconds to wait for a busy session (``math.inf``: as long as it
        takes) before ``SessionBusyError``.

        A lease that ends while held (on PostgreSQL, when its connection ends) fails the
        holder's next save that writes with ``LeaseLostError``, not applied. Save with
        ``expected_version`` under a lease, as the agent does: a lease that ended unnoticed
        (a silent network cut) then still never lets a save replace another run's commit."""
        with self.store.lease(self.key(session, tenant), wait=check_wait(wait)):
            yield
