"""``ScriptedModel``: a deterministic model for tests and the offline demo.

Each call to ``stream`` plays the next turn of a script:

- a ``Msg`` (role ``assistant``) or a plain string: streamed as a real model would stream it:
  thinking and text cut into several deltas, each tool call as a start, several argument deltas
  and an end, then usage and a ``ModelResponse`` carrying the scripted message itself (same id:
  script a distinct ``Msg`` per turn);
- an exception (``ModelError(..., status=429, retryable=True)``): raised when the turn is called;
- a callable ``(messages, tools) -> Msg | str`` (sync or async): answers from the request.

Every call is recorded in ``model.requests`` (messages, system, tools, settings), failing ones
too. When the script runs out, the call raises ``ModelError``.

Pausing, for interrupt tests: ``pause_after`` stops a turn's stream right after one event, until
the test releases it. It is an int ``n`` (after the n-th event of the turn; ``-1`` = after the
last event before ``ModelResponse``), an event class (after the first event of that class), or a
predicate on events; or a mapping ``{turn_number: one of those}`` to pause only some turns. At
the pause, after the consumer has handled that event and asked for the next, ``model.reached``
is set and the stream awaits ``model.release``::

    model = ScriptedModel([msg_with_tool_call], pause_after=ToolCallDelta)
    task = asyncio.create_task(agent.run("go", ctx))
    await model.reached.wait()          # the first argument delta has been consumed
    agent.interrupt(session)            # ... or task.cancel()
    model.release.set()                 # let the stream go on (not needed after a cancel)

``pause_after=-1`` is "after the complete tool calls, before ``ModelResponse``".
``model.paused_at`` is the event after which the stream stopped.

Script files (``ScriptedModel.from_file(path)``) are JSON: a list of turns, or
``{"turns": [...]}``. A turn is one of:

- a string: the answer text;
- ``{"text": "...", "thinking": "...", "tool_calls": [{"name": "search", "arguments": {...},
  "id": "call_1"}], "usage": {"input_tokens": 10, "output_tokens": 5}}`` (every key optional;
  tool-call ids default to ``call_<turn>_<n>``);
- a message in agentledger's codec JSON (has ``"role"`` and ``"content"`` blocks; ``"id"``
  optional);
- ``{"error": {"message": "...", "status": 429, "retryable": true}}``: raise ``ModelError``.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeAlias

import msgspec

from agentledger.agent.events import (
    ModelEvent,
    ModelResponse,
    RedactedThinking,
    TextDelta,
    ThinkingDelta,
    ThinkingSignature,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageReport,
)
from agentledger.agent.model import ModelSettings, ToolSpec
from agentledger.errors import CodecError, ModelError, UserError
from agentledger.messages.blocks import TextBlock, ThinkingBlock, ToolUseBlock
from agentledger.messages.codec import decode
from agentledger.messages.ids import new_id
from agentledger.messages.msg import Msg, Usage
from agentledger.wire.private import REFUSAL_KEY, arguments_text, tool_use_from_object

__all__ = ["PausePoint", "ScriptedModel", "ScriptedRequest", "Turn", "events_for"]

Responder: TypeAlias = Callable[[list[Msg], tuple[ToolSpec, ...]], Msg | str | Awaitable[Msg | str]]
Turn: TypeAlias = Msg | str | BaseException | Responder
PausePoint: TypeAlias = int | type | Callable[[ModelEvent], bool]


class ScriptedRequest(msgspec.Struct, frozen=True):
    """One call the model received."""

    messages: tuple[Msg, ...]
    system: str | None
    tools: tuple[ToolSpec, ...]
    settings: ModelSettings | None


class ScriptedModel:
    """A model that plays a script (see the module docstring)."""

    def __init__(
        self,
        script: Sequence[Turn],
        *,
        name: str = "scripted",
        chunk_size: int = 4,
        pause_after: PausePoint | Mapping[int, PausePoint] | None = None,
    ) -> None:
        if isinstance(script, (str, bytes)) or not isinstance(script, Sequence):
            raise UserError("the script must be a list of turns")
        if chunk_size < 1:
            raise UserError("chunk_size must be at least 1")
        for i, turn in enumerate(script):
            _check_turn(turn, i)
        points = pause_after.values() if isinstance(pause_after, Mapping) else [pause_after]
        for point in points:
            if isinstance(point, bool) or not (
                point is None or isinstance(point, int) or callable(point)
            ):
                raise UserError(
                    f"pause_after must be an int, an event class or a predicate, got {point!r}"
                )
        self.name = name
        self.script: list[Turn] = list(script)
        self.chunk_size = chunk_size
        self.pause_after = pause_after
        self.requests: list[ScriptedRequest] = []
        self.reached = asyncio.Event()
        self.release = asyncio.Event()
        self.paused_at: ModelEvent | None = None

    @classmethod
    def from_file(cls, path: str | Path, **options: Any) -> ScriptedModel:
        """Load a script from a JSON file (format in the module docstring)."""
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise UserError(f"cannot read script {path}: {exc}") from None
        except ValueError as exc:
            raise UserError(f"script {path} is not valid JSON: {exc}") from None
        if isinstance(data, dict) and "turns" in data:
            data = data["turns"]
        if not isinstance(data, list):
            raise UserError(f"script {path} must be a JSON list of turns (or {{'turns': [...]}})")
        options.setdefault("name", f"scripted:{path.name}")
        return cls([_turn_from_json(t, i, path) for i, t in enumerate(data)], **options)

    @property
    def remaining(self) -> int:
        """How many scripted turns have not been played."""
        return max(0, len(self.script) - len(self.requests))

    async def stream(
        self,
        messages: Sequence[Msg],
        *,
        system: str | None = None,
        tools: Sequence[ToolSpec] = (),
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[ModelEvent]:
        """Play the next turn; see ``agentledger.agent.model.Model``."""
        turn_number = len(self.requests)
        request = ScriptedRequest(tuple(messages), system, tuple(tools), settings)
        self.requests.append(request)
        if turn_number >= len(self.script):
            raise ModelError(
                f"{self.name}: the script has run out ({len(self.script)} turns scripted, "
                f"this is call {turn_number + 1})"
            )
        turn = self.script[turn_number]
        if isinstance(turn, BaseException):
            raise turn
        if callable(turn) and not isinstance(turn, Msg):
            answer = turn(list(messages), tuple(tools))
            if inspect.isawaitable(answer):
                answer = await answer
            turn = _as_message(answer, turn_number)
        msg = _as_message(turn, turn_number)
        events = events_for(msg, chunk_size=self.chunk_size)
        pause = self._pause_index(turn_number, events)
        for i, event in enumerate(events):
            await asyncio.sleep(0)  # a real stream yields to the loop between events
            yield event
            if i == pause:
                self.paused_at = event
                self.reached.set()
                await self.release.wait()
                self.release.clear()
                self.reached.clear()
        yield ModelResponse(msg, "tool_use" if msg.tool_calls else "end_turn")

    def _pause_index(self, turn_number: int, events: list[ModelEvent]) -> int | None:
        point = self.pause_after
        if isinstance(point, Mapping):
            point = point.get(turn_number)
        if point is None:
            return None
        if isinstance(point, int):
            index = point - 1 if point > 0 else len(events) + point
            return index if 0 <= index < len(events) else None
        test: Callable[[ModelEvent], bool]
        if isinstance(point, type):
            cls = point
            test = lambda e: isinstance(e, cls)  # noqa: E731
        else:
            test = point
        return next((i for i, e in enumerate(events) if test(e)), None)


def events_for(msg: Msg, *, chunk_size: int = 4) -> list[ModelEvent]:
    """The events a streaming model would send for ``msg`` (without the ``ModelResponse``)."""
    events: list[ModelEvent] = []
    index = 0
    for block in msg.content:
        if isinstance(block, TextBlock):
            refusal = block.metadata.get(REFUSAL_KEY) is True
            events.extend(TextDelta(c, refusal) for c in _chunks(block.text, chunk_size))
        elif isinstance(block, ThinkingBlock):
            if block.redacted:
                events.append(RedactedThinking(block.thinking))
                continue
            events.extend(ThinkingDelta(c) for c in _chunks(block.thinking, chunk_size))
            if block.signature:
                events.append(ThinkingSignature(block.signature))
        elif isinstance(block, ToolUseBlock):
            arguments = arguments_text(block)  # the model's text, byte for byte
            events.append(ToolCallStart(index, block.id, block.name))
            events.extend(ToolCallDelta(index, block.id, c) for c in _chunks(arguments, chunk_size))
            events.append(ToolCallEnd(index, block.id))
            index += 1
        # Other blocks (media) have no delta form; they arrive with the final message.
    if msg.usage is not None:
        events.append(UsageReport(msg.usage))
    return events


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _check_turn(turn: Any, i: int) -> None:
    if isinstance(turn, Msg):
        _as_message(turn, i)
    elif not isinstance(turn, (str, BaseException)) and not callable(turn):
        raise UserError(
            f"script turn {i} must be a Msg, a string, an exception or a callable, got {turn!r}"
        )


def _as_message(answer: Any, turn_number: int) -> Msg:
    if isinstance(answer, str):
        return Msg.assistant(answer)
    if not isinstance(answer, Msg):
        raise UserError(f"script turn {turn_number} answered {answer!r}, not a Msg or a string")
    if answer.role != "assistant":
        raise UserError(f"script turn {turn_number} is a {answer.role} message, not assistant")
    return answer


def _turn_from_json(item: Any, i: int, path: Path) -> Turn:
    where = f"script {path}, turn {i}"
    if isinstance(item, str):
        return Msg.assistant(item)
    if not isinstance(item, dict):
        raise UserError(f"{where}: a turn is a string or an object, got {item!r}")
    if "error" in item:
        error = item["error"] if isinstance(item["error"], dict) else {"message": item["error"]}
        return ModelError(
            str(error.get("message", "scripted model error")),
            status=error.get("status"),
            retryable=bool(error.get("retryable", False)),
        )
    if "role" in item:
        record = dict(item) if item.get("id") else {**item, "id": new_id()}
        try:
            return decode(json.dumps(record))
        except CodecError as exc:
            raise UserError(f"{where}: not a valid message: {exc}") from None
    unknown = set(item) - {"text", "thinking", "tool_calls", "usage"}
    if unknown:
        raise UserError(f"{where}: unknown keys {sorted(unknown)}")
    blocks: list[Any] = []
    if item.get("thinking"):
        blocks.append(ThinkingBlock(thinking=item["thinking"]))
    if item.get("text"):
        blocks.append(TextBlock(text=item["text"]))
    for n, call in enumerate(item.get("tool_calls") or ()):
        if not isinstance(call, dict) or not call.get("name"):
            raise UserError(f"{where}: tool call {n} needs a name")
        call_id = call.get("id") or f"call_{i}_{n}"
        arguments = call.get("arguments", {})
        if not isinstance(arguments, Mapping):
            raise UserError(f"{where}: tool call {n} arguments must be an object")
        blocks.append(tool_use_from_object(call_id, call["name"], arguments))
    usage = Usage(**item["usage"]) if item.get("usage") else None
    return Msg.assistant(blocks, usage=usage)
