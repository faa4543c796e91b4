"""Commands that read sessions: sessions, show, history, search. None of them writes or creates
a store."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from agentledger.cli.errors import EXIT_USAGE, CliError
from agentledger.cli.errors import state as run
from agentledger.cli.options import (
    LimitOption,
    OffsetOption,
    SessionArg,
    StoreOption,
    TenantOption,
    version_option,
)
from agentledger.cli.output import JsonOption, Output, describe, message_json, utc
from agentledger.cli.store import open_ledger
from agentledger.errors import SessionNotFoundError
from agentledger.messages import encode_value
from agentledger.messages.checks import MAX_COUNT
from agentledger.store import Ledger, SessionState
from agentledger.store.ids import shown

__all__ = ["describe", "load_existing", "register"]


def load_existing(ledger: Ledger, session: str, version: int | None = None) -> SessionState:
    """The session (at ``version``), or "not found" naming the store."""
    run.session = session
    if version == 0:
        raise CliError("version 0 is the empty session before the first commit", EXIT_USAGE)
    loaded = ledger.load(session, version=version)
    if not loaded.exists:
        raise SessionNotFoundError(f"no session {shown(session)} in {ledger.store.location}")
    return loaded


AfterOption = Annotated[
    str | None,
    typer.Option(
        "--after",
        metavar="CURSOR",
        help="Start after this row: the cursor of the previous page's last row (its JSON "
        "'cursor'). Cheaper than --offset deep in the list, and no row is skipped or shown "
        "twice when sessions change between pages.",
    ),
]


def list_sessions(
    store: StoreOption = None,
    tenant: TenantOption = None,
    limit: LimitOption = 50,
    offset: OffsetOption = 0,
    after: AfterOption = None,
    as_json: JsonOption = False,
) -> None:
    """List sessions, most recently updated first.

    Page with --after: each row's JSON carries its cursor, and when more rows follow a page
    the plain output says on stderr which --after shows them.
    """
    out = Output(as_json)
    with open_ledger(store, tenant) as ledger:
        # one more says whether a next page exists (none can past MAX_COUNT)
        more = None if limit is None else min(limit + 1, MAX_COUNT)
        infos = ledger.list_sessions(limit=more, offset=offset, after=after)
        where = ledger.store.location or "memory://"
    following = limit is not None and 0 < limit < len(infos)
    infos = infos[:limit]
    out.table(
        ("session", "title", "messages", "version", "updated (UTC)"),
        [
            (i.session_id, i.title or "", i.message_count, i.version, utc(i.updated_at))
            for i in infos
        ],
        [
            {
                "session": i.session_id,
                "title": i.title,
                "messages": i.message_count,
                "version": i.version,
                "created_at": i.created_at.isoformat(),
                "updated_at": i.updated_at.isoformat(),
                "cursor": i.cursor,
            }
            for i in infos
        ],
        title=f"sessions in {where}",
    )
    if following and not as_json:
        out.line(f"more sessions follow: --after {infos[-1].cursor}", err=True)


def show(
    session: SessionArg,
    store: StoreOption = None,
    tenant: TenantOption = None,
    version: Annotated[int | None, version_option("Show the session as it was then.")] = None,
    limit: LimitOption = None,
    offset: OffsetOption = 0,
    as_json: JsonOption = False,
) -> None:
    """Print a session's messages (optionally at a past version, or a window of them)."""
    out = Output(as_json)
    with open_ledger(store, tenant) as ledger:
        state = load_existing(ledger, session, version)
    stop = None if limit is None else offset + limit
    if as_json:
        out.json(
            {
                "session": session,
                "version": state.version,
                "lists": {
                    name: {
                        "count": len(msgs),
                        "offset": offset,
                        "messages": [message_json(m) for m in msgs[offset:stop]],
                    }
                    for name, msgs in state.lists.items()
                },
                "values": {n: json.loads(encode_value(v)) for n, v in state.values.items()},
            }
        )
        return
    out.text(f"{session} at version {state.version}", style="bold")
    for name, msgs in state.lists.items():
        shown = msgs[offset:stop]
        window = f", showing {offset}..{offset + len(shown) - 1}" if len(shown) < len(msgs) else ""
        out.text(f"{name} ({len(msgs)} messages{window})", style="bold")
        for i, msg in enumerate(shown, offset):
            out.text(f"  {i:>4} {describe(msg)}")
    for name, value in state.values.items():
        out.text(f"{name} = {encode_value(value).decode()[:200]}")


def history(
    session: SessionArg,
    store: StoreOption = None,
    tenant: TenantOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show every committed version of a session and what it changed.

    appended, replaced and truncated count messages; "values set" counts named values (title,
    summary, ...) that the version set or deleted.
    """
    out = Output(as_json)
    with open_ledger(store, tenant) as ledger:
        if not ledger.exists(session):
            raise SessionNotFoundError(f"no session {shown(session)} in {ledger.store.location}")
        versions = ledger.history(session)
    out.table(
        ("version", "committed (UTC)", "appended", "replaced", "truncated", "values set"),
        [
            (v.version, utc(v.committed_at), v.appended, v.replaced, v.truncated, v.values_changed)
            for v in versions
        ],
        [
            {
                "version": v.version,
                "committed_at": v.committed_at.isoformat(),
                "appended": v.appended,
                "replaced": v.replaced,
                "truncated": v.truncated,
                "values_set": v.values_changed,
            }
            for v in versions
        ],
        title=f"history of {session}",
    )


def search(
    query: Annotated[str, typer.Argument(help="Words to find (every word must match).")],
    store: StoreOption = None,
    tenant: TenantOption = None,
    limit: Annotated[int, typer.Option(min=1, max=MAX_COUNT, help="Show at most this many.")] = 20,
    as_json: JsonOption = False,
) -> None:
    """Full-text search over live message text."""
    if not query.split():
        raise CliError("give at least one word to search for", EXIT_USAGE)
    out = Output(as_json)
    with open_ledger(store, tenant) as ledger:
        hits = ledger.search(query, limit=limit)
    out.table(
        ("session", "list", "position", "snippet"),
        [(h.session_id, h.list_name, h.position, h.snippet) for h in hits],
        [
            {
                "session": h.session_id,
                "list": h.list_name,
                "position": h.position,
                "message_id": h.msg_id,
                "snippet": h.snippet,
            }
            for h in hits
        ],
    )


def register(app: typer.Typer) -> None:
    app.command("sessions")(list_sessions)
    app.command("show")(show)
    app.command("history")(history)
    app.command("search")(search)
