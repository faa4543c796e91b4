"""This process's connections to one SQLite file, and how SQLite's failures are reported.

Connections (``Database``): WAL mode, ``synchronous=NORMAL`` (``FULL`` once a store on the file
asks for it: every commit flushed to disk, not only checkpoints), 2 KiB pages for new files. A
process holds one writer connection per file, shared through a reference-counted registry by
every store opened on that file and used under a lock; readers come from a small pool and never
wait for a writer. A writer that finds the file locked by another process does not sleep in
SQLite's busy handler (writers queued there convoy): each attempt waits at most
``BUSY_TIMEOUT_MS``, then it retries with jittered exponential backoff until ``WRITE_DEADLINE``.
The file is touched only through SQLite.

No memory map: SQLite reads a mapped file by plain memory access, and a file truncated under the
map (a damaged disk, a copy tool, another process) turns that access into SIGBUS, which kills
the process; a ``read()`` of the same page returns short and SQLite reports a malformed file.
Measured on a 12,000-message reload, the map saved 5-10 ms of about 35 ms of fetching.

A shared connection never outlives its file. Every operation first compares the path's
``(st_dev, st_ino)`` with the file the connections hold; a file deleted, or replaced and created
again at the same path, closes them all, and the next connection opens what the path names now
(and checks its schema again). While a connection holds the old file its inode stays in use,
so a new file at the path always has another number. A file that vanished while open is
``StoreUnavailableError`` until a file is back at the path (an empty database is never silently
created in its place).

Every ``sqlite3`` error becomes a ``StoreError`` (``store_error``). Damage is
``CorruptStoreError``: a malformed image, a file that is not a database, text that is not UTF-8,
a constraint a migration finds broken, a schema that is not the one the migrations made. A
vanished file is ``StoreUnavailableError``; I/O failures, a full disk or a file-size limit are
``StoreError`` saying that the operation was not applied.
"""

from __future__ import annotations

import os
import random
import sqlite3
import threading
import time
from pathlib import Path
from urllib.parse import quote

from agentledger.errors import CorruptStoreError, StoreError, StoreUnavailableError
from agentledger.store.closable import closed_error
from agentledger.store.sqlite_schema import define_body_text

__all__ = [
    "BUSY_TIMEOUT_MS",
    "PAGE_SIZE",
    "WRITE_DEADLINE",
    "Database",
    "acquire",
    "begin_immediate",
    "file_id",
    "release",
    "store_error",
]

#: How long one attempt to take the write lock may wait inside SQLite.
BUSY_TIMEOUT_MS = 50
#: How long a write keeps retrying a locked database before it gives up with ``StoreError``.
WRITE_DEADLINE = 10.0
#: Page size of new files: the trade between the bytes a commit writes and the cost of reading a
#: session back. Every page a commit touches (the file header, the session row, an index leaf)
#: costs a whole page of WAL, so smaller pages keep a small change small; but a body that does
#: not fit in its page spills into overflow pages, each read on its own, and a typical message
#: (about 1.4 KB in the benchmark) spills out of a 1 KiB page and fits in a 2 KiB one. Measured
#: with 1, 2 and 4 KiB pages: reloading the benchmark's 12,000 messages took 45, 36 and 31 ms;
#: in the session of ``test_bytes_written_follow_the_change`` (2,000 messages) a turn appended
#: 18, 28 and 47 KiB of WAL on average and an edit 13, 18 and 36 KiB. Files made with another
#: page size keep theirs; ``agentledger migrate`` into a new file moves every version across.
PAGE_SIZE = 2048
_MAX_BACKOFF = 0.1
_IDLE_READERS = 8
_READER_BUSY_MS = 5000  # readers wait only for WAL recovery, never for a writer

FileId = tuple[int, int]

# SQLite's primary result codes that mean the bytes on disk are not a sound database.
_DAMAGE = {
    sqlite3.SQLITE_CORRUPT,
    sqlite3.SQLITE_NOTADB,
    sqlite3.SQLITE_FORMAT,
    sqlite3.SQLITE_MISMATCH,
    sqlite3.SQLITE_CONSTRAINT,  # our statements never break a constraint on a sound file
}
_NOT_APPLIED = "nothing was written; what was committed before is intact"


