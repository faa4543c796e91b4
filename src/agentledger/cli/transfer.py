"""Commands that move a session in and out of a store: export and import.

``-`` as the file means stdout (export) or stdin (import), so sessions pipe between stores and
hosts. The confirmation line goes to stderr when the data goes to stdout.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from agentledger.cli.errors import EXIT_CONFLICT, EXIT_NOT_FOUND, CliError
from agentledger.cli.formats import Format, render
from agentledger.cli.options import SessionArg, StoreOption, TenantOption
from agentledger.cli.output import JsonOption, Output
from agentledger.cli.sessions import load_existing
from agentledger.cli.store import open_ledger
from agentledger.errors import CodecError, ConflictError, UserError
from agentledger.store.ids import shown
from agentledger.store.state import CONTEXT
from agentledger.store.transfer import export_session, import_versions, read_export

__all__ = ["register"]


def _target(path: str) -> Path | None:
    """The file to write (None for stdout); its directory must exist."""
    if path == "-":
        return None
    target = Path(path)
    if not target.parent.is_dir():
        raise CliError(
            f"cannot write {path}: the directory {target.parent} does not exist", EXIT_NOT_FOUND
        )
    return target


def export(
    session: SessionArg,
    path: Annotated[str, typer.Argument(help="File to write, or - for stdout.")],
    store: StoreOption = None,
    tenant: TenantOption = None,
    history: Annotated[
        bool,
        typer.Option(help="Every version on record, so import reproduces them (jsonl only)."),
    ] = False,
    fmt: Annotated[
        Format,
        typer.Option(
            "--format",
            help="jsonl: lossless, import reads it; openai / anthropic: their request "
            "messages; markdown: a readable transcript.",
        ),
    ] = Format.jsonl,
    as_json: JsonOption = False,
) -> None:
    """Export a session: lossless JSONL by default (import reads it back)."""
    if history and fmt is not Format.jsonl:
        raise CliError("--history needs --format jsonl (the other formats hold one state)", 2)
    target = _target(path)
    with open_ledger(store, tenant) as ledger:
        state = load_existing(ledger, session)
        if fmt is not Format.jsonl:
            msgs = state.lists.get(CONTEXT, [])
            text = render(fmt, session, state.version, msgs)
            count = len(msgs)
            if target is None:
                typer.echo(text, nl=False)
            else:
                target.write_text(text, encoding="utf-8")
        elif target is None:
            count = export_session(ledger, session, sys.stdout.buffer, history=history)
            sys.stdout.buffer.flush()
        else:
            count = export_session(ledger, session, target, history=history)
    what = f"{count} message records" if history else f"{count} messages"
    Output(as_json and target is not None).line(
        f"exported {what} of {session} v{state.version} ({fmt.value}) to "
        f"{path if target else 'stdout'}",
        data={
            "session": session,
            "version": state.version,
            "format": fmt.value,
            "history": history,
            "messages": count,
            "path": path,
        },
        err=target is None,
    )


def _read_input(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise CliError(f"no file {path} to import", EXIT_NOT_FOUND) from None


def _transcript(data: bytes, path: str) -> list | None:
    """The OpenAI messages of a JSON transcript (a list of messages, or an object holding them
    as ``messages``, however laid out, a BOM allowed), or None when ``data`` is not one (an
    export: JSON lines, each an object with a ``kind``)."""
    text = data.removeprefix(b"\xef\xbb\xbf").lstrip()
    if not text.startswith((b"[", b"{")):
        return None
    try:
        transcript = json.loads(text)
    except RecursionError:
        raise CodecError(f"{path} is nested too deeply to read") from None
    except ValueError as exc:
        if text.startswith(b"{"):
            return None  # JSON lines: an export, read as one
        raise CodecError(f"{path} is not valid JSON: {exc}") from None
    if isinstance(transcript, dict):
        if "kind" in transcript:
            return None  # an export of one line
        transcript = transcript.get("messages")
    if not isinstance(transcript, list):
        raise CodecError(f"{path}: expected a JSON list of messages or {{'messages': [...]}}")
    return transcript


def import_(
    path: Annotated[
        str, typer.Argument(help="JSONL export, or a JSON list of OpenAI messages; - for stdin.")
    ],
    session: Annotated[str | None, typer.Option(help="Target session id.")] = None,
    store: StoreOption = None,
    tenant: TenantOption = None,
    overwrite: Annotated[
        bool, typer.Option(help="Replace an existing session (its old content stays in history).")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Import an export file, or an OpenAI chat transcript (JSON list or {"messages": [...]})."""
    data = _read_input(path)
    transcript = _transcript(data, path)
    if transcript is not None and session is None:
        session = "imported" if path == "-" else Path(path).stem
    with open_ledger(store, tenant, create=True, writes=True) as ledger:
        try:
            if transcript is not None:
                report = ledger.import_openai(session or "", transcript, overwrite=overwrite)
                reports = [report]
            else:
                reports = import_versions(ledger, data, session=session, overwrite=overwrite)
        except (CodecError, UserError) as exc:  # what the file holds, or the ids given
            raise type(exc)(f"{path} cannot be imported: {exc}") from None
        except ConflictError:
            if session is None:
                session = read_export(data)[0]["session"]
            raise CliError(
                f"session {shown(session)} already exists; pass --overwrite to replace it (its "
                "current content stays in its history) or --session to choose another id",
                EXIT_CONFLICT,
            ) from None
    made = [r.version for r in reports if not r.noop]
    written = sum(r.appended + r.replaced for r in reports)
    Output(as_json).line(
        _imported(path, made, reports[-1].version, written),
        data={"versions": made, "messages_written": written},
    )


def _imported(path: str, made: list[int], version: int, written: int) -> str:
    """What an import did: the versions it committed (``made``), or that it committed none
    because the session already held what the file holds (``--overwrite`` with the same
    content); ``version`` is the session's version after it."""
    if not made:
        return f"nothing to import: the session already holds what {path} holds (v{version})"
    versions = f"v{made[0]}" if len(made) == 1 else f"v{made[0]}..v{made[-1]}"
    return f"imported {path} as {versions} ({len(made)} version(s), {written} messages written)"


def register(app: typer.Typer) -> None:
    app.command("export")(export)
    app.command("import")(import_)
