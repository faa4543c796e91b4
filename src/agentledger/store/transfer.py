"""Moving conversations in and out: a caller's live list, JSONL export/import, OpenAI transcripts.

``sync`` is for callers who run their own loop and keep their own list (of ``Msg`` or of OpenAI
chat dicts). It persists exactly the difference by content, never by object identity (seed 004:
an ``id()``-keyed "already saved" set made a recycled address look persisted, and a real turn
was never written), and it never changes the caller's objects.

Exports are JSONL (``export_format``): the session's current state, or with ``history=True``
every version on record as the changes it made, so an import reproduces each version. Import of
an export gives equal messages with equal digests.
"""

from __future__ import annotations

import contextlib
import os
import stat
import uuid
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import msgspec

from agentledger.errors import UserError
from agentledger.messages import Msg, encode, encode_value
from agentledger.store.export_format import EXPORT_FORMAT, Snapshot, read_snapshots
from agentledger.store.ids import check_list_name
from agentledger.store.ledger import check_value

if TYPE_CHECKING:
    from agentledger.store.ledger import Ledger
    from agentledger.store.state import SaveReport, SessionState
    from agentledger.wire.live import LiveConverter

__all__ = [
    "EXPORT_FORMAT",
    "as_messages",
    "export_session",
    "import_session",
    "import_versions",
    "read_export",
]


def as_messages(
    items: Sequence[Msg | Mapping[str, Any]], converter: LiveConverter | None = None
) -> list[Msg]:
    """Messages for a live list of ``Msg``, OpenAI chat dicts and/or Responses-API items,
    without mutating them.

    Dicts get deterministic ids from their content and occurrence (``wire.openai.derived_id``;
    an item's own ``id`` when it has one), so the same list converts to equal messages every
    time, as does a list shifted around them, and only real changes get written; a list that
    mixes formats converts each dict exactly as a list of that dict's format alone would.
    ``converter``: the ``LiveConverter`` that converted this list before (a new one if None).
    """
    if all(isinstance(m, Msg) for m in items):
        return list(items)  # type: ignore[arg-type]
    if converter is None:
        from agentledger.wire.live import LiveConverter

        converter = LiveConverter()
    return converter.convert(items)


def _record(kind: str, **fields: Any) -> bytes:
    return msgspec.json.encode({"kind": kind, **fields})


def _message(name: str, msg: Msg, position: int | None = None) -> bytes:
    at = b"" if position is None else b',"position":' + str(position).encode()
    return (
        b'{"kind":"message","list":'
        + msgspec.json.encode(name)
        + at
        + b',"message":'
        + encode(msg)
        + b"}"
    )


def _value(name: str, value: Any) -> bytes:
    return (
        b'{"kind":"value","name":'
        + msgspec.json.encode(name)
        + b',"value":'
        + encode_value(value)
        + b"}"
    )


def _state_records(state: SessionState) -> Iterator[bytes]:
    for name, msgs in state.lists.items():
        for msg in msgs:
            yield _message(name, msg)
    for name, value in state.values.items():
        yield _value(name, value)


def _change_records(before: SessionState, after: SessionState) -> Iterator[bytes]:
    """The records that turn ``before`` into ``after``: cut lists, put the messages whose
    digest changed or that are new, set and unset values."""
    for name in dict.fromkeys([*before.lists, *after.lists]):
        old, new = before.lists.get(name, []), after.lists.get(name, [])
        if len(new) < len(old):
            yield _record("length", list=name, length=len(new))
        for position, msg in enumerate(new):
            if position >= len(old) or old[position].digest != msg.digest:
                yield _message(name, msg, position)
    for name in dict.fromkeys([*before.values, *after.values]):
        if name not in after.values:
            yield _record("unset", name=name)
        elif name not in before.values or encode_value(before.values[name]) != encode_value(
            after.values[name]
        ):
            yield _value(name, after.values[name])


def _export_lines(
    ledger: Ledger, session: str, tenant: str | None, history: bool
) -> Iterator[bytes]:
    key = ledger.key(session, tenant)
    state = ledger.load(session, tenant=tenant)
    if history:
        from agentledger.store.state import SessionState

        body: list[bytes] = []
        previous = SessionState()
        for info in ledger.history(session, tenant=tenant):
            at = ledger.load(session, tenant=tenant, version=info.version)
            body.append(
                _record("version", version=info.version, committed_at=info.committed_at.isoformat())
            )
            body.extend(_change_records(previous, at))
            previous = at
        state = previous if previous.version else state
    else:
        body = list(_state_records(state))
    header = {
        "kind": "header",
        "format": EXPORT_FORMAT,
        "tenant": key.tenant,
        "session": key.session,
        "version": state.version,
        "exported_at": datetime.now(UTC).isoformat(),
        "records": len(body),
    }
    if history:
        header["history"] = True
    yield msgspec.json.encode(header)
    yield from body


