"""Tool-call ids stay unique within a session, whatever ids the model sends.

Strict providers refuse a history in which two tool calls share an id, so a reply that reuses
one would be stored and then fail every later request: the session stuck for good. Some models
do reuse ids (servers that number calls ``call_0``, ``call_1`` afresh in every reply; a scripted
model replayed on a stored session). ``CallIds`` gives such a call a fresh id, ``<id>_<n>``,
before anything is stored or streamed: in the events the run yields, so a client sees the id
the store holds, and in the message the run appends.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from typing import Any

import msgspec

from agentledger.agent.events import ToolCallDelta, ToolCallEnd, ToolCallStart
from agentledger.messages import Msg, ToolUseBlock

__all__ = ["CallIds"]


class CallIds:
    """The ids of one model reply, made unique against ``taken``: the tool-call ids of the
    session so far (``HistoryChecker.call_ids`` of the history sent: it passed strict
    validation, so its results answer only those calls)."""

    def __init__(self, taken: AbstractSet[str]) -> None:
        self._taken = taken
        self._used: set[str] = set()  # the ids this reply kept
        self._by_index: dict[Any, str] = {}
        self._started: list[tuple[str, str]] = []  # (model's id, id kept), in start order

    def event(self, event: Any) -> Any:
        """``event`` with the tool-call id this reply keeps (unchanged when it was unique)."""
        if isinstance(event, ToolCallStart) and isinstance(event.id, str):
            kept = self._fresh(event.id)
            self._by_index[event.index] = kept
            self._started.append((event.id, kept))
        elif isinstance(event, (ToolCallDelta, ToolCallEnd)):
            kept = self._by_index.get(event.index, event.id)
        else:
            return event
        return event if kept == event.id else msgspec.structs.replace(event, id=kept)

    def message(self, msg: Msg) -> Msg:
        """The reply ``msg`` with the ids its streamed calls were given, in order; a call that
        was never streamed is made unique here."""
        if not msg.tool_calls:
            return msg
        started = iter(self._started)
        content = []
        for block in msg.content:
            if isinstance(block, ToolUseBlock):
                sent, kept = next(started, (block.id, None))
                if kept is None or sent != block.id:
                    kept = self._fresh(block.id)
                if kept != block.id:
                    block = block.replace(id=kept)
            content.append(block)
        return msg.replace(content=tuple(content))

    def _fresh(self, call_id: str) -> str:
        kept, n = call_id, 1
        while kept in self._taken or kept in self._used:
            n += 1
            kept = f"{call_id}_{n}"
        self._used.add(kept)
        return kept
