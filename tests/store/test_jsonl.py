"""``jsonl://`` specifics: the log on disk, torn tails, corruption, compaction, ids, write sizes.

The behaviour every backend shares is checked by the conformance suite (bottom of this file).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentledger import decode, encode
from agentledger.errors import ConflictError, CorruptStoreError, UserError, VersionNotFoundError
from agentledger.messages import ImageBlock, Msg
from agentledger.store import (
    CommitPlan,
    Ledger,
    ListWrite,
    MemoryStore,
    SessionKey,
    StoredMsg,
    open_store,
)
from agentledger.store.ids import path_component
from agentledger.store.jsonl import JsonlStore
from agentledger.store.jsonl_replay import SessionLog
from agentledger.testing.conformance import StoreConformance
from agentledger.testing.samples import sample_conversation
from agentledger.testing.statemachine import run_ledger_state_machine


def _log(root: Path, session: str = "s", tenant: str = "default") -> Path:
    return root / path_component(tenant) / (path_component(session) + ".jsonl")


def _msgs(n: int, prefix: str = "m") -> list[Msg]:
    return [
        Msg.user(f"{prefix}{i} " + "x" * 40, id=f"{prefix}{i}", created_at=None) for i in range(n)
    ]


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def _stat(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_size, st.st_mtime_ns


# -- the file itself ----------------------------------------------------------------------------
def test_url_layout_and_readable_records(tmp_path: Path) -> None:
    store = open_store(f"jsonl:///{tmp_path / 'dir'}")
    assert isinstance(store, JsonlStore) and store.location == str((tmp_path / "dir").resolve())
    ledger = Ledger(store)
    msgs = _msgs(3)
    ledger.save_state("s", lists={"context": msgs}, values={"summary": "so far"})
    ledger.save("s", msgs[:1])
    records = _records(_log(tmp_path / "dir"))
    assert [r["op"] for r in records] == [
        "header", "put", "put", "put", "set", "commit", "trunc", "commit",
    ]  # fmt: skip
    assert records[0]["tenant"] == "default" and records[0]["session"] == "s"
    assert records[1]["body"] == json.loads(encode(msgs[0]))  # embedded as is
    assert records[1]["digest"] == msgs[0].digest.hex()
    assert records[5]["v"] == 1 and records[5]["appended"] == 3 and records[5]["message_count"] == 3
    assert records[6] == {"op": "trunc", "v": 2, "list": "context", "length": 1}
    # the bytes of each body are exactly the canonical encoding: nothing was re-encoded
    assert encode(msgs[2]) in _log(tmp_path / "dir").read_bytes()


# -- seed 000: every edit persisted, equal lists write nothing --------------------------------
@pytest.mark.parametrize(("size", "positions"), [(10, [3]), (1000, [3, 251, 749])])
def test_edits_anywhere_reach_the_file(
    ledgers: Callable[[], Ledger], root: Path, size: int, positions: list[int]
) -> None:
    msgs = _msgs(size)
    ledgers().save("s", msgs)
    edited = ledgers().messages("s")
    for p in positions:
        edited[p] = edited[p].replace(content=f"EDITED {p}")
    before = _log(root).stat().st_size
    report = ledgers().save("s", edited)
    assert report.replaced == len(positions) and report.appended == 0
    grown = _log(root).stat().st_size - before
    assert grown < 2 * sum(len(encode(edited[p])) for p in positions) + 1024
    reloaded = ledgers().messages("s")
    assert [reloaded[p].text for p in positions] == [f"EDITED {p}" for p in positions]
    assert reloaded == edited
    assert ledgers().messages("s", version=1) == msgs


def test_equal_rebuilt_list_leaves_the_file_untouched(
    ledgers: Callable[[], Ledger], root: Path
) -> None:
    msgs = sample_conversation(10, result_size=300)
    ledgers().save("s", msgs)
    path = _log(root)
    before = _stat(path), path.read_bytes()
    for ledger in (ledgers(), ledgers()):
        loaded = ledger.load("s")  # loading never writes either
        report = ledger.save("s", [decode(encode(m)) for m in loaded.context])
        assert report.noop and report.bytes_written == 0 and report.version == 1
    report = ledgers().save("s", [decode(encode(m)) for m in msgs])  # never loaded
    assert report.noop
    assert (_stat(path), path.read_bytes()) == before


# -- torn tails ---------------------------------------------------------------------------------
def _torn_variants(path: Path) -> dict[str, bytes]:
    records = path.read_bytes().splitlines(keepends=True)
    put = records[1]
    return {
        "half line": put[: len(put) // 2],
        "records without commit": put.replace(b'"v":2', b'"v":3') * 2,
        "both": put.replace(b'"v":2', b'"v":3') + put[:10],
        "commit without newline": records[-1].rstrip(b"\n").replace(b'"v":2', b'"v":3'),
    }


TORN = ["half line", "records without commit", "both", "commit without newline"]


@pytest.mark.parametrize("variant", TORN)
def test_torn_tail_is_ignored_reported_and_cut_by_the_next_save(
    ledgers: Callable[[], Ledger],
    root: Path,
    variant: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    msgs = _msgs(6)
    ledger = ledgers()
    ledger.save("s", msgs[:3])
    ledger.save("s", msgs[:5])
    path = _log(root)
    committed = path.read_bytes()
    with path.open("ab") as f:
        f.write(_torn_variants(path)[variant])
    size = path.stat().st_size

    reader = ledgers()
    with caplog.at_level(logging.WARNING, logger="agentledger.store.jsonl"):
        assert reader.messages("s") == msgs[:5]
    assert reader.version("s") == 2
    torn = reader.store.last_torn_tail  # type: ignore[attr-defined]
    assert (
        torn is not None and torn.offset == len(committed) and torn.length == size - len(committed)
    )
    assert torn.path == str(path) and torn.line == committed.count(b"\n") + 1
    assert "ignoring" in caplog.text and str(path) in caplog.text
    assert path.stat().st_size == size  # reading did not repair anything

    report = ledgers().save("s", msgs)
    assert report.version == 3 and report.appended == 1
    data = path.read_bytes()
    assert data.startswith(committed) and data.endswith(b"\n")
    log = SessionLog(path)
    log.feed(data, 0)
    assert log.torn is None and log.version == 3
    fresh = ledgers()
    assert fresh.messages("s") == msgs and fresh.messages("s", version=2) == msgs[:5]
    assert fresh.store.last_torn_tail is None  # type: ignore[attr-defined]


def test_torn_creation_means_no_session(ledgers: Callable[[], Ledger], root: Path) -> None:
    ledgers().save("s", _msgs(2))
    path = _log(root)
    path.write_bytes(path.read_bytes()[:-5])  # the first save itself was cut short
    reader = ledgers()
    assert not reader.exists("s") and reader.load("s").version == 0 and reader.history("s") == []
    assert reader.list_sessions() == []
    assert reader.store.last_torn_tail.offset == 0  # type: ignore[attr-defined]
    reader.save("s", _msgs(1), expected_version=0)
    assert ledgers().messages("s") == _msgs(1)
    assert _records(path)[0]["op"] == "header"


def test_writer_with_a_cached_index_also_cuts_a_torn_tail(
    ledgers: Callable[[], Ledger], root: Path
) -> None:
    ledger = ledgers()
    msgs = _msgs(4)
    ledger.save("s", msgs[:2])
    path = _log(root)
    with path.open("ab") as f:
        f.write(b'{"op":"put","v":2,"li')  # another process died mid-save
    ledger.save("s", msgs)
    log = SessionLog(path)
    log.feed(path.read_bytes(), 0)
    assert log.torn is None and log.version == 2
    assert ledgers().messages("s") == msgs


# -- corruption ---------------------------------------------------------------------------------
@pytest.mark.parametrize("cached", [False, True])
@pytest.mark.parametrize("garbage", [b"}{ not json", b'{"op":"put","v":2}', b""])
def test_garbage_in_the_middle_is_an_error_naming_file_and_line(
    ledgers: Callable[[], Ledger], root: Path, cached: bool, garbage: bytes
) -> None:
    writer = ledgers()
    for n in (2, 4, 6):
        writer.save("s", _msgs(n))
    path = _log(root)
    lines = path.read_bytes().splitlines(keepends=True)
    lines.insert(4, garbage + b"\n")  # after version 1, before versions 2 and 3
    reader = ledgers()
    if cached:
        reader.load("s")
    path.write_bytes(b"".join(lines))
    before = path.read_bytes()
    with pytest.raises(CorruptStoreError) as info:
        reader.load("s")
    assert info.value.location == f"{path}:5"
    assert str(path) in str(info.value) and "line 5" in str(info.value)
    with pytest.raises(CorruptStoreError):
        reader.save("s", _msgs(8))
    with pytest.raises(CorruptStoreError):
        ledgers().load("s", version=1)
    assert path.read_bytes() == before


# -- history, purge and compaction ------------------------------------------------------------
def test_load_at_past_versions_after_replace_and_truncate(
    ledgers: Callable[[], Ledger],
) -> None:
    msgs = _msgs(20)
    ledger = ledgers()
    ledger.save("s", msgs)  # v1
    replaced = [*msgs[:5], msgs[5].replace(content="five"), *msgs[6:]]
    ledger.save("s", replaced)  # v2
    ledger.save("s", replaced[:8])  # v3
    ledger.save("s", [*replaced[:8], *_msgs(3, "n")])  # v4
    reader = ledgers()
    assert reader.messages("s", version=1) == msgs
    assert reader.messages("s", version=2) == replaced
    assert reader.messages("s", version=3) == replaced[:8]
    assert reader.messages("s") == [*replaced[:8], *_msgs(3, "n")]
    assert [(v.appended, v.replaced, v.truncated) for v in reader.history("s")] == [
        (20, 0, 0),
        (0, 1, 0),
        (0, 0, 12),
        (3, 0, 0),
    ]


def test_compaction_keeps_every_loadable_version_and_shrinks_the_log(
    ledgers: Callable[[], Ledger], root: Path
) -> None:
    ledger = ledgers()
    msgs = _msgs(30)
    snapshots = {}
    for v in range(1, 21):  # each version rewrites a third of the list: lots of dead rows
        msgs = [m.replace(content=f"v{v} {i}") if i % 3 == v % 3 else m for i, m in enumerate(msgs)]
        msgs = msgs[: 25 + v % 5] + _msgs(v % 5, f"t{v}-")
        ledger.save_state("s", lists={"context": msgs}, values={"n": v, f"only{v % 4}": v})
        snapshots[v] = ledger.load("s", version=v)
    path = _log(root)
    size = path.stat().st_size
    removed = ledger.purge_history("s", keep_last=5)
    assert removed > 0
    assert path.stat().st_size < size / 2
    assert _records(path)[0]["oldest"] == 16
    for reader in (ledger, ledgers()):
        assert [v.version for v in reader.history("s")] == list(range(16, 21))
        for v in range(16, 21):
            assert reader.load("s", version=v) == snapshots[v]
        with pytest.raises(VersionNotFoundError):
            reader.load("s", version=15)
    ledger.save("s", msgs[:3])
    assert ledgers().messages("s") == msgs[:3]
    assert ledgers().load("s", version=17) == snapshots[17]


def test_purge_without_compaction_appends_a_record(
    ledgers: Callable[[], Ledger], root: Path
) -> None:
    ledger = ledgers()
    msgs = _msgs(50)
    ledger.save("s", msgs)
    for v in range(2, 5):
        ledger.save("s", [*msgs, *_msgs(v, f"a{v}-")])  # appends and a few replacements
    path = _log(root)
    before = path.read_bytes()
    assert ledger.purge_history("s", keep_last=2) == 2  # two replaced rows, dead now
    after = path.read_bytes()
    assert after.startswith(before) and _records(path)[-1]["op"] == "purge"
    assert [v.version for v in ledgers().history("s")] == [3, 4]
    with pytest.raises(VersionNotFoundError):
        ledgers().load("s", version=2)
    assert ledger.purge_history("s", keep_last=2) == 0 and path.read_bytes() == after


def test_purge_collects_unreferenced_blobs(ledgers: Callable[[], Ledger], root: Path) -> None:
    def picture(n: int) -> Msg:
        return Msg.user(
            ImageBlock(media_type="image/png", data=bytes([n]) * 5000), id=f"p{n}", created_at=None
        )

    ledger = ledgers()
    ledger.save("s", [picture(1)])
    ledger.save("s", [picture(2)])
    ledger.save("other", [picture(2)])
    blobs = root / "default" / "_blobs"
    assert len([p for p in blobs.iterdir() if not p.name.startswith(".")]) == 2
    ledger.purge_history("s", keep_last=1)
    assert len([p for p in blobs.iterdir() if not p.name.startswith(".")]) == 1
    assert ledger.delete("s")
    assert ledgers().messages("other") == [picture(2)]  # still referenced by "other"
    assert ledger.delete("other")
    assert [p for p in blobs.iterdir() if not p.name.startswith(".")] == []


def test_a_load_searches_bodies_for_media_only_when_the_tenant_stored_some(
    ledgers: Callable[[], Ledger], root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No blob under the tenant: no body can reference one, and the load does not look; once
    one is stored, loads of its sessions (any of them) look again, and restore it."""
    from agentledger.store import loading

    searched: list[int] = []
    real = loading.media.has_refs

    def has_refs(body: bytes) -> bool:
        searched.append(len(body))
        return real(body)

    monkeypatch.setattr(loading.media, "has_refs", has_refs)
    picture = Msg.user(
        ImageBlock(media_type="image/png", data=b"\x89" * 5000), id="p", created_at=None
    )
    ledgers().save("s", _msgs(3))
    ledgers().save("pictures", [picture], tenant="b")  # blobs of another tenant
    assert ledgers().messages("s") == _msgs(3) and searched == []
    ledgers().save("pictures", [picture])
    assert ledgers().messages("s") == _msgs(3) and searched  # looked, found none
    assert ledgers().messages("pictures") == [picture]


