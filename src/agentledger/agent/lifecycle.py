"""The durable tool-call lifecycle: telling "never ran" from "ran, result lost" after a crash.

Each call's state is persisted in the session value ``tool_calls`` in the same commits as the
messages: ``issued`` when the assistant message is saved, ``started`` just before the tool runs,
and removed in the commit that saves its result. On resume, an unanswered call that was only
``issued`` is run; one that ``started`` is re-run only if its tool is idempotent, and otherwise
answered with an error saying it may have run, so side effects are never silently repeated.

A call to a *client* tool (``RuntimeContext.client_tools``) is recorded as ``client``: the
caller runs it, so an unanswered one is waiting for the client, not lost in a crash. It is never
run or answered by recovery; the next run's input brings its result, and only a run whose input
moves on without it answers it with an error saying the client sent no result.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentledger.messages import Msg, TextBlock, ToolResultBlock, ToolUseBlock

__all__ = [
    "CLIENT",
    "PENDING_VALUE",
    "client_calls",
    "maybe_ran_result",
    "no_client_result",
    "unanswered_calls",
]

PENDING_VALUE = "tool_calls"
ISSUED = "issued"
STARTED = "started"
CLIENT = "client"


def unanswered_calls(context: Sequence[Msg]) -> list[ToolUseBlock]:
    """Calls of the last assistant message that asked for tools and have no result after it."""
    for index in range(len(context) - 1, -1, -1):
        msg = context[index]
        if msg.role == "assistant" and msg.tool_calls:
            answered = {r.id for m in context[index + 1 :] for r in m.tool_results}
            return [c for c in msg.tool_calls if c.id not in answered]
        if msg.role in ("assistant", "user"):
            return []
    return []


def state_of(pending: dict[str, Any], call_id: str) -> str:
    """``issued`` or ``started``; a call with no record is treated as possibly started."""
    record = pending.get(call_id)
    return record.get("state", STARTED) if isinstance(record, dict) else STARTED


def maybe_ran_result(call: ToolUseBlock) -> ToolResultBlock:
    """The error result for a call that started but whose result was never saved."""
    return _error(
        call,
        f"The call to {call.name} started before the run was interrupted and its result was "
        "not recorded. It may have run; it was not run again to avoid repeating its side "
        "effects.",
        "result_lost",
    )


def client_calls(context: Sequence[Msg], pending: dict[str, Any]) -> list[ToolUseBlock]:
    """Unanswered calls that wait for the client to run them."""
    return [c for c in unanswered_calls(context) if state_of(pending, c.id) == CLIENT]


def no_client_result(call: ToolUseBlock) -> ToolResultBlock:
    """The error result for a client call the conversation moved on from without its result."""
    return _error(
        call,
        f"The client did not return a result for this call to {call.name}; the conversation "
        "went on without it.",
        "no_client_result",
    )


def _error(call: ToolUseBlock, text: str, lifecycle: str) -> ToolResultBlock:
    return ToolResultBlock(
        id=call.id,
        name=call.name,
        output=(TextBlock(text=text),),
        is_error=True,
        metadata={"lifecycle": lifecycle},
    )
