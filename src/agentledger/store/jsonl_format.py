"""The ``jsonl://`` record format: one JSON object per line, its checks, and how a save
becomes lines.

A session is one append-only file, one JSON object per line (format 3)::

    {"op":"header","format":3,"tenant":"t","session":"s","created_at":"…","id":"5e…","crc":"…"}
    {"op":"put","v":3,"list":"context","pos":17,"id":"m17","digest":"9f…","body":{…message…}}
    {"op":"trunc","v":3,"list":"context","length":12}
    {"op":"keep","v":3,"list":"notes","runs":[1,0,11],"length":12}
    {"op":"set","v":3,"name":"summary","value":"…"}
    {"op":"del","v":3,"name":"summary"}
    {"op":"commit","v":3,"at":"…","appended":1,"replaced":0,"truncated":5,"values_changed":1,
     "title":"…","message_count":12,"sum":"…","crc":"…"}
    {"op":"purge","oldest":3,"at":"…","crc":"…"}

A list write is positional (``put`` replaces the row at ``pos`` or appends one, ``trunc``
cuts the list to ``length``) unless it moves rows: then it is one ``keep`` record, the rows
that stay as flat ``old_start, new_start, count`` triples (ascending in both lists; every other
row leaves), then a ``put`` for each new position no triple covers, in any order. A sliding
window, an insert near the front, a deletion or a summary over a prefix thus writes its new
messages and a few dozen bytes, never a line per row that moved. Format 3 (from which ``keep``
exists) is what new logs say; a format 1 or 2 log may get ``keep`` records appended, which an
older reader refuses as an unknown record rather than misreading.

The records of version ``v`` precede its ``commit`` record and count only once it is read: a
tail without one (a save cut short by a crash) is not part of the session. Message bodies are
embedded as they are (they already are compact JSON), so nothing is re-encoded on the way in or
out. A compacted log starts at version ``oldest`` (in its header) with a snapshot of that
version. ``id`` names this life of the session (a log deleted and created again gets a new one).

Every byte of a committed version is checked, so that damage is found rather than read as
different content. ``crc`` (always the last field, 8 hex digits) is the CRC-32 of its own line
up to that field: header, commit and purge records check themselves, which is all that listing
sessions reads. ``sum`` is the CRC-32 of every byte between the previous commit or purge record
(or the start of the file) and this commit record: the records the commit closes. CRC-32
detects every error confined to 32 bits, so every flipped byte. Format 1 logs (before the
checks) still load; records added to them carry the checks, and compaction rewrites them as
format 3. ``plan_records`` turns one ``CommitPlan`` into these lines; replaying them is
``jsonl_replay``'s job.
"""

from __future__ import annotations

import base64
import secrets
import zlib
from datetime import datetime
from operator import itemgetter
from types import UnionType
from typing import TYPE_CHECKING

import msgspec

from agentledger.errors import UserError
from agentledger.store.base import CommitPlan, StoredMsg

if TYPE_CHECKING:
    from agentledger.store.jsonl_replay import SessionLog

__all__ = [
    "FORMAT",
    "FORMATS",
    "BaseRecord",
    "Commit",
    "DecodeErrors",
    "DelValue",
    "Header",
    "Keep",
    "Purge",
    "Put",
    "Record",
    "SetValue",
    "Trunc",
    "Versioned",
    "Written",
    "checksum",
    "commit_decoder",
    "decoder",
    "embed",
    "encode_record",
    "gaps",
    "header_decoder",
    "plan_records",
    "seal",
    "sealed",
    "unembed",
]

FORMAT = 3  # written
FORMATS = (1, 2, 3)  # read


class BaseRecord(msgspec.Struct, tag_field="op", kw_only=True, omit_defaults=True):
    pass


class Header(BaseRecord, tag="header"):
    format: int
    tenant: str
    session: str
    created_at: datetime
    oldest: int = 1
    id: str | None = None  # this life of the session (format 1: created_at names it)
    crc: str | None = None


class Versioned(BaseRecord, kw_only=True):
    v: int  # the version whose commit record closes this record


class Put(Versioned, tag="put", kw_only=True):
    list_name: str = msgspec.field(name="list")
    pos: int
    msg_id: str = msgspec.field(name="id")
    digest: str
    enc: str | None = None  # "b64" when the body is not embeddable JSON
    body: msgspec.Raw


class Trunc(Versioned, tag="trunc"):
    list_name: str = msgspec.field(name="list")
    length: int


