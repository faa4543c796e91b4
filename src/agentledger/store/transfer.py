"""Moving conversations in and out: a caller's live list, JSONL export/import, OpenAI transcripts.

``sync`` is for callers who run their own loop and keep their own list (of ``Msg`` or of OpenAI
chat dicts). It persists exactly the difference by content, never by object identity (seed 004:
an ``id()``-keyed "already saved" set made a recycled address look persisted, and a real turn
was never written), and it never changes the caller's objects.

The export format is JSONL: a header line, then one line per message (``{"list": name,
"message": <canonical message>}``) and per value. Import of an export gives equal messages with
equal digests.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import msgspec

from agentledger.errors import CodecError
from agentledger.messages import Msg, decode, decode_value, encode, encode_value

if TYPE_CHECKING:
    from agentledger.store.ledger import Ledger
    from agentledger.store.state import SaveReport

__all__ = ["EXPORT_FORMAT", "as_messages", "export_session", "import_session"]

EXPORT_FORMAT = "agentledger.export/1"


def as_messages(items: Sequence[Msg | Mapping[str, Any]]) -> list[Msg]:
    """Messages for a live list of ``Msg``, OpenAI chat dicts and/or Responses-API items,
    without mutating them.

    Dicts get deterministic ids from their position and content (``wire.openai.derived_id``;
    an item's own ``id`` when it has one), so the same list converts to equal messages every
    time and only real changes get written; a list that mixes formats converts each dict
    exactly as a list of that dict's format alone would.
    """
    if all(isinstance(m, Msg) for m in items):
        return list(items)  # type: ignore[arg-type]
    from agentledger.wire.responses import from_live_items

    return from_live_items(items)


class _Line(msgspec.Struct, omit_defaults=True, forbid_unknown_fields=True):
    """One export line; ``message`` and ``value`` stay raw so they are decoded by the codec."""

    kind: str
    list: str | None = None
    name: str | None = None
    message: msgspec.Raw = msgspec.Raw(b"")
    value: msgspec.Raw = msgspec.Raw(b"")
    format: str | None = None
    tenant: str | None = None
    session: str | None = None
    version: int | None = None
    exported_at: str | None = None


_line_decoder = msgspec.json.Decoder(_Line)


def _export_lines(ledger: Ledger, session: str, tenant: str | None) -> Iterator[bytes]:
    state = ledger.load(session, tenant=tenant)
    key = ledger.key(session, tenant)
    header = {
        "kind": "header",
        "format": EXPORT_FORMAT,
        "tenant": key.tenant,
        "session": key.session,
        "version": state.version,
        "exported_at": datetime.now(UTC).isoformat(),
    }
    yield msgspec.json.encode(header)
    for name, msgs in state.lists.items():
        prefix = b'{"kind":"message","list":' + msgspec.json.encode(name) + b',"message":'
        for msg in msgs:
            yield prefix + encode(msg) + b"}"
    for name, value in state.values.items():
        yield (
            b'{"kind":"value","name":'
            + msgspec.json.encode(name)
            + b',"value":'
            + encode_value(value)
            + b"}"
        )


def export_session(
    ledger: Ledger,
    session: str,
    target: str | os.PathLike[str] | IO[bytes],
    *,
    tenant: str | None = None,
) -> int:
    """Write a session as JSONL to a path or binary file; returns the number of messages."""
    count = 0
    if isinstance(target, (str, os.PathLike)):
        path = Path(target)
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as fh:
            count = export_session(ledger, session, fh, tenant=tenant)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        return count
    for line in _export_lines(ledger, session, tenant):
        target.write(line + b"\n")
        count += line.startswith(b'{"kind":"message"')
    return count


def read_export(
    source: str | os.PathLike[str] | IO[bytes] | bytes,
) -> tuple[dict[str, Any], dict[str, list[Msg]], dict[str, Any]]:
    """Parse an export: (header, lists, values). Errors name the line."""
    if isinstance(source, bytes):
        fh: IO[bytes] = io.BytesIO(source)
    elif isinstance(source, (str, os.PathLike)):
        fh = open(source, "rb")  # noqa: SIM115 - closed below
    else:
        fh = source
    header: dict[str, Any] | None = None
    lists: dict[str, list[Msg]] = {}
    values: dict[str, Any] = {}
    try:
        for number, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                line = _line_decoder.decode(raw)
                if line.kind == "header":
                    if header is not None:
                        raise CodecError("a second header line")
                    if line.format != EXPORT_FORMAT:
                        raise CodecError(f"unsupported export format {line.format!r}")
                    header = {
                        "tenant": line.tenant,
                        "session": line.session,
                        "version": line.version,
                        "exported_at": line.exported_at,
                    }
                elif line.kind == "message" and line.list and line.message:
                    lists.setdefault(line.list, []).append(decode(bytes(line.message)))
                elif line.kind == "value" and line.name and line.value:
                    values[line.name] = decode_value(bytes(line.value))
                else:
                    raise CodecError(f"unknown record kind {line.kind!r}")
            except (
                msgspec.DecodeError,
                msgspec.ValidationError,
                CodecError,
                RecursionError,
            ) as exc:
                raise CodecError(f"export line {number}: {exc}") from None
    finally:
        if fh is not source:
            fh.close()
    if header is None:
        raise CodecError("not an agentledger export: no header line")
    return header, lists, values


def import_session(
    ledger: Ledger,
    source: str | os.PathLike[str] | IO[bytes] | bytes,
    *,
    session: str | None = None,
    tenant: str | None = None,
    overwrite: bool = False,
) -> SaveReport:
    """Load an export into ``session`` (default: the exported id) as one commit.

    Refuses to replace an existing session unless ``overwrite``: then the session becomes
    exactly the export (lists and values it does not name are removed) and the old content
    stays in its history.
    """
    header, lists, values = read_export(source)
    target = session or header["session"]
    return ledger.save_state(
        target,
        lists=lists,
        values=values,
        tenant=tenant,
        expected_version=None if overwrite else 0,
        drop_unnamed=overwrite,
    )
