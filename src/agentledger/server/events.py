"""Step 3 of a run: the agent's events as AG-UI 1.0 events (``ag_ui.core`` models).

Ids on the wire are the ids in the store: a text message streams under the id the agent
announced for its answer (``ResponseStarted``), the ``n``-th thinking block of that answer as
reasoning message ``reasoning_message_id(answer, n)`` (numbered exactly as ``ResponseBuilder``
splits blocks), a tool result as the tool message id ``to_agui`` gives it once committed. So the
``MESSAGES_SNAPSHOT`` that closes the run names the same messages, and a client resending them
is recognised.

Every ``*_START`` is matched by its ``*_END`` before the run ends: when the answer is committed,
and on every other exit (``close``). Signatures and redacted reasoning travel as
``REASONING_ENCRYPTED_VALUE``. A second text block of one answer continues the same text message
after a newline, as ``to_agui`` joins them.
"""

from __future__ import annotations

import re
from typing import Any

from agentledger._optional import require
from agentledger.agent.context import (
    AgentEvent,
    MessageCommitted,
    ResponseStarted,
)
from agentledger.agent.events import (
    RedactedThinking,
    TextDelta,
    ThinkingDelta,
    ThinkingSignature,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)
from agentledger.server.encode import MessagesSnapshot
from agentledger.server.merge import Merge
from agentledger.server.parse import RunRequest
from agentledger.wire.agui import reasoning_message_id, to_agui

__all__ = ["EventStream", "error_code"]


