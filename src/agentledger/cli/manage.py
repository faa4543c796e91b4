"""Commands that change sessions: fork, rewind, delete, purge.

``fork`` and ``rewind`` are non-destructive (a new session, or a new version; every old version
still loads). ``delete`` and ``purge`` destroy: they ask first on a terminal, need ``--yes`` in a
script, and ``--dry-run`` says what they would remove without removing it.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from agentledger.cli.errors import EXIT_CONFLICT, EXIT_NOT_FOUND, EXIT_USAGE, CliError
from agentledger.cli.options import (
    DryRunOption,
    SessionArg,
    StoreOption,
    TenantOption,
    YesOption,
    version_option,
)
from agentledger.cli.output import JsonOption, Output
from agentledger.cli.sessions import load_existing
from agentledger.cli.store import open_ledger
from agentledger.errors import ConflictError
from agentledger.messages.checks import MAX_COUNT
from agentledger.store.ids import shown
from agentledger.store.state import CONTEXT

__all__ = ["confirm", "register"]

ListOption = Annotated[str, typer.Option("--list", help="Which message list.")]


def confirm(question: str, yes: bool) -> None:
    """Go on only with ``--yes`` or a "yes" typed at a terminal."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise CliError(f"{question} — pass --yes to confirm (or --dry-run to see)", EXIT_USAGE)
    if not typer.confirm(question, default=False, err=True):
        raise CliError("nothing changed (not confirmed)", 1)


def fork(
    session: Annotated[str, typer.Argument(help="Source session id.")],
    new_session: Annotated[str, typer.Argument(help="New session id (must not exist).")],
    at_version: Annotated[int | None, version_option("Fork as of this version.")] = None,
    store: StoreOption = None,
    tenant: TenantOption = None,
    as_json: JsonOption = False,
) -> None:
    """Branch a session (optionally at a past version) into a new one."""
    with open_ledger(store, tenant, writes=True) as ledger:
        state = load_existing(ledger, session, at_version)
        try:  # at the version read, so the count said is the count copied
            report = ledger.fork(session, new_session, at_version=state.version)
        except ConflictError:
            raise CliError(
                f"session {shown(new_session)} already exists; choose another name or delete it "
                "first",
                EXIT_CONFLICT,
            ) from None
    count = sum(len(m) for m in state.lists.values())
    Output(as_json).line(
        f"forked {session} v{state.version} -> {new_session} ({count} messages)",
        data={
            "session": session,
            "version": state.version,
            "new_session": new_session,
            "new_version": report.version,
            "messages": count,
        },
    )


def rewind(
    session: SessionArg,
    to_message: Annotated[
        str, typer.Option(help="Id of the last message to keep; later ones are cut.")
    ],
    list_name: ListOption = CONTEXT,
    store: StoreOption = None,
    tenant: TenantOption = None,
    dry_run: DryRunOption = False,
    as_json: JsonOption = False,
) -> None:
    """Cut a list back to a message, as a new version (the cut messages stay in history)."""
    with open_ledger(store, tenant, writes=not dry_run) as ledger:
        state = load_existing(ledger, session)
        msgs = state.lists.get(list_name, [])
        ids = [m.id for m in msgs]
        if to_message not in ids:
            raise CliError(
                f"no message {shown(to_message)} in list {shown(list_name)} of {session} "
                f"(see the ids with: agentledger show {session} --json)",
                EXIT_NOT_FOUND,
            )
        keep = len(ids) - ids[::-1].index(to_message)
        cut = len(msgs) - keep
        version = state.version
        if not dry_run and cut:
            # at the version read: a message another writer added meanwhile is not cut unseen
            version = ledger.save(
                session, msgs[:keep], name=list_name, expected_version=state.version
            ).version
    verb = "would cut" if dry_run else "cut"
    Output(as_json).line(
        f"{verb} {cut} messages after {to_message!r}; {session} "
        + (f"stays at v{version}" if dry_run or not cut else f"is now v{version}")
        + (f" (v{state.version} still loads)" if cut and not dry_run else ""),
        data={"session": session, "kept": keep, "cut": cut, "version": version, "dry_run": dry_run},
    )


def delete(
    session: SessionArg,
    store: StoreOption = None,
    tenant: TenantOption = None,
    yes: YesOption = False,
    dry_run: DryRunOption = False,
    as_json: JsonOption = False,
) -> None:
    """Delete a session and all its history (asks first; --yes in scripts)."""
    with open_ledger(store, tenant, writes=not dry_run) as ledger:
        state = load_existing(ledger, session)
        versions = len(ledger.history(session))
        count = sum(len(m) for m in state.lists.values())
        what = f"session {shown(session)} ({count} messages, {versions} versions on record)"
        if not dry_run:
            confirm(f"delete {what}?", yes)
            ledger.delete(session)
    Output(as_json).line(
        f"{'would delete' if dry_run else 'deleted'} {what}",
        data={
            "session": session,
            "messages": count,
            "versions": versions,
            "dry_run": dry_run,
            "deleted": not dry_run,
        },
    )


def purge(
    session: SessionArg,
    keep_last: Annotated[
        int,
        typer.Option(
            min=1, max=MAX_COUNT, help="Versions to keep loadable (1: only the current one)."
        ),
    ] = 1,
    store: StoreOption = None,
    tenant: TenantOption = None,
    yes: YesOption = False,
    dry_run: DryRunOption = False,
    as_json: JsonOption = False,
) -> None:
    """Forget history older than the last KEEP_LAST versions (asks first; --yes in scripts)."""
    with open_ledger(store, tenant, writes=not dry_run) as ledger:
        load_existing(ledger, session)
        versions = [v.version for v in ledger.history(session)]
        first_kept = versions[max(0, len(versions) - keep_last)]
        dropped = [v for v in versions if v < first_kept]
        span = f"v{dropped[0]}..v{dropped[-1]}" if dropped else "none"
        if dry_run:
            removed = None
        else:
            if dropped:
                confirm(f"make versions {span} of {shown(session)} unloadable for good?", yes)
            removed = ledger.purge_history(session, keep_last=keep_last)
    kept = f"v{first_kept}..v{versions[-1]} still load"
    if removed is None:
        text = f"would forget versions {span} of {session}; {kept}"
    else:
        text = (
            f"forgot versions {span} of {session}: removed {removed} old copies of messages and "
            f"values that only those versions used; {kept}"
        )
    Output(as_json).line(
        text,
        data={
            "session": session,
            "forgotten_versions": dropped,
            "first_loadable": first_kept,
            "removed_rows": removed,
            "dry_run": dry_run,
        },
    )


def register(app: typer.Typer) -> None:
    app.command("fork")(fork)
    app.command("rewind")(rewind)
    app.command("delete")(delete)
    app.command("purge")(purge)
