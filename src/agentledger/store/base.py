"""The store contract: the few primitives a backend implements, and the records they exchange.

A backend (``Store``) never decides *what* to write. ``Ledger`` aligns the caller's lists with the
digests of the last commit (``planner``), encodes only the messages that are new where they stand,
and hands the backend one ``CommitPlan``: per list, the committed rows kept (as runs) and the rows
to put, and for a ``ranked`` store their rank keys (``ranks``). The backend applies it atomically,
and only if the session is still at ``plan.base_version`` (optimistic concurrency); otherwise it
raises ``ConflictError``.

Storage is non-destructive. Each stored message row is live from the version that put it until
the version that replaced or truncated it (``version_to``); a load at version ``v`` returns the
rows live at ``v``. Only ``purge_history`` removes dead rows.

All primitives are synchronous and thread-safe; ``AsyncLedger`` runs them in worker threads.
Third-party backends subclass ``Store`` and pass ``agentledger.testing.run_conformance``.

A closed store stays closed: once ``close()`` has run, every public method a backend defines
raises ``ClosedError`` (``closable``: the check wraps them, so no backend writes or forgets it).
"""

from __future__ import annotations

import math
import os
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from itertools import islice
from operator import itemgetter, lt
from pathlib import Path
from typing import Any

from agentledger.errors import (
    ClosedError,
    ConflictError,
    CorruptStoreError,
    SessionBusyError,
    UserError,
    VersionNotFoundError,
)
from agentledger.messages import Msg, digest_of
from agentledger.store.body_text import searchable_parts, text_of_body
from agentledger.store.closable import Closable, closed_error
from agentledger.store.cursor import Keyset, encode_cursor
from agentledger.store.ranks import RankPlan
from agentledger.store.search_words import first_word_at, has_words, query_words

__all__ = [
    "CommitPlan",
    "Head",
    "ListWrite",
    "SearchHit",
    "SessionInfo",
    "SessionKey",
    "Store",
    "StoredList",
    "StoredMsg",
    "StoredState",
    "VersionInfo",
    "check_base",
    "check_blobs",
    "check_ranks",
    "check_title",
    "columns",
    "drop_dead_rows",
    "lists_from_rows",
]


@dataclass(frozen=True, slots=True)
class SessionKey:
    """Sessions are always addressed by tenant *and* id; ids are checked by ``Ledger``."""

    tenant: str
    session: str


@dataclass(frozen=True, slots=True)
class StoredMsg:
    """One message as a backend keeps it.

    ``body`` is the storage encoding (the canonical JSON, with large media replaced by blob
    references); ``digest`` is the message's content digest; ``text`` is its searchable text,
    given in every commit for backends that index it. Loads may leave ``text`` empty: the
    ledger decodes ``body`` and never reads it.
    """

    msg_id: str
    digest: bytes
    body: bytes
    text: str = ""


@dataclass(frozen=True, slots=True)
class Head:
    """What the ledger needs to plan the next save: the version and the live digests.

    ``messages`` holds, for the lists this process last loaded or saved, the ``Msg`` objects at
    each position (so the planner can skip positions that still hold the same object). A store
    never fills it: it has digests only.
    """

    version: int
    lists: dict[str, list[bytes]]
    values: dict[str, bytes]  # name -> digest of the value's canonical JSON
    incarnation: str = ""  # see ``Store.read_stamp``
    messages: dict[str, list[Msg]] = field(default_factory=dict)
    #: Where the derived title comes from, as the ledger last computed it (see ``title``);
    #: -1 when not known. A store never fills it.
    title_at: int = -1
    #: For a ``ranked`` store: each list's live ranks, in order, and its floor (see ``ranks``).
    ranks: dict[str, list[bytes]] = field(default_factory=dict)
    floors: dict[str, bytes] = field(default_factory=dict)
    #: Every value's canonical bytes, when the ledger knows them all (from a load, kept up by
    #: its saves); None otherwise. A store never fills it.
    raw_values: dict[str, bytes] | None = None
    #: The lists of ``messages`` whose every message is known to be decoded (a message once
    #: decoded stays so), which a decoding load need not walk again. A store never fills it.
    decoded: set[str] = field(default_factory=set)


