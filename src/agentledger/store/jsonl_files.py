"""Low-level file work for ``jsonl://``: whole reads and writes, fsync, flock, fingerprints.

Kept apart from the store so that every system call the backend makes on a log sits in one
small place.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
from collections.abc import Iterable, Iterator
from pathlib import Path

__all__ = [
    "ensure_dir",
    "fingerprint",
    "flock",
    "fsync_dir",
    "holds",
    "read_range",
    "replace_file",
    "write_all",
]


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_range(fd: int, start: int, end: int) -> bytes:
    """Bytes ``start:end`` of the file (fewer if it is shorter now)."""
    parts = []
    while start < end:
        part = os.pread(fd, end - start, start)
        if not part:
            break
        parts.append(part)
        start += len(part)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def fingerprint(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def holds(fd: int, marks: Iterable[tuple[int, bytes]]) -> bool:
    """Whether the file holds each ``(offset, bytes)`` of ``marks``: one ``pread`` each."""
    return all(os.pread(fd, len(data), offset) == data for offset, data in marks)


@contextlib.contextmanager
def flock(path: Path, *, shared: bool = False) -> Iterator[None]:
    """An flock on ``path`` (created if missing), retried if it was unlinked meanwhile."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
            st = os.fstat(fd)
            try:
                current = os.stat(path)
            except FileNotFoundError:
                current = None
        except BaseException:
            os.close(fd)
            raise
        if current is not None and (current.st_dev, current.st_ino) == (st.st_dev, st.st_ino):
            break
        os.close(fd)  # delete() removed the lock file while we waited: lock the new one
    try:
        yield
    finally:
        os.close(fd)


def replace_file(target: Path, tmp_name: str, data: bytes) -> None:
    """Make ``target`` hold ``data`` whole or not at all: write a temporary file beside it
    named ``tmp_name`` (whose ``{}`` becomes a unique part), fsync it, rename it over
    ``target``. A failure removes the temporary file. The caller fsyncs the directory."""
    tmp = target.parent / tmp_name.format(f"{os.getpid()}-{secrets.token_hex(4)}")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


def ensure_dir(path: Path) -> None:
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True)
        fsync_dir(path.parent)
