"""``jsonl://`` and its files: a cached index is never taken for a log that replaced it, and a
write the disk refuses is a typed error that leaves the log as it was committed.

Disk-full runs twice: under ``RLIMIT_FSIZE`` with ``SIGXFSZ`` ignored (always), and on a small
tmpfs when this process may mount one (skipped with the reason otherwise).
"""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from reliability import record

from agentledger.errors import StoreUnavailableError
from agentledger.messages import ImageBlock, Msg
from agentledger.store import Ledger, SessionKey
from agentledger.store.jsonl import JsonlStore
from agentledger.store.jsonl_files import fingerprint
from tests.store.test_jsonl import _log, _msgs

KEY = SessionKey("default", "s")


# -- the cached index and the file under it -----------------------------------------------------
def _recreate_in_place(path: Path, new: bytes, *, keep_mtime: bool) -> None:
    """Another writer deleted the session and created it again, and the filesystem gave the
    new log the old inode (and, with 1-second timestamps, the old mtime)."""
    before = os.stat(path)
    with path.open("r+b") as f:
        f.write(new)
        f.truncate()
    if keep_mtime:
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def _same_size_log(at: Path, size: int, msgs: list[Msg]) -> bytes:
    for attempt in range(5):  # the header's time may print with fewer digits (rarely)
        with Ledger(JsonlStore(at / str(attempt))) as ledger:
            ledger.save("s", msgs)
        data = _log(at / str(attempt)).read_bytes()
        if len(data) == size:
            return data
    raise AssertionError("could not build a log of the same size")


def test_a_session_recreated_in_place_is_not_taken_for_the_cached_one(
    ledgers: Callable[..., Ledger], root: Path, tmp_path: Path
) -> None:
    old, new = _msgs(3, "a"), _msgs(3, "b")
    ledgers().save("s", old)
    reader, lister = ledgers(), JsonlStore(root)
    assert reader.messages("s") == old
    assert [i.title for i in lister.list_sessions("default")] == [old[0].text]
    stamp = reader.store.read_stamp(KEY)
    path = _log(root)
    before = fingerprint(os.stat(path))
    _recreate_in_place(path, _same_size_log(tmp_path / "other", before[2], new), keep_mtime=True)
    assert fingerprint(os.stat(path)) == before  # device, inode, size and mtime all equal

    assert reader.store.read_stamp(KEY) != stamp
    assert reader.messages("s") == new
    assert [i.title for i in lister.list_sessions("default")] == [new[0].text]
    report = reader.save("s", [*new, *_msgs(1, "c")])  # planned against the live session
    assert (report.version, report.appended) == (2, 1)
    assert ledgers().messages("s") == [*new, *_msgs(1, "c")]


def test_a_longer_log_in_the_same_inode_is_read_from_its_start(
    ledgers: Callable[..., Ledger], root: Path, tmp_path: Path
) -> None:
    ledgers().save("s", _msgs(2, "a"))
    reader = ledgers()
    assert reader.messages("s") == _msgs(2, "a")
    other = tmp_path / "other"
    ledgers(other).save("s", _msgs(5, "b"))
    _recreate_in_place(_log(root), _log(other).read_bytes(), keep_mtime=False)
    assert reader.messages("s") == _msgs(5, "b") and reader.version("s") == 1


def test_an_unchanged_log_costs_a_few_reads_of_its_ends(
    ledgers: Callable[..., Ledger], root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = ledgers()
    ledger.save("s", _msgs(200))
    reads: list[tuple[int, int]] = []
    real = os.pread

    def spy(fd: int, n: int, offset: int) -> bytes:
        reads.append((n, offset))
        return real(fd, n, offset)

    monkeypatch.setattr(os, "pread", spy)
    assert ledger.save("s", _msgs(200)).noop
    size = _log(root).stat().st_size
    assert reads and all(n < 1024 for n, _ in reads)  # the header and the last commit record
    assert {offset for _, offset in reads} <= {0, *range(size - 1024, size)}


# -- failed writes: typed, undone, retried ------------------------------------------------------
@contextlib.contextmanager
def file_size_limit(limit: int) -> Iterator[None]:
    """Writes past ``limit`` bytes fail with EFBIG (``SIGXFSZ`` ignored) inside the block."""
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)


def _picture(n: int) -> Msg:
    return Msg.user(
        ImageBlock(media_type="image/png", data=bytes([n]) * 20_000), id=f"p{n}", created_at=None
    )


def _snapshot(root: Path) -> dict[str, bytes]:
    """Every file's bytes, lock files (empty, kept for the next writer) aside."""
    files = [p for p in root.rglob("*") if p.is_file() and not p.name.endswith(".lock")]
    return {str(p.relative_to(root)): p.read_bytes() for p in files}


