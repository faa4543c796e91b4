"""Commands that inspect and move sessions: list, show, history, search, export, import,
fork, delete, purge."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from agentledger.cli.options import StoreOption, TenantOption
from agentledger.errors import AgentLedgerError
from agentledger.messages import Msg
from agentledger.store import Ledger

__all__ = ["describe", "register"]

console = Console(highlight=False)


def _open(store: str | None, tenant: str) -> Ledger:
    try:
        return Ledger(store, tenant=tenant)
    except AgentLedgerError as exc:
        raise typer.BadParameter(str(exc)) from None


def describe(msg: Msg, width: int = 100) -> str:
    """One readable line for a message: role, blocks, text."""
    kinds = []
    for block in msg.content:
        kind = type(block).__name__.removesuffix("Block").lower()
        if kind == "tooluse":
            kind = f"call {block.name}({block.id})"  # type: ignore[union-attr]
        elif kind == "toolresult":
            err = " error" if block.is_error else ""  # type: ignore[union-attr]
            kind = f"result{err} {block.id}"  # type: ignore[union-attr]
        kinds.append(kind)
    results = " | ".join(r.text for r in msg.tool_results)
    text = " ".join((msg.text or results or msg.thinking or "").split())
    if len(text) > width:
        text = text[: width - 1] + "…"
    return f"{msg.role:<9} [{', '.join(kinds)}] {text}"


def list_sessions(
    store: StoreOption = None,
    tenant: TenantOption = "default",
    limit: Annotated[int, typer.Option(help="Show at most this many.")] = 50,
) -> None:
    """List sessions, most recently updated first."""
    with _open(store, tenant) as ledger:
        table = Table("session", "title", "messages", "version", "updated")
        for info in ledger.list_sessions(limit=limit):
            table.add_row(
                info.session_id,
                info.title or "",
                str(info.message_count),
                str(info.version),
                info.updated_at.strftime("%Y-%m-%d %H:%M:%S"),
            )
        console.print(table)


def show(
    session: Annotated[str, typer.Argument(help="Session id.")],
    store: StoreOption = None,
    tenant: TenantOption = "default",
    version: Annotated[int | None, typer.Option(help="Show the session as it was then.")] = None,
) -> None:
    """Print a session's messages (optionally at a past version)."""
    with _open(store, tenant) as ledger:
        state = ledger.load(session, version=version)
        if not state.exists:
            raise typer.BadParameter(f"no session {session!r}")
        console.print(f"[bold]{session}[/] at version {state.version}")
        for name, msgs in state.lists.items():
            console.print(f"[bold]{name}[/] ({len(msgs)} messages)")
            for i, msg in enumerate(msgs):
                console.print(f"  {i:>4} {describe(msg)}", markup=False)
        for name, value in state.values.items():
            console.print(f"[bold]{name}[/] = {value!r}")


def history(
    session: Annotated[str, typer.Argument(help="Session id.")],
    store: StoreOption = None,
    tenant: TenantOption = "default",
) -> None:
    """Show every committed version of a session and what it changed."""
    with _open(store, tenant) as ledger:
        table = Table("version", "committed", "appended", "replaced", "truncated", "values")
        for v in ledger.history(session):
            table.add_row(
                str(v.version),
                v.committed_at.strftime("%Y-%m-%d %H:%M:%S"),
                str(v.appended),
                str(v.replaced),
                str(v.truncated),
                str(v.values_changed),
            )
        console.print(table)


def search(
    query: Annotated[str, typer.Argument(help="Words to find.")],
    store: StoreOption = None,
    tenant: TenantOption = "default",
    limit: int = 20,
) -> None:
    """Full-text search over live message text."""
    with _open(store, tenant) as ledger:
        for hit in ledger.search(query, limit=limit):
            console.print(f"{hit.session_id}  #{hit.position}  {hit.snippet}", markup=False)


def export(
    session: Annotated[str, typer.Argument(help="Session id.")],
    path: Annotated[Path, typer.Argument(help="JSONL file to write.")],
    store: StoreOption = None,
    tenant: TenantOption = "default",
) -> None:
    """Export a session to a lossless JSONL file."""
    with _open(store, tenant) as ledger:
        count = ledger.export(session, path)
        console.print(f"exported {count} messages to {path}")


def import_(
    path: Annotated[Path, typer.Argument(help="JSONL export, or a JSON list of OpenAI messages.")],
    session: Annotated[str | None, typer.Option(help="Target session id.")] = None,
    store: StoreOption = None,
    tenant: TenantOption = "default",
    overwrite: Annotated[bool, typer.Option(help="Replace an existing session.")] = False,
) -> None:
    """Import an export file, or an OpenAI chat transcript (JSON list or {"messages": [...]})."""
    import json

    with _open(store, tenant) as ledger:
        data = path.read_bytes()
        if data.lstrip().startswith((b"[", b'{"messages"')):
            transcript = json.loads(data)
            if isinstance(transcript, dict):
                transcript = transcript["messages"]
            report = ledger.import_openai(session or path.stem, transcript, overwrite=overwrite)
        else:
            report = ledger.import_(data, session=session, overwrite=overwrite)
        console.print(f"imported: version {report.version}, {report.appended} messages")


def fork(
    session: Annotated[str, typer.Argument(help="Source session id.")],
    new_session: Annotated[str, typer.Argument(help="New session id.")],
    at_version: Annotated[int | None, typer.Option(help="Fork as of this version.")] = None,
    store: StoreOption = None,
    tenant: TenantOption = "default",
) -> None:
    """Branch a session (optionally at a past version) into a new one."""
    with _open(store, tenant) as ledger:
        report = ledger.fork(session, new_session, at_version=at_version)
        console.print(f"forked {session} -> {new_session} ({report.appended} messages)")


def delete(
    session: Annotated[str, typer.Argument(help="Session id.")],
    store: StoreOption = None,
    tenant: TenantOption = "default",
) -> None:
    """Delete a session and all its history."""
    with _open(store, tenant) as ledger:
        console.print("deleted" if ledger.delete(session) else "no such session")


def purge(
    session: Annotated[str, typer.Argument(help="Session id.")],
    keep_last: Annotated[int, typer.Option(help="Versions to keep loadable.")] = 1,
    store: StoreOption = None,
    tenant: TenantOption = "default",
) -> None:
    """Forget history older than the last KEEP_LAST versions."""
    with _open(store, tenant) as ledger:
        console.print(f"removed {ledger.purge_history(session, keep_last=keep_last)} records")


def register(app: typer.Typer) -> None:
    app.command("sessions")(list_sessions)
    app.command("show")(show)
    app.command("history")(history)
    app.command("search")(search)
    app.command("export")(export)
    app.command("import")(import_)
    app.command("fork")(fork)
    app.command("delete")(delete)
    app.command("purge")(purge)
