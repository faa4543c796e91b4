"""Replaying a ``jsonl://`` session log into an in-memory index: what counts as committed,
what is a torn tail, and what is damage.

``SessionLog`` is the replayed index: every row with the versions it was live for, exactly as
``memory.py`` keeps them, plus the byte offsets needed to resume reading. The records of a
version count only once its commit record is read, and only if the commit's checks hold (see
``jsonl_format``).

A past version's order cannot come from positions once rows move (a ``keep`` record shifts
every row after an insert). Each row gets a rank key instead (see ``ranks``), made during
replay and held only in memory: an append takes the key after the last, a put in place the key
of the row it replaces (the two are never live at once), and the puts of a ``keep`` the keys
``plan_ranks`` makes between their new neighbours'. A past version's list is its live rows
sorted by key. This is the cheapest order that survives shifts: a key per row, O(1) per append
and put in place, and C-level slice moves of the live keys per ``keep``, where an order kept
per version would copy the whole list at every version. Rows that leave are closed as they leave,
so no floor is needed (the SQL stores leave a dropped prefix to one).

A torn tail is what a write cut short leaves, and nothing else: records of the next version
that are complete and valid but have no commit record, then at most one final line without its
newline that could still be the start of a record. It belongs to no version; it is reported
(``torn``) and the next save cuts it off. A complete line (newline-terminated) that does not
decode or fails a check, or a last line that holds a whole record and then more bytes, is
damage: ``CorruptStoreError`` naming the file and line, and nothing is cut or rewritten. A
writer never produces either, so treating them as a torn tail would silently drop a commit.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from agentledger.errors import CorruptStoreError
from agentledger.messages import digest_of
from agentledger.store.base import (
    Head,
    SessionInfo,
    StoredList,
    StoredMsg,
    StoredState,
    VersionInfo,
    drop_dead_rows,
)
from agentledger.store.jsonl_format import (
    FORMATS,
    BaseRecord,
    Commit,
    DecodeErrors,
    DelValue,
    Header,
    Keep,
    Purge,
    Put,
    SetValue,
    Trunc,
    Versioned,
    Written,
    checksum,
    decoder,
    gaps,
    header_decoder,
    sealed,
    unembed,
)
from agentledger.store.planner import splice_into
from agentledger.store.ranks import START, plan_ranks

__all__ = [
    "Group",
    "Row",
    "SessionLog",
    "TornTail",
    "ValueRow",
    "could_be_cut",
    "live_at",
    "read_info",
    "self_checked",
]


@dataclass(slots=True)
class Row:
    rank: bytes  # a version's rows in order are its live rows sorted by rank
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
_Pending = tuple[BaseRecord, int, int, int, "StoredMsg | None"]


class SessionLog:
    """The replayed state of one log file (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fingerprint: tuple[int, int, int, int] = (0, 0, 0, 0)  # dev, ino, size, mtime_ns
        self.header: Header | None = None
        self.header_line = b""  # its line, to recognise the file (a new life has a new one)
        self.clean_end = 0  # offset just past the last commit/purge record
        self.last_close = b""  # that record's line, to recognise the file when reading on
        self.lines = 0  # complete lines before clean_end
        self.version = 0
        self.oldest = 1
        self.title: str | None = None
        self.message_count = 0
        self.updated_at: datetime | None = None
        self.live: dict[str, list[Row]] = {}
        self.ranks: dict[str, list[bytes]] = {}  # of the live rows, in order
        self.rows: dict[str, list[Row]] = {}
        self.values: dict[str, list[ValueRow]] = {}
        self.groups: list[Group] = []
        self.torn: TornTail | None = None
        self._header_read = b""  # the header line read, until a commit makes it count

    # -- reading ---------------------------------------------------------------------------
    def feed(self, data: bytes, base: int) -> None:
        """Replay the file bytes ``data`` (which start at offset ``base == clean_end``).

        Complete versions are applied; a torn tail is recorded in ``torn``. Damage raises
        ``CorruptStoreError`` (see the module docstring).
        """
        view = memoryview(data)
        pending: list[_Pending] = []
        lineno, pos, size = self.lines, 0, len(view)
        self.torn = None
        find, decode, add = data.find, decoder.decode, pending.append
        while pos < size:
            nl = find(b"\n", pos)
            if nl < 0:
                if not could_be_cut(data[pos:]):
                    raise self._corrupt(
                        lineno + 1, "the last line is not the start of a record cut short"
                    )
                self._set_torn(pending, base + pos, base + size, lineno + 1, "no newline at end")
                return
            lineno += 1
            try:
                rec = decode(view[pos:nl])
            except DecodeErrors as exc:
                raise self._corrupt(lineno, f"not a valid record ({exc})") from None
            kind = type(rec)
            if kind is Commit or kind is Purge:
                line = bytes(view[pos:nl])
                if isinstance(rec, Commit):
                    span = view[self.clean_end - base : pos]
                    self._apply(rec, pending, base + pos, base + nl + 1, lineno, (line, span))
                elif pending:
                    raise self._corrupt(lineno, "purge record inside an uncommitted version")
                else:
                    self._apply_purge(rec, lineno, line)
                pending.clear()
                self.clean_end = base + nl + 1
                self.last_close = bytes(view[pos : nl + 1])
                self.lines = lineno
            elif kind is Header:
                if base + pos != 0:
                    raise self._corrupt(lineno, "header record after the start of the log")
                if rec.format not in FORMATS:
                    raise self._corrupt(lineno, f"unsupported log format {rec.format}")
                self._header_read = bytes(view[pos : nl + 1])
                if not self_checked(rec.format, rec.crc, self._header_read[:-1]):
                    raise self._corrupt(lineno, "the header record fails its check")
                add((rec, nl + 1 - pos, lineno, base + pos, None))
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
        self,
        commit: Commit,
        pending: list[_Pending],
        commit_at: int,
        end: int,
        lineno: int,
        read: tuple[bytes, memoryview] | None = None,
    ) -> None:
        """Apply one version. ``read`` holds, for a version read from the file, its commit
        line and the bytes it closes, to check; records this process wrote come without."""
        if pending and isinstance(pending[0][0], Header):
            header, _, hline, _, _ = pending.pop(0)
            assert isinstance(header, Header)
            if self.header is not None:
                raise self._corrupt(hline, "a second header record")
            if header.oldest < 1:
                raise self._corrupt(hline, f"bad oldest version {header.oldest}")
            self.header, self.header_line = header, self._header_read
            self.oldest, self.version = header.oldest, header.oldest - 1
        if self.header is None:
            raise self._corrupt(lineno, "committed records before any header record")
        v = commit.v
        if read is not None:
            fmt = self.header.format
            line, span = read
            if not self_checked(fmt, commit.crc, line):
                raise self._corrupt(lineno, f"the commit record of version {v} fails its check")
            if (commit.sum is not None or fmt >= 2) and checksum(span) != commit.sum:
                first = pending[0][2] if pending else lineno
                raise self._corrupt(
                    lineno,
                    f"lines {first} to {lineno - 1}, the records of version {v}, do not match "
                    "the checksum in its commit record",
                )
        if v != self.version + 1:
            raise self._corrupt(lineno, f"commit of version {v} follows version {self.version}")
        start = pending[0][3] if pending else commit_at
        meta = end - start
        live_of, rows_of, ranks_of = self.live, self.rows, self.ranks
        holes: dict[str, dict[int, bytes]] = {}  # per list: positions a keep left to fill
        for index, (rec, nbytes, line_no, _, item) in enumerate(pending):
            try:
                if not isinstance(rec, Versioned) or rec.v != v:
                    raise ValueError(f"a record of another version inside version {v}")
                if type(rec) is Put:  # the hot path: inlined
                    name = rec.list_name
                    live = live_of.get(name)
                    if live is None:
                        live = live_of[name] = []
                        ranks_of[name] = []
                        rows_of.setdefault(name, [])
                    ranks = ranks_of[name]
                    text, position = None, rec.pos
                    if item is None:
                        body = bytes(rec.body) if rec.enc is None else unembed(rec.enc, rec.body)
                        item = StoredMsg(rec.msg_id, bytes.fromhex(rec.digest), body)
                    elif item.text:  # kept for search; loads return no text (it is not stored)
                        text, item = item.text, StoredMsg(item.msg_id, item.digest, item.body)
                    open_at = holes.get(name) if holes else None
                    if open_at is not None:
                        rank = open_at.pop(position, None)
                        if rank is None:
                            raise IndexError(
                                f"put at position {position}, which the keep record of list "
                                f"{name!r} does not leave open"
                            )
                        live[position] = Row(rank, v, None, item, nbytes, text)
                    elif position == len(live):
                        rank = _after(ranks[-1]) if ranks else START
                        live.append(Row(rank, v, None, item, nbytes, text))
                        ranks.append(rank)
                    elif 0 <= position < len(live):
                        old = live[position]
                        old.version_to = v
                        live[position] = Row(old.rank, v, None, item, nbytes, text)
                    else:
                        raise IndexError(f"put at position {position} of a list of {len(live)}")
                    rows_of[name].append(live[position])
                    meta -= nbytes
                elif type(rec) is Keep:
                    if rec.list_name in holes:
                        raise ValueError(f"a second keep record for list {rec.list_name!r}")
                    holes[rec.list_name] = self._apply_keep(rec, v, len(pending) - index - 1)
                elif type(rec) is Trunc and rec.list_name in holes:
                    raise ValueError("a trunc record after the keep record of its list")
                elif self._apply_other(rec, v, nbytes):
                    meta -= nbytes
            except (ValueError, IndexError) as exc:
                raise self._corrupt(line_no, str(exc)) from None
        for name, open_at in holes.items():
            if open_at:
                raise self._corrupt(
                    lineno,
                    f"version {v} leaves position {min(open_at)} of list {name!r} empty: its "
                    "keep record opened it and no put filled it",
                )
        info = VersionInfo(
            v, commit.at, commit.appended, commit.replaced, commit.truncated, commit.values_changed
        )
        self.groups.append(Group(info, start, commit_at, end, meta))
        self.version = v
        self.title, self.message_count = commit.title, commit.message_count
        self.updated_at = commit.at

    def _apply_keep(self, rec: Keep, v: int, most_puts: int) -> dict[int, bytes]:
        """Apply a keep record of version ``v`` (at most ``most_puts`` records follow it):
        close the rows that leave, move the others in place (``splice_into``: slice moves in C),
        and return the positions left open, each with the rank its put will take."""
        name = rec.list_name
        live = self.live.setdefault(name, [])
        ranks = self.ranks.setdefault(name, [])
        self.rows.setdefault(name, [])
        runs = rec.checked(len(live), most_puts)
        positions = gaps(runs, rec.length)
        planned = plan_ranks(ranks, None, runs, positions, rec.length)
        for row in live[: planned.dropped]:
            row.version_to = v
        for i in planned.closed:
            live[i].version_to = v
        splice_into(live, runs, [(p, None) for p in positions], rec.length)  # puts fill these
        splice_into(ranks, runs, list(zip(positions, planned.put_ranks)), rec.length)
        return dict(zip(positions, planned.put_ranks))

    def _apply_other(self, rec: BaseRecord, v: int, nbytes: int) -> bool:
        """Apply a trunc/set/del record of version ``v``; True if it holds a row (set)."""
        if isinstance(rec, Trunc):
            live = self.live.setdefault(rec.list_name, [])
            self.rows.setdefault(rec.list_name, [])
            if not 0 <= rec.length <= len(live):
                raise IndexError(f"truncate to {rec.length} a list of {len(live)}")
            for row in live[rec.length :]:
                row.version_to = v
            del live[rec.length :]
            del self.ranks.setdefault(rec.list_name, [])[rec.length :]
            return False
        if isinstance(rec, SetValue | DelValue):
            rows = self.values.setdefault(rec.name, [])
            for value in rows:
                if value.version_to is None:
                    value.version_to = v
            if isinstance(rec, SetValue):
                rows.append(ValueRow(v, None, unembed(rec.enc, rec.value), nbytes))
                return True
            return False
        raise ValueError(f"unexpected {type(rec).__name__} record")

    def _apply_purge(self, rec: Purge, lineno: int, line: bytes) -> None:
        if self.header is None or not self.oldest < rec.oldest <= self.version:
            raise self._corrupt(lineno, f"purge to version {rec.oldest} is out of range")
        if not self_checked(self.header.format, rec.crc, line):
            raise self._corrupt(lineno, "the purge record fails its check")
        self.drop_before(rec.oldest)

    def drop_before(self, oldest: int) -> int:
        """Forget rows only versions older than ``oldest`` need; return how many."""
        removed = drop_dead_rows(self.rows, oldest) + drop_dead_rows(self.values, oldest)
        self.groups = [g for g in self.groups if g.info.version >= oldest]
        self.oldest = oldest
        return removed

    def apply_written(self, records: Written, start: int) -> None:
        """Apply records this process just appended at offset ``start`` (ends with a commit)."""
        pending: list[_Pending] = []
        offset, lineno = start, self.lines
        for rec, line, item in records[:-1]:
            lineno += 1
            if isinstance(rec, Header):
                self._header_read = line
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
    def marks(self) -> tuple[tuple[int, bytes], tuple[int, bytes]]:
        """The header line and the last closing record at their offsets: a file that still
        holds both (and has not changed size) is the one this index was read from."""
        return (0, self.header_line), (self.clean_end - len(self.last_close), self.last_close)

    @property
    def incarnation(self) -> str:
        """This life of the session: its header's id (format 1: its creation time)."""
        if self.header is None:
            return ""
        return self.header.id or self.header.created_at.isoformat()

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
                    alive.sort(key=lambda r: r.rank)
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