# -- ids ----------------------------------------------------------------------------------------
HOSTILE = ["../../etc/passwd", "a/b", "A", "a", "%41", "..", ".", "~x", "x" * 256, "y" * 255,
           "ünï 码 🚀", "C:\\windows", "a\\b", "-rf", "_blobs", "s.lock", "s.jsonl"]  # fmt: skip


def test_hostile_ids_stay_under_root_and_never_collide(tmp_path: Path) -> None:
    root = tmp_path / "root"
    ledger = Ledger(JsonlStore(root))
    for tenant in HOSTILE:
        for session in HOSTILE:
            ledger.save(session, [Msg.user(f"{tenant}|{session}", id="m")], tenant=tenant)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["root"]
    files = [p for p in root.rglob("*") if p.is_file()]
    for p in files:
        assert p.resolve().is_relative_to(root.resolve())
    logs = [p for p in files if p.suffix == ".jsonl"]
    assert len(logs) == len(HOSTILE) ** 2 and len({p.name.lower() for p in logs}) == len(HOSTILE)
    assert len({p.parent.name.lower() for p in logs}) == len(HOSTILE)  # case-insensitive safe
    reader = Ledger(JsonlStore(root))
    for tenant in HOSTILE:
        assert {i.session_id for i in reader.list_sessions(tenant=tenant)} == set(HOSTILE)
        for session in HOSTILE:
            assert reader.messages(session, tenant=tenant)[0].text == f"{tenant}|{session}"
    for tenant, session in (("..", "a/b"), ("A", "a")):
        header = _records(_log(root, session, tenant))[0]
        assert (header["tenant"], header["session"]) == (tenant, session)
    assert reader.delete("a/b", tenant="..") and not reader.exists("a/b", tenant="..")
    assert reader.messages("a", tenant="..")[0].text == "..|a"


