"""Session tools: diff two versions, check a history against a provider's strict rules, repair it.

``check`` is the question "would this provider accept the history?", answered by
``agentledger.wire.validate`` with every finding (what, where, which tool call) and exit code 1
when there is any. ``repair`` applies ``agentledger.wire.repair`` and saves the repaired list as
a new version, so the broken one still loads; ``--dry-run`` shows the changes only.
"""

from __future__ import annotations

import difflib
import json
from enum import StrEnum
from typing import Annotated, Any

import typer

from agentledger.cli.errors import EXIT_FAILURE, EXIT_NOT_FOUND, CliError
from agentledger.cli.manage import ListOption
from agentledger.cli.options import (
    DryRunOption,
    SessionArg,
    StoreOption,
    TenantOption,
    version_argument,
    version_option,
)
from agentledger.cli.output import JsonOption, Output, describe, message_json
from agentledger.cli.sessions import load_existing
from agentledger.cli.store import open_ledger
from agentledger.messages import Msg, encode_value
from agentledger.store.ids import shown
from agentledger.store.state import CONTEXT
from agentledger.wire import repair as repair_history
from agentledger.wire import validate

__all__ = ["diff_lists", "register"]


class Provider(StrEnum):
    strict = "strict"
    openai = "openai"
    anthropic = "anthropic"
    agui = "agui"


class Strategy(StrEnum):
    drop = "drop"
    error_result = "error-result"


def diff_lists(name: str, old: list[Msg], new: list[Msg]) -> list[dict[str, Any]]:
    """What changed in one list, aligned by content digest: ``added``, ``removed``, and
    ``changed`` (same message id at a matching place, different content)."""
    changes: list[dict[str, Any]] = []
    matcher = difflib.SequenceMatcher(
        a=[m.digest for m in old], b=[m.digest for m in new], autojunk=False
    )

    def entry(op: str, i: int | None, j: int | None) -> None:
        before = old[i] if i is not None else None
        after = new[j] if j is not None else None
        changes.append(
            {
                "op": op,
                "list": name,
                "old_position": i,
                "new_position": j,
                "message_id": (after or before).id,  # type: ignore[union-attr]
                "old": message_json(before) if before else None,
                "new": message_json(after) if after else None,
            }
        )

    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        olds, news = list(range(i1, i2)), list(range(j1, j2))
        while olds and news and old[olds[0]].id == new[news[0]].id:
            entry("changed", olds.pop(0), news.pop(0))
        for i in olds:
            entry("removed", i, None)
        for j in news:
            entry("added", None, j)
    return changes