class Keep(Versioned, tag="keep", kw_only=True):
    """The rows of a list that stay, and where: ``runs`` holds ``(old_start, new_start,
    count)`` triples flattened into one array (compact, and O(runs) to read)."""

    list_name: str = msgspec.field(name="list")
    runs: list[int]
    length: int

    def checked(self, old_length: int, most_puts: int) -> list[tuple[int, int, int]]:
        """The runs, checked against a list of ``old_length`` rows: ascending, inside both
        lists, and leaving at most ``most_puts`` positions to fill (so that a damaged length
        is refused before anything is sized by it). Raises ``ValueError``."""
        flat = self.runs
        if len(flat) % 3:
            raise ValueError("keep runs must come in (old_start, new_start, count) triples")
        runs = list(zip(flat[0::3], flat[1::3], flat[2::3]))
        old_at = new_at = kept = 0
        for old_start, new_start, count in runs:
            if count < 1 or old_start < old_at or new_start < new_at:
                raise ValueError("keep runs must be non-empty and ascending")
            old_at, new_at = old_start + count, new_start + count
            kept += count
        if old_at > old_length or new_at > self.length:
            raise ValueError(
                f"keep runs reach past the list ({old_length} rows, then {self.length})"
            )
        if not 0 <= self.length - kept <= most_puts:
            raise ValueError(f"a keep record leaves {self.length - kept} positions to fill")
        return runs


def gaps(runs: list[tuple[int, int, int]], length: int) -> list[int]:
    """The new positions below ``length`` that no run covers (the runs ascend), ascending:
    where a keep write puts rows. O(runs + gaps), never O(length)."""
    out: list[int] = []
    at = 0
    for _, new_start, count in runs:
        out.extend(range(at, new_start))
        at = max(at, new_start + count)
    out.extend(range(at, length))
    return out


class SetValue(Versioned, tag="set", kw_only=True):
    name: str
    enc: str | None = None
    value: msgspec.Raw


class DelValue(Versioned, tag="del"):
    name: str


class Commit(BaseRecord, tag="commit", omit_defaults=False):
    v: int
    at: datetime
    appended: int = 0
    replaced: int = 0
    truncated: int = 0
    values_changed: int = 0
    title: str | None = None  # the session's title as of this version (not a change)
    message_count: int = 0
    sum: str | None = None
    crc: str | None = None


class Purge(BaseRecord, tag="purge"):
    oldest: int
    at: datetime
    crc: str | None = None


Record = Header | Put | Trunc | Keep | SetValue | DelValue | Commit | Purge
_encoder = msgspec.json.Encoder()
decoder = msgspec.json.Decoder(Record)
commit_decoder = msgspec.json.Decoder(Commit)
header_decoder = msgspec.json.Decoder(Header)
DecodeErrors = (msgspec.DecodeError, msgspec.ValidationError)
_CRC = b',"crc":"'
_SEAL = len(_CRC) + 8 + 2  # the crc field and the closing '"}'


def encode_record(record: BaseRecord) -> bytes:
    """One log line, newline included."""
    return _encoder.encode(record) + b"\n"


def checksum(data: bytes | memoryview, start: int = 0) -> str:
    """CRC-32 of ``data`` (continuing from ``start``) as the 8 hex digits the log stores."""
    return f"{zlib.crc32(data, start):08x}"


def seal(record: Header | Commit | Purge) -> bytes:
    """``record`` as a self-checked line: its ``crc`` field, last, checks what precedes it."""
    line = _encoder.encode(msgspec.structs.replace(record, crc="00000000"))
    head = line[:-_SEAL]
    return b'%s,"crc":"%08x"}\n' % (head, zlib.crc32(head))


def sealed(line: bytes) -> bool:
    """Whether ``line`` (no newline) ends with a ``crc`` field that checks the rest of it."""
    return (
        line[-_SEAL : -_SEAL + len(_CRC)] == _CRC
        and line[-2:] == b'"}'
        and line[-10:-2] == b"%08x" % zlib.crc32(line[:-_SEAL])
    )


def embed(raw: bytes) -> tuple[str | None, msgspec.Raw]:
    """``raw`` as a JSON value to embed as is, or base64 if it is not one-line JSON."""
    if b"\n" not in raw and raw == raw.strip(b" \t\r"):  # a Raw value holds no padding
        try:
            msgspec.json.decode(raw, type=msgspec.Raw)  # validates without building objects
            return None, msgspec.Raw(raw)
        except DecodeErrors:
            pass
    return "b64", msgspec.Raw(_encoder.encode(base64.b64encode(raw).decode("ascii")))


def unembed(enc: str | None, raw: msgspec.Raw) -> bytes:
    if enc is None:
        return bytes(raw)
    if enc == "b64":
        return base64.b64decode(msgspec.json.decode(raw, type=str), validate=True)
    raise ValueError(f"unknown encoding {enc!r}")


Written = list[tuple[BaseRecord, bytes, StoredMsg | None]]