def test_a_log_under_the_wrong_name_is_refused(ledgers: Callable[[], Ledger], root: Path) -> None:
    ledgers().save("a", _msgs(1))
    _log(root, "a").rename(_log(root, "b"))
    with pytest.raises(CorruptStoreError, match="belongs to session 'a'"):
        ledgers().load("b")


# -- cost of a save -----------------------------------------------------------------------------
def test_bytes_written_follow_the_change(ledgers: Callable[[], Ledger], root: Path) -> None:
    msgs = sample_conversation(250, result_size=1000)  # 1,000 messages
    ledger = ledgers()
    ledger.save("s", msgs)
    path = _log(root)
    for turn in range(3):
        new = sample_conversation(1, seed=turn + 1, result_size=1000)
        new = [m.replace(id=f"{m.id}-{turn}") for m in new]
        size = path.stat().st_size
        report = ledger.save("s", [*msgs, *new])
        msgs = [*msgs, *new]
        new_bytes = sum(len(encode(m)) for m in new)
        assert report.appended == 4 and report.bytes_written == new_bytes
        assert path.stat().st_size - size < 2 * new_bytes + 1024
    size = path.stat().st_size
    msgs[500] = msgs[500].replace(content="short now")
    ledger.save("s", msgs)
    assert path.stat().st_size - size < 2 * len(encode(msgs[500])) + 1024
    assert ledgers().messages("s") == msgs


