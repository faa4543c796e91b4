"""``jsonl_replay``: what a load counts as committed, what is a torn tail, and what is damage.

The rule under test: only a write cut short (complete, valid records of the next version, then
at most one last line without its newline that could still be a record's start) is a torn tail,
which loads ignore and the next save cuts. Anything else that does not read back or fails its
check is damage: ``CorruptStoreError`` naming file and line, and the file is never changed.

``test_every_flipped_byte_*`` flips every byte of the last two versions (their records and
commit records) three ways (two bit masks and a newline; about 3,200 trials, a second or so),
reading each result both fresh and through an index that had read the log up to version 1.
``AGENTLEDGER_FUZZ=long`` flips every byte of the whole log with every single-bit mask, 0xFF
and 41 byte substitutions instead (about 178,000 trials, a minute or two), and also runs
``test_flips_in_a_torn_tail_*`` that way::

    AGENTLEDGER_FUZZ=long python -m pytest tests/store/test_jsonl_replay.py -k flip -s
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec
import pytest
from reliability import record

from agentledger.errors import CorruptStoreError, VersionNotFoundError
from agentledger.messages import Msg, encode
from agentledger.store import Ledger, SessionKey
from agentledger.store.jsonl import JsonlStore
from agentledger.store.jsonl_format import Commit, Header, Purge, checksum, decoder, seal
from agentledger.store.jsonl_replay import SessionLog, could_be_cut
from agentledger.store.title import title_text
from tests.store.test_jsonl import _log, _msgs

LONG = os.environ.get("AGENTLEDGER_FUZZ") == "long"
KEY = SessionKey("default", "s")
#: The title of ``_three_versions``' last version, whose title value is deleted: derived again.
_DERIVED = title_text(_msgs(1)[0])


def _state(ledger: Ledger, version: int | None = None) -> tuple[int, list[Msg], dict]:
    loaded = ledger.load("s", version=version)
    return loaded.version, list(loaded.context), dict(loaded.values)


def _three_versions(ledger: Ledger) -> dict[int, tuple[int, list[Msg], dict]]:
    """Versions that put, replace, truncate, set and delete values, and change the title."""
    msgs = _msgs(4)
    edited = msgs[1].replace(content="edited 1")
    lists = [msgs[:2], [msgs[0], edited, msgs[2]], [msgs[0], edited, msgs[3]]]
    values: list[dict] = [{"title": "first", "n": 1}, {"n": 2, "k": [1, 2]}, {"title": None}]
    states = {}
    for v, (msgs_v, values_v) in enumerate(zip(lists, values, strict=True), 1):
        ledger.save_state("s", lists={"context": msgs_v}, values=values_v)
        states[v] = _state(ledger)
    return states


def _shifted_versions(ledger: Ledger) -> dict[int, tuple[int, list[Msg], dict]]:
    """Versions whose lists move rows (keep records): an insert near the front with a deletion
    in the middle, then a summary over a prefix, a moved row and an append."""
    m, new = _msgs(6), _msgs(2, "n")
    summary = Msg.system("summary of m0 to m3", id="summary", created_at=None)
    lists = [m, [m[0], new[0], m[1], m[2], m[4], m[5]], [summary, m[5], m[4], new[1]]]
    values: list[dict] = [{"title": "first", "n": 1}, {"n": 2}, {"title": None}]
    states = {}
    for v, (msgs_v, values_v) in enumerate(zip(lists, values, strict=True), 1):
        ledger.save_state("s", lists={"context": msgs_v}, values=values_v)
        states[v] = _state(ledger)
    return states


#: The logs the byte-level tests damage: one of positional writes, one of shifts.
BUILDERS = {"edits": _three_versions, "shifts": _shifted_versions}
_OF = {"edits": "", "shifts": ", a log of shifts"}  # the report's titles


def _line_ends(data: bytes) -> list[int]:
    return [i + 1 for i, byte in enumerate(data) if byte == 10]


def _commit_ends(data: bytes) -> list[int]:
    """Offsets just past each commit record's newline."""
    ends, start = [], 0
    for end in _line_ends(data):
        if data[start:end].startswith(b'{"op":"commit"'):
            ends.append(end)
        start = end
    return ends


