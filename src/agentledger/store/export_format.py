"""The export file format (``agentledger.export/1``): JSONL records, written and read strictly.

The first line is the header: format, tenant, session, version, export time, and ``records``,
the number of lines that follow (an export cut short, or with lines lost, is refused instead of
imported as a smaller session; exports written before the count existed are read without it).
Then one record per line:

- ``{"kind": "message", "list": name, "message": <canonical message>}`` appends a message to a
  list; with ``"position": i`` it puts the message at ``i`` instead (replacing the one there, or
  appending when ``i`` is the list's length);
- ``{"kind": "length", "list": name, "length": n}`` cuts a list to ``n`` messages;
- ``{"kind": "value", "name": name, "value": <canonical value>}`` sets a named value;
  ``{"kind": "unset", "name": name}`` deletes it;
- ``{"kind": "version", "version": v, "committed_at": iso}`` starts the records of version ``v``.

An export of the current state has no version records: its messages and values are the state.
An export with history (``"history": true`` in the header) is a sequence of versions, each
holding only what changed since the previous one, so it costs about what the history stores;
reading it replays them into one snapshot per version. Every record is checked (unknown keys,
kinds, positions outside the list, versions out of order): a bad line is a ``CodecError``
naming it, never skipped.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

import msgspec

from agentledger.errors import CodecError
from agentledger.messages import Msg, decode, decode_value

__all__ = ["EXPORT_FORMAT", "Snapshot", "read_snapshots"]

EXPORT_FORMAT = "agentledger.export/1"


class _Line(msgspec.Struct, omit_defaults=True, forbid_unknown_fields=True):
    """One export line; ``message`` and ``value`` stay raw so they are decoded by the codec."""

    kind: str
    list: str | None = None
    name: str | None = None
    message: msgspec.Raw = msgspec.Raw(b"")
    value: msgspec.Raw = msgspec.Raw(b"")
    position: int | None = None
    length: int | None = None
    format: str | None = None
    tenant: str | None = None
    session: str | None = None
    version: int | None = None
    exported_at: str | None = None
    committed_at: str | None = None
    records: int | None = None
    history: bool | None = None


_line_decoder = msgspec.json.Decoder(_Line)


@dataclass
class Snapshot:
    """A session's lists and values as of one exported version (``version`` None: the export
    has no history, this is its one state)."""

    version: int | None
    committed_at: str | None = None
    lists: dict[str, list[Msg]] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)

    def next(self, version: int, committed_at: str | None) -> Snapshot:
        return Snapshot(
            version, committed_at, {n: list(m) for n, m in self.lists.items()}, dict(self.values)
        )


class _Reader:
    """Replays records into snapshots (see the module docstring)."""

    def __init__(self) -> None:
        self.header: dict[str, Any] | None = None
        self.current = Snapshot(None)
        self.done: list[Snapshot] = []
        self.records = 0

    def apply(self, line: _Line) -> None:
        if line.kind == "header":
            self._header(line)
            return
        if self.header is None:
            raise CodecError("a record before the header line")
        self.records += 1
        state = self.current
        if line.kind == "message" and line.list and line.message:
            msgs = state.lists.setdefault(line.list, [])
            position = len(msgs) if line.position is None else line.position
            if not 0 <= position <= len(msgs):
                raise CodecError(f"position {position} is outside list {line.list!r} ({len(msgs)})")
            msg = decode(bytes(line.message))
            if position == len(msgs):
                msgs.append(msg)
            else:
                msgs[position] = msg
        elif line.kind == "length" and line.list and line.length is not None:
            msgs = state.lists.get(line.list, [])
            if not 0 <= line.length <= len(msgs):
                raise CodecError(
                    f"length {line.length} is outside list {line.list!r} ({len(msgs)})"
                )
            del msgs[line.length :]
        elif line.kind == "value" and line.name and line.value:
            state.values[line.name] = decode_value(bytes(line.value))
        elif line.kind == "unset" and line.name:
            if state.values.pop(line.name, None) is None:
                raise CodecError(f"unset of value {line.name!r}, which is not set")
        elif line.kind == "version" and line.version is not None:
            self._version(line.version, line.committed_at)
        else:
            raise CodecError(f"unknown or incomplete record of kind {line.kind!r}")

    def _header(self, line: _Line) -> None:
        if self.header is not None:
            raise CodecError("a second header line")
        if line.format != EXPORT_FORMAT:
            raise CodecError(f"unsupported export format {line.format!r}")
        self.header = {
            "tenant": line.tenant,
            "session": line.session,
            "version": line.version,
            "exported_at": line.exported_at,
            "records": line.records,
            "history": bool(line.history),
        }

    def _version(self, version: int, committed_at: str | None) -> None:
        state = self.current
        if state.version is None:
            if self.done or state.lists or state.values:
                raise CodecError("a version record after records that belong to no version")
        elif version <= state.version:
            raise CodecError(f"version {version} after version {state.version}")
        if state.version is not None:
            self.done.append(state)
        self.current = state.next(version, committed_at)

    def finish(self) -> tuple[dict[str, Any], list[Snapshot]]:
        if self.header is None:
            raise CodecError("not an agentledger export: no header line")
        expected = self.header["records"]
        if expected is not None and expected != self.records:
            raise CodecError(
                f"the export is incomplete: its header announces {expected} records after it, "
                f"the file has {self.records} (cut short, or lines lost)"
            )
        return self.header, [*self.done, self.current]


def _lines(source: str | os.PathLike[str] | IO[bytes] | bytes) -> Iterator[bytes]:
    if isinstance(source, bytes):
        yield from io.BytesIO(source)
    elif isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as fh:
            yield from fh
    else:
        yield from source


def read_snapshots(
    source: str | os.PathLike[str] | IO[bytes] | bytes,
) -> tuple[dict[str, Any], list[Snapshot]]:
    """Parse an export: its header and one snapshot per version (one in all for an export
    without history). Errors name the line."""
    reader = _Reader()
    for number, raw in enumerate(_lines(source), 1):
        if not raw.strip():
            continue
        try:
            reader.apply(_line_decoder.decode(raw))
        except (msgspec.DecodeError, msgspec.ValidationError, CodecError, RecursionError) as exc:
            raise CodecError(f"export line {number}: {exc}") from None
    return reader.finish()