def test_shifts_append_only_what_they_add(ledgers: Callable[[], Ledger], root: Path) -> None:
    """A sliding window, an insert at the front, a deleted and a moved range, and a summary
    replacing a prefix of a 2,000-message session each append a keep record, the added
    messages' put records and a commit record: never a line per row that moved."""
    msgs = _msgs(2000)
    ledger = ledgers()
    ledger.save("s", msgs)
    path = _log(root)
    added = _msgs(4, "new")
    summary = Msg.system("summary of m0 to m1499", id="summary", created_at=None)
    window = [*msgs[1:], added[0]]
    front = [added[1], *window]
    deleted = front[:100] + front[300:]
    moved = deleted[:10] + deleted[15:35] + deleted[10:15] + deleted[35:]
    summarised = [summary, *moved[1500:], added[2]]
    steps = [(window, [added[0]]), (front, [added[1]]), (deleted, []), (moved, deleted[10:15]),
             (summarised, [summary, added[2]])]  # fmt: skip
    for new, puts in steps:
        before = path.read_bytes()
        report = ledger.save("s", new)
        grown = path.read_bytes()
        assert grown.startswith(before)
        lines = [json.loads(line) for line in grown[len(before) :].splitlines()]
        assert [r["op"] for r in lines] == ["keep", *["put"] * len(puts), "commit"]
        assert [r["id"] for r in lines[1:-1]] == [m.id for m in puts]
        body_bytes = sum(len(encode(m)) for m in puts)
        assert report.bytes_written == body_bytes
        # per put: its position, id and digest; per save: the keep and commit records
        assert len(grown) - len(before) < body_bytes + 120 * len(puts) + 400
    versions = [msgs, *(new for new, _ in steps)]
    reader = ledgers()
    for version, expected in enumerate(versions, 1):
        assert reader.messages("s", version=version) == expected
    appended = _msgs(2, "tail")
    size = path.stat().st_size
    ledger.save("s", [*summarised, *appended])  # an append is put records, as ever
    assert [r["op"] for r in _records(path)][-3:] == ["put", "put", "commit"]
    assert path.stat().st_size - size < sum(len(encode(m)) for m in appended) + 600