def reseal(data: bytes) -> bytes:
    """``data`` with every check recomputed: what a writer with a bug (not damage) leaves."""
    out: list[bytes] = []
    since = 0  # offset in ``out`` just past the last closing record
    for line in data.splitlines(keepends=True):
        rec = decoder.decode(line)
        if isinstance(rec, Commit):
            span = b"".join(out)[since:]
            line = seal(msgspec.structs.replace(rec, sum=checksum(span)))
        elif isinstance(rec, Header | Purge):
            line = seal(rec)
        out.append(line)
        if isinstance(rec, Commit | Purge):
            since = len(b"".join(out))
    return b"".join(out)


# -- damage is an error naming the line, and changes nothing --------------------------------
def _expect_damage(ledgers: Callable[[], Ledger], path: Path, line: int | None = None) -> None:
    before = path.read_bytes()
    with pytest.raises(CorruptStoreError) as info:
        ledgers().load("s")
    assert str(path) in str(info.value) and info.value.location is not None
    if line is not None:
        assert info.value.location == f"{path}:{line}"
    with pytest.raises(CorruptStoreError):
        ledgers().save("s", _msgs(9))
    try:  # listing reads the header and last commit record, which check themselves
        listed = [(i.version, i.title) for i in ledgers().list_sessions()]
        assert listed == [(3, _DERIVED)]
    except CorruptStoreError:
        pass
    assert path.read_bytes() == before