@dataclass(slots=True)
class ListWrite:
    """Changes to one named list: which committed rows stay and where, the rows to put, and
    the list's new length.

    ``runs`` are the rows kept, as ``(old_start, new_start, count)`` ascending in both lists
    (the ledger's alignment, see ``planner``); every other new position gets a row from
    ``puts`` ``(position, row)``, and every committed row no run keeps leaves the list (it stays
    in history). ``runs=None`` means the positional write: a put at a position that holds a live
    row replaces it, and every live row at a position ``>= length`` is truncated away.
    """

    name: str
    puts: list[tuple[int, StoredMsg]]
    length: int
    runs: list[tuple[int, int, int]] | None = None
    #: For a ``ranked`` store, set by the ledger: the puts' ranks, the rows closed, the floor.
    ranks: RankPlan | None = None

    def kept_runs(self, old_length: int) -> list[tuple[int, int, int]]:
        """The runs of committed rows kept, checked against the list's ``old_length``.

        Raises ``UserError`` unless the runs and the puts make a list of ``length`` exactly
        (every new position filled once, every run inside both lists, both ascending).
        """
        puts = sorted(position for position, _ in self.puts)
        if self.runs is None:
            limit = min(old_length, self.length)
            runs: list[tuple[int, int, int]] = []
            start = 0
            for position in puts:
                if position >= limit:
                    break
                if position > start:
                    runs.append((start, start, position - start))
                start = position + 1
            if limit > start:
                runs.append((start, start, limit - start))
        else:
            runs = self.runs
        _check_runs(self.name, runs, puts, old_length, self.length)
        return runs


def _check_runs(
    name: str, runs: list[tuple[int, int, int]], puts: list[int], old_length: int, length: int
) -> None:
    old_at = new_at = 0
    filled = 0
    put_at = 0
    for old_start, new_start, count in runs:
        if count < 1 or old_start < old_at or new_start < new_at:
            raise UserError(f"list {name!r}: kept runs must be non-empty and ascending")
        old_at, new_at = old_start + count, new_start + count
        if old_at > old_length or new_at > length:
            raise UserError(f"list {name!r}: a kept run reaches past the list")
        while put_at < len(puts) and puts[put_at] < new_start:
            put_at += 1
        if put_at < len(puts) and puts[put_at] < new_at:
            raise UserError(f"list {name!r}: a put at {puts[put_at]} overlaps a kept run")
        filled += count
    if len(set(puts)) != len(puts) or (puts and not 0 <= puts[0] <= puts[-1] < length):
        raise UserError(f"list {name!r}: puts must be at distinct positions below {length}")
    if filled + len(puts) != length:
        raise UserError(
            f"list {name!r}: {filled} kept and {len(puts)} put rows do not make {length}"
        )


@dataclass(slots=True)
class CommitPlan:
    """Everything one save writes, applied atomically at ``version == base_version + 1``."""

    key: SessionKey
    base_version: int
    committed_at: datetime
    lists: list[ListWrite] = field(default_factory=list)
    values: dict[str, bytes | None] = field(default_factory=dict)  # None deletes
    media: dict[bytes, bytes] = field(default_factory=dict)  # blob digest -> bytes
    title: str | None = None  # None keeps the stored title
    message_count: int | None = None  # length of ``context``; None keeps the stored count
    appended: int = 0
    replaced: int = 0
    truncated: int = 0
    base_incarnation: str = ""  # the life of the session the plan was made against

    @property
    def version(self) -> int:
        return self.base_version + 1

    @property
    def bytes_written(self) -> int:
        rows = sum(len(m.body) for w in self.lists for _, m in w.puts)
        values = sum(len(v) for v in self.values.values() if v is not None)
        return rows + values + sum(len(b) for b in self.media.values())


