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
under the lock. Each process keeps the replayed index of the logs it uses and, when another
process has appended, reads only the new bytes. ``purge_history`` rewrites a log atomically
when dead records outweigh live ones. The record format is in ``jsonl_format``, replaying a
log in ``jsonl_replay``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from agentledger.errors import CodecError, CorruptStoreError
from agentledger.messages import decode
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
    searchable_text,
    snippet_around,
)
from agentledger.store.ids import path_component
from agentledger.store.jsonl_files import (
    ensure_dir,
    fingerprint,
    flock,
    fsync_dir,
    read_range,
    write_all,
)
from agentledger.store.jsonl_format import Purge, encode_record, plan_records
from agentledger.store.jsonl_replay import SessionLog, TornTail, read_info

__all__ = ["JsonlStore", "TornTail"]

logger = logging.getLogger("agentledger.store.jsonl")

_SUFFIX = ".jsonl"
_BLOBS = "_blobs"  # never a session file: those end in .jsonl / .lock
_BLOB_NAME = re.compile(r"[0-9a-f]{32}")
_BLOB_REF = re.compile(rb"\\u0000blob:([0-9a-f]{32})")  # as media.blob_refs, but tolerant
_STALE_TMP_SECONDS = 3600


class JsonlStore(Store):
    """Sessions as JSONL logs under ``root``; see the module docstring.

    ``cache_bytes`` bounds the log bytes whose replayed index this store keeps in memory
    (least recently used logs are dropped first and re-read on demand). ``purge_history``
    rewrites a log when its dead bytes exceed ``compaction_ratio`` times its live bytes.
    """

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
        self._tails: dict[str, tuple[tuple[int, int, int, int], SessionInfo | None]] = {}

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
            st = os.stat(path)
        except FileNotFoundError:
            self._forget(name)
            return None
        if log is not None and log.fingerprint == fingerprint(st) and log.torn is None:
            return log  # (a torn tail is re-read: a writer may cut it and append same-sized data)
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            self._forget(name)
            return None
        try:
            log = self._read_log(path, fd, log)
        except FileNotFoundError:
            self._forget(name)
            return None
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
    def _read_log(path: Path, fd: int, log: SessionLog | None) -> SessionLog:
        st = os.fstat(fd)
        if (
            log is not None
            and (log.fingerprint[0], log.fingerprint[1]) == (st.st_dev, st.st_ino)
            and log.clean_end > 0
            and st.st_size >= log.clean_end
        ):
            # Appended to by another process: read on from our last commit record, after
            # checking that it is still there (the same inode may hold a recreated log).
            start = log.clean_end - len(log.last_close)
            data = read_range(fd, start, st.st_size)
            if data.startswith(log.last_close):
                log.feed(data[len(log.last_close) :], log.clean_end)
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
    def setup(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)

    def close(self) -> None:
        with self._guard:
            self._logs.clear()
            self._tails.clear()

    def read_version(self, key: SessionKey) -> int:
        path = self._log_path(key)
        with self._thread_lock(path):
            log = self._refresh(path, key)
            return log.version if log else 0

    def read_stamp(self, key: SessionKey) -> tuple[str, int]:
        path = self._log_path(key)
        with self._thread_lock(path):
            log = self._refresh(path, key)
            return (log.incarnation, log.version) if log else ("", 0)

    def read_head(self, key: SessionKey) -> Head | None:
        path = self._log_path(key)
        with self._thread_lock(path):
            log = self._refresh(path, key)
            if log is None or log.version == 0:
                return None
            return log.head()

    def load(self, key: SessionKey, version: int | None = None) -> StoredState | None:
        path = self._log_path(key)
        with self._thread_lock(path):
            log = self._refresh(path, key)
            if log is None or log.version == 0:
                return None
            check_version(version, log.oldest, log.version)
            return log.state(log.version if version is None else version)

    def read_media(self, key: SessionKey, digests: Sequence[bytes]) -> dict[bytes, bytes]:
        blobs = self._tenant_dir(key.tenant) / _BLOBS
        found = {}
        for digest in digests:
            try:
                found[digest] = (blobs / digest.hex()).read_bytes()
            except FileNotFoundError:
                pass
        return found

    def history(self, key: SessionKey) -> list[VersionInfo]:
        path = self._log_path(key)
        with self._thread_lock(path):
            log = self._refresh(path, key)
            return [g.info for g in log.groups] if log else []

    def list_sessions(
        self, tenant: str, *, limit: int | None = None, offset: int = 0
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
        infos.sort(key=lambda i: (i.updated_at, i.session_id), reverse=True)
        return infos[offset : None if limit is None else offset + limit]

    def _session_info(self, path: Path) -> SessionInfo | None:
        """From the cached index, else from the file's first line and last commit record."""
        name = str(path)
        try:
            with open(path, "rb") as f:
                st = os.fstat(f.fileno())
                stamp = fingerprint(st)
                with self._thread_lock(path):
                    log = self._cached(name)
                    if log is not None and log.fingerprint == stamp:
                        return log.info()
                with self._guard:
                    cached = self._tails.get(name)
                if cached is not None and cached[0] == stamp:
                    return cached[1]
                info = read_info(f.fileno(), st.st_size)
        except FileNotFoundError:
            return None
        except OSError as exc:
            logger.warning("%s: cannot read (%s); not listed", path, exc)
            return None
        with self._guard:
            self._tails[name] = (stamp, info)
        return info

    def search(self, tenant: str, query: str, *, limit: int = 20) -> list[SearchHit]:
        """Live messages whose text contains every word of ``query`` (case-insensitive).

        The log keeps no separate text: it is derived from each body once and cached.
        """
        words = [w for w in query.lower().split() if w]
        if not words:
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
                            row.text = _text_of(row.item.body)
                        text = row.text.lower()
                        if all(w in text for w in words):
                            snippet = snippet_around(row.text, words[0])
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
    def commit(self, plan: CommitPlan) -> str:
        key = plan.key
        path = self._log_path(key)
        directory = path.parent
        ensure_dir(directory)
        with contextlib.ExitStack() as stack:
            if plan.media:  # held shared so that blob collection cannot remove them meanwhile
                blobs = directory / _BLOBS
                ensure_dir(blobs)
                stack.enter_context(flock(blobs / ".lock", shared=True))
                self._write_blobs(blobs, plan.media)
            stack.enter_context(self._thread_lock(path))
            stack.enter_context(flock(path.with_suffix(".lock")))
            log = self._refresh(path, key)
            check_base(plan, log.version if log else 0, log.incarnation if log else "")
            if log is None or log.version == 0:
                log = SessionLog(path)
            records = plan_records(plan, log)
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
        """Cut any torn tail, append ``data`` in one write and fsync; return the new stat."""
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            try:
                if os.fstat(fd).st_size != clean_end:
                    os.ftruncate(fd, clean_end)  # the torn tail of a save that never committed
                write_all(fd, data)
                os.fsync(fd)
            except BaseException:
                self._forget(str(path))
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, clean_end)  # leave no half-written version behind
                raise
            st = os.fstat(fd)
        finally:
            os.close(fd)
        if clean_end == 0:
            fsync_dir(path.parent)
        return st

    def _write_blobs(self, blobs: Path, media: dict[bytes, bytes]) -> None:
        wrote = False
        for digest, data in media.items():
            target = blobs / digest.hex()
            if target.exists():
                continue
            tmp = blobs / f".tmp-{digest.hex()}-{os.getpid()}-{secrets.token_hex(4)}"
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
            wrote = True
        if wrote:
            fsync_dir(blobs)

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
                lock_path.unlink()  # waiters notice and lock the next file (see _flock)
            fsync_dir(path.parent)
        self._collect_blobs(key.tenant)
        return existed

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
                removed = log.drop_before(oldest)
                live = log.live_bytes()
                if log.clean_end - live > self.compaction_ratio * live:
                    self._rewrite(path, log)
                else:
                    line = encode_record(Purge(oldest=oldest, at=datetime.now(UTC)))
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
            data = log.compacted(lambda a, b: read_range(f.fileno(), a, b))
        tmp = path.parent / f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp"
        try:
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            fresh = SessionLog(path)
            fresh.feed(data, 0)  # the new file must replay to the same versions
            if (fresh.version, fresh.oldest, fresh.torn) != (log.version, log.oldest, None):
                raise CorruptStoreError(f"{path}: compaction check failed; log left as it is")
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            raise
        fsync_dir(path.parent)
        fresh.fingerprint = fingerprint(os.stat(path))
        self._remember(str(path), fresh)
        logger.info("%s: compacted from %d to %d bytes", path, log.clean_end, len(data))

    def _collect_blobs(self, tenant: str) -> None:
        """Remove the tenant's blobs that no row still on record references."""
        directory = self._tenant_dir(tenant)
        blobs = directory / _BLOBS
        if not blobs.is_dir():
            return
        with flock(blobs / ".lock"):
            referenced: set[bytes] = set()
            for entry in os.scandir(directory):
                if entry.name.endswith(_SUFFIX):
                    try:
                        referenced |= self._blob_refs(Path(entry.path))
                    except OSError:
                        return  # cannot tell what is referenced: keep everything
            now = time.time()
            for entry in os.scandir(blobs):
                if _BLOB_NAME.fullmatch(entry.name):
                    if bytes.fromhex(entry.name) not in referenced:
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(entry.path)
                elif entry.name.startswith(".tmp-"):
                    with contextlib.suppress(FileNotFoundError):
                        if now - entry.stat().st_mtime > _STALE_TMP_SECONDS:
                            os.unlink(entry.path)

    def _blob_refs(self, path: Path) -> set[bytes]:
        with self._thread_lock(path):
            if self._cached(str(path)) is not None:
                try:
                    log = self._refresh(path)
                except CorruptStoreError:
                    log = None
                if log is not None:
                    return {
                        bytes.fromhex(m.decode())
                        for rows in log.rows.values()
                        for r in rows
                        for m in _BLOB_REF.findall(r.item.body)
                    }
        # Not in memory: scan the raw file, which may keep a few more blobs than needed.
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return set()
        return {bytes.fromhex(m.decode()) for m in _BLOB_REF.findall(data)}


def _text_of(body: bytes) -> str:
    try:
        return searchable_text(decode(body))
    except CodecError:
        return ""