def error_code(kind: str) -> str:
    """A machine-readable ``RUN_ERROR`` code for an error class name (``ModelError`` →
    ``model_error``)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", kind).lower()


class EventStream:
    """Builds the AG-UI events of one run; see the module docstring."""

    def __init__(self, request: RunRequest) -> None:
        self.core = require("ag_ui.core", "server")
        self.request = request
        self.answer: str | None = None  # id of the answer being streamed
        self.text_open = False
        self.last_part: str | None = None  # text | thinking | signed | redacted | tool
        self.reasoning_open: str | None = None
        self.unsigned: list[str] = []  # reasoning ids of thinking blocks not signed yet
        self.thinking = 0
        self.calls_open: list[str] = []
        self.from_client: set[str] = set()  # ids of messages the client sent in this run

    # -- the frame of a run ------------------------------------------------------------------
    def started(self, merge: Merge | None, version: int) -> list[Any]:
        core = self.core
        events: list[Any] = [
            core.RunStartedEvent(
                thread_id=self.request.thread_id,
                run_id=self.request.run_id,
                protocol_version=core.PROTOCOL_VERSION,
                parent_run_id=self.request.parent_run_id,
            )
        ]
        if merge is not None:
            self.from_client = {m.id for m in merge.input}
            if merge.fork_at is not None:
                value = {"messageId": merge.fork_at, "previousVersion": version}
                events.append(core.CustomEvent(name="agentledger.fork", value=value))
        return events

    def snapshots(self, state: Any, messages: list[dict[str, Any]]) -> list[Any]:
        """``STATE_SNAPSHOT`` and ``MESSAGES_SNAPSHOT`` (``messages``: ``to_agui`` dicts)."""
        return [
            self.core.StateSnapshotEvent(snapshot={} if state is None else state),
            MessagesSnapshot(messages),
        ]

    def finished(self, version: int, reason: str, pending: list[str]) -> Any:
        core = self.core
        if reason == "interrupted":
            outcome: Any = core.RunFinishedCancelledOutcome()
        else:
            outcome = core.RunFinishedSuccessOutcome(pending_tool_call_ids=pending or None)
        return core.RunFinishedEvent(
            thread_id=self.request.thread_id,
            run_id=self.request.run_id,
            outcome=outcome,
            metadata={"agentledger": {"version": version, "stopReason": reason}},
        )

    def failed(self, message: str, code: str, version: int | None) -> Any:
        meta = {"agentledger": {"version": version}} if version is not None else None
        return self.core.RunErrorEvent(message=message, code=code, metadata=meta)

    # -- the agent's events --------------------------------------------------------------------
    def translate(self, event: AgentEvent) -> list[Any]:
        """The AG-UI events for one agent event (often none)."""
        core = self.core
        if isinstance(event, ResponseStarted):
            out = self.close()
            self.answer, self.thinking, self.last_part = event.message_id, 0, None
            return out
        if isinstance(event, TextDelta) and event.text:
            return self._text(event.text)
        if isinstance(event, ThinkingDelta) and event.text:
            out = []
            if self.last_part != "thinking":
                out = self._new_reasoning()
                self.last_part = "thinking"
            rid = self.unsigned[-1]
            return [*out, core.ReasoningMessageContentEvent(message_id=rid, delta=event.text)]
        if isinstance(event, ThinkingSignature):
            return self._signature(event.signature)
        if isinstance(event, RedactedThinking):
            out = self._new_reasoning(signed=True)
            rid = reasoning_message_id(self._answer(), self.thinking - 1)
            self.last_part = "redacted"
            return [*out, *self._end_reasoning(), self._encrypted(rid, event.data)]
        if isinstance(event, ToolCallStart):
            self.last_part = "tool"
            self.calls_open.append(event.id)
            start = core.ToolCallStartEvent(
                tool_call_id=event.id, tool_call_name=event.name, parent_message_id=self._answer()
            )
            return [*self._end_reasoning(), start]
        if isinstance(event, ToolCallDelta):
            return [core.ToolCallArgsEvent(tool_call_id=event.id, delta=event.arguments_delta)]
        if isinstance(event, ToolCallEnd) and event.id in self.calls_open:
            self.calls_open.remove(event.id)
            return [core.ToolCallEndEvent(tool_call_id=event.id)]
        if isinstance(event, MessageCommitted):
            return self._committed(event)
        return []

    def close(self) -> list[Any]:
        """``*_END`` events for everything still open (the answer is complete or abandoned)."""
        core = self.core
        out = self._end_reasoning()
        if self.text_open and self.answer is not None:
            out.append(core.TextMessageEndEvent(message_id=self.answer))
        out.extend(core.ToolCallEndEvent(tool_call_id=c) for c in self.calls_open)
        self.text_open, self.calls_open, self.unsigned = False, [], []
        return out

    # -- pieces --------------------------------------------------------------------------------
    def _answer(self) -> str:
        if self.answer is None:  # a model event before ResponseStarted: not from ReActAgent
            raise RuntimeError("the agent streamed an answer without announcing its id")
        return self.answer

    def _text(self, text: str) -> list[Any]:
        core = self.core
        out = self._end_reasoning()
        if not self.text_open:
            self.text_open = True
            out.append(core.TextMessageStartEvent(message_id=self._answer(), role="assistant"))
        elif self.last_part != "text":
            text = "\n" + text  # a new text block: to_agui joins blocks with a newline
        self.last_part = "text"
        out.append(core.TextMessageContentEvent(message_id=self._answer(), delta=text))
        return out

    def _new_reasoning(self, *, signed: bool = False) -> list[Any]:
        out = self._end_reasoning()
        rid = reasoning_message_id(self._answer(), self.thinking)
        self.thinking += 1
        if not signed:
            self.unsigned.append(rid)
        self.reasoning_open = rid
        out.append(self.core.ReasoningMessageStartEvent(message_id=rid))
        return out

    def _end_reasoning(self) -> list[Any]:
        if self.reasoning_open is None:
            return []
        rid, self.reasoning_open = self.reasoning_open, None
        return [self.core.ReasoningMessageEndEvent(message_id=rid)]

    def _signature(self, signature: str) -> list[Any]:
        """Signs the last unsigned thinking block, or a new empty one (as the builder does)."""
        out: list[Any] = []
        if self.unsigned:
            rid = self.unsigned.pop()
            if self.last_part == "thinking" and rid == reasoning_message_id(
                self._answer(), self.thinking - 1
            ):
                self.last_part = "signed"
        else:
            out = self._new_reasoning(signed=True)
            rid = reasoning_message_id(self._answer(), self.thinking - 1)
            self.last_part = "signed"
        if self.reasoning_open == rid:
            out.extend(self._end_reasoning())
        return [*out, self._encrypted(rid, signature)]

    def _encrypted(self, rid: str, value: str) -> Any:
        return self.core.ReasoningEncryptedValueEvent(
            subtype="message", entity_id=rid, encrypted_value=value
        )

    def _committed(self, event: MessageCommitted) -> list[Any]:
        msg = event.message
        if msg.id == self.answer:
            out = self.close()
            self.answer = None
            return out
        if msg.role != "tool" or msg.id in self.from_client:
            return []
        return [
            self.core.ToolCallResultEvent(
                message_id=d["id"], tool_call_id=d["toolCallId"], content=d["content"], role="tool"
            )
            for d in to_agui([msg])
        ]