DAMAGE = {  # (what is changed in the last commit's line or its records, line it names)
    "a digit of message_count": (b'"message_count":3', b'"message_count":2', 14),
    "a letter in a body": (b'"m3 xxx', b'"m3 xxy', 14),
    "a digit of a position": (b'"pos":2,"id":"m3"', b'"pos":1,"id":"m3"', 14),
    "the title": (b'"title":"m0', b'"title":"M0', 14),
    "a letter of the op": (b'{"op":"commit","v":3', b'{"op":"commiT","v":3', 14),
    "a digit of the version": (b'{"op":"commit","v":3', b'{"op":"commit","v":4', 14),
}


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_a_damaged_last_version_is_an_error_not_a_torn_tail(
    ledgers: Callable[[], Ledger], root: Path, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    _three_versions(ledgers())
    path = _log(root)
    old, new, line = DAMAGE[case]
    data = path.read_bytes()
    at = data.rfind(old)
    assert at > _commit_ends(data)[-2]  # inside the last version
    path.write_bytes(data[:at] + new + data[at + len(old) :])
    with caplog.at_level(logging.WARNING, logger="agentledger.store.jsonl"):
        _expect_damage(ledgers, path, line)
    assert "ignoring" not in caplog.text  # never reported as a torn tail


def test_a_damaged_last_newline_is_not_a_write_cut_short(
    ledgers: Callable[[], Ledger], root: Path
) -> None:
    _three_versions(ledgers())
    path = _log(root)
    data = path.read_bytes()
    for byte in (b" ", b"\r", b"x", b"}", b"\x00"):
        path.write_bytes(data[:-1] + byte)
        _expect_damage(ledgers, path, 14)
    path.write_bytes(data[:-1] + b"x" + b'{"op":"put"')  # and a torn tail after it
    _expect_damage(ledgers, path, 14)


def test_a_bad_line_among_uncommitted_records_is_damage(
    ledgers: Callable[[], Ledger], root: Path
) -> None:
    _three_versions(ledgers())
    path = _log(root)
    data = path.read_bytes()
    put = data.splitlines(keepends=True)[-2].replace(b'"v":3', b'"v":4')
    path.write_bytes(data + put + b"}{\n" + put[:20])  # cut short after a bad complete line
    _expect_damage(ledgers, path, 16)


def test_records_that_contradict_the_log_are_corrupt(
    ledgers: Callable[[], Ledger], root: Path
) -> None:
    ledgers().save("s", _msgs(2))
    ledgers().save("s", _msgs(3))
    path = _log(root)
    data = path.read_bytes()
    # a put past the end of the list, with every check recomputed: it still does not apply
    path.write_bytes(reseal(data.replace(b'"pos":2', b'"pos":7')))
    with pytest.raises(CorruptStoreError) as info:
        ledgers().load("s")
    assert info.value.location == f"{path}:5" and "put at position 7" in str(info.value)
    path.write_bytes(reseal(data.replace(b'{"op":"commit","v":2', b'{"op":"commit","v":9')))
    with pytest.raises(CorruptStoreError, match="version 9"):
        ledgers().version("s")
    path.write_bytes(data.replace(b'"pos":2', b'"pos":7'))  # not resealed: the check says so
    with pytest.raises(CorruptStoreError, match="lines 5 to 5, the records of version 2"):
        ledgers().load("s")


# -- keep records: a writer's bug that moves rows wrongly is corrupt, never a different list ---
def _drop_line(number: int) -> Callable[[bytes], bytes]:
    def drop(data: bytes) -> bytes:
        lines = data.splitlines(keepends=True)
        return b"".join(lines[: number - 1] + lines[number:])

    return drop


def _add_after(number: int, line: bytes) -> Callable[[bytes], bytes]:
    def add(data: bytes) -> bytes:
        lines = data.splitlines(keepends=True)
        return b"".join([*lines[:number], line, *lines[number:]])

    return add


def _swap(old: bytes, new: bytes) -> Callable[[bytes], bytes]:
    def swap(data: bytes) -> bytes:
        assert data.count(old) == 1
        return data.replace(old, new)

    return swap


KEEP_BUGS = {  # (the log changed and resealed, the line named, what the error says)
    "a run past the old list": (_swap(b'"runs":[5,1,1]', b'"runs":[5,1,2]'), 15, "reach past"),
    "runs out of order": (
        _swap(b'"runs":[0,0,1,1,2,2,4,4,2]', b'"runs":[1,2,2,0,0,1,4,4,2]'),
        11,
        "ascending",
    ),
    "a broken triple": (_swap(b'"runs":[5,1,1]', b'"runs":[5,1]'), 15, "triples"),
    "a length beyond its puts": (
        _swap(b'"runs":[5,1,1],"length":4', b'"runs":[5,1,1],"length":40'), 15, "39 positions"
    ),
    "a position left open": (_drop_line(18), 19, "leaves position 3 of list 'context' empty"),
    "a put over a kept row": (
        _swap(b'"pos":2,"id":"m4"', b'"pos":1,"id":"m4"'), 17, "does not leave open"
    ),
    "a trunc after the keep": (
        _add_after(15, b'{"op":"trunc","v":3,"list":"context","length":1}\n'),
        16,
        "trunc record after the keep",
    ),
    "a second keep": (
        _add_after(15, b'{"op":"keep","v":3,"list":"context","runs":[],"length":0}\n'),
        16,
        "a second keep record",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(KEEP_BUGS))
def test_keep_records_that_contradict_the_log_are_corrupt(
    ledgers: Callable[[], Ledger], root: Path, case: str
) -> None:
    _shifted_versions(ledgers())
    path = _log(root)
    change, line, why = KEEP_BUGS[case]
    path.write_bytes(reseal(change(path.read_bytes())))
    with pytest.raises(CorruptStoreError, match=why) as info:
        ledgers().load("s")
    assert info.value.location == f"{path}:{line}"


def test_an_unknown_record_is_refused_not_skipped(
    ledgers: Callable[[], Ledger], root: Path
) -> None:
    """What a newer writer may add (as format 3 added ``keep``) is an error here, typed, with
    its line: skipping it would load a different list."""
    _shifted_versions(ledgers())
    reading_on = ledgers()
    assert reading_on.version("s") == 3
    path = _log(root)
    data = path.read_bytes()
    newer = b'{"op":"rotate","v":4,"list":"context","by":1}\n'
    last = decoder.decode(data.splitlines()[-1])
    assert isinstance(last, Commit)
    commit = seal(msgspec.structs.replace(last, v=4, sum=checksum(newer)))  # checks that hold
    path.write_bytes(data + newer + commit)
    for reader in (ledgers(), reading_on):  # read fresh, or read on from version 3
        with pytest.raises(CorruptStoreError, match="not a valid record") as info:
            reader.load("s")
        assert info.value.location == f"{path}:21"


def test_a_format_1_log_takes_keep_records(ledgers: Callable[[], Ledger], root: Path) -> None:
    path = _format_1_log(root)
    m = _old_msgs()
    edited = m[1].replace(content="edited")
    reader = ledgers()
    moved = [m[3], m[0], edited, _msgs(1)[0]]
    assert reader.save("s", moved).bytes_written == len(encode(m[3])) + len(encode(_msgs(1)[0]))
    data = path.read_bytes()
    assert data.startswith(FORMAT_1)
    added = [decoder.decode(line) for line in data[len(FORMAT_1) :].splitlines()]
    assert [type(r).__name__ for r in added] == ["Keep", "Put", "Put", "Commit"]
    for fresh in (ledgers(), ledgers()):
        assert fresh.messages("s") == moved
        assert fresh.messages("s", version=4) == [m[0], edited, m[3]]
        assert fresh.messages("s", version=2) == [m[0], edited, m[2]]


# -- every flipped byte: an error or the exact committed state --------------------------------
_MASKS = (0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0xFF) if LONG else (0x01, 0x80)
_SUBSTITUTES = b'\n\r\t\x00 "\\{}[]:,.-+0123456789abcdefnulrtxyzE' if LONG else b"\n"


def _flip_trials(root: Path, *, reader_at: int | None) -> dict[str, int]:
    """Flip bytes of the log under ``root``; check each result; count the outcomes.

    The file is changed in place (``pwrite``) and put back after each trial.
    """
    path = _log(root)
    committed = _state(Ledger(JsonlStore(root)))
    data = path.read_bytes()
    ends = _commit_ends(data)
    start = 0 if LONG else ends[-3]  # the last two versions: their records and commit records
    prefix = ends[reader_at - 1] if reader_at else 0
    outcomes = {"corrupt": 0, "exact": 0}
    other = _msgs(9)
    fd = os.open(path, os.O_RDWR)
    try:
        for trial, (at, value) in enumerate(_flips(data, start)):
            store = JsonlStore(root)
            if prefix and at >= prefix:  # an index read at an earlier version reads on
                os.ftruncate(fd, prefix)
                store.read_head(KEY)
                os.pwrite(fd, data[prefix:], prefix)
            os.pwrite(fd, bytes([value]), at)
            ledger = Ledger(store)
            try:
                state = _state(ledger)
            except CorruptStoreError:
                outcomes["corrupt"] += 1
                if LONG or trial % 4 == 0:  # a save never repairs damage away
                    with pytest.raises(CorruptStoreError):
                        ledger.save("s", other)
                flipped = data[:at] + bytes([value]) + data[at + 1 :]
                assert os.pread(fd, len(data) + 1, 0) == flipped, f"byte {at}: file changed"
            else:
                assert state == committed, f"byte {at}: {value:#x} changed what loads"
                outcomes["exact"] += 1
            os.pwrite(fd, data[at : at + 1], at)
    finally:
        os.close(fd)
    return outcomes


def _flips(data: bytes, start: int) -> Iterator[tuple[int, int]]:
    for at in range(start, len(data)):
        seen = {data[at]}
        for value in [data[at] ^ m for m in _MASKS] + list(_SUBSTITUTES):
            if value not in seen:
                seen.add(value)
                yield at, value


@pytest.mark.parametrize("build", sorted(BUILDERS))
@pytest.mark.parametrize("reader_at", [None, 1], ids=["fresh", "reading-on"])
def test_every_flipped_byte_is_an_error_or_the_exact_state(
    ledgers: Callable[[], Ledger],
    root: Path,
    reader_at: int | None,
    build: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="agentledger.store.jsonl")  # torn tails warn
    BUILDERS[build](ledgers())
    data = _log(root).read_bytes()
    assert data[_commit_ends(data)[0] :].count(b'{"op":"keep"') == (2 if build == "shifts" else 0)
    outcomes = _flip_trials(root, reader_at=reader_at)
    # every byte of a committed version is covered by a check: no flip goes unnoticed
    assert outcomes["exact"] == 0 and outcomes["corrupt"] > 1000
    if LONG:
        print(f"\nbyte flips ({'reading on' if reader_at else 'fresh'}): {outcomes}")
    record(
        "damage",
        f"JSONL byte flips, {'read on from version 1' if reader_at else 'read fresh'}" + _OF[build],
        backend="jsonl",
        scope="the whole log" if LONG else "the last two versions",
        trials=sum(outcomes.values()),
        outcomes=outcomes,
    )


@pytest.mark.parametrize("build", sorted(BUILDERS))
def test_flips_in_a_torn_tail_only_lose_the_torn_tail(
    ledgers: Callable[[], Ledger], root: Path, build: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="agentledger.store.jsonl")  # torn tails warn
    states = BUILDERS[build](ledgers())
    path = _log(root)
    data = path.read_bytes()
    torn = data[_commit_ends(data)[-2] : -40].replace(b'"v":3', b'"v":4')
    whole = data + torn
    outcomes = {"corrupt": 0, "exact": 0}
    for at, value in _flips(whole, len(data)):
        flipped = whole[:at] + bytes([value]) + whole[at + 1 :]
        path.write_bytes(flipped)
        try:
            assert _state(ledgers()) == states[3], f"byte {at}"
            outcomes["exact"] += 1
        except CorruptStoreError:
            assert path.read_bytes() == flipped  # a complete line that is not a record
            outcomes["corrupt"] += 1
    record(
        "damage",
        "JSONL byte flips in a torn tail" + _OF[build],
        backend="jsonl",
        trials=sum(outcomes.values()),
        outcomes=outcomes,
    )


# -- truncation: a torn tail recovers to the previous version ---------------------------------
@pytest.mark.parametrize("build", sorted(BUILDERS))
def test_truncation_at_every_offset_of_the_last_two_versions(
    ledgers: Callable[[], Ledger], root: Path, build: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="agentledger.store.jsonl")  # torn tails warn
    states = BUILDERS[build](ledgers())
    path = _log(root)
    data = path.read_bytes()
    ends = _commit_ends(data)
    cuts = list(range(ends[0], len(data) + 1))
    assert set(_line_ends(data[: ends[-1]])) & set(range(ends[0] + 1, ends[-1]))
    for cut in cuts:  # record boundaries before a commit record included
        path.write_bytes(data[:cut])
        version = sum(end <= cut for end in ends)
        reader = ledgers()
        assert _state(reader) == states[version], f"cut at {cut}"
        if cut % 7 == 0 or cut in ends or cut + 1 in ends:
            report = reader.save("s", _msgs(2, "new"))
            assert report.version == version + 1
            assert ledgers().messages("s") == _msgs(2, "new")
            assert _state(ledgers(), version) == states[version]
    saves = sum(1 for cut in cuts if cut % 7 == 0 or cut in ends or cut + 1 in ends)
    record(
        "damage",
        "JSONL truncated at every byte of the last two versions" + _OF[build],
        backend="jsonl",
        truncation_points=len(cuts),
        recovered_exactly=len(cuts),
        saves_after=saves,
    )


@pytest.mark.parametrize(
    ("fragment", "cut"),
    [
        (b'{"op":"put","v":2,"body":{"text":"a } b', True),  # a brace inside a string
        (b'{"op":"put","v":2,"body":{"text":"a \\', True),  # cut inside an escape
        (b'{"op":"commit","v":2}', True),  # cut just before the newline
        (b'{"op', True),
        (b'{"op":"commit","v":2}x', False),  # a newline damaged into another byte
        (b'{"op":"commit","v":2} ', False),
        (b'{"op":"commit"}{"op":"put"', False),
        (b'"op":"put"', False),  # not the start of a record
        (b"\x00\x00\x00", False),
    ],
)
def test_only_the_start_of_a_record_can_be_cut_short(fragment: bytes, cut: bool) -> None:
    assert could_be_cut(fragment) is cut


# -- format 1 logs, written before the checks -------------------------------------------------
FORMAT_1 = b"""\
{"op":"header","format":1,"tenant":"default","session":"s","created_at":"2026-12-03T10:54:28.367872Z"}
{"op":"put","v":1,"list":"context","pos":0,"id":"m0","digest":"2a15e63440693ba61aaf8bc83a299562","body":{"content":[{"text":"hello 0","type":"text"}],"created_at":"2026-01-01T00:00:00Z","id":"m0","role":"user"}}
{"op":"put","v":1,"list":"context","pos":1,"id":"m1","digest":"a2e598e49c5014540f9de5755bb823e4","body":{"content":[{"text":"hello 1","type":"text"}],"created_at":"2026-01-01T00:00:00Z","id":"m1","role":"user"}}
{"op":"set","v":1,"name":"title","value":"Old times"}
{"op":"set","v":1,"name":"n","value":1}
{"op":"commit","v":1,"at":"2026-12-03T10:54:28.367872Z","appended":2,"replaced":0,"truncated":0,"values_changed":2,"title":"Old times","message_count":2}
{"op":"put","v":2,"list":"context","pos":1,"id":"m1","digest":"c7400c72b8e648d9e0897591f0977183","body":{"content":[{"text":"edited","type":"text"}],"created_at":"2026-01-01T00:00:00Z","id":"m1","role":"user"}}
{"op":"put","v":2,"list":"context","pos":2,"id":"m2","digest":"b710a48b220bc69a2160e2a779b21b2e","body":{"content":[{"text":"hello 2","type":"text"}],"created_at":"2026-01-01T00:00:00Z","id":"m2","role":"user"}}
{"op":"set","v":2,"name":"n","value":2}
{"op":"commit","v":2,"at":"2026-12-03T10:54:28.370191Z","appended":1,"replaced":1,"truncated":0,"values_changed":1,"title":"Old times","message_count":3}
{"op":"trunc","list":"context","length":2,"v":3}
{"op":"del","name":"n","v":3}
{"op":"commit","v":3,"at":"2026-12-03T10:54:28.371110Z","appended":0,"replaced":0,"truncated":1,"values_changed":1,"title":"Old times","message_count":2}
{"op":"put","v":4,"list":"context","pos":2,"id":"m3","digest":"8fb6f598ef6e8750017f27fa79c8ac07","body":{"content":[{"text":"hello 3","type":"text"}],"created_at":"2026-01-01T00:00:00Z","id":"m3","role":"user"}}
{"op":"commit","v":4,"at":"2026-12-03T10:54:28.371733Z","appended":1,"replaced":0,"truncated":0,"values_changed":0,"title":"Old times","message_count":3}
{"op":"purge","oldest":2,"at":"2026-12-03T10:54:28.372406Z"}
"""  # noqa: E501 - written by agentledger before the checks (main at 6b29d49)


def _format_1_log(root: Path) -> Path:
    """Session ``s`` as the format 1 log above; returns its path."""
    path = _log(root)
    path.parent.mkdir(parents=True)
    path.write_bytes(FORMAT_1)
    return path


def _old_msgs() -> list[Msg]:
    from datetime import UTC, datetime

    at = datetime(2026, 1, 1, tzinfo=UTC)
    return [Msg.user(f"hello {i}", id=f"m{i}", created_at=at) for i in range(4)]


def test_a_format_1_log_still_loads_and_new_versions_carry_checks(
    ledgers: Callable[[], Ledger], root: Path
) -> None:
    path = _format_1_log(root)
    m = _old_msgs()
    edited = m[1].replace(content="edited")
    reader = ledgers()
    assert _state(reader) == (4, [m[0], edited, m[3]], {"title": "Old times"})
    assert _state(reader, 2) == (2, [m[0], edited, m[2]], {"title": "Old times", "n": 2})
    with pytest.raises(VersionNotFoundError):
        reader.load("s", version=1)
    assert [(i.title, i.version) for i in ledgers().list_sessions()] == [("Old times", 4)]
    stamp = reader.store.read_stamp(KEY)
    assert stamp == ("2026-12-03T10:54:28.367872+00:00", 4)

    reader.save("s", [m[0]])
    data = path.read_bytes()
    assert data.startswith(FORMAT_1)
    added = data[len(FORMAT_1) :].splitlines()
    assert [getattr(decoder.decode(line), "crc", None) is not None for line in added] == [
        False,
        True,
    ]
    assert _state(ledgers()) == (5, [m[0]], {"title": "Old times"})
    path.write_bytes(data.replace(b'"message_count":1', b'"message_count":7'))
    with pytest.raises(CorruptStoreError, match="commit record of version 5 fails its check"):
        ledgers().load("s")
    # format 1 has no record checks, but a body is still checked against its digest
    path.write_bytes(FORMAT_1.replace(b'"hello 3"', b'"hello 4"'))
    with pytest.raises(CorruptStoreError, match="do not match the digest"):
        ledgers().messages("s")[2].text  # noqa: B018 - the first read decodes


def test_a_log_in_an_unknown_format_is_refused(ledgers: Callable[[], Ledger], root: Path) -> None:
    path = _log(root)
    path.parent.mkdir(parents=True)
    path.write_bytes(FORMAT_1.replace(b'"format":1', b'"format":4'))
    with pytest.raises(CorruptStoreError, match="unsupported log format 4"):
        ledgers().load("s")


# -- listing reads little but checks what it reads --------------------------------------------
def test_listing_follows_the_same_rules(
    ledgers: Callable[[], Ledger], root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="agentledger.store.jsonl")  # torn tails warn
    _three_versions(ledgers())
    path = _log(root)
    data = path.read_bytes()
    ends = _commit_ends(data)
    listed = [(i.session_id, i.version, i.title) for i in ledgers().list_sessions()]
    assert listed == [("s", 3, _DERIVED)]
    path.write_bytes(data[:-1])  # the last commit record cut short: a torn tail
    assert [(i.version, i.title) for i in ledgers().list_sessions()] == [(2, "first")]
    path.write_bytes(data[: ends[0] - 3])  # the creation cut short: no session yet
    assert ledgers().list_sessions() == []
    path.write_bytes(data.replace(b'"title":"m0', b'"title":"M0'))
    with pytest.raises(CorruptStoreError):
        ledgers().list_sessions()
    header_damaged = data.replace(b'"session":"s"', b'"session":"t"', 1)
    path.write_bytes(header_damaged)
    with pytest.raises(CorruptStoreError, match="line 1: the header record fails its check"):
        ledgers().list_sessions()


def test_reseal_is_what_a_writer_writes(ledgers: Callable[[], Ledger], root: Path) -> None:
    """The helper the tests above use to forge a writer's bug is faithful."""
    _three_versions(ledgers())
    data = _log(root).read_bytes()
    assert reseal(data) == data
    log = SessionLog(_log(root))
    log.feed(data, 0)
    assert log.version == 3 and log.torn is None