def _after(rank: bytes) -> bytes:
    """``ranks.after(rank)[0]`` without its list: the append path of replay runs once a row."""
    return (int.from_bytes(rank[:8].ljust(8, b"\0"), "big") + 1).to_bytes(8, "big")


def self_checked(fmt: int, crc: str | None, line: bytes) -> bool:
    """Whether a header, commit or purge line (no newline) passes its own check: required
    from format 2 on, and wherever a format 1 log has one."""
    return (crc is None and fmt < 2) or sealed(line)


def live_at(version_from: int, version_to: int | None, at: int) -> bool:
    return version_from <= at and (version_to is None or version_to > at)


# JSON strings (an unterminated one may run to the end) and brackets outside them.
_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*(?:"|\\?\Z)|[][{}]')
_START = b'{"op":"'


def could_be_cut(fragment: bytes) -> bool:
    """Whether ``fragment``, a last line without its newline, may be a record whose write was
    cut short: it starts as every record does, and no whole JSON value ends before its last
    byte. A newline damaged into another byte leaves a whole record followed by more bytes,
    which no cut-short write can."""
    if not (fragment.startswith(_START) or _START.startswith(fragment)):
        return False
    depth = 0
    for match in _TOKENS.finditer(fragment):
        token = match.group()
        if token in (b"{", b"["):
            depth += 1
        elif token in (b"}", b"]"):
            depth -= 1
            if depth == 0:
                return match.end() == len(fragment)
    return True


def read_info(fd: int, size: int) -> tuple[bytes, SessionInfo] | None:
    """A session's listing, and the header line it was read with, from its header and its last
    commit record read from the tail, so that listing sessions does not replay whole logs.

    Only a log that ends cleanly (a checked commit record, perhaps followed by checked purge
    records) is listed this way; for anything else (a torn tail, damage, no version yet) this
    returns None and the caller replays the log, which decides.
    """
    head = os.pread(fd, min(size, 8192), 0)
    nl = head.find(b"\n")
    if nl < 0:
        return None
    try:
        header = header_decoder.decode(head[:nl])
    except DecodeErrors:
        return None
    if header.format not in FORMATS or not self_checked(header.format, header.crc, head[:nl]):
        return None
    chunk = 1 << 16
    while True:
        start = max(0, size - chunk)
        data = os.pread(fd, size - start, start)
        if not data.endswith(b"\n"):
            return None
        lines = data.split(b"\n")[:-1]
        if start > 0:
            lines = lines[1:]  # may begin mid-line
        for line in reversed(lines):
            try:
                rec = decoder.decode(line)
            except DecodeErrors:
                return None
            if not isinstance(rec, Commit | Purge):
                return None
            if not self_checked(header.format, rec.crc, line):
                return None
            if isinstance(rec, Commit):
                h = header
                return head[: nl + 1], SessionInfo(
                    h.tenant, h.session, rec.title, rec.message_count, rec.v, h.created_at, rec.at
                )
        if start == 0:
            return None
        chunk *= 4
