"""``RuntimeContext`` and the events an agent run streams.

The context says *which* session a run is for (tenant and id), carries per-run attributes that
are never persisted, exposes the loaded state as ``ctx.state``, and offers the
``on_state_loaded`` hook: called after the session is loaded and before anything is appended or
the model is called, with the run's input list, which it may change in place (seed 001: callers
need the loaded state to dedupe, filter or inject input). The hook may also cut
``ctx.state.context`` short (a rewind: the run continues from there; what was cut stays in the
ledger's history). A run whose input the hook emptied ends without calling the model: all it
was given was already there. The run's saves expect the session at ``ctx.state.version`` as the
hook leaves it: a hook that saves to the session itself sets it to the version its save
committed (as the AG-UI server's does), else the run's first save fails with ``ConflictError``.

Per run, a caller may also declare ``client_tools``: tools the model may call but the caller
runs (an AG-UI frontend's tools). The run ends when the model calls one, the call waiting for
its result in the next run's input; and ``instructions`` added to the system prompt for this run
only (never stored).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

import msgspec

from agentledger.agent.events import (
    RedactedThinking,
    TextDelta,
    ThinkingDelta,
    ThinkingSignature,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageReport,
)
from agentledger.agent.model import ToolSpec
from agentledger.messages import Msg, ToolResultBlock
from agentledger.store import SessionState

__all__ = [
    "AgentEvent",
    "ContextEditFailed",
    "MessageCommitted",
    "OnStateLoaded",
    "ResponseStarted",
    "RunError",
    "RunFinished",
    "RunInterrupted",
    "RunStarted",
    "RuntimeContext",
    "ToolResultEvent",
]

OnStateLoaded: TypeAlias = Callable[["RuntimeContext", list[Msg]], Awaitable[None] | None]


@dataclass(slots=True)
class RuntimeContext:
    """Per-run context: which session, transient attributes, the loaded state, the load hook.

    ``tenant`` None means the tenant of the agent's ledger; the agent sets it when the run
    starts, so hooks and tools always see the tenant the run is stored under.
    """

    session_id: str
    tenant: str | None = None
    attributes: dict[str, Any] = field(default_factory=dict)
    on_state_loaded: OnStateLoaded | None = None
    state: SessionState | None = None
    client_tools: tuple[ToolSpec, ...] = ()
    instructions: str | None = None


class RunStarted(msgspec.Struct, frozen=True):
    """The run holds the session lease and has loaded its state."""

    session_id: str
    tenant: str
    run_id: str
    version: int


class ResponseStarted(msgspec.Struct, frozen=True):
    """The model starts answering; the answer is persisted under ``message_id`` (so a client
    streaming it can use the id it will find in the store)."""

    message_id: str


class MessageCommitted(msgspec.Struct, frozen=True):
    """A message is durably stored; ``version`` is the session version that holds it."""

    message: Msg
    version: int


class ToolResultEvent(msgspec.Struct, frozen=True):
    """A tool finished (or failed); its result is committed right after this event."""

    result: ToolResultBlock


class RunFinished(msgspec.Struct, frozen=True):
    """The run ended normally. ``reason`` is ``end_turn``, ``max_iters``, ``client_tool`` (the
    model called client tools: their calls wait for results in the next run's input) or
    ``no_new_input`` (the ``on_state_loaded`` hook found nothing new: no model call)."""

    message: Msg | None
    reason: str
    version: int


class RunInterrupted(msgspec.Struct, frozen=True):
    """The run was interrupted; ``message`` is what was kept of the partial answer, if any."""

    source: Literal["user", "system"]
    message: Msg | None
    version: int


class ContextEditFailed(msgspec.Struct, frozen=True):
    """A middleware's edit was not made: its own model call failed (a summary, ``kind``
    ``ModelError``) or what it returned would not pass the agent's history check (``kind``
    ``HistoryError``); the context was left as it was."""

    middleware: str
    error: str
    kind: str
    version: int


class RunError(msgspec.Struct, frozen=True):
    """The run failed. Every message a ``MessageCommitted`` event announced is persisted, at
    ``version`` and before it, and nothing else the run made: after a ``ConflictError`` or a
    ``LeaseLostError`` (another writer committed under the run, or its lease ended), what the
    run had not yet saved was dropped rather than saved over the other commit."""

    error: str
    kind: str
    version: int


AgentEvent: TypeAlias = (
    RunStarted
    | ResponseStarted
    | TextDelta
    | ThinkingDelta
    | ThinkingSignature
    | RedactedThinking
    | ToolCallStart
    | ToolCallDelta
    | ToolCallEnd
    | UsageReport
    | MessageCommitted
    | ContextEditFailed
    | ToolResultEvent
    | RunFinished
    | RunInterrupted
    | RunError
)
