"""Middleware: hooks around each reasoning step that may edit the persisted context.

``before_reasoning`` gets a copy of the context and may return an edited list (previews of old
tool results, a summary replacing old turns ...). The agent saves the edit through the normal
incremental save before calling the model, so only changed rows are written and the originals
stay in the ledger's history. ``after_reasoning`` may adjust the model's answer before it is
saved. Both default to "no change".

A ``before_reasoning`` that calls a model of its own (a summary) and fails raises ``ModelError``:
the agent then keeps the context as it was and reports a ``ContextEditFailed`` event instead of
ending the run. So it does for an edit that fails the history check the model call would make
(a tool call left without its result, say): the edit is checked before it is saved, and never
becomes the session's state. Returning anything but a list of ``Msg`` or ``None`` is a
``UserError``. Ready-made context middlewares are in ``agentledger.context``.
"""

from __future__ import annotations

from agentledger.agent.context import RuntimeContext
from agentledger.messages import Msg

__all__ = ["Middleware"]


class Middleware:
    """Subclass and override the hooks you need."""

    async def before_reasoning(self, ctx: RuntimeContext, context: list[Msg]) -> list[Msg] | None:
        """Return an edited context to persist and send, or ``None`` to leave it (raise
        ``ModelError`` if a model call of its own failed; see the module docstring)."""
        return None

    async def after_reasoning(self, ctx: RuntimeContext, message: Msg) -> Msg:
        """Return the assistant message to persist (default: unchanged)."""
        return message
