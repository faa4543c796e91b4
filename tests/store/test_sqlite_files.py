"""SQLite and the file behind the connections: a failed open holds nothing, a file replaced or
deleted while open is never written through stale connections, and a full disk or a file-size
limit fails a save with a ``StoreUnavailableError`` that leaves the previous version loadable.

"Another process sees" is checked in a fresh interpreter: only there is no connection of this
process's registry involved.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from reliability import record

from agentledger.errors import CorruptStoreError, StoreUnavailableError
from agentledger.messages import Msg
from agentledger.store import Ledger, sqlite_db
from tests.store.sqlite_old import as_before_ranks

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}


def _msgs(count: int) -> list[Msg]:
    return [Msg.user(f"message {i}", id=f"m{i}") for i in range(count)]


def _seen_by_another_process(path: Path) -> tuple[int, list[str]]:
    """``(version, message ids)`` of session "s" as a fresh interpreter reads them."""
    code = (
        "import json, sys\n"
        "from agentledger.store import Ledger\n"
        "with Ledger(f'sqlite:///{sys.argv[1]}') as ledger:\n"
        "    state = ledger.load('s')\n"
        "print(json.dumps([state.version, [m.id for m in state.context]]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, env=ENV
    )
    assert done.returncode == 0, done.stderr[-2000:]
    version, ids = json.loads(done.stdout)
    return version, ids


def _remove(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def _restore(backup: Path, path: Path) -> None:
    """Put ``backup`` back at ``path`` the way a careful operator does: a new file renamed into
    place, without the old file's WAL and shared-memory index."""
    _remove(Path(f"{path}-restoring"))
    shutil.copy(backup, f"{path}-restoring")
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    os.replace(f"{path}-restoring", path)


