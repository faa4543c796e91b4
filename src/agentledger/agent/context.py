"""``RuntimeContext`` and the events an agent run streams.

The context says *which* session a run is for (tenant and id), carries per-run attributes that
are never persisted, exposes the loaded state as ``ctx.state``, and offers the
``on_state_loaded`` hook: called after the session is loaded and before anything is appended or
the model is called, with the run's input list, which it may change in place (seed 001: callers
need the loaded state to dedupe, filter or inject input).
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
from agentledger.messages import Msg, ToolResultBlock
from agentledger.store import SessionState

__all__ = [
    "AgentEvent",
    "ContextEditFailed",
    "MessageCommitted",
    "OnStateLoaded",
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


class RunStarted(msgspec.Struct, frozen=True):
    """The run holds the session lease and has loaded its state."""

    session_id: str
    tenant: str
    run_id: str
    version: int


class MessageCommitted(msgspec.Struct, frozen=True):
    """A message is durably stored; ``version`` is the session version that holds it."""

    message: Msg
    version: int


class ToolResultEvent(msgspec.Struct, frozen=True):
    """A tool finished (or failed); its result is committed right after this event."""

    result: ToolResultBlock


class RunFinished(msgspec.Struct, frozen=True):
    """The run ended normally. ``reason`` is ``end_turn`` or ``max_iters``."""

    message: Msg | None
    reason: str
    version: int


class RunInterrupted(msgspec.Struct, frozen=True):
    """The run was interrupted; ``message`` is what was kept of the partial answer, if any."""

    source: Literal["user", "system"]
    message: Msg | None
    version: int


class ContextEditFailed(msgspec.Struct, frozen=True):
    """A middleware's own model call failed (a summary); the context was left as it was."""

    middleware: str
    error: str
    kind: str
    version: int


class RunError(msgspec.Struct, frozen=True):
    """The run failed; the input and every completed step are persisted."""

    error: str
    kind: str
    version: int


AgentEvent: TypeAlias = (
    RunStarted
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
