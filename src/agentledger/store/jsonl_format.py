"""The ``jsonl://`` record format: one JSON object per line, and how a save becomes lines.

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
version. ``plan_records`` turns one ``CommitPlan`` into these lines; replaying them is
``jsonl_replay``'s job.
"""

from __future__ import annotations

import base64
from datetime import datetime
from typing import TYPE_CHECKING

import msgspec

from agentledger.errors import UserError
from agentledger.store.base import CommitPlan, StoredMsg

if TYPE_CHECKING:
    from agentledger.store.jsonl_replay import SessionLog

__all__ = [
    "FORMAT",
    "BaseRecord",
    "Commit",
    "DecodeErrors",
    "DelValue",
    "Header",
    "Purge",
    "Put",
    "Record",
    "SetValue",
    "Trunc",
    "Versioned",
    "Written",
    "commit_decoder",
    "decoder",
    "embed",
    "encode_record",
    "header_decoder",
    "plan_records",
    "unembed",
]

FORMAT = 1


class BaseRecord(msgspec.Struct, tag_field="op", kw_only=True, omit_defaults=True):
    pass


class Header(BaseRecord, tag="header"):
    format: int
    tenant: str
    session: str
    created_at: datetime
    oldest: int = 1


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


class Purge(BaseRecord, tag="purge"):
    oldest: int
    at: datetime


Record = Header | Put | Trunc | SetValue | DelValue | Commit | Purge
_encoder = msgspec.json.Encoder()
decoder = msgspec.json.Decoder(Record)
commit_decoder = msgspec.json.Decoder(Commit)
header_decoder = msgspec.json.Decoder(Header)
DecodeErrors = (msgspec.DecodeError, msgspec.ValidationError)


def encode_record(record: BaseRecord) -> bytes:
    """One log line, newline included."""
    return _encoder.encode(record) + b"\n"


def embed(raw: bytes) -> tuple[str | None, msgspec.Raw]:
    """``raw`` as a JSON value to embed as is, or base64 if it is not one-line JSON."""
    if b"\n" not in raw:
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
        return base64.b64decode(msgspec.json.decode(raw, type=str))
    raise ValueError(f"unknown encoding {enc!r}")


Written = list[tuple[BaseRecord, bytes, StoredMsg | None]]


def plan_records(plan: CommitPlan, log: SessionLog | None) -> Written:
    """The lines of one save (a header first when it creates the log), checked against the
    log so that a malformed plan raises ``UserError`` before anything is written."""
    v = plan.version
    out: Written = []

    def add(rec: BaseRecord, item: StoredMsg | None = None) -> None:
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
