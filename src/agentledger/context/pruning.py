"""``ToolResultPruning``: old tool results shrink to previews; the recent ones stay whole.

A tool result matters most right after it lands; a few steps later the model has read it and
acted on it, yet it still costs its full size on every call. Pruning keeps the most recent
``keep_recent`` tool results as they are and replaces each older one by its preview
(``ToolResultPreview``: media, fields and order kept, one marker where text was cut). A result
that was already shortened (pruned or offloaded) is left alone, so pruning the same context again
changes nothing and writes nothing; a result whose text fits the allowance is left alone too.

Each pruned result is one replaced row in the next save; the original stays in the ledger's
history (``ledger.messages(session, version=...)``).
"""

from __future__ import annotations

from collections.abc import Sequence

from agentledger.agent.context import RuntimeContext
from agentledger.agent.middleware import Middleware
from agentledger.context.marks import preview_mark
from agentledger.context.preview import ToolResultPreview, as_preview, map_results
from agentledger.context.tokens import usage_basis
from agentledger.errors import UserError
from agentledger.messages import Msg, ToolResultBlock, message_list

__all__ = ["ToolResultPruning"]


class ToolResultPruning(Middleware):
    """Preview every tool result except the latest ``keep_recent`` (see the module docstring).

    ``preview`` is the allowance kept of each pruned result, or a ``ToolResultPreview``.
    """

    def __init__(self, *, keep_recent: int = 3, preview: ToolResultPreview | int = 400) -> None:
        if isinstance(keep_recent, bool) or not isinstance(keep_recent, int) or keep_recent < 0:
            raise UserError(f"keep_recent must be a non-negative int, got {keep_recent!r}")
        self.keep_recent = keep_recent
        self.preview = as_preview(preview)

    def prune(self, messages: Sequence[Msg]) -> list[Msg]:
        """A copy of ``messages`` with the results before the protected window previewed."""
        messages = message_list(messages, "prune")
        remaining = sum(len(m.tool_results) for m in messages if m.role == "tool")
        remaining -= self.keep_recent  # results still to go before the protected window
        basis = usage_basis(messages)
        mark = {"by": "pruning", "basis": basis}

        def prune_one(result: ToolResultBlock) -> ToolResultBlock:
            nonlocal remaining
            remaining -= 1
            if remaining < 0 or preview_mark(result) is not None:
                return result
            return self.preview.result(result, mark=mark)

        return [map_results(msg, prune_one) if remaining > 0 else msg for msg in messages]

    async def before_reasoning(self, ctx: RuntimeContext, context: list[Msg]) -> list[Msg] | None:
        pruned = self.prune(context)
        return None if all(a is b for a, b in zip(pruned, context)) else pruned