def _history(ledger: Ledger, session: str = "s") -> list[list[Msg]]:
    return [ledger.messages(session, version=v.version) for v in ledger.history(session)]


def _prepare(ledger: Ledger) -> None:
    for n in range(1, 5):
        ledger.save("s", _msgs(n * 3))


OPERATIONS: dict[str, Callable[[Ledger], object]] = {
    "append a version": lambda ledger: ledger.save("s", [*_msgs(12), _big()]),
    "write a blob": lambda ledger: ledger.save("s", [*_msgs(12), _picture(7)]),
    "create a session": lambda ledger: ledger.save("new", [_big()]),
    "compact": lambda ledger: ledger.purge_history("s", keep_last=1),
}


def _big() -> Msg:
    return Msg.user("big " * 2000, id="big", created_at=None)


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_a_file_size_limit_is_a_typed_error_that_leaves_the_log_intact(
    ledgers: Callable[..., Ledger], root: Path, operation: str
) -> None:
    ledger = ledgers(ratio=0.0)
    _prepare(ledger)
    before, history = _snapshot(root), _history(ledger)
    limit = 256 if operation == "compact" else _log(root).stat().st_size + 256
    with file_size_limit(limit), pytest.raises(StoreUnavailableError) as info:
        OPERATIONS[operation](ledger)
    assert isinstance(info.value.__cause__, OSError)
    assert info.value.__cause__.errno == errno.EFBIG
    assert "was not applied" in str(info.value)
    assert _snapshot(root) == before  # nothing half-written, no temporary file left
    record(
        "faults",
        "JSONL file-size limit (RLIMIT_FSIZE)",
        backend="jsonl",
        operation=operation,
        error=type(info.value).__name__,
        errno="EFBIG",
        files_unchanged=True,
    )
    for reader in (ledger, ledgers()):
        assert _history(reader) == history and not reader.exists("new")
    OPERATIONS[operation](ledger)  # the limit is gone: the same call now works
    assert _history(ledgers())[-1] == _history(ledger)[-1]


def test_a_purge_record_that_cannot_be_written_is_a_typed_error(
    ledgers: Callable[..., Ledger], root: Path
) -> None:
    ledger = ledgers(ratio=float("inf"))  # never compacts: purge appends a record
    _prepare(ledger)
    before = _snapshot(root)
    with file_size_limit(_log(root).stat().st_size), pytest.raises(StoreUnavailableError):
        ledger.purge_history("s", keep_last=2)
    assert _snapshot(root) == before
    assert [v.version for v in ledgers().history("s")] == [1, 2, 3, 4]
    ledger.purge_history("s", keep_last=2)
    assert [v.version for v in ledgers().history("s")] == [3, 4]


def test_a_read_error_is_typed(
    ledgers: Callable[..., Ledger], monkeypatch: pytest.MonkeyPatch
) -> None:
    ledgers().save("s", _msgs(3))

    def fail(fd: int, n: int, offset: int) -> bytes:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "pread", fail)
    for call in (
        lambda ledger: ledger.load("s"),
        lambda ledger: ledger.list_sessions(),
        lambda ledger: ledger.save("s", _msgs(4)),
    ):
        with pytest.raises(StoreUnavailableError, match="Input/output error"):
            call(ledgers())


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs, mounted for this test (needs the right to mount)."""
    where = tmp_path / "small"
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(
            f"cannot mount a small tmpfs here ({mounted.stderr.strip() or mounted.returncode}); "
            "the RLIMIT_FSIZE test covers the same paths"
        )
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


def _fill(directory: Path) -> Path:
    filler = directory / "filler"
    with filler.open("wb", buffering=0) as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * 4096)
    return filler


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_a_full_disk_is_a_typed_error_that_leaves_the_log_intact(
    ledgers: Callable[..., Ledger], small_disk: Path, operation: str
) -> None:
    root = small_disk / "root"
    ledger = ledgers(root, ratio=0.0)
    _prepare(ledger)
    before, history = _snapshot(root), _history(ledger)
    filler = _fill(small_disk)
    with pytest.raises(StoreUnavailableError) as info:
        OPERATIONS[operation](ledger)
    assert isinstance(info.value.__cause__, OSError)
    assert info.value.__cause__.errno == errno.ENOSPC
    assert _snapshot(root) == before
    record(
        "faults",
        "JSONL full tmpfs",
        backend="jsonl",
        operation=operation,
        error=type(info.value).__name__,
        errno="ENOSPC",
        files_unchanged=True,
    )
    assert _history(ledgers(root)) == history
    filler.unlink()
    OPERATIONS[operation](ledger)
    assert _history(ledgers(root))[-1] == _history(ledger)[-1]
