"""``jsonl_compact``: a compacted log keeps every version on record and the session's life,
carries every check, and is never built from bytes that no longer match their checks."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from agentledger.errors import CorruptStoreError, VersionNotFoundError
from agentledger.store import Ledger, SessionKey
from agentledger.store.jsonl_format import Commit, Header, Keep, decoder
from tests.store.test_jsonl import _log, _msgs
from tests.store.test_jsonl_replay import FORMAT_1, _commit_ends, reseal

KEY = SessionKey("default", "s")


def test_a_format_1_log_is_compacted_into_a_checked_format_3_log(
    ledgers: Callable[[], Ledger], root: Path
) -> None:
    path = _log(root)
    path.parent.mkdir(parents=True)
    path.write_bytes(FORMAT_1)
    ledger = ledgers(ratio=0.0)
    stamp = ledger.store.read_stamp(KEY)
    kept = {v: ledger.load("s", version=v) for v in (3, 4)}
    assert ledger.purge_history("s", keep_last=2) > 0
    data = path.read_bytes()
    assert len(data) < len(FORMAT_1)
    records = [decoder.decode(line) for line in data.splitlines()]
    header = records[0]
    assert isinstance(header, Header) and (header.format, header.oldest, header.id) == (3, 3, None)
    commits = [r for r in records if isinstance(r, Commit)]
    assert [c.v for c in commits] == [3, 4] and all(c.sum and c.crc for c in commits)
    assert reseal(data) == data  # every check in place and right
    for reader in (ledger, ledgers(ratio=0.0)):
        assert reader.store.read_stamp(KEY) == stamp  # the same life of the session
        assert {v: reader.load("s", version=v) for v in (3, 4)} == kept
        with pytest.raises(VersionNotFoundError):
            reader.load("s", version=2)
    flipped = data.replace(b'"hello 3"', b'"hello 4"')
    path.write_bytes(flipped)
    with pytest.raises(CorruptStoreError):
        ledgers(ratio=0.0).load("s")


def test_compaction_refuses_a_version_damaged_since_it_was_read(
    ledgers: Callable[[], Ledger], root: Path
) -> None:
    ledger = ledgers(ratio=0.0)
    for n in range(1, 6):
        ledger.save("s", _msgs(n * 2))  # v1..v5
    path = _log(root)
    data = path.read_bytes()
    before = os.stat(path)
    # damage a body of version 5 in place, keeping size and mtime: the index still trusts the
    # file, so only compaction's own check can notice
    at = data.rfind(b"m9 x") + 3
    assert at > _commit_ends(data)[-2]
    damaged = data[:at] + b"y" + data[at + 1 :]
    with path.open("r+b") as f:
        f.write(damaged)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    with pytest.raises(CorruptStoreError, match=r"version 5 .* no longer matches"):
        ledger.purge_history("s", keep_last=2)
    assert path.read_bytes() == damaged
    with pytest.raises(CorruptStoreError):
        ledgers(ratio=0.0).load("s")


def test_compaction_writes_only_what_replays_to_the_same_state(
    ledgers: Callable[[], Ledger], root: Path
) -> None:
    ledger = ledgers(ratio=0.0)
    states = {}
    for n in range(1, 7):
        msgs = _msgs(n) + [m.replace(content=f"v{n}") for m in _msgs(2, "e")]
        ledger.save_state("s", lists={"context": msgs}, values={"n": n, f"k{n % 2}": n})
        states[n] = ledger.load("s", version=n)
    ledger.purge_history("s", keep_last=3)
    data = _log(root).read_bytes()
    assert reseal(data) == data
    fresh = ledgers(ratio=0.0)
    assert {v: fresh.load("s", version=v) for v in (4, 5, 6)} == {v: states[v] for v in (4, 5, 6)}
    fresh.save("s", _msgs(1))
    ledger.purge_history("s", keep_last=1)  # a compacted log compacts again
    assert ledgers(ratio=0.0).messages("s") == _msgs(1) and ledgers(ratio=0.0).version("s") == 7


def test_compaction_after_shifts_keeps_every_version_on_record(
    ledgers: Callable[[], Ledger], root: Path
) -> None:
    """The snapshot puts each row at its position at the oldest version kept (not at the
    position it was written at, nor in the order rows were written), so the keep records copied
    after it move the same rows."""
    ledger = ledgers(ratio=0.0)
    msgs = _msgs(6)
    front, tail = _msgs(2, "front"), _msgs(2, "tail")
    lists = [
        msgs,
        [front[0], *msgs],  # v2: an insert at the front, written after the rows it precedes
        [front[0], *msgs[3:], *msgs[:3]],  # v3: a moved range
        [front[1], *msgs[4:], *msgs[:3], tail[0]],  # v4: a summary and an append
        [*msgs[5:], *msgs[:2], tail[1]],  # v5: a window and a deletion
    ]
    for new in lists:
        ledger.save("s", new)
    ledger.purge_history("s", keep_last=3)
    data = _log(root).read_bytes()
    assert reseal(data) == data
    assert sum(isinstance(decoder.decode(line), Keep) for line in data.splitlines()) == 2
    for reader in (ledger, ledgers(ratio=0.0)):
        for version in (3, 4, 5):
            assert reader.messages("s", version=version) == lists[version - 1], version
    ledgers(ratio=0.0).save("s", [tail[0], *lists[-1]])
    ledger.purge_history("s", keep_last=1)  # the snapshot of a shifted version compacts again
    assert ledgers(ratio=0.0).messages("s") == [tail[0], *lists[-1]]
