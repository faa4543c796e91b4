"""``jsonl:///dir``: one human-readable, append-only log file per session.

Layout (every id reaches the disk only through ``path_component``; the real ids are in the
header record)::

    root/<tenant>/<session>.jsonl    the log: records closed by one commit record per version
    root/<tenant>/<session>.lock     flock'ed by writers of that session
    root/<tenant>/_blobs/<digest>    large media, written once (tmp + rename), shared
    root/<tenant>/_blobs/.lock       shared by saves that write media, exclusive for collection

A save is one ``os.write`` of its records and commit record on an ``O_APPEND`` descriptor, then
``fsync``: its cost follows the size of the change. A crash can only leave a tail without its
commit record; loads ignore and report it (``last_torn_tail``), and the next save cuts it off
under the lock. Anything else that does not read back is damage (``CorruptStoreError``), and
nothing is ever cut or rewritten because of it. A save that fails (disk full, file-size limit,
I/O error) removes what it wrote and raises ``StoreUnavailableError``: the previous version
stays intact and a later save can retry.

Each process keeps the replayed index of the logs it uses. It trusts that index while the
file's identity, size and mtime are unchanged *and* the file still holds the index's header
line and last commit record at their offsets: a session deleted and created again can reuse
the inode, the size and (on a filesystem with coarse timestamps) the mtime, but not the header,
whose ``id`` is new in every life. When another process has appended, it reads only the new
bytes. ``purge_history`` rewrites a log atomically when dead records outweigh live ones. The
record format is in ``jsonl_format``, replaying a log in ``jsonl_replay``, compacting it in
``jsonl_compact``, media blobs in ``jsonl_blobs``.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

from agentledger.errors import CorruptStoreError, StoreUnavailableError
from agentledger.store.base import (
    CommitPlan,
    Head,
    SearchHit,
    SessionInfo,
    SessionKey,
    Store,
    StoredState,
    VersionInfo,
    check_base,
    check_version,
    snippet_around,
)
from agentledger.store.body_text import text_of_body
from agentledger.store.cursor import Keyset, newest_first
from agentledger.store.ids import path_component
from agentledger.store.jsonl_blobs import BLOBS, collect_blobs, holds_blobs, refs_in, write_blobs
from agentledger.store.jsonl_compact import compacted, live_bytes
from agentledger.store.jsonl_files import (
    ensure_dir,
    fingerprint,
    flock,
    fsync_dir,
    holds,
    read_range,
    replace_file,
    write_all,
)
from agentledger.store.jsonl_format import Purge, plan_records, seal
from agentledger.store.jsonl_replay import SessionLog, TornTail, read_info
from agentledger.store.search_words import has_words, query_words

__all__ = ["JsonlStore", "TornTail"]

logger = logging.getLogger("agentledger.store.jsonl")

_SUFFIX = ".jsonl"
_P = ParamSpec("_P")
_R = TypeVar("_R")


def _typed(
    method: Callable[Concatenate[JsonlStore, _P], _R],
) -> Callable[Concatenate[JsonlStore, _P], _R]:
    """Raise ``StoreUnavailableError`` for an ``OSError`` the method lets through."""

    @functools.wraps(method)
    def wrapper(self: JsonlStore, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return method(self, *args, **kwargs)
        except OSError as exc:
            raise StoreUnavailableError(
                f"jsonl store {self.location}: {method.__name__} failed: {exc}"
            ) from exc

    return wrapper


@contextlib.contextmanager
def _not_committed(path: Path, what: str) -> Iterator[None]:
    """Raise ``StoreUnavailableError`` for an ``OSError`` in a write that was undone."""
    try:
        yield
    except OSError as exc:
        raise StoreUnavailableError(
            f"{path}: {what} failed ({exc.strerror or exc}) and was not applied; what was "
            "committed before is intact, and it can be retried once the cause is fixed"
        ) from exc


def _unchanged(log: SessionLog, fd: int, st: os.stat_result) -> bool:
    """Whether the open file is still exactly the one ``log`` was read from (see the module
    docstring). A torn tail is always re-read: a writer may cut it and append as many bytes."""
    return log.torn is None and log.fingerprint == fingerprint(st) and holds(fd, log.marks())


class JsonlStore(Store):
    """Sessions as JSONL logs under ``root``; see the module docstring.

    ``cache_bytes`` bounds the log bytes whose replayed index this store keeps in memory
    (least recently used logs are dropped first and re-read on demand). ``purge_history``
    rewrites a log when its dead bytes exceed ``compaction_ratio`` times its live bytes.
    """

    stamp_before_commit = False  # ``commit`` checks version and incarnation under the lock

    def __init__(
        self,
        root: Path | str,
        *,
        cache_bytes: int = 256 * 2**20,
        compaction_ratio: float = 1.0,
    ) -> None:
        self.root = Path(root)
        self.location = str(self.root.resolve())
        self.lease_dir = self.root / ".leases"  # "." never appears in an encoded tenant
        self.cache_bytes = cache_bytes
        self.compaction_ratio = compaction_ratio
        #: The most recent tail without a commit record found while reading a log, if any.
        self.last_torn_tail: TornTail | None = None
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._logs: OrderedDict[str, SessionLog] = OrderedDict()
        self._tails: dict[str, tuple[tuple[int, int, int, int], bytes, SessionInfo]] = {}

    # -- paths and locks ---------------------------------------------------------------------
    def _tenant_dir(self, tenant: str) -> Path:
        return self.root / path_component(tenant)

    def _log_path(self, key: SessionKey) -> Path:
        return self._tenant_dir(key.tenant) / (path_component(key.session) + _SUFFIX)

    def _thread_lock(self, path: Path) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(str(path), threading.Lock())

    # -- the per-process index ---------------------------------------------------------------
    def _refresh(self, path: Path, key: SessionKey | None = None) -> SessionLog | None:
        """The replayed log at ``path`` (None if there is no file), reading only what changed.

        Caller holds the path's thread lock.
        """
        name = str(path)
        log = self._cached(name)
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            self._forget(name)
            return None
        try:
            st = os.fstat(fd)
            if log is not None and _unchanged(log, fd, st):
                return log
            log = self._read_log(path, fd, st, log)
        except BaseException:
            self._forget(name)
            raise
        finally:
            os.close(fd)
        if log.torn is not None and log.torn != self.last_torn_tail:
            self.last_torn_tail = log.torn
            logger.warning(
                "%s: ignoring %d bytes from line %d on (%s): they belong to no committed "
                "version; the next save removes them",
                log.torn.path,
                log.torn.length,
                log.torn.line,
                log.torn.reason,
            )
        header = log.header
        if (
            key is not None
            and header
            and (header.tenant, header.session) != (key.tenant, key.session)
        ):
            self._forget(name)
            raise CorruptStoreError(
                f"{path}, line 1: the log belongs to session {header.session!r} of "
                f"tenant {header.tenant!r}, not {key.session!r} of {key.tenant!r}",
                location=f"{path}:1",
            )
        self._remember(name, log)
        return log

    @staticmethod
    def _read_log(path: Path, fd: int, st: os.stat_result, log: SessionLog | None) -> SessionLog:
        if (
            log is not None
            and (log.fingerprint[0], log.fingerprint[1]) == (st.st_dev, st.st_ino)
            and log.clean_end > 0
            and st.st_size >= log.clean_end
            and holds(fd, log.marks())
        ):
            # Appended to by another process (the same header and last commit record are
            # still in place): read on from there.
            log.feed(read_range(fd, log.clean_end, st.st_size), log.clean_end)
            log.fingerprint = fingerprint(st)
            return log
        log = SessionLog(path)
        log.feed(read_range(fd, 0, st.st_size), 0)
        log.fingerprint = fingerprint(st)
        return log

    def _cached(self, name: str) -> SessionLog | None:
        with self._guard:
            log = self._logs.get(name)
            if log is not None:
                self._logs.move_to_end(name)
            return log

    def _remember(self, name: str, log: SessionLog) -> None:
        with self._guard:
            self._logs[name] = log
            self._logs.move_to_end(name)
            total = sum(entry.clean_end for entry in self._logs.values())
            while total > self.cache_bytes and len(self._logs) > 1:
                _, dropped = self._logs.popitem(last=False)
                total -= dropped.clean_end

    def _forget(self, name: str) -> None:
        with self._guard:
            self._logs.pop(name, None)

    # -- reading -----------------------------------------------------------------------------
    @_typed
    def setup(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)

    def close(self) -> None:
        with self._guard:
            self._logs.clear()
            self._tails.clear()

    @_typed
    def read_version(self, key: SessionKey) -> int:
        path = self._log_path(key)
        with self._thread_lock(path):
            log = self._refresh(path, key)
            return log.version if log else 0

    @_typed
    def read_stamp(self, key: SessionKey) -> tuple[str, int]:
        path = self._log_path(key)
        with self._thread_lock(path):
            log = self._refresh(path, key)
            return (log.incarnation, log.version) if log else ("", 0)

    @_typed
    def read_head(self, key: SessionKey) -> Head | None:
        path = self._log_path(key)
        with self._thread_lock(path):
            log = self._refresh(path, key)
            if log is None or log.version == 0:
                return None
            return log.head()

    @_typed
    def load(self, key: SessionKey, version: int | None = None) -> StoredState | None:
        path = self._log_path(key)
        with self._thread_lock(path):
            log = self._refresh(path, key)
            if log is None or log.version == 0:
                return None
            check_version(version, log.oldest, log.version)
            state = log.state(log.version if version is None else version)
        if holds_blobs(self._tenant_dir(key.tenant) / BLOBS):
            return state
        # no blob stored for the tenant: no body can reference one, so the loader need not
        # search every body for references (a body that still names one fails its digest
        # check on first read, as any damaged body does)
        return replace(state, may_have_media=False)

    @_typed
    def read_media(self, key: SessionKey, digests: Sequence[bytes]) -> dict[bytes, bytes]:
        blobs = self._tenant_dir(key.tenant) / BLOBS
        found = {}
        for digest in digests:
            try:
                found[digest] = (blobs / digest.hex()).read_bytes()
            except FileNotFoundError:
                pass
        return found

    @_typed
    def history(self, key: SessionKey) -> list[VersionInfo]:
        path = self._log_path(key)
        with self._thread_lock(path):
            log = self._refresh(path, key)
            return [g.info for g in log.groups] if log else []

    @_typed
    def list_sessions(
        self,
        tenant: str,
        *,
        limit: int | None = None,
        offset: int = 0,
        after: Keyset | None = None,
    ) -> list[SessionInfo]:
        directory = self._tenant_dir(tenant)
        try:
            entries = [e for e in os.scandir(directory) if e.name.endswith(_SUFFIX)]
        except FileNotFoundError:
            return []
        infos = []
        for entry in entries:
            info = self._session_info(Path(entry.path))
            if info is not None and info.tenant == tenant:
                infos.append(info)
        return newest_first(infos, limit=limit, offset=offset, after=after)

    def _session_info(self, path: Path) -> SessionInfo | None:
        """From the cached index, else from the file's first line and last commit record,
        else (a torn tail, damage) by replaying the log."""
        name = str(path)
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            st = os.fstat(fd)
            stamp = fingerprint(st)
            with self._thread_lock(path):
                log = self._cached(name)
                if log is not None and _unchanged(log, fd, st):
                    return log.info()
            with self._guard:
                cached = self._tails.get(name)
            if cached is not None and cached[0] == stamp and holds(fd, ((0, cached[1]),)):
                return cached[2]
            found = read_info(fd, st.st_size)
        finally:
            os.close(fd)
        if found is None:
            with self._thread_lock(path):
                log = self._refresh(path)
            return log.info() if log is not None else None
        header_line, info = found
        with self._guard:
            self._tails[name] = (stamp, header_line, info)
        return info

    @_typed
    def search(self, tenant: str, query: str, *, limit: int = 20) -> list[SearchHit]:
        """Live messages whose text has every word of ``query`` as a word prefix, as on every
        store (``Store.search``).

        The log keeps no separate text: it is derived from each body once and cached.
        """
        wanted = query_words(query)
        if not wanted:
            return []
        hits: list[SearchHit] = []
        for info in self.list_sessions(tenant):
            path = self._log_path(SessionKey(tenant, info.session_id))
            with self._thread_lock(path):
                log = self._refresh(path)
                if log is None:
                    continue
                for name, live in log.live.items():
                    for position, row in enumerate(live):
                        if row.text is None:
                            row.text = text_of_body(row.item.body)
                        if has_words(row.text, wanted):
                            snippet = snippet_around(row.text, wanted[0])
                            hits.append(
                                SearchHit(
                                    tenant,
                                    info.session_id,
                                    name,
                                    position,
                                    row.item.msg_id,
                                    snippet,
                                )
                            )
                            if len(hits) >= limit:
                                return hits
        return hits

    # -- writing -----------------------------------------------------------------------------
    @_typed
    def commit(self, plan: CommitPlan) -> str:
        key = plan.key
        path = self._log_path(key)
        directory = path.parent
        with contextlib.ExitStack() as stack:
            stack.enter_context(_not_committed(path, f"the save of version {plan.version}"))
            ensure_dir(directory)
            if plan.media:  # held shared so that blob collection cannot remove them meanwhile
                blobs = directory / BLOBS
                ensure_dir(blobs)
                stack.enter_context(flock(blobs / ".lock", shared=True))
            stack.enter_context(self._thread_lock(path))
            stack.enter_context(flock(path.with_suffix(".lock")))
            log = self._refresh(path, key)
            check_base(plan, log.version if log else 0, log.incarnation if log else "")
            if log is None or log.version == 0:
                log = SessionLog(path)
            records = plan_records(plan, log)  # refuses a bad plan before anything is written
            if plan.media:
                write_blobs(blobs, plan.media)
            start = log.clean_end
            st = self._append(path, start, b"".join(line for _, line, _ in records))
            try:
                log.apply_written(records, start)
            except BaseException:
                self._forget(str(path))
                raise
            log.fingerprint = fingerprint(st)
            self._remember(str(path), log)
            return log.incarnation

    def _append(self, path: Path, clean_end: int, data: bytes) -> os.stat_result:
        """Cut any torn tail, append ``data`` in one write and fsync; return the new stat.

        On failure the file is cut back to ``clean_end`` (removed if that leaves it empty), so
        that what was committed before is all it holds, and the error is raised.
        """
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            try:
                if clean_end == 0:
                    fsync_dir(path.parent)  # the name is durable before any version is in it
                if os.fstat(fd).st_size != clean_end:
                    os.ftruncate(fd, clean_end)  # the torn tail of a save that never committed
                write_all(fd, data)
                os.fsync(fd)
            except BaseException:
                self._forget(str(path))
                self._undo(path, fd, clean_end)
                raise
            return os.fstat(fd)
        finally:
            os.close(fd)

    @staticmethod
    def _undo(path: Path, fd: int, clean_end: int) -> None:
        """Cut a failed append off; raise if the file cannot be brought back."""
        try:
            os.ftruncate(fd, clean_end)
            if clean_end == 0:
                os.unlink(path)  # we hold the session's lock: nobody else is writing it
            elif os.fstat(fd).st_size == clean_end:
                return
            else:
                raise OSError(f"still {os.fstat(fd).st_size} bytes long")
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StoreUnavailableError(
                f"{path}: a failed save could not be cut off ({exc}); the file may hold an "
                f"unacknowledged version after byte {clean_end}"
            ) from exc

    @_typed
    def delete(self, key: SessionKey) -> bool:
        path = self._log_path(key)
        lock_path = path.with_suffix(".lock")
        if not path.exists() and not lock_path.exists():
            return False
        with self._thread_lock(path), flock(lock_path):
            try:
                log = self._refresh(path, key)
                existed = log is not None and log.version > 0
            except CorruptStoreError:
                existed = True
            self._forget(str(path))
            with self._guard:
                self._tails.pop(str(path), None)
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            with contextlib.suppress(FileNotFoundError):
                lock_path.unlink()  # waiters notice and lock the next file (see flock)
            fsync_dir(path.parent)
        self._collect_blobs(key.tenant)
        return existed

    @_typed
    def purge_history(self, key: SessionKey, keep_last: int) -> int:
        path = self._log_path(key)
        if not path.exists():
            return 0
        with self._thread_lock(path), flock(path.with_suffix(".lock")):
            log = self._refresh(path, key)
            if log is None or log.version == 0:
                return 0
            oldest = max(log.oldest, log.version - max(keep_last, 1) + 1)
            if oldest == log.oldest:
                return 0
            try:
                with _not_committed(path, f"purging history before version {oldest}"):
                    removed = log.drop_before(oldest)
                    live = live_bytes(log)
                    if log.clean_end - live > self.compaction_ratio * live:
                        self._rewrite(path, log)
                    else:
                        line = seal(Purge(oldest=oldest, at=datetime.now(UTC)))
                        st = self._append(path, log.clean_end, line)
                        log.closed_by(line)
                        log.fingerprint = fingerprint(st)
            except BaseException:
                self._forget(str(path))
                raise
        self._collect_blobs(key.tenant)
        return removed

    def _rewrite(self, path: Path, log: SessionLog) -> None:
        """Replace the log by its compacted form: tmp file, fsync, rename, fsync dir."""
        with open(path, "rb") as f:
            data = compacted(log, lambda a, b: read_range(f.fileno(), a, b))
        fresh = SessionLog(path)
        fresh.feed(data, 0)  # the new file must replay to the same versions
        if (fresh.version, fresh.oldest, fresh.torn, fresh.head()) != (
            log.version,
            log.oldest,
            None,
            log.head(),
        ):
            raise CorruptStoreError(f"{path}: compaction check failed; log left as it is")
        replace_file(path, f".{path.name}.{{}}.tmp", data)
        fresh.fingerprint = fingerprint(os.stat(path))
        self._remember(str(path), fresh)
        fsync_dir(path.parent)
        logger.info("%s: compacted from %d to %d bytes", path, log.clean_end, len(data))

    def _collect_blobs(self, tenant: str) -> None:
        collect_blobs(self._tenant_dir(tenant), _SUFFIX, self._blob_refs)

    def _blob_refs(self, path: Path) -> set[bytes]:
        """The blobs the log at ``path`` references: from its index if this process has it,
        else from its raw bytes (which may keep a few more blobs than needed)."""
        with self._thread_lock(path):
            if self._cached(str(path)) is not None:
                try:
                    log = self._refresh(path)
                except CorruptStoreError:
                    log = None
                if log is not None:
                    bodies = (r.item.body for rows in log.rows.values() for r in rows)
                    return {digest for body in bodies for digest in refs_in(body)}
        try:
            return refs_in(path.read_bytes())
        except FileNotFoundError:
            return set()