def store_error(exc: BaseException, location: str) -> StoreError:
    """The ``StoreError`` that reports ``exc`` (an ``sqlite3`` or text decoding error)."""
    if isinstance(exc, UnicodeError):  # text in the file (or in SQLite's message) is not UTF-8
        return CorruptStoreError(
            f"{location}: text in the database is not valid UTF-8 ({exc})", location=location
        )
    try:
        text = str(exc)
    except UnicodeError:  # pragma: no cover - str() of an exception that holds bad bytes
        text = repr(exc.args)
    code = getattr(exc, "sqlite_errorcode", None)
    primary = None if code is None else code & 0xFF
    damaged = (
        primary in _DAMAGE
        or "malformed" in text
        or "Could not decode" in text
        # SQLITE_ERROR: our statements are fixed, so SQLite finding fault with one (no such
        # column, an FTS5 option it cannot parse) means the schema in the file is not ours
        or primary == sqlite3.SQLITE_ERROR
    )
    if damaged or (primary is None and isinstance(exc, sqlite3.IntegrityError)):
        return CorruptStoreError(f"{location}: {text}", location=location)
    if primary == sqlite3.SQLITE_FULL:
        return StoreUnavailableError(f"{location}: the disk is full; {_NOT_APPLIED} ({text})")
    if primary == sqlite3.SQLITE_IOERR:
        return StoreUnavailableError(
            f"{location}: I/O error (or a file-size limit); {_NOT_APPLIED} ({text})"
        )
    if primary == sqlite3.SQLITE_CANTOPEN:
        return StoreUnavailableError(f"{location}: cannot open the database file ({text})")
    return StoreError(f"{location}: {text}")


def file_id(path: str) -> FileId | None:
    """``(st_dev, st_ino)`` of the file ``path`` names now, or None if there is none."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino)


def is_busy(exc: sqlite3.Error) -> bool:
    """Whether SQLite failed because another connection holds a lock."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)


def begin_immediate(conn: sqlite3.Connection) -> None:
    """Take the write lock, retrying with jitter while another process holds it."""
    deadline = time.monotonic() + WRITE_DEADLINE
    delay = 0.001
    while True:
        try:
            conn.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if not is_busy(exc):
                raise
            if time.monotonic() + delay > deadline:
                raise StoreError(
                    f"the database stayed locked by another writer for {WRITE_DEADLINE:g} s"
                ) from exc
        time.sleep(delay * random.uniform(0.5, 1.5))
        delay = min(delay * 2, _MAX_BACKOFF)