def plan_records(plan: CommitPlan, log: SessionLog | None) -> Written:
    """The lines of one save (a header first when it creates the log), checked against the
    log and read back, so that a plan the log could not hold raises ``UserError`` before
    anything is written: every line written is one every reader can read."""
    try:
        out = _plan_records(plan, log)
    except UserError:
        raise
    except (TypeError, ValueError, AttributeError, msgspec.EncodeError) as exc:
        raise UserError(f"{_what(plan)} holds a value the log cannot store: {exc}") from exc
    for rec, line, _ in out:
        try:
            decoder.decode(line)
        except DecodeErrors as exc:
            raise UserError(
                f"{_what(plan)}: its {type(rec).__name__.lower()} record would not read back "
                f"({exc})"
            ) from None
    return out


def _what(plan: CommitPlan) -> str:
    return f"the save of session {plan.key.session!r} (tenant {plan.key.tenant!r})"


def _check(value: object, kind: type | UnionType, what: str) -> None:
    """Refuse a value that JSON would write as another type (bytes as base64 text, a
    ``datetime`` as text ...): it would read back, but not as what was given."""
    if not isinstance(value, kind):
        raise UserError(f"{what} must be {_NAMES.get(kind, kind)}, not {type(value).__name__}")


_NAMES: dict[type | UnionType, str] = {str: "a string", bytes | bytearray: "bytes"}


def _plan_records(plan: CommitPlan, log: SessionLog | None) -> Written:
    v = plan.version
    out: Written = []

    def add(rec: BaseRecord, item: StoredMsg | None = None) -> None:
        out.append((rec, encode_record(rec), item))

    if log is None or log.header is None:
        key = plan.key
        header = Header(
            format=FORMAT,
            tenant=key.tenant,
            session=key.session,
            created_at=plan.committed_at,
            id=secrets.token_hex(16),
        )
        out.append((header, seal(header), None))
    lengths: dict[str, int] = {}
    for write in plan.lists:
        n = lengths.get(write.name)
        if n is None:
            n = len(log.live.get(write.name, ())) if log is not None else 0
        _check(write.name, str, "a list name")
        if write.runs is not None and not _positional(write.kept_runs(n)):
            # rows move: one keep record, then the new rows at their new positions
            runs = write.runs
            flat = [number for run in runs for number in run]
            add(Keep(v=v, list_name=write.name, runs=flat, length=write.length))
            for pos, item in sorted(write.puts, key=itemgetter(0)):
                add(_put(v, write.name, pos, item), item)
            lengths[write.name] = write.length
            continue
        for pos, item in write.puts:
            if not 0 <= pos <= n or pos >= write.length:
                raise UserError(
                    f"list {write.name!r}: put at position {pos} of a list of {n} "
                    f"that should end at {write.length}"
                )
            n += pos == n
            add(_put(v, write.name, pos, item), item)
        if not 0 <= write.length <= n:
            raise UserError(f"list {write.name!r}: length {write.length} past its {n} rows")
        if write.length < n:
            add(Trunc(v=v, list_name=write.name, length=write.length))
        lengths[write.name] = write.length
    for name, raw in plan.values.items():
        _check(name, str, "a value name")
        if raw is None:
            add(DelValue(v=v, name=name))
        else:
            _check(raw, bytes | bytearray, "a value")
            enc, value = embed(raw)
            add(SetValue(v=v, name=name, enc=enc, value=value))
    title = log.title if log is not None else None
    if plan.title is not None:
        _check(plan.title, str, "a session title")
        title = plan.title or None
    count = log.message_count if log is not None else 0
    if plan.message_count is not None:
        count = plan.message_count
    records_sum = 0
    for _, line, _ in out:
        records_sum = zlib.crc32(line, records_sum)
    commit = Commit(
        v=v,
        at=plan.committed_at,
        appended=plan.appended,
        replaced=plan.replaced,
        truncated=plan.truncated,
        values_changed=len(plan.values),
        title=title,
        message_count=count,
        sum=f"{records_sum:08x}",
    )
    out.append((commit, seal(commit), None))
    return out


def _positional(runs: list[tuple[int, int, int]]) -> bool:
    """Whether kept ``runs`` (checked) keep every row where it was: then puts and a trunc say
    the same, as every log before format 3 said it."""
    return all(old_start == new_start for old_start, new_start, _ in runs)


def _put(v: int, name: str, pos: int, item: StoredMsg) -> Put:
    _check(item.msg_id, str, "a message id")
    _check(item.digest, bytes | bytearray, "a digest")
    _check(item.body, bytes | bytearray, "a message body")
    enc, body = embed(item.body)
    return Put(
        v=v,
        list_name=name,
        pos=pos,
        msg_id=item.msg_id,
        digest=item.digest.hex(),
        enc=enc,
        body=body,
    )