def export_session(
    ledger: Ledger,
    session: str,
    target: str | os.PathLike[str] | IO[bytes],
    *,
    tenant: str | None = None,
    history: bool = False,
) -> int:
    """Write a session as JSONL to a path or binary file; returns the number of message
    records. With ``history``, every version on record is written (as its changes)."""
    count = 0
    if isinstance(target, (str, os.PathLike)):
        path = _export_path(target)
        # a name of its own (O_EXCL: never another file's), the umask applying as to any file
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        descriptor = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            with contextlib.suppress(FileNotFoundError):  # an existing file keeps its mode
                os.fchmod(descriptor, stat.S_IMODE(path.stat().st_mode))
            with open(descriptor, "wb") as fh:
                count = export_session(ledger, session, fh, tenant=tenant, history=history)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        return count
    for line in _export_lines(ledger, session, tenant, history):
        target.write(line + b"\n")
        count += line.startswith(b'{"kind":"message"')
    return count


def _export_path(target: str | os.PathLike[str]) -> Path:
    """Where an export to ``target`` is written: the file a symbolic link names (the link
    stays), a regular file or a new one. The export is written beside it under a name of its
    own and moved over it once complete, so a file of any other kind (a directory, a device, a
    pipe) is refused: moving over it would replace it, and ``-`` is standard output."""
    path = Path(os.path.realpath(target))
    if str(target) == "" or (path.exists() and not path.is_file()):
        raise UserError(
            f"cannot export to {str(target)!r}: not a regular file (use - for standard output)"
        )
    return path


def read_export(
    source: str | os.PathLike[str] | IO[bytes] | bytes,
) -> tuple[dict[str, Any], dict[str, list[Msg]], dict[str, Any]]:
    """Parse an export: (header, lists, values) of its last version. Errors name the line."""
    header, snapshots = read_snapshots(source)
    last = snapshots[-1]
    return header, {n: m for n, m in last.lists.items() if m}, last.values


def import_versions(
    ledger: Ledger,
    source: str | os.PathLike[str] | IO[bytes] | bytes,
    *,
    session: str | None = None,
    tenant: str | None = None,
    overwrite: bool = False,
) -> list[SaveReport]:
    """Load an export into ``session`` (default: the exported id): one commit per exported
    version (one in all for an export without history), each planned against the one before,
    so no other writer's commit can land in between unnoticed.

    Refuses to replace an existing session unless ``overwrite``: then the session becomes
    exactly the export (lists and values it does not name are removed) and the old content
    stays in its history.

    A first version that holds nothing (an export of an emptied session, a history purged up
    to an emptied version) makes a session that holds nothing, as it did in the source.
    """
    header, snapshots = read_snapshots(source)
    target = session or header["session"]
    _check_snapshots(snapshots)
    reports: list[SaveReport] = []
    expected = None if overwrite else 0
    for snapshot in snapshots:
        report = _save_snapshot(ledger, target, snapshot, tenant, expected)
        expected = report.version
        reports.append(report)
    return reports


def _check_snapshots(snapshots: Sequence[Snapshot]) -> None:
    """Refuse, before anything is committed, a version a save would refuse: a list name no
    store takes, a value none holds (a ``title`` that is not text). The versions are
    committed one by one, and a refusal midway left the session holding those before it."""
    for snapshot in snapshots:
        for name in snapshot.lists:
            check_list_name(name)
        for name, value in snapshot.values.items():
            check_value(name, value)


def _save_snapshot(
    ledger: Ledger, target: str, snapshot: Snapshot, tenant: str | None, expected: int | None
) -> SaveReport:
    return ledger.save_state(
        target,
        lists=snapshot.lists,
        values=snapshot.values,
        tenant=tenant,
        expected_version=expected,
        drop_unnamed=True,
        create=True,
    )


def import_session(
    ledger: Ledger,
    source: str | os.PathLike[str] | IO[bytes] | bytes,
    *,
    session: str | None = None,
    tenant: str | None = None,
    overwrite: bool = False,
) -> SaveReport:
    """``import_versions``, reporting the last commit (see there)."""
    return import_versions(ledger, source, session=session, tenant=tenant, overwrite=overwrite)[-1]
