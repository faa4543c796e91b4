"""What an interrupted run keeps (seed 003).

A run can be interrupted while the model is still streaming, after the answer is complete but
before its tool calls run, or while tools run. The rule that keeps every later request valid:
a tool call is persisted only together with its result. So on interrupt

- text and thinking already streamed are kept (user interrupt), or kept / dropped by
  ``PartialReasoningPolicy`` (system interrupt);
- tool calls that never ran are dropped (``UnexecutedCallPolicy.DROP``, the default) or kept
  with a synthesized error result each (``ERROR_RESULTS``);
- nothing is persisted when nothing remains: no empty assistant message.
"""

from __future__ import annotations

import enum
from typing import Literal

from agentledger.messages import Msg, TextBlock, ToolResultBlock, ToolUseBlock
from agentledger.wire.validate import is_empty_assistant

__all__ = ["InterruptSource", "PartialReasoningPolicy", "UnexecutedCallPolicy", "keep_on_interrupt"]

InterruptSource = Literal["user", "system"]


class PartialReasoningPolicy(enum.Enum):
    """On a *system* interrupt: keep the partial answer (``SAVE``) or drop it (``DISCARD``)."""

    SAVE = "save"
    DISCARD = "discard"


class UnexecutedCallPolicy(enum.Enum):
    """Tool calls that never ran: drop them, or keep them answered by error results."""

    DROP = "drop"
    ERROR_RESULTS = "error_results"


def not_run_result(call: ToolUseBlock, source: InterruptSource) -> ToolResultBlock:
    """The error result for a call that was never executed."""
    return ToolResultBlock(
        id=call.id,
        name=call.name,
        output=(TextBlock(text=f"Not executed: the run was interrupted ({source})."),),
        is_error=True,
        metadata={"interrupted": source},
    )


def keep_on_interrupt(
    partial: Msg,
    source: InterruptSource,
    reasoning: PartialReasoningPolicy,
    calls: UnexecutedCallPolicy,
) -> tuple[Msg | None, list[Msg]]:
    """What to persist of a partial assistant message whose tool calls did not run.

    Returns the assistant message to append (or ``None``) and the tool messages answering its
    calls (only with ``ERROR_RESULTS``).
    """
    if source == "system" and reasoning is PartialReasoningPolicy.DISCARD:
        return None, []
    tool_calls = partial.tool_calls
    if tool_calls and calls is UnexecutedCallPolicy.ERROR_RESULTS:
        return partial, [Msg.tool(not_run_result(c, source)) for c in tool_calls]
    kept = partial.replace(content=[b for b in partial.content if not isinstance(b, ToolUseBlock)])
    if is_empty_assistant(kept):  # blank text alone: a message strict providers refuse
        return None, []
    return kept, []