def diff(
    session: SessionArg,
    v1: Annotated[int, version_argument("The older version.")],
    v2: Annotated[int, version_argument("The newer version.")],
    store: StoreOption = None,
    tenant: TenantOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show what changed between two versions of a session: messages and values."""
    with open_ledger(store, tenant) as ledger:
        old, new = load_existing(ledger, session, v1), load_existing(ledger, session, v2)
    changes = [
        change
        for name in dict.fromkeys([*old.lists, *new.lists])
        for change in diff_lists(name, old.lists.get(name, []), new.lists.get(name, []))
    ]
    for name in dict.fromkeys([*old.values, *new.values]):
        before, after = old.values.get(name), new.values.get(name)
        if before != after:
            changes.append(
                {
                    "op": "value",
                    "name": name,
                    "old": None if before is None else json.loads(encode_value(before)),
                    "new": None if after is None else json.loads(encode_value(after)),
                }
            )
    out = Output(as_json)
    if as_json:
        out.json({"session": session, "from": v1, "to": v2, "changes": changes})
        return
    out.text(f"{session}: v{v1} -> v{v2}, {len(changes)} changes", style="bold")
    signs = {"added": "+", "removed": "-", "changed": "~"}
    for change in changes:
        if change["op"] == "value":
            value = "deleted" if change["new"] is None else json.dumps(change["new"])[:100]
            out.text(f"= value {change['name']}: {value}")
            continue
        position = change["new_position"] if change["op"] != "removed" else change["old_position"]
        msg = new.lists[change["list"]][position] if change["op"] != "removed" else None
        msg = msg or old.lists[change["list"]][position]
        out.text(f"{signs[change['op']]} {change['list']}[{position}] {describe(msg)}")


def _list_of(state: Any, session: str, name: str) -> list[Any]:
    """List ``name`` of a session's ``state``; a list it does not hold is "not found" (a typo
    in ``--list`` once checked nothing and said the history was valid), but for the context,
    which a session without messages holds empty."""
    if name not in state.lists and name != CONTEXT:
        held = ", ".join(sorted(state.lists)) or "none"
        raise CliError(
            f"{session} v{state.version} holds no list {shown(name)} (its lists: {held})",
            EXIT_NOT_FOUND,
        )
    return state.lists.get(name, [])


def _findings_table(out: Output, findings: list, data: dict[str, Any]) -> None:
    out.table(
        ("kind", "position", "message", "tool call", "what"),
        [(f.kind.value, f.index, f.message_id, f.tool_call_id or "", f.text) for f in findings],
        data,
    )


def _finding_json(f: Any) -> dict[str, Any]:
    return {
        "kind": f.kind.value,
        "position": f.index,
        "message_id": f.message_id,
        "tool_call_id": f.tool_call_id,
        "text": f.text,
    }


def check(
    session: SessionArg,
    provider: Annotated[
        Provider,
        typer.Option(help="Whose rules: strict (every provider), openai, anthropic, agui."),
    ] = Provider.strict,
    list_name: ListOption = CONTEXT,
    version: Annotated[int | None, version_option("Check the session as it was then.")] = None,
    store: StoreOption = None,
    tenant: TenantOption = None,
    as_json: JsonOption = False,
) -> None:
    """Check that a provider would accept the session's history; exit code 1 if not."""
    with open_ledger(store, tenant) as ledger:
        state = load_existing(ledger, session, version)
    msgs = _list_of(state, session, list_name)
    findings = validate(msgs, target=provider.value)
    out = Output(as_json)
    data = {
        "session": session,
        "version": state.version,
        "list": list_name,
        "provider": provider.value,
        "messages": len(msgs),
        "valid": not findings,
        "findings": [_finding_json(f) for f in findings],
    }
    if not findings:
        out.line(
            f"{session} v{state.version}: {len(msgs)} messages are valid for {provider.value}",
            data=data,
        )
        return
    _findings_table(out, findings, data)
    raise CliError(
        f"{session} v{state.version} is not valid for {provider.value}: {len(findings)} "
        f"finding(s), the first: {findings[0]} (fix with: agentledger repair {session}"
        + ("" if provider is Provider.strict else f" --provider {provider.value}")
        + ")",
        EXIT_FAILURE,
    )


def repair(
    session: SessionArg,
    strategy: Annotated[
        Strategy,
        typer.Option(
            help="What to do with a tool call that has no result: drop it, or answer it with an "
            "error result saying it was not executed."
        ),
    ] = Strategy.drop,
    provider: Annotated[
        Provider,
        typer.Option(help="Whose rules to repair for: strict (every provider), openai, anthropic."),
    ] = Provider.strict,
    list_name: ListOption = CONTEXT,
    store: StoreOption = None,
    tenant: TenantOption = None,
    dry_run: DryRunOption = False,
    as_json: JsonOption = False,
) -> None:
    """Repair a history that strict providers reject, as a new version (the old one still loads)."""
    if provider is Provider.agui:
        raise CliError("agui is the lenient target: check it, there is nothing to repair", 2)
    with open_ledger(store, tenant, writes=not dry_run) as ledger:
        state = load_existing(ledger, session)
        msgs = _list_of(state, session, list_name)
        unanswered = "drop" if strategy is Strategy.drop else "error_result"
        report = repair_history(msgs, unanswered=unanswered, target=provider.value)
        version = state.version
        if report.changed and not dry_run:
            # at the version read: a message another writer added meanwhile is not lost
            version = ledger.save(
                session, report.messages, name=list_name, expected_version=state.version
            ).version
    left = validate(report.messages, target=provider.value)
    changes = [
        {
            "kind": c.kind.value,
            "position": c.index,
            "message_id": c.message_id,
            "tool_call_id": c.tool_call_id,
            "text": c.text,
        }
        for c in report.changes
    ]
    data = {
        "session": session,
        "version": version,
        "dry_run": dry_run,
        "changes": changes,
        "remaining": [_finding_json(f) for f in left],
    }
    out = Output(as_json)
    if as_json:
        out.json(data)
    else:
        for c in report.changes:
            out.text(f"{'would ' if dry_run else ''}{c}")
        if not report.changed:
            if not left:
                out.text(f"{session} v{version}: nothing to repair")
        elif dry_run:
            out.text(f"{len(changes)} change(s); nothing saved (--dry-run)")
        else:
            out.text(f"{len(changes)} change(s) saved as v{version}; v{state.version} still loads")
    if left:
        raise CliError(
            f"{len(left)} problem(s) repair cannot fix, the first: {left[0]}", EXIT_FAILURE
        )


def register(app: typer.Typer) -> None:
    app.command("diff")(diff)
    app.command("check")(check)
    app.command("repair")(repair)