def test_reads_use_the_index_and_only_new_bytes(
    ledgers: Callable[[], Ledger], root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reader, writer = ledgers(), ledgers()
    writer.save("s", _msgs(100))
    assert reader.messages("s") == _msgs(100)
    fed: list[tuple[int, int]] = []
    original = SessionLog.feed

    def spy(self: SessionLog, data: bytes, base: int) -> None:
        fed.append((base, len(data)))
        original(self, data, base)

    monkeypatch.setattr(SessionLog, "feed", spy)
    for _ in range(5):
        assert reader.version("s") == 1 and reader.load("s").version == 1
    assert fed == []  # unchanged file: a stat, no parsing
    size = _log(root).stat().st_size
    writer.save("s", _msgs(101))
    assert reader.messages("s") == _msgs(101)
    assert len(fed) == 1 and fed[0][0] == size and fed[0][1] < 1024  # only the appended bytes
    # a session deleted and recreated by another process is read from scratch
    writer.delete("s")
    writer.save("s", _msgs(2, "new"))
    assert reader.messages("s") == _msgs(2, "new") and reader.version("s") == 1
    # listing reads headers and last commit records, not whole logs
    fed.clear()
    assert [i.message_count for i in ledgers().list_sessions()] == [2]
    assert fed == []


def test_conflicts_write_nothing(ledgers: Callable[[], Ledger], root: Path) -> None:
    a, b = ledgers(), ledgers()
    a.save("s", _msgs(3))
    b.load("s")
    a.save("s", _msgs(4))
    before = _log(root).read_bytes()
    with pytest.raises(ConflictError) as info:
        b.save("s", _msgs(5), expected_version=1)
    assert (info.value.expected, info.value.actual) == (1, 2)
    with pytest.raises(ConflictError):
        b.save("s", _msgs(5), expected_version=0)
    assert _log(root).read_bytes() == before


def _plan(key: SessionKey, base: int, puts: list[tuple[int, StoredMsg]], length: int) -> CommitPlan:
    return CommitPlan(key, base, datetime.now(UTC), [ListWrite("context", puts, length)])


def test_malformed_plans_are_refused_before_writing(root: Path) -> None:
    store, key = JsonlStore(root), SessionKey("t", "s")
    row = StoredMsg("m", b"\x01" * 16, b'{"id":"m"}')
    store.commit(_plan(key, 0, [(0, row)], 1))
    before = _log(root, "s", "t").read_bytes()
    for puts, length in (([(5, row)], 6), ([(1, row)], 1), ([], 3), ([(-1, row)], 1)):
        with pytest.raises(UserError):
            store.commit(_plan(key, 1, puts, length))
    assert _log(root, "s", "t").read_bytes() == before and store.read_version(key) == 1


def test_bodies_that_are_not_one_line_json_round_trip(root: Path) -> None:
    store, key = JsonlStore(root), SessionKey("t", "s")
    odd = [b"not json", b'{"a":\n1}', b"\xff\x00\n", b'"just a string"']
    rows = [StoredMsg(f"m{i}", bytes([i]) * 16, body) for i, body in enumerate(odd)]
    store.commit(_plan(key, 0, list(enumerate(rows)), len(rows)))
    assert _log(root, "s", "t").read_bytes().count(b"\n") == 6  # header, 4 puts, commit
    loaded = JsonlStore(root).load(key)
    assert loaded is not None and list(loaded.lists["context"].bodies) == odd


def test_threads_sharing_a_store_lose_nothing(root: Path) -> None:
    store = JsonlStore(root)
    errors: list[BaseException] = []

    def work(name: str) -> None:
        ledger = Ledger(store if name < "w2" else JsonlStore(root))
        try:
            for k in range(15):
                while True:
                    state = ledger.load("s")
                    msgs = [*state.context, Msg.user(f"{name}-{k}", id=f"{name}-{k}")]
                    try:
                        ledger.save("s", msgs, expected_version=state.version)
                        break
                    except ConflictError:
                        continue
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(f"w{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    final = Ledger(JsonlStore(root)).messages("s")
    assert sorted(m.id for m in final) == sorted(f"w{i}-{k}" for i in range(4) for k in range(15))


def test_search_derives_text_from_bodies(ledgers: Callable[[], Ledger]) -> None:
    ledgers().save("s", [Msg.user("needle in a haystack", id="a"), Msg.user("hay", id="b")])
    hits = ledgers().search("needle")
    assert [(h.session_id, h.msg_id, h.position) for h in hits] == [("s", "a", 0)]


# -- differential: purge and compaction against the reference backend ---------------------------
_OPS = ["append", "append", "replace", "replace", "truncate", "value", "purge", "reopen",
        "insert", "delete", "move", "window", "summary"]  # fmt: skip
_ops = st.lists(st.tuples(st.sampled_from(_OPS), st.integers(0, 50)), min_size=4, max_size=30)


def _shifted(op: str, msgs: list[Msg], n: int, tag: str) -> list[Msg]:
    """``msgs`` after an edit that moves rows: what only a keep record can say."""
    at = n % (len(msgs) + 1)
    if op == "insert":
        return [*msgs[:at], *_msgs(1 + n % 3, tag), *msgs[at:]]
    if op == "delete":
        return msgs[:at] + msgs[at + 1 + n % 3 :]
    if op == "move":
        rest = msgs[:at] + msgs[at + 3 :]
        to = n // 3 % (len(rest) + 1)
        return rest[:to] + msgs[at : at + 3] + rest[to:]
    if op == "window":
        return [*msgs[1 + n % 3 :], *_msgs(1, tag)]
    assert op == "summary"
    return [*_msgs(1, tag), *msgs[1 + n % 5 :]]


_SHIFTS = ("insert", "delete", "move", "window", "summary")
#: Always tried: a compaction whose snapshot holds rows that moved (rows written later first).
_SHIFTED_THEN_COMPACTED = [("append", 3), ("insert", 0), ("append", 1), ("move", 4), ("purge", 0),
                           ("window", 1), ("summary", 2), ("purge", 1), ("reopen", 0),
                           ("delete", 1)]  # fmt: skip


@pytest.mark.parametrize("ratio", [0.0, float("inf")], ids=["always-compact", "never-compact"])
@settings(max_examples=60, deadline=None)
@given(ops=_ops)
@example(ops=_SHIFTED_THEN_COMPACTED)
def test_history_and_purge_match_the_memory_backend(
    ratio: float, ops: list[tuple[str, int]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        memory, jsonl = Ledger(MemoryStore()), Ledger(JsonlStore(tmp, compaction_ratio=ratio))
        msgs: list[Msg] = []
        counter = 0
        for op, n in ops:
            if op == "purge":
                keep = 1 + n % 3
                assert jsonl.purge_history("s", keep_last=keep) == memory.purge_history(
                    "s", keep_last=keep
                )
            elif op == "reopen":
                jsonl = Ledger(JsonlStore(tmp, compaction_ratio=ratio))
            else:
                values = {}
                if op == "append":
                    msgs = msgs + _msgs(1 + n % 4, f"a{counter}-")
                elif op == "replace" and msgs:
                    msgs = list(msgs)
                    msgs[n % len(msgs)] = msgs[n % len(msgs)].replace(content=f"r{counter}")
                elif op == "truncate":
                    msgs = msgs[: n % (len(msgs) + 1)]
                elif op in _SHIFTS:
                    msgs = _shifted(op, msgs, n, f"s{counter}-")
                else:
                    values = {f"k{n % 4}": counter if n % 4 else None}
                counter += 1
                a = memory.save_state("s", lists={"context": msgs}, values=values)
                b = jsonl.save_state("s", lists={"context": msgs}, values=values)
                assert (a.version, a.noop) == (b.version, b.noop)
            expected = [
                (v.version, v.appended, v.replaced, v.truncated) for v in memory.history("s")
            ]
            for ledger in (jsonl, Ledger(JsonlStore(tmp))):
                history = ledger.history("s")
                assert [
                    (v.version, v.appended, v.replaced, v.truncated) for v in history
                ] == expected
                for v, *_ in expected:
                    assert ledger.load("s", version=v) == memory.load("s", version=v)
                listed = [(i.title, i.message_count, i.version) for i in ledger.list_sessions()]
                assert listed == [
                    (i.title, i.message_count, i.version) for i in memory.list_sessions()
                ]


# -- the shared suites --------------------------------------------------------------------------
class TestJsonlConformance(StoreConformance):
    @pytest.fixture
    def open_ledger(self, ledgers: Callable[[], Ledger]) -> Callable[[], Ledger]:
        return ledgers


def test_state_machine_leaves_clean_logs(ledgers: Callable[[], Ledger], root: Path) -> None:
    run_ledger_state_machine(ledgers)
    for path in root.rglob("*.jsonl"):
        log = SessionLog(path)
        log.feed(path.read_bytes(), 0)
        assert log.torn is None and os.path.getsize(path) == log.clean_end
