"""``agentledger migrate``: copy every session, with every version, from one store to another.

Each session travels as its history export (``export --history`` then ``import``, in memory),
so the target holds one commit per source version, each made of the same messages. Afterwards
every version is loaded back from both stores and compared by digest, list by list, value by
value: a migration that cannot prove itself exits 1. A session that already exists in the
target is a conflict found before anything is written.

``--to memory://`` is refused: that store would end, copy and all, as the command exits.

The store API has no list of tenants, so ``--tenant`` names the ones to move (repeatable;
default: the configured tenant).
"""

from __future__ import annotations

import io
import os
from contextlib import ExitStack
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import Progress

from agentledger.cli.config import setting
from agentledger.cli.errors import EXIT_CONFLICT, EXIT_FAILURE, EXIT_USAGE, CliError, state
from agentledger.cli.output import JsonOption, Output
from agentledger.cli.store import lasting, open_ledger, resolve_store
from agentledger.store import Ledger
from agentledger.store.transfer import export_session, import_versions

__all__ = ["register", "version_digests"]


def version_digests(ledger: Ledger, session: str, version: int, tenant: str) -> tuple[Any, Any]:
    """What a version holds, by content: each list's digests and each value."""
    loaded = ledger.load(session, tenant=tenant, version=version)
    return {n: [m.digest for m in msgs] for n, msgs in loaded.lists.items()}, loaded.values


def _move(source: Ledger, target: Ledger, session: str, tenant: str) -> dict[str, Any]:
    buf = io.BytesIO()
    export_session(source, session, buf, tenant=tenant, history=True)
    reports = import_versions(target, buf.getvalue(), tenant=tenant)
    versions = [v.version for v in source.history(session, tenant=tenant)]
    copied = [r.version for r in reports]
    for old, new in zip(versions, copied, strict=True):
        if version_digests(source, session, old, tenant) != version_digests(
            target, session, new, tenant
        ):
            raise CliError(f"{tenant}/{session} v{old} differs after migration", EXIT_FAILURE)
    return {
        "tenant": tenant,
        "session": session,
        "versions": len(copied),
        "renumbered": versions != copied,
        "messages": sum(len(m) for m in target.load(session, tenant=tenant).lists.values()),
    }


def migrate(
    from_url: Annotated[str, typer.Option("--from", help="The store to copy from.")],
    to_url: Annotated[str, typer.Option("--to", help="The store to copy into.")],
    tenant: Annotated[
        list[str] | None,
        typer.Option("--tenant", "-t", help="A tenant to move (repeatable; default: configured)."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Copy every session, with every version, to another store, and verify every digest."""
    if resolve_store(from_url) == lasting(resolve_store(to_url), "--to"):
        raise CliError("--from and --to are the same store", EXIT_USAGE)
    tenants = tenant or [setting("tenant", os.environ.get("AGENTLEDGER_TENANT")) or "default"]
    with ExitStack() as stack:
        source = stack.enter_context(open_ledger(from_url, tenants[0]))
        target = stack.enter_context(open_ledger(to_url, tenants[0], create=True))
        state.store = from_url
        sessions = [(t, i.session_id) for t in tenants for i in source.list_sessions(tenant=t)]
        taken = [f"{t}/{s}" for t, s in sessions if target.exists(s, tenant=t)]
        if taken:
            raise CliError(
                f"{len(taken)} session(s) already exist in {to_url}, e.g. {taken[0]}; nothing "
                "was copied",
                EXIT_CONFLICT,
            )
        moved = []
        console = Console(stderr=True)
        with Progress(console=console, transient=True, disable=not console.is_terminal) as bar:
            task = bar.add_task("migrating", total=len(sessions))
            for t, session in sessions:
                moved.append(_move(source, target, session, t))
                bar.advance(task)
    Output(as_json).table(
        ("tenant", "session", "versions", "messages", "verified"),
        [
            (
                m["tenant"],
                m["session"],
                m["versions"],
                m["messages"],
                "✓ (renumbered from v1)" if m["renumbered"] else "✓",
            )
            for m in moved
        ],
        {"from": from_url, "to": to_url, "sessions": moved},
        title=f"{len(moved)} sessions copied from {from_url} to {to_url}, every version verified",
    )


def register(app: typer.Typer) -> None:
    app.command("migrate")(migrate)