@dataclass(frozen=True, slots=True)
class StoredList:
    """One list as loaded, in columns: position ``i`` holds message ``ids[i]``, whose digest is
    ``digests[i]`` and whose storage body is ``bodies[i]``.

    Columns, not an object per message: a SQL backend splits the rows its driver returned with
    ``columns``, and a 12,000-message load builds no per-row Python object.
    """

    ids: Sequence[str]
    digests: Sequence[bytes]
    bodies: Sequence[bytes]
    #: The rows' ranks, from a ``ranked`` store (``None`` from the others).
    ranks: Sequence[bytes] | None = None

    @classmethod
    def of(cls, rows: Sequence[StoredMsg]) -> StoredList:
        return cls([r.msg_id for r in rows], [r.digest for r in rows], [r.body for r in rows])

    def __len__(self) -> int:
        return len(self.ids)


def columns(rows: Sequence[Sequence[Any]], first: int, count: int) -> list[list[Any]]:
    """Columns ``first`` to ``first + count - 1`` of ``rows``, one list each.

    One C-level pass per column: ``zip(*rows)`` would build an iterator object per row.
    """
    return [list(map(itemgetter(i), rows)) for i in range(first, first + count)]


def check_ranks(ranks: Sequence[Any], where: str) -> None:
    """Raise ``CorruptStoreError`` unless ``ranks`` (one list's, as read) are rank keys in
    strictly ascending order: two live rows at one rank, rows out of order (a damaged index) or
    a rank of another type is damage (a damaged rank value changes the list's id sums)."""
    try:
        if set(map(type, ranks)) <= {bytes} and all(map(lt, ranks, islice(ranks, 1, None))):
            return
    except TypeError:  # ranks of mixed types
        pass
    raise CorruptStoreError(
        f"{where}: live rows out of rank order, at one rank, or with a rank that is not bytes",
        location=where,
    )


def lists_from_rows(rows: Sequence[Sequence[Any]], where: str) -> dict[str, StoredList]:
    """SQL rows ``(list, rank, msg_id, digest, body)``, each list's together and in rank
    order, as one ``StoredList`` per list, each list's ranks checked (``check_ranks``)."""
    names, ranks, ids, digests, bodies = columns(rows, 0, 5)
    lists: dict[str, StoredList] = {}
    start = 0
    while start < len(names):
        name = names[start]
        stop = start + names.count(name)  # the rows of one list are adjacent
        if stop - start == len(names):  # the usual single list: no slice copied
            found = StoredList(ids, digests, bodies, ranks)
        else:
            part = slice(start, stop)
            found = StoredList(ids[part], digests[part], bodies[part], ranks[part])
        check_ranks(found.ranks, f"{where}/{name}")  # type: ignore[arg-type]
        lists[name] = found
        start = stop
    return lists


@dataclass(slots=True)
class StoredState:
    """A session as stored at one version (only non-empty lists).

    ``may_have_media`` is False when the backend knows that no body references stored media,
    which spares the loader from searching every body for references.
    """

    version: int
    lists: dict[str, StoredList]
    values: dict[str, bytes]
    incarnation: str = ""
    may_have_media: bool = True
    #: A ``ranked`` store's list floors at this version (see ``ranks``).
    floors: dict[str, bytes] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """One row of ``list_sessions``."""

    tenant: str
    session_id: str
    title: str | None
    message_count: int
    version: int
    created_at: datetime
    updated_at: datetime

    @property
    def cursor(self) -> str:
        """Where this row stands in the listing, as a short URL-safe string: pass it (or the
        row itself) as ``list_sessions(after=...)`` for the page that follows it."""
        return encode_cursor(self.tenant, self.updated_at, self.session_id)


