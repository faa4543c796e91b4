"""Compacting a ``jsonl://`` log: the file rewritten to start at its oldest version on record.

``purge_history`` first drops, from the replayed index, the rows that only older versions
need. When the dead bytes left in the file then outweigh the live ones (``live_bytes``), the
store replaces the file by ``compacted``: a header, a snapshot of the oldest version kept, its
commit record, then every later version's records copied byte for byte, each behind a commit
record resealed for its new place. A copied version is checked against its commit record
before it is written, so compaction never turns damage into a log that checks out. The
snapshot puts each list's rows at their positions at that version (rank order), so the keep
records copied after it move the same rows they moved before. Logs of every format come out as
format 3, with every check added; the session keeps its incarnation.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import msgspec

from agentledger.errors import CorruptStoreError
from agentledger.store.jsonl_format import (
    FORMAT,
    Commit,
    DecodeErrors,
    Header,
    Put,
    SetValue,
    checksum,
    commit_decoder,
    embed,
    encode_record,
    seal,
)
from agentledger.store.jsonl_replay import Group, SessionLog, live_at, self_checked

__all__ = ["compacted", "live_bytes"]


def live_bytes(log: SessionLog) -> int:
    """Bytes of the records that versions still on record need."""
    return (
        len(log.header_line)
        + sum(r.nbytes for rows in log.rows.values() for r in rows)
        + sum(r.nbytes for rows in log.values.values() for r in rows)
        + sum(g.meta_bytes for g in log.groups)
    )


def compacted(log: SessionLog, read_span: Callable[[int, int], bytes]) -> bytes:
    """The whole log rewritten to start at ``log.oldest`` (see the module docstring);
    ``read_span(start, end)`` reads bytes of the current file."""
    assert log.header is not None and log.groups
    at, old = log.oldest, log.header
    header = Header(
        format=FORMAT,
        tenant=old.tenant,
        session=old.session,
        created_at=old.created_at,
        oldest=at,
        id=old.id,
    )
    out = [seal(header)]
    for name, rows in log.rows.items():
        alive = [r for r in rows if live_at(r.version_from, r.version_to, at)]
        for position, r in enumerate(sorted(alive, key=lambda r: r.rank)):
            enc, body = embed(r.item.body)
            put = Put(
                v=at,
                list_name=name,
                pos=position,
                msg_id=r.item.msg_id,
                digest=r.item.digest.hex(),
                enc=enc,
                body=body,
            )
            out.append(encode_record(put))
    for name, vrows in log.values.items():
        for value in vrows:
            if live_at(value.version_from, value.version_to, at):
                enc, raw = embed(value.raw)
                out.append(encode_record(SetValue(v=at, name=name, enc=enc, value=raw)))
    snapshot = 0
    for line in out:
        snapshot = zlib.crc32(line, snapshot)
    first = _commit_of(log, log.groups[0], read_span)
    out.append(seal(msgspec.structs.replace(first, sum=f"{snapshot:08x}")))
    for group in log.groups[1:]:
        records = read_span(group.start, group.commit_at)
        commit = _commit_of(log, group, read_span)
        if commit.sum is not None and checksum(records) != commit.sum:
            raise _changed(log, group)
        out.append(records)
        out.append(seal(msgspec.structs.replace(commit, sum=checksum(records))))
    return b"".join(out)


def _commit_of(log: SessionLog, group: Group, read_span: Callable[[int, int], bytes]) -> Commit:
    """The commit record of ``group`` as the file holds it, checked."""
    assert log.header is not None
    line = read_span(group.commit_at, group.end)
    try:
        commit = commit_decoder.decode(line)
    except DecodeErrors:
        raise _changed(log, group) from None
    if commit.v != group.info.version or not self_checked(
        log.header.format, commit.crc, line.rstrip(b"\n")
    ):
        raise _changed(log, group)
    return commit


def _changed(log: SessionLog, group: Group) -> CorruptStoreError:
    return CorruptStoreError(
        f"{log.path}: version {group.info.version} (bytes {group.start} to {group.end}) no "
        "longer matches its commit record; compaction stopped and the log was left as it is",
        location=f"{log.path}@{group.start}",
    )
