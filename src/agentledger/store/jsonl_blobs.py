"""Large media of ``jsonl://`` sessions: one file per blob, shared by a tenant's sessions.

``root/<tenant>/_blobs/<digest>`` holds the bytes a storage body references (see
``store/media.py``). A blob is written once, to a temporary file that is fsynced and renamed,
so a reader never sees half of one; a failed write removes its temporary file. Saves that
write blobs hold ``_blobs/.lock`` shared and collection holds it exclusive, so a blob that a
save is about to reference is never collected under it. Collection keeps whatever some log
still on record references, and everything when it cannot tell.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable
from pathlib import Path

from agentledger.store.jsonl_files import flock, fsync_dir, replace_file
from agentledger.store.media import blob_refs

__all__ = ["BLOBS", "collect_blobs", "holds_blobs", "refs_in", "write_blobs"]

BLOBS = "_blobs"  # never a session file: those end in .jsonl / .lock
_NAME = re.compile(r"[0-9a-f]{32}")
_STALE_TMP_SECONDS = 3600


def refs_in(data: bytes) -> set[bytes]:
    """Digests of the blobs ``data`` (a body, or a whole log) may reference (a superset)."""
    return set(blob_refs(data))


def holds_blobs(blobs: Path) -> bool:
    """Whether the blob directory ``blobs`` holds any blob (it stops at the first). Read after
    a log, it tells whether what that log holds may reference one: a save writes its blobs
    before the commit that references them, and collection keeps what a log references."""
    try:
        with os.scandir(blobs) as entries:
            return any(_NAME.fullmatch(entry.name) for entry in entries)
    except (FileNotFoundError, NotADirectoryError):
        return False


def write_blobs(blobs: Path, media: dict[bytes, bytes]) -> None:
    """Write each missing blob: tmp file, fsync, rename; a failed one leaves no tmp file."""
    wrote = False
    for digest, data in media.items():
        target = blobs / digest.hex()
        if target.exists():
            continue
        replace_file(target, f".tmp-{digest.hex()}-{{}}", data)
        wrote = True
    if wrote:
        fsync_dir(blobs)


def collect_blobs(directory: Path, suffix: str, refs_of: Callable[[Path], set[bytes]]) -> None:
    """Remove the blobs under ``directory`` that no log there (a name ending in ``suffix``)
    references (``refs_of``), and temporary files a crashed writer left over an hour ago.

    The logs are listed under the exclusive lock: a session created meanwhile is seen."""
    blobs = directory / BLOBS
    if not blobs.is_dir():
        return
    with flock(blobs / ".lock"):
        referenced: set[bytes] = set()
        for entry in os.scandir(directory):
            if entry.name.endswith(suffix):
                try:
                    referenced |= refs_of(Path(entry.path))
                except OSError:
                    return  # cannot tell what is referenced: keep everything
        now = time.time()
        for entry in os.scandir(blobs):
            if _NAME.fullmatch(entry.name):
                if bytes.fromhex(entry.name) not in referenced:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(entry.path)
            elif entry.name.startswith(".tmp-"):
                with contextlib.suppress(FileNotFoundError):
                    if now - entry.stat().st_mtime > _STALE_TMP_SECONDS:
                        os.unlink(entry.path)