@dataclass(frozen=True, slots=True)
class VersionInfo:
    """One committed version of a session and what it changed."""

    version: int
    committed_at: datetime
    appended: int
    replaced: int
    truncated: int
    values_changed: int


@dataclass(frozen=True, slots=True)
class SearchHit:
    """A message whose text matched a search."""

    tenant: str
    session_id: str
    list_name: str
    position: int
    msg_id: str
    snippet: str


class Store(Closable, ABC):
    """The primitives every backend implements. See the module docstring for the contract."""

    #: A string naming where the data lives (path, URL); used to share in-process leases.
    location: str = ""

    #: Whether the ledger reads ``read_stamp`` before planning each save from its cache. A
    #: store whose ``commit`` checks the base version and incarnation in the same round trip
    #: as the write sets it False: a save from a stale cache then fails with ``ConflictError``
    #: and is planned again, and the common save costs one round trip, not two.
    stamp_before_commit: bool = True

    #: Whether rows are ordered by rank keys (see ``ranks``) that the ledger assigns: every
    #: ``ListWrite`` then carries a ``RankPlan``, and ``read_head`` and ``load`` (at the latest
    #: version) return each list's ranks and floor. Stores that keep lists in order themselves
    #: (memory, JSONL) leave it False.
    ranked: bool = False

    # -- lifecycle ---------------------------------------------------------------------
    def setup(self) -> None:
        """Create or migrate the schema. Idempotent; safe to call from many processes."""

    def close(self) -> None:
        """Release connections and file handles, for good: every later call on this store
        raises ``ClosedError``. Closing again does nothing more than finish a close that failed;
        what was committed stays, for a new store on the same location to read."""

    def _closed_error(self) -> ClosedError:
        return closed_error(self.location or type(self).__name__)

    # -- reading -----------------------------------------------------------------------
    @abstractmethod
    def read_version(self, key: SessionKey) -> int:
        """The committed version of a session, 0 if it does not exist. Must be cheap."""

    def read_stamp(self, key: SessionKey) -> tuple[str, int]:
        """``(incarnation, version)`` of a session; ``("", 0)`` if it does not exist.

        The incarnation names one life of a session: it changes when a session is deleted and
        created again, whose versions restart at 1. The ledger trusts its cached digests only
        while both match. Must be cheap. The default (no incarnation) suits stores that never
        reuse a version for a key.
        """
        return "", self.read_version(key)

    @abstractmethod
    def read_head(self, key: SessionKey) -> Head | None:
        """Version and live digests of every list and value, or None if absent."""

    @abstractmethod
    def load(self, key: SessionKey, version: int | None = None) -> StoredState | None:
        """The session as it was at ``version`` (default: latest), or None if it does not exist.

        Raises ``VersionNotFoundError`` for a version that never existed or was purged.
        """

    @abstractmethod
    def read_media(self, key: SessionKey, digests: Sequence[bytes]) -> dict[bytes, bytes]:
        """The blobs stored for these digests (missing ones are simply absent)."""

    @abstractmethod
    def history(self, key: SessionKey) -> list[VersionInfo]:
        """Every version still on record, oldest first."""

    @abstractmethod
    def list_sessions(
        self,
        tenant: str,
        *,
        limit: int | None = None,
        offset: int = 0,
        after: Keyset | None = None,
    ) -> list[SessionInfo]:
        """A tenant's sessions, most recently updated first: by ``(updated_at, session_id)``,
        descending. With ``after``, only those that sort below it (``(updated_at, session) <
        after``), answered from an index where the store has one, so that a page deep in the
        list costs what the first one does. ``Ledger`` passes ``after`` only when it is set.
        """

    # -- writing -----------------------------------------------------------------------
    @abstractmethod
    def commit(self, plan: CommitPlan) -> str | None:
        """Apply ``plan`` atomically if the session is at ``plan.base_version``.

        ``base_version == 0`` creates the session (and conflicts if it exists). Otherwise raise
        ``ConflictError(expected=plan.base_version, actual=stored)`` and change nothing; also
        when ``plan.base_incarnation`` is set and differs from the session's (see
        ``check_base``). Returns the session's incarnation (``None`` if the store has none).
        """

    @abstractmethod
    def delete(self, key: SessionKey) -> bool:
        """Remove the session and all its history. True if it existed."""

    @abstractmethod
    def purge_history(self, key: SessionKey, keep_last: int) -> int:
        """Drop rows only needed by versions older than the last ``keep_last``; return how many.

        Afterwards the last ``keep_last`` versions still load; older ones raise
        ``VersionNotFoundError``.
        """

    # -- conveniences with generic implementations ---------------------------------------
    def search(self, tenant: str, query: str, *, limit: int = 20) -> list[SearchHit]:
        """Live messages whose text has every word of ``query`` as a word prefix, any case,
        Latin accents ignored (``search_words``, the rule of the indexed stores), in
        ``list_sessions`` order, then by list and position.

        This generic version scans live messages; indexed backends override it.
        """
        wanted = query_words(query)
        if not wanted:
            return []
        hits: list[SearchHit] = []
        for info in self.list_sessions(tenant):
            state = self.load(SessionKey(tenant, info.session_id))
            if state is None:
                continue
            for name, rows in state.lists.items():
                for position, (msg_id, body) in enumerate(zip(rows.ids, rows.bodies, strict=True)):
                    text = text_of_body(body)
                    if has_words(text, wanted):
                        snippet = snippet_around(text, wanted[0])
                        hits.append(
                            SearchHit(tenant, info.session_id, name, position, msg_id, snippet)
                        )
                        if len(hits) >= limit:
                            return hits
        return hits

    #: Where file-backed stores keep lease files, so the lease also holds across processes.
    lease_dir: Path | None = None

    @contextmanager
    def lease(self, key: SessionKey, *, wait: float = 0.0) -> Iterator[None]:
        """Hold the session's run lease: at most one run per session at a time.

        This default holds a lock per process (shared by every store on the same ``location``)
        and, when ``lease_dir`` is set, an exclusive ``flock`` on a lease file, which the OS
        releases if the holder dies; the Postgres backend uses an advisory lock instead.
        Raises ``SessionBusyError`` if the lease cannot be taken within ``wait`` seconds.

        Neither lock can end while the holder's process lives, so such a lease is never lost
        under its holder, with one exception: a lease file deleted (or its directory removed)
        while held, after which another process locks a new file of the same name. A backend
        whose lease can end under its holder (PostgreSQL's, with its connection) says so in
        its own ``lease``; saves made with ``expected_version``, as the agent's are, never
        replace another writer's commit in any case.
        """
        deadline = time.monotonic() + wait
        lock = process_lock(self.location, key)
        if not acquire_within(lock, wait):
            raise _busy(key)
        try:
            if self.lease_dir is None:
                yield
                return
            with _file_lease(self.lease_dir, key, deadline):
                yield
        finally:
            lock.release()


