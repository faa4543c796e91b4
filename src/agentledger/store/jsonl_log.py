"""One ``jsonl://`` session log: its record types, and replaying it into an in-memory index.

A session is one append-only file, one JSON object per line::

    {"op":"header","format":1,"tenant":"t","session":"s","created_at":"2026-01-01T00:00:00Z"}
    {"op":"put","v":3,"list":"context","pos":17,"id":"m17","digest":"9f…","body":{…message…}}
    {"op":"trunc","v":3,"list":"context","length":12}
    {"op":"set","v":3,"name":"summary","value":"…"}
    {"op":"del","v":3,"name":"summary"}
    {"op":"commit","v":3,"at":"…","appended":1,"replaced":0,"truncated":5,"values_changed":1,
     "title":"…","message_count":12}
    {"op":"purge","oldest":3,"at":"…"}

The records of version ``v`` precede its ``commit`` record and count only once it is read: a
tail without one (a save cut short by a crash) is not part of the session. Message bodies are
embedded as they are (they already are compact JSON), so nothing is re-encoded on the way in or
out. A compacted log starts at version ``oldest`` (in its header) with a snapshot of that
version. ``SessionLog`` is the replayed index: every row with the versions it was live for,
exactly as ``memory.py`` keeps them, plus the byte offsets needed to resume reading.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import msgspec

from agentledger.errors import CorruptStoreError, UserError
from agentledger.messages import digest_of
from agentledger.store.base import (
    CommitPlan,
    Head,
    SessionInfo,
    StoredList,
    StoredMsg,
    StoredState,
    VersionInfo,
)

__all__ = [
    "FORMAT",
    "Commit",
    "Header",
    "Purge",
    "SessionLog",
    "TornTail",
    "encode_record",
    "plan_records",
    "read_info",
]

FORMAT = 1


class _Record(msgspec.Struct, tag_field="op", kw_only=True, omit_defaults=True):
    pass


class Header(_Record, tag="header"):
    format: int
    tenant: str
    session: str
    created_at: datetime
    oldest: int = 1


class _Versioned(_Record, kw_only=True):
    v: int  # the version whose commit record closes this record


class Put(_Versioned, tag="put", kw_only=True):
    list_name: str = msgspec.field(name="list")
    pos: int
    msg_id: str = msgspec.field(name="id")
    digest: str
    enc: str | None = None  # "b64" when the body is not embeddable JSON
    body: msgspec.Raw


class Trunc(_Versioned, tag="trunc"):
    list_name: str = msgspec.field(name="list")
    length: int


class SetValue(_Versioned, tag="set", kw_only=True):
    name: str
    enc: str | None = None
    value: msgspec.Raw


class DelValue(_Versioned, tag="del"):
    name: str


class Commit(_Record, tag="commit", omit_defaults=False):
    v: int
    at: datetime
    appended: int = 0
    replaced: int = 0
    truncated: int = 0
    values_changed: int = 0
    title: str | None = None  # the session's title as of this version (not a change)
    message_count: int = 0


class Purge(_Record, tag="purge"):
    oldest: int
    at: datetime


Record = Header | Put | Trunc | SetValue | DelValue | Commit | Purge
_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Record)
_commit_decoder = msgspec.json.Decoder(Commit)
_header_decoder = msgspec.json.Decoder(Header)
_DecodeErrors = (msgspec.DecodeError, msgspec.ValidationError)


def encode_record(record: _Record) -> bytes:
    """One log line, newline included."""
    return _encoder.encode(record) + b"\n"


def embed(raw: bytes) -> tuple[str | None, msgspec.Raw]:
    """``raw`` as a JSON value to embed as is, or base64 if it is not one-line JSON."""
    if b"\n" not in raw:
        try:
            msgspec.json.decode(raw, type=msgspec.Raw)  # validates without building objects
            return None, msgspec.Raw(raw)
        except _DecodeErrors:
            pass
    return "b64", msgspec.Raw(_encoder.encode(base64.b64encode(raw).decode("ascii")))


def _unembed(enc: str | None, raw: msgspec.Raw) -> bytes:
    if enc is None:
        return bytes(raw)
    if enc == "b64":
        return base64.b64decode(msgspec.json.decode(raw, type=str))
    raise ValueError(f"unknown encoding {enc!r}")


def read_info(fd: int, size: int) -> SessionInfo | None:
    """A session's listing from its header and its last commit record, read from the tail,
    so that listing sessions does not replay whole logs."""
    head = os.pread(fd, min(size, 8192), 0)
    try:
        header = _header_decoder.decode(head[: head.find(b"\n")]) if b"\n" in head else None
    except _DecodeErrors:
        header = None
    if header is None:
        return None
    chunk = 1 << 16
    while True:
        start = max(0, size - chunk)
        data = os.pread(fd, size - start, start)
        lines = data[: data.rfind(b"\n") + 1].split(b"\n")[:-1]
        if start > 0:
            lines = lines[1:]  # may begin mid-line
        for line in reversed(lines):
            if line.startswith(b'{"op":"commit"'):
                try:
                    c = _commit_decoder.decode(line)
                except _DecodeErrors:
                    continue
                h = header
                return SessionInfo(
                    h.tenant, h.session, c.title, c.message_count, c.v, h.created_at, c.at
                )
        if start == 0:
            return None
        chunk *= 4


@dataclass(slots=True)
class Row:
    position: int
    version_from: int
    version_to: int | None
    item: StoredMsg
    nbytes: int  # length of its log line
    text: str | None = None  # searchable text, derived from the body on first use


@dataclass(slots=True)
class ValueRow:
    version_from: int
    version_to: int | None
    raw: bytes
    nbytes: int


@dataclass(slots=True)
class Group:
    """One committed version: what it changed and where its records sit in the file."""

    info: VersionInfo
    start: int  # offset of its first record
    commit_at: int  # offset of its commit record
    end: int  # offset just past its commit record
    meta_bytes: int  # bytes of its records other than put/set (trunc, del, commit)


@dataclass(frozen=True, slots=True)
class TornTail:
    """Bytes after the last commit record that belong to no version (ignored, reported)."""

    path: str
    offset: int
    length: int
    line: int
    reason: str


# A record read but not yet committed: (record, line length, line number, offset, known item).
_Pending = tuple[_Record, int, int, int, "StoredMsg | None"]


class SessionLog:
    """The replayed state of one log file (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fingerprint: tuple[int, int, int, int] = (0, 0, 0, 0)  # dev, ino, size, mtime_ns
        self.header: Header | None = None
        self.header_bytes = 0
        self.clean_end = 0  # offset just past the last commit/purge record
        self.last_close = b""  # that record's line, to recognise the file when reading on
        self.lines = 0  # complete lines before clean_end
        self.version = 0
        self.oldest = 1
        self.title: str | None = None
        self.message_count = 0
        self.updated_at: datetime | None = None
        self.live: dict[str, list[Row]] = {}
        self.rows: dict[str, list[Row]] = {}
        self.values: dict[str, list[ValueRow]] = {}
        self.groups: list[Group] = []
        self.torn: TornTail | None = None

    # -- reading ---------------------------------------------------------------------------
    def feed(self, data: bytes, base: int) -> None:
        """Replay the file bytes ``data`` (which start at offset ``base == clean_end``).

        Complete versions are applied; a tail without its commit record is recorded in
        ``torn``. Raises ``CorruptStoreError`` for a bad line that committed records follow.
        """
        view = memoryview(data)
        pending: list[_Pending] = []
        lineno, pos, size = self.lines, 0, len(view)
        self.torn = None
        find, decode, add = data.find, _decoder.decode, pending.append
        while pos < size:
            nl = find(b"\n", pos)
            if nl < 0:
                self._set_torn(pending, base + pos, base + size, lineno + 1, "no newline at end")
                return
            lineno += 1
            try:
                rec = decode(view[pos:nl])
            except _DecodeErrors as exc:
                if _closes_after(view, nl + 1, find):
                    raise self._corrupt(lineno, f"not a valid record ({exc})") from None
                self._set_torn(pending, base + pos, base + size, lineno, f"bad line ({exc})")
                return
            kind = type(rec)
            if kind is Commit or kind is Purge:
                if isinstance(rec, Commit):
                    self._apply(rec, pending, base + pos, base + nl + 1, lineno)
                elif pending:
                    raise self._corrupt(lineno, "purge record inside an uncommitted version")
                else:
                    self._apply_purge(rec, lineno)
                pending.clear()
                self.clean_end = base + nl + 1
                self.last_close = bytes(view[pos : nl + 1])
                self.lines = lineno
            elif kind is Header and base + pos != 0:
                raise self._corrupt(lineno, "header record after the start of the log")
            else:
                add((rec, nl + 1 - pos, lineno, base + pos, None))
            pos = nl + 1
        if pending:
            self._set_torn(pending, base + size, base + size, lineno, "records without a commit")

    def _set_torn(
        self, pending: list[_Pending], offset: int, end: int, line: int, reason: str
    ) -> None:
        if pending:  # the torn tail starts with the uncommitted version's first record
            line, offset = pending[0][2], pending[0][3]
        self.torn = TornTail(str(self.path), offset, end - offset, line, reason)

    def _corrupt(self, line: int, why: str) -> CorruptStoreError:
        where = f"{self.path}:{line}"
        return CorruptStoreError(
            f"{self.path}, line {line}: {why}; the log was left as it is", location=where
        )

    # -- applying versions -----------------------------------------------------------------
    def _apply(
        self, commit: Commit, pending: list[_Pending], commit_at: int, end: int, lineno: int
    ) -> None:
        if pending and isinstance(pending[0][0], Header):
            header, nbytes, hline, _, _ = pending.pop(0)
            assert isinstance(header, Header)
            if self.header is not None:
                raise self._corrupt(hline, "a second header record")
            if header.format != FORMAT:
                raise self._corrupt(hline, f"unsupported log format {header.format}")
            if header.oldest < 1:
                raise self._corrupt(hline, f"bad oldest version {header.oldest}")
            self.header, self.header_bytes = header, nbytes
            self.oldest, self.version = header.oldest, header.oldest - 1
        if self.header is None:
            raise self._corrupt(lineno, "committed records before any header record")
        v = commit.v
        if v != self.version + 1:
            raise self._corrupt(lineno, f"commit of version {v} follows version {self.version}")
        start = pending[0][3] if pending else commit_at
        meta = end - start
        live_of, rows_of = self.live, self.rows
        for rec, nbytes, line, _, item in pending:
            try:
                if not isinstance(rec, _Versioned) or rec.v != v:
                    raise ValueError(f"a record of another version inside version {v}")
                if type(rec) is Put:  # the hot path: inlined
                    live = live_of.get(rec.list_name)
                    if live is None:
                        live = live_of[rec.list_name] = []
                        rows_of.setdefault(rec.list_name, [])
                    text, position = None, rec.pos
                    if item is None:
                        body = bytes(rec.body) if rec.enc is None else _unembed(rec.enc, rec.body)
                        item = StoredMsg(rec.msg_id, bytes.fromhex(rec.digest), body)
                    elif item.text:  # kept for search; loads return no text (it is not stored)
                        text, item = item.text, StoredMsg(item.msg_id, item.digest, item.body)
                    row = Row(position, v, None, item, nbytes, text)
                    if position == len(live):
                        live.append(row)
                    elif 0 <= position < len(live):
                        live[position].version_to = v
                        live[position] = row
                    else:
                        raise IndexError(f"put at position {position} of a list of {len(live)}")
                    rows_of[rec.list_name].append(row)
                    meta -= nbytes
                elif self._apply_other(rec, v, nbytes):
                    meta -= nbytes
            except (ValueError, IndexError) as exc:
                raise self._corrupt(line, str(exc)) from None
        info = VersionInfo(
            v, commit.at, commit.appended, commit.replaced, commit.truncated, commit.values_changed
        )
        self.groups.append(Group(info, start, commit_at, end, meta))
        self.version = v
        self.title, self.message_count = commit.title, commit.message_count
        self.updated_at = commit.at

    def _apply_other(self, rec: _Record, v: int, nbytes: int) -> bool:
        """Apply a trunc/set/del record of version ``v``; True if it holds a row (set)."""
        if isinstance(rec, Trunc):
            live = self.live.setdefault(rec.list_name, [])
            self.rows.setdefault(rec.list_name, [])
            if not 0 <= rec.length <= len(live):
                raise IndexError(f"truncate to {rec.length} a list of {len(live)}")
            for row in live[rec.length :]:
                row.version_to = v
            del live[rec.length :]
            return False
        if isinstance(rec, SetValue | DelValue):
            rows = self.values.setdefault(rec.name, [])
            for value in rows:
                if value.version_to is None:
                    value.version_to = v
            if isinstance(rec, SetValue):
                rows.append(ValueRow(v, None, _unembed(rec.enc, rec.value), nbytes))
                return True
            return False
        raise ValueError(f"unexpected {type(rec).__name__} record")

    def _apply_purge(self, rec: Purge, lineno: int) -> None:
        if self.header is None or not self.oldest < rec.oldest <= self.version:
            raise self._corrupt(lineno, f"purge to version {rec.oldest} is out of range")
        self.drop_before(rec.oldest)

    def drop_before(self, oldest: int) -> int:
        """Forget rows only versions older than ``oldest`` need; return how many."""
        removed = 0
        for name, rows in self.rows.items():
            kept = [r for r in rows if r.version_to is None or r.version_to > oldest]
            removed += len(rows) - len(kept)
            self.rows[name] = kept
        for name, vrows in self.values.items():
            kept_v = [r for r in vrows if r.version_to is None or r.version_to > oldest]
            removed += len(vrows) - len(kept_v)
            self.values[name] = kept_v
        self.groups = [g for g in self.groups if g.info.version >= oldest]
        self.oldest = oldest
        return removed

    def apply_written(self, records: Written, start: int) -> None:
        """Apply records this process just appended at offset ``start`` (ends with a commit)."""
        pending: list[_Pending] = []
        offset, lineno = start, self.lines
        for rec, line, item in records[:-1]:
            lineno += 1
            pending.append((rec, len(line), lineno, offset, item))
            offset += len(line)
        commit, line, _ = records[-1]
        assert isinstance(commit, Commit)
        lineno += 1
        self._apply(commit, pending, offset, offset + len(line), lineno)
        self.clean_end, self.last_close, self.lines = offset + len(line), line, lineno
        self.torn = None

    def closed_by(self, line: bytes) -> None:
        """Note a closing record (purge) this process just appended at ``clean_end``."""
        self.clean_end, self.last_close = self.clean_end + len(line), line
        self.lines += 1
        self.torn = None

    # -- what the store hands out ------------------------------------------------------------
    @property
    def incarnation(self) -> str:
        """This life of the session: its creation time (a re-created log has a new one)."""
        return self.header.created_at.isoformat() if self.header is not None else ""

    def head(self) -> Head:
        lists = {n: [r.item.digest for r in live] for n, live in self.live.items() if live}
        values = {
            n: digest_of(r.raw)
            for n, rows in self.values.items()
            for r in rows
            if r.version_to is None
        }
        return Head(self.version, lists, values, self.incarnation)

    def state(self, at: int) -> StoredState:
        """The session at version ``at`` (checked by the caller)."""
        if at == self.version:
            lists = {
                n: StoredList.of([r.item for r in live]) for n, live in self.live.items() if live
            }
        else:
            lists = {}
            for name, rows in self.rows.items():
                alive = [r for r in rows if live_at(r.version_from, r.version_to, at)]
                if alive:
                    alive.sort(key=lambda r: r.position)
                    lists[name] = StoredList.of([r.item for r in alive])
        values = {
            n: r.raw
            for n, rows in self.values.items()
            for r in rows
            if live_at(r.version_from, r.version_to, at)
        }
        return StoredState(at, lists, values, self.incarnation)

    def info(self) -> SessionInfo | None:
        if self.header is None or self.version == 0 or self.updated_at is None:
            return None
        h = self.header
        count, title = self.message_count, self.title
        return SessionInfo(
            h.tenant, h.session, title, count, self.version, h.created_at, self.updated_at
        )

    # -- sizes and compaction --------------------------------------------------------------
    def live_bytes(self) -> int:
        """Bytes of the records that versions still on record need."""
        return (
            self.header_bytes
            + sum(r.nbytes for rows in self.rows.values() for r in rows)
            + sum(r.nbytes for rows in self.values.values() for r in rows)
            + sum(g.meta_bytes for g in self.groups)
        )

    def compacted(self, read_span: Callable[[int, int], bytes]) -> bytes:
        """The whole log rewritten to start at ``oldest``: header, a snapshot of that version,
        its commit record, then every later version's records copied byte for byte."""
        assert self.header is not None and self.groups
        at = self.oldest
        header = Header(
            format=FORMAT,
            tenant=self.header.tenant,
            session=self.header.session,
            created_at=self.header.created_at,
            oldest=at,
        )
        out = [encode_record(header)]
        for name, rows in self.rows.items():
            alive = [r for r in rows if live_at(r.version_from, r.version_to, at)]
            for r in sorted(alive, key=lambda r: r.position):
                enc, body = embed(r.item.body)
                out.append(
                    encode_record(
                        Put(
                            v=at,
                            list_name=name,
                            pos=r.position,
                            msg_id=r.item.msg_id,
                            digest=r.item.digest.hex(),
                            enc=enc,
                            body=body,
                        )
                    )
                )
        for name, vrows in self.values.items():
            for value in vrows:
                if live_at(value.version_from, value.version_to, at):
                    enc, raw = embed(value.raw)
                    out.append(encode_record(SetValue(v=at, name=name, enc=enc, value=raw)))
        first = self.groups[0]
        out.append(read_span(first.commit_at, first.end))
        out.extend(read_span(g.start, g.end) for g in self.groups[1:])
        return b"".join(out)


Written = list[tuple[_Record, bytes, StoredMsg | None]]


def plan_records(plan: CommitPlan, log: SessionLog | None) -> Written:
    """The lines of one save (a header first when it creates the log), checked against the
    log so that a malformed plan raises ``UserError`` before anything is written."""
    v = plan.version
    out: Written = []

    def add(rec: _Record, item: StoredMsg | None = None) -> None:
        out.append((rec, encode_record(rec), item))

    if log is None or log.header is None:
        key = plan.key
        add(
            Header(
                format=FORMAT, tenant=key.tenant, session=key.session, created_at=plan.committed_at
            )
        )
    lengths: dict[str, int] = {}
    for write in plan.lists:
        n = lengths.get(write.name)
        if n is None:
            n = len(log.live.get(write.name, ())) if log is not None else 0
        for pos, item in write.puts:
            if not 0 <= pos <= n or pos >= write.length:
                raise UserError(
                    f"list {write.name!r}: put at position {pos} of a list of {n} "
                    f"that should end at {write.length}"
                )
            n += pos == n
            enc, body = embed(item.body)
            add(
                Put(
                    v=v,
                    list_name=write.name,
                    pos=pos,
                    msg_id=item.msg_id,
                    digest=item.digest.hex(),
                    enc=enc,
                    body=body,
                ),
                item,
            )
        if not 0 <= write.length <= n:
            raise UserError(f"list {write.name!r}: length {write.length} past its {n} rows")
        if write.length < n:
            add(Trunc(v=v, list_name=write.name, length=write.length))
        lengths[write.name] = write.length
    for name, raw in plan.values.items():
        if raw is None:
            add(DelValue(v=v, name=name))
        else:
            enc, value = embed(raw)
            add(SetValue(v=v, name=name, enc=enc, value=value))
    title = log.title if log is not None else None
    if plan.title is not None:
        title = plan.title or None
    count = log.message_count if log is not None else 0
    if plan.message_count is not None:
        count = plan.message_count
    add(
        Commit(
            v=v,
            at=plan.committed_at,
            appended=plan.appended,
            replaced=plan.replaced,
            truncated=plan.truncated,
            values_changed=len(plan.values),
            title=title,
            message_count=count,
        )
    )
    return out


def live_at(version_from: int, version_to: int | None, at: int) -> bool:
    return version_from <= at and (version_to is None or version_to > at)


def _closes_after(view: memoryview, pos: int, find: Callable[..., int]) -> bool:
    """Whether any complete line from ``pos`` on is a commit or purge record."""
    size = len(view)
    while pos < size:
        nl = find(b"\n", pos)
        if nl < 0:
            return False
        try:
            if isinstance(_decoder.decode(view[pos:nl]), Commit | Purge):
                return True
        except _DecodeErrors:
            pass
        pos = nl + 1
    return False