@pytest.fixture
def saved(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """``state.db`` with session "s" at version 2 (two messages), and a closed copy of it."""
    path = tmp_path / "state.db"
    with Ledger(f"sqlite:///{path}") as ledger:
        ledger.save("s", _msgs(1))
        ledger.save("s", _msgs(2))
    backup = tmp_path / "backup.db"
    shutil.copy(path, backup)
    yield path, backup
    assert str(path.resolve()) not in sqlite_db._registry, "a store was left open"


# -- a failed open ------------------------------------------------------------------------------
def _not_a_database(path: Path) -> None:
    path.write_bytes(b"this is not a database" * 100)


def _refused_by_a_migration(path: Path) -> None:
    """Two live rows at one position in a file from before migration 3, which then fails."""
    as_before_ranks(path)
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("DROP INDEX messages_live_position")
        conn.execute("DELETE FROM schema_migrations WHERE id >= 3")
        conn.execute("ALTER TABLE versions DROP COLUMN lists")
        conn.execute("DROP INDEX sessions_by_id")
        conn.execute(
            "INSERT INTO messages (sid, list, position, version_from, msg_id, digest, body) "
            "SELECT sid, list, position, version_from, 'x', digest, body FROM messages "
            "WHERE msg_id = 'm0'"
        )


@pytest.mark.parametrize("damage", [_not_a_database, _refused_by_a_migration])
def test_a_failed_open_releases_everything(saved: tuple[Path, Path], damage: object) -> None:
    path, backup = saved
    damage(path)  # type: ignore[operator]
    with pytest.raises(CorruptStoreError):
        Ledger(f"sqlite:///{path}")
    assert str(path.resolve()) not in sqlite_db._registry
    _restore(backup, path)
    with Ledger(f"sqlite:///{path}") as ledger:
        assert ledger.version("s") == 2
        assert ledger.save("s", _msgs(3)).version == 3
    assert _seen_by_another_process(path) == (3, ["m0", "m1", "m2"])


def test_a_failed_open_of_a_shared_file_releases_only_its_own_reference(
    saved: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _ = saved
    with Ledger(f"sqlite:///{path}") as ledger:
        shared = sqlite_db._registry[str(path.resolve())]
        check = sqlite_db.Database.check_file

        def fail_once(db: sqlite_db.Database) -> None:
            monkeypatch.setattr(sqlite_db.Database, "check_file", check)
            raise StoreUnavailableError("failing as a first use can")

        monkeypatch.setattr(sqlite_db.Database, "check_file", fail_once)
        with pytest.raises(StoreUnavailableError, match="first use"):
            Ledger(f"sqlite:///{path}")
        assert shared.refs == 1 and sqlite_db._registry[str(path.resolve())] is shared
        assert ledger.save("s", _msgs(3)).version == 3


# -- the file replaced or deleted while open ----------------------------------------------------
def test_a_file_replaced_while_open_is_reopened(saved: tuple[Path, Path]) -> None:
    path, backup = saved
    with Ledger(f"sqlite:///{path}") as ledger:
        assert ledger.save("s", _msgs(3)).version == 3  # the old file is at version 3
        _restore(backup, path)  # the restored file is at version 2
        assert ledger.version("s") == 2 and [m.id for m in ledger.messages("s")] == ["m0", "m1"]
        assert ledger.save("s", [*_msgs(2), Msg.user("new", id="new")]).version == 3
        assert _seen_by_another_process(path) == (3, ["m0", "m1", "new"])


def test_a_save_planned_on_the_old_file_conflicts_on_the_new_one(
    saved: tuple[Path, Path],
) -> None:
    path, backup = saved
    with Ledger(f"sqlite:///{path}") as ledger:
        ledger.save("s", _msgs(3))
        ledger.save("s", _msgs(4))  # version 4 in the old file
        _restore(backup, path)
        report = ledger.save("s", _msgs(5))  # re-planned against version 2 of the new file
        assert report.version == 3 and report.appended == 3
    assert _seen_by_another_process(path) == (3, [f"m{i}" for i in range(5)])


def test_a_file_deleted_while_open_is_unavailable_until_it_is_back(
    saved: tuple[Path, Path],
) -> None:
    path, backup = saved
    with Ledger(f"sqlite:///{path}") as ledger:
        assert ledger.version("s") == 2
        _remove(path)
        with pytest.raises(StoreUnavailableError, match="deleted or moved"):
            ledger.load("s")
        with pytest.raises(StoreUnavailableError, match="deleted or moved"):
            ledger.save("s", _msgs(3))
        assert not path.exists()  # no empty database was created in its place
        _restore(backup, path)
        assert ledger.save("s", _msgs(3)).version == 3
    assert _seen_by_another_process(path) == (3, ["m0", "m1", "m2"])


def test_a_file_created_again_by_another_process_is_the_one_used(
    saved: tuple[Path, Path],
) -> None:
    path, _ = saved
    with Ledger(f"sqlite:///{path}") as ledger:
        assert ledger.version("s") == 2
        _remove(path)
        code = (
            "import sys\n"
            "from agentledger.messages import Msg\n"
            "from agentledger.store import Ledger\n"
            "with Ledger(f'sqlite:///{sys.argv[1]}') as ledger:\n"
            "    ledger.save('s', [Msg.user('other', id='other')])\n"
        )
        subprocess.run([sys.executable, "-c", code, str(path)], check=True, env=ENV)
        assert [m.id for m in ledger.messages("s")] == ["other"]
        assert ledger.save("s", [Msg.user("other", id="other"), *_msgs(1)]).version == 2
    assert _seen_by_another_process(path) == (2, ["other", "m0"])


# -- a full disk --------------------------------------------------------------------------------
_FILE_SIZE_LIMIT = """
import json, resource, signal, sys
from agentledger.errors import StoreError
from agentledger.messages import Msg
from agentledger.store import Ledger

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
path = sys.argv[1]
small = [Msg.user("small", id="small")]
big = [*small, Msg.user("x" * 2_000_000, id="big")]
out = {}
with Ledger(f"sqlite:///{path}") as ledger:
    ledger.save("s", small)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (512 * 1024, hard))
    try:
        ledger.save("s", big)
        out["failed"] = None
    except StoreError as exc:
        out["failed"] = type(exc).__name__ + ": " + str(exc)
    out["after failure"] = [ledger.version("s"), [m.id for m in ledger.messages("s")]]
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    out["next save"] = ledger.save("s", big).version
print(json.dumps(out))
"""


def test_a_file_size_limit_fails_the_save_and_keeps_the_previous_version(
    tmp_path: Path,
) -> None:
    """In a child process, where RLIMIT_FSIZE and the SIGXFSZ disposition cannot leak."""
    path = tmp_path / "state.db"
    done = subprocess.run(
        [sys.executable, "-c", _FILE_SIZE_LIMIT, str(path)],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout)
    assert out["failed"] is not None and out["failed"].startswith("StoreUnavailableError:"), out
    assert "nothing was written" in out["failed"]
    assert out["after failure"] == [1, ["small"]]
    record(
        "faults",
        "SQLite file-size limit (RLIMIT_FSIZE)",
        backend="sqlite",
        error=out["failed"].split(":")[0],
        previous_version_kept=True,
        next_save_version=out["next save"],
    )
    assert out["next save"] == 2
    assert _seen_by_another_process(path) == (2, ["small", "big"])


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs mounted for this test (needs root and mount permission)."""
    mount = tmp_path / f"disk-{uuid.uuid4().hex[:8]}"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({done.stderr.strip() or done.returncode})")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def _fill(directory: Path) -> Path:
    """Write a file until the file system is full; return it (deleting it frees the space)."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)
    return filler


def test_a_full_disk_fails_the_save_and_keeps_the_previous_version(small_disk: Path) -> None:
    path = small_disk / "state.db"
    small = [Msg.user("small", id="small")]
    big = [*small, Msg.user("y" * 300_000, id="big")]
    with Ledger(f"sqlite:///{path}") as ledger:
        ledger.save("s", small)
        filler = _fill(small_disk)
        with pytest.raises(StoreUnavailableError, match=r"disk is full|I/O error") as info:
            ledger.save("s", big)
        assert "nothing was written" in str(info.value)
        assert ledger.version("s") == 1 and ledger.messages("s") == small
        assert _seen_by_another_process(path) == (1, ["small"])
        record(
            "faults",
            "SQLite full tmpfs",
            backend="sqlite",
            error=type(info.value).__name__,
            previous_version_kept=True,
        )
        filler.unlink()
        assert ledger.save("s", big).version == 2
    assert _seen_by_another_process(path) == (2, ["small", "big"])


def test_a_file_created_by_another_thread_during_the_check_is_not_taken_for_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Threads opening a new database at once: one looks at the path just before another creates
    the file and records it. The first must not take the file it never saw for one that was
    deleted (it raised StoreUnavailableError, and every store on the file after it)."""
    db = sqlite_db.Database(str(tmp_path / "new.db"))
    real_file_id = sqlite_db.file_id

    def created_meanwhile(path: str) -> object:
        seen = real_file_id(path)  # nothing there yet
        (tmp_path / "new.db").touch()
        db.file = real_file_id(path)  # the other thread opened it and recorded it
        return seen

    monkeypatch.setattr(sqlite_db, "file_id", created_meanwhile)
    db.check_file()  # no error
    monkeypatch.undo()
    db.check_file()
    assert db.file == sqlite_db.file_id(str(tmp_path / "new.db"))