def check_wait(wait: object, name: str = "wait") -> float:
    """``wait`` (how long a lease call may wait for a busy session) in seconds, from 0 to
    ``math.inf`` (as long as it takes), else ``UserError``: ``lock.acquire`` refuses a timeout
    past ``threading.TIMEOUT_MAX`` with ``OverflowError``, and a NaN compares false with any
    deadline."""
    if isinstance(wait, bool) or not isinstance(wait, int | float) or math.isnan(wait) or wait < 0:
        raise UserError(f"{name} must be a number of seconds from 0 to math.inf, got {wait!r}")
    return float(wait)


def acquire_within(lock: Any, wait: float) -> bool:
    """``lock.acquire`` waiting at most ``wait`` seconds, however long (infinity included)."""
    if wait <= 0:
        return bool(lock.acquire(blocking=False))
    if wait >= threading.TIMEOUT_MAX:
        return bool(lock.acquire())
    return bool(lock.acquire(timeout=wait))


def _busy(key: SessionKey) -> SessionBusyError:
    return SessionBusyError(f"session {key.session!r} (tenant {key.tenant!r}) is already running")


@contextmanager
def _file_lease(directory: Path, key: SessionKey, deadline: float) -> Iterator[None]:
    import fcntl

    from agentledger.store.ids import path_component

    folder = directory / path_component(key.tenant)
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / f"{path_component(key.session)}.lease", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise _busy(key) from None
                time.sleep(0.01)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def searchable_text(msg: Msg) -> str:
    """The text search indexes: text blocks and tool-result text (``body_text`` reads the
    same from a stored body)."""
    return searchable_parts(msg.text, [r.text for r in msg.tool_results])


