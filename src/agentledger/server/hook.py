"""The ``on_state_loaded`` hook of a server run: where the merge meets the loaded thread.

It runs under the run lease, after the agent loaded the thread and before anything is appended
or the model is called (seed 001). It merges (``merge``), refuses an input the thread could not
run on (a result for a call the server runs, a history a strict provider rejects) before anything
is written, applies the merge (a fork cuts ``ctx.state.context``, the input list becomes the new
messages), and stores ``RunAgentInput.state`` as the session value ``agui.state`` when it
changed (except that ``{}``, a fresh reference client's default, never replaces a stored
state), and the client's ``activity`` messages as ``agui.activity`` (``server.activity``).
What it decided is left in ``ctx.attributes["agui.merge"]`` for the event stream.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Any

from agentledger.agent.context import OnStateLoaded, RuntimeContext
from agentledger.agent.lifecycle import CLIENT, PENDING_VALUE, state_of, unanswered_calls
from agentledger.errors import CodecError, HistoryError, UserError
from agentledger.messages import Msg, ToolResultBlock, encode_value
from agentledger.server.activity import ACTIVITY_VALUE, merged, split
from agentledger.server.forms import AguiForms
from agentledger.server.merge import Merge, Merger
from agentledger.server.parse import NO_STATE, RunRequest
from agentledger.server.same import same_json
from agentledger.store import SessionState
from agentledger.store.aio import AsyncLedger
from agentledger.wire import HistoryChecker
from agentledger.wire.agui import to_agui

__all__ = ["MERGE_KEY", "STATE_VALUE", "client_state", "merge_hook", "save_client_values"]

STATE_VALUE = "agui.state"
"""Session value holding the AG-UI state a client last sent."""
MERGE_KEY = "agui.merge"
"""``ctx.attributes`` key where the hook leaves its ``Merge``."""


def merge_hook(
    request: RunRequest,
    ledger: AsyncLedger,
    chained: OnStateLoaded | None = None,
    forms: AguiForms | None = None,
    checker: HistoryChecker | None = None,
) -> OnStateLoaded:
    """The hook for one run of ``request`` (``chained``, the agent's own hook, runs after;
    ``forms``, the server's AG-UI forms of its messages; ``checker``, the thread's history
    checker, so the thread is checked from where its last check ended)."""

    async def hook(ctx: RuntimeContext, msgs: list[Msg]) -> None:
        state = ctx.state
        assert state is not None
        conversation, activity, positions = split(request.messages)
        merger = Merger(state.context, conversation, positions, forms)
        questions = merger.questions()
        earlier = await earlier_forms(ledger, ctx, questions) if questions else {}
        merge = merger.result(earlier)
        pending = state.values.get(PENDING_VALUE) or {}
        _check_runnable(state.context[: merge.keep], merge.input, pending, checker)
        ctx.attributes[MERGE_KEY] = merge
        del state.context[merge.keep :]
        msgs[:] = merge.input
        values = client_state(request, state)
        entries = merged(state.values.get(ACTIVITY_VALUE), activity)
        if entries is not None:
            values[ACTIVITY_VALUE] = entries
        await save_client_values(ledger, ctx.session_id, ctx.tenant, state, values)
        if chained is not None:
            outcome = chained(ctx, msgs)
            if inspect.isawaitable(outcome):
                await outcome

    return hook


_CLIENT_VALUES = {STATE_VALUE: "RunAgentInput.state", ACTIVITY_VALUE: "the activity messages"}


def client_state(request: RunRequest, state: SessionState) -> dict[str, Any]:
    """``{STATE_VALUE: the client's state}`` when it replaces the thread's (``_replaces``),
    else ``{}``."""
    if _replaces(request.state, state.values.get(STATE_VALUE, NO_STATE)):
        return {STATE_VALUE: request.state}
    return {}


async def save_client_values(
    ledger: AsyncLedger,
    session: str,
    tenant: str | None,
    state: SessionState,
    values: dict[str, Any],
    *,
    create: bool = True,
) -> None:
    """Store ``values`` the client sent in the thread ``state`` was loaded from, and make
    ``state`` hold them at the version they were committed as; ``UserError`` (HTTP 422) when
    the client's JSON holds what a value cannot. Without ``create``, a thread that does not
    exist is not made to hold them: ``state`` alone takes them (once checked).

    The save expects the thread at ``state.version``: a commit another writer made since the
    load fails it with ``ConflictError`` (HTTP 409), since the run would go on from a thread
    that is no longer the stored one (and, adopting the new version, save over that commit)."""
    if not values:
        return
    try:
        if create or state.version:
            report = await ledger.save_state(
                session, values=values, tenant=tenant, expected_version=state.version
            )
            state.version = report.version
        else:
            for value in values.values():
                encode_value(value)
    except CodecError as exc:  # the client's JSON holds what a value cannot (HTTP 422)
        names = " and ".join(_CLIENT_VALUES[n] for n in values)
        raise UserError(f"{names} cannot be stored: {exc}") from None
    state.values.update(values)


def _replaces(sent: Any, stored: Any) -> bool:
    """Whether the client's state is stored: it was sent, it differs, and it is not the empty
    object a fresh reference client sends by default over a thread's non-empty state."""
    if sent is NO_STATE or same_json(sent, stored):
        return False
    return not (sent == {} and stored not in (NO_STATE, None, {}))


async def earlier_forms(
    ledger: AsyncLedger, ctx: RuntimeContext, ids: Iterable[str]
) -> dict[str, list[dict[str, Any]]]:
    """The AG-UI forms the thread held for ``ids`` before a save replaced or removed them.

    Only versions that replaced or truncated messages can have held a form that is gone, so
    only the version before each of those is read."""
    wanted = set(ids)
    forms: dict[str, list[dict[str, Any]]] = {}
    history = await ledger.history(ctx.session_id, tenant=ctx.tenant)
    for info in history:
        if not (info.replaced or info.truncated) or info.version < 2:
            continue
        older = await ledger.messages(ctx.session_id, tenant=ctx.tenant, version=info.version - 1)
        for d in to_agui(older):
            if d["id"] in wanted and d not in forms.setdefault(d["id"], []):
                forms[d["id"]].append(d)
    return {k: v for k, v in forms.items() if v}


def _check_runnable(
    kept: list[Msg], new: list[Msg], pending: Any, checker: HistoryChecker | None
) -> None:
    """Refuse (``UserError``, HTTP 422) an input the run could not go on with, before anything
    is saved: the thread must stay valid for every strict provider (``checker``, strict)."""
    if not new:
        return
    waiting = unanswered_calls(kept)
    answered = {r.id for m in new for r in m.tool_results}
    pending = pending if isinstance(pending, dict) else {}
    for call in waiting:
        if call.id in answered and state_of(pending, call.id) != CLIENT:
            raise UserError(
                f"tool call {call.id} ({call.name}) is run by the server; a client cannot answer it"
            )
    # the calls the run will answer itself (an error for a client call left behind, a resumed
    # server call) stand in as placeholders where the agent will put them
    placeholders = [
        Msg.tool(ToolResultBlock(id=c.id, name=c.name)) for c in waiting if c.id not in answered
    ]
    try:
        (HistoryChecker() if checker is None else checker).check([*kept, *placeholders, *new])
    except HistoryError as exc:
        problems = "; ".join(str(f) for f in exc.findings)
        raise UserError(f"the thread would not be valid with these messages: {problems}") from None


def merge_of(ctx: RuntimeContext) -> Merge | None:
    """The ``Merge`` the hook decided for this run, if it ran."""
    merge = ctx.attributes.get(MERGE_KEY)
    return merge if isinstance(merge, Merge) else None