class Database:
    """The connections this process holds on one database file (shared, reference-counted).

    ``file`` is the ``file_id`` of the file they have open (None before the first);
    ``generation`` counts the files they held, so a reader handed out before a reset is closed,
    not pooled, when it comes back.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.pid = os.getpid()
        self.refs = 0
        self.write_lock = threading.Lock()  # guards the writer and its transactions
        self.ready = False  # schema checked on this file by this process
        self.file: FileId | None = None
        self.generation = 0
        self._lost = False  # the file vanished while open and has not come back
        self._writer: sqlite3.Connection | None = None
        self._pool_lock = threading.Lock()  # guards file, generation, _lost and _idle
        self._idle: list[sqlite3.Connection] = []
        self._closed = False
        self.synchronous = "NORMAL"  # FULL once any store on the file asked for it

    def require_full_sync(self) -> None:
        """Flush every commit to disk (``synchronous=FULL``) from now on, for every store that
        shares these connections: one that asked for it must get it from a shared writer."""
        with self.write_lock:
            self.synchronous = "FULL"
            if self._writer is not None:
                self._writer.execute("PRAGMA synchronous = FULL")

    # -- the file behind the connections ---------------------------------------------------
    def check_file(self) -> None:
        """Close every connection if the path no longer names the file they hold.

        Raises ``StoreUnavailableError`` while the file is gone.
        """
        # What the connections hold is read before the path is: read after, it could be a file
        # another thread created since the look at the path, which would then seem lost.
        with self._pool_lock:
            held, lost = self.file, self._lost
        current = file_id(self.path)
        if held is not None and current != held:
            self._reset(held)
            lost = current is None
            with self._pool_lock:
                self._lost = lost
        if current is None and lost:
            raise StoreUnavailableError(
                f"{self.path}: the database file was deleted or moved away while open; restore "
                "it, or close every store on it before starting a new database there"
            )

    def holds_current_file(self) -> bool:
        """Whether the path still names the file the connections hold."""
        return file_id(self.path) == self.file

    def _reset(self, held: FileId) -> None:
        with self.write_lock, self._pool_lock:
            if self.file != held:
                return  # another thread reset first
            self.file = None
            self.generation += 1
            self.ready = False
            stale, self._idle = self._idle, []
            if self._writer is not None:
                stale.append(self._writer)
                self._writer = None
        # Closed while the path names another file: SQLite sees that its file moved and leaves
        # the WAL at the path alone (no checkpoint, no delete), so nothing reaches the new file.
        for conn in stale:
            conn.close()

    def _connect(self, busy_ms: int, *, create: bool) -> sqlite3.Connection:
        """A new connection to the file the path names, registered as ``file``."""
        before = file_id(self.path)
        mode = "rwc" if create else "rw"
        uri = f"file:{quote(self.path)}?mode={mode}"
        conn = sqlite3.connect(
            uri, uri=True, timeout=busy_ms / 1000, isolation_level=None, check_same_thread=False
        )
        try:
            opened = file_id(self.path)
            if opened is None or (before is not None and before != opened):
                raise StoreUnavailableError(
                    f"{self.path}: the database file was replaced while being opened; retry"
                )
            with self._pool_lock:
                if self.file is None:
                    self.file, self._lost = opened, False
                elif self.file != opened:
                    raise StoreUnavailableError(
                        f"{self.path}: the database file was replaced while open; retry"
                    )
            conn.execute(f"PRAGMA busy_timeout = {busy_ms}")
            conn.execute(f"PRAGMA synchronous = {self.synchronous}")
            conn.execute("PRAGMA mmap_size = 0")  # see the module docstring
            define_body_text(conn)  # the full-text index reads text with it
        except BaseException:
            conn.close()
            raise
        return conn

    # -- the writer ------------------------------------------------------------------------
    def writer(self) -> sqlite3.Connection:
        """The process's writer connection; call with ``write_lock`` held."""
        if self._closed:  # a call that took these connections just before its store closed
            raise closed_error(self.path)
        if self._writer is None:
            with self._pool_lock:
                create = not self._lost
            if create:
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            conn = self._connect(BUSY_TIMEOUT_MS, create=create)
            try:
                if conn.execute("PRAGMA page_count").fetchone()[0] == 0:
                    conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")  # a new file
                self._set_wal(conn)
                # Checkpoint at about 4 MiB of WAL (the default counts 1,000 pages, sized for
                # 4 KiB pages), and give the space back after a very large transaction.
                conn.execute(f"PRAGMA wal_autocheckpoint = {4 * 1024 * 1024 // PAGE_SIZE}")
                conn.execute("PRAGMA journal_size_limit = 67108864")
            except BaseException:
                conn.close()
                raise
            self._writer = conn
        return self._writer

    def drop_writer(self) -> None:
        """Close the writer after a failure left its state unknown; call with ``write_lock``."""
        conn, self._writer = self._writer, None
        if conn is not None:
            try:
                conn.close()
            except sqlite3.Error:  # pragma: no cover - closing a connection that failed
                pass

    @staticmethod
    def _set_wal(conn: sqlite3.Connection) -> None:
        deadline = time.monotonic() + WRITE_DEADLINE
        while True:
            try:
                conn.execute("PRAGMA journal_mode = WAL").fetchone()
                return
            except sqlite3.OperationalError as exc:
                if not is_busy(exc) or time.monotonic() > deadline:
                    raise
            time.sleep(random.uniform(0.001, 0.02))

    # -- readers ---------------------------------------------------------------------------
    def take_reader(self) -> tuple[sqlite3.Connection, int]:
        """A reader connection and the ``generation`` it belongs to (for ``give_back``)."""
        with self._pool_lock:
            if self._closed:
                raise closed_error(self.path)
            generation = self.generation
            if self._idle:
                return self._idle.pop(), generation
        return self._connect(_READER_BUSY_MS, create=False), generation

    def give_back(self, conn: sqlite3.Connection, generation: int) -> None:
        with self._pool_lock:
            keep = not self._closed and generation == self.generation
            if keep and len(self._idle) < _IDLE_READERS:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._pool_lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
        with self.write_lock:
            self.drop_writer()


_registry_lock = threading.Lock()
_registry: dict[str, Database] = {}
# Entries inherited through fork(): a child must neither use nor close its parent's connections.
_inherited: list[Database] = []


def acquire(path: str) -> Database:
    """The shared connections for ``path`` (a resolved file name), with one more reference."""
    with _registry_lock:
        db = _registry.get(path)
        if db is not None and db.pid != os.getpid():
            _inherited.append(db)
            db = None
        if db is None:
            db = _registry[path] = Database(path)
        db.refs += 1
        return db


def release(db: Database) -> None:
    """Drop one reference; the last one closes the connections."""
    with _registry_lock:
        if db.pid != os.getpid():
            return
        db.refs -= 1
        if db.refs > 0:
            return
        if _registry.get(db.path) is db:
            del _registry[db.path]
    db.close()