def drop_dead_rows(rows_by_name: dict[str, list[Any]], oldest: int) -> int:
    """Forget, in place, the rows (anything with ``version_to``) that only versions older than
    ``oldest`` need: for in-process stores purging history. Returns how many went."""
    removed = 0
    for name, rows in rows_by_name.items():
        kept = [r for r in rows if r.version_to is None or r.version_to > oldest]
        removed += len(rows) - len(kept)
        rows_by_name[name] = kept
    return removed


def check_base(plan: CommitPlan, version: int, incarnation: str) -> None:
    """Raise ``ConflictError`` unless the stored session is the one ``plan`` was made against."""
    if version != plan.base_version:
        raise ConflictError(
            f"session {plan.key.session!r} is at version {version}, "
            f"the save was planned at {plan.base_version}",
            expected=plan.base_version,
            actual=version,
        )
    if version and plan.base_incarnation and incarnation != plan.base_incarnation:
        raise ConflictError(
            f"session {plan.key.session!r} was deleted and created again since the save was "
            "planned",
            expected=plan.base_version,
            actual=version,
        )


def check_title(plan: CommitPlan) -> str | None:
    """``plan.title`` once it is known to be text (or None), so no backend writes another type.

    Raises ``UserError`` naming the type: a title comes from the session's ``title`` value,
    which may hold any JSON value.
    """
    title = plan.title
    if title is not None and not isinstance(title, str):
        raise UserError(
            f"session {plan.key.session!r}: the title must be text (str), got "
            f"{type(title).__name__}"
        )
    return title


def check_blobs(found: dict[bytes, bytes], where: str) -> dict[bytes, bytes]:
    """``found`` (blob digest -> bytes, as read) once every blob matches its digest; a blob
    that does not is ``CorruptStoreError``, never handed out as someone's media."""
    for digest, data in found.items():
        if type(data) is not bytes or digest_of(data) != digest:
            raise CorruptStoreError(
                f"{where}: blob {digest.hex()} does not match its digest", location=where
            )
    return found


def check_version(version: int | None, oldest: int, latest: int) -> None:
    """Raise ``VersionNotFoundError`` unless ``oldest <= version <= latest``."""
    if version is not None and not oldest <= version <= latest:
        raise VersionNotFoundError(
            f"version {version} is not available (this session has versions {oldest}..{latest})"
        )


def snippet_around(text: str, word: str, width: int = 80) -> str:
    """A short excerpt of ``text`` centred on its first word that starts with ``word`` (a word
    of ``search_words.query_words``), or from its start if none does."""
    at = first_word_at(text, word)
    start = max(0, at - width // 2) if at >= 0 else 0
    excerpt = text[start : start + width].replace("\n", " ")
    return ("…" if start else "") + excerpt + ("…" if start + width < len(text) else "")


_locks_guard = threading.Lock()
_locks: dict[tuple[str, SessionKey], threading.Lock] = {}


def process_lock(location: str, key: SessionKey) -> threading.Lock:
    with _locks_guard:
        lock = _locks.get((location, key))
        if lock is None:
            lock = _locks[(location, key)] = threading.Lock()
        return lock
