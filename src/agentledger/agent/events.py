"""What a model yields while it answers, and the accumulator that assembles it.

A ``Model.stream`` call yields deltas (text, thinking, tool-call arguments), usage reports, and
last a ``ModelResponse`` holding the complete assistant ``Msg``. The agent loop forwards deltas to
its own stream and persists only the final message, or, when a run is interrupted, what was
streamed so far: ``ResponseBuilder`` takes the same events one by one and can say at any moment
what the assistant message is so far and which tool calls were complete.

Conventions every model follows (the builder relies on them):

- Consecutive ``TextDelta``/``ThinkingDelta`` events extend the current text/thinking block; a
  delta of the other kind, or a tool call, starts a new block. ``ThinkingSignature`` closes the
  thinking block it signs: the next ``ThinkingDelta`` starts a new one.
- Tool calls are numbered by ``index`` (0, 1, ... in order of their ``ToolCallStart``), on every
  provider. Argument deltas of several calls may interleave; ``ToolCallEnd`` says a call's
  arguments are complete.
- ``UsageReport`` carries the usage of this call *so far* (cumulative): the latest one wins.
- ``stop_reason`` uses one vocabulary: ``end_turn``, ``tool_use``, ``max_tokens``,
  ``stop_sequence``, ``content_filter``; anything else a provider sends is passed through.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal, TypeAlias

import msgspec

from agentledger.errors import CodecError, ModelError
from agentledger.messages.arguments import input_of, is_raw
from agentledger.messages.blocks import Block, TextBlock, ThinkingBlock, ToolUseBlock
from agentledger.messages.checks import lone_surrogate_at
from agentledger.messages.ids import new_id
from agentledger.messages.msg import Msg, Usage
from agentledger.messages.values import EMPTY, FrozenMap, freeze_map
from agentledger.wire.private import REASONING_SOURCE_KEY, REFUSAL_KEY

__all__ = [
    "ModelEvent",
    "ModelResponse",
    "RedactedThinking",
    "ResponseBuilder",
    "StreamedToolCall",
    "TextDelta",
    "ThinkingDelta",
    "ThinkingSignature",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "UsageReport",
]


class TextDelta(msgspec.Struct, frozen=True):
    """A piece of the answer text; ``refusal`` marks a refusal (OpenAI's ``refusal`` field),
    kept as its own text block with ``metadata={"refusal": True}``."""

    text: str
    refusal: bool = False


class ThinkingDelta(msgspec.Struct, frozen=True):
    """A piece of the model's reasoning. ``source`` names the provider that wrote reasoning it
    does not sign (an OpenAI-compatible server's ``reasoning_content``); the thinking block keeps
    it in the private metadata key ``_reasoning_source``, so that only that provider is sent the
    reasoning again (see ``wire.to_openai``)."""

    text: str
    source: str | None = None


class ThinkingSignature(msgspec.Struct, frozen=True):
    """The provider's signature for the thinking block just streamed; closes that block."""

    signature: str


class RedactedThinking(msgspec.Struct, frozen=True):
    """A whole block of encrypted reasoning (Anthropic ``redacted_thinking``), kept opaque."""

    data: str


class ToolCallStart(msgspec.Struct, frozen=True):
    """The model starts a tool call; its arguments follow as ``ToolCallDelta`` events.

    ``text_arguments``: the provider's own format carries the arguments as text (OpenAI), so
    the text is kept verbatim to be sent back byte for byte. ``False`` for a provider whose
    format holds an object (Anthropic streams the object as JSON text): the text is kept only
    when ``input`` cannot hold it exactly.
    """

    index: int
    id: str
    name: str
    text_arguments: bool = True


class ToolCallDelta(msgspec.Struct, frozen=True):
    """A piece of a tool call's JSON arguments."""

    index: int
    id: str
    arguments_delta: str


class ToolCallEnd(msgspec.Struct, frozen=True):
    """A tool call's arguments are complete."""

    index: int
    id: str


class UsageReport(msgspec.Struct, frozen=True):
    """Token usage of this model call so far (cumulative; the latest report wins)."""

    usage: Usage


class ModelResponse(msgspec.Struct, frozen=True):
    """The last event of every stream: the complete assistant message and why the model stopped."""

    message: Msg
    stop_reason: str


ModelEvent: TypeAlias = (
    TextDelta
    | ThinkingDelta
    | ThinkingSignature
    | RedactedThinking
    | ToolCallStart
    | ToolCallDelta
    | ToolCallEnd
    | UsageReport
    | ModelResponse
)


class StreamedToolCall(msgspec.Struct, frozen=True):
    """A tool call as streamed so far: ``arguments`` is the raw JSON text received."""

    index: int
    id: str
    name: str
    arguments: str
    complete: bool
    text_arguments: bool = True

    def parse(self) -> FrozenMap:
        """The arguments as a (frozen) JSON object. Raises ``ModelError`` if they are not one."""
        if not self.arguments.strip():
            return EMPTY
        try:
            value = json.loads(self.arguments)
        except ValueError as exc:
            raise self._error(f"that are not valid JSON ({exc})") from None
        if not isinstance(value, dict):
            raise self._error("that are not a JSON object")
        try:
            return freeze_map(value)
        except CodecError as exc:  # NaN, integers past 64 bits ...
            raise self._error(f"that cannot be stored ({exc})") from None

    def _error(self, what: str) -> ModelError:
        return ModelError(
            f"tool call {self.name!r} ({self.id}) has arguments {what}: {_clip(self.arguments)}"
        )

    def block(self) -> ToolUseBlock:
        """A ``ToolUseBlock`` keeping the argument text verbatim (``ToolUseBlock.arguments``);
        text that holds no JSON object is kept too, marked in ``input`` (``_raw_arguments``)."""
        if not self.text_arguments:
            derived = input_of(self.arguments)
            if not is_raw(derived):
                return ToolUseBlock(id=self.id, name=self.name, input=derived)
        return ToolUseBlock(id=self.id, name=self.name, arguments=self.arguments)


def _text(value: object, what: str) -> str:
    """A streamed string, refused (``ModelError``) unless it is text a message can hold: a
    lone surrogate (JSON's ``"\\ud800"`` escape reads as one) cannot be encoded as UTF-8, and
    the block built from it would be refused as if the caller had passed bad input."""
    if not isinstance(value, str):
        raise ModelError(f"the model sent a {what} that is not a string: {value!r}")
    at = lone_surrogate_at(value)
    if at is not None:
        raise ModelError(
            f"the model sent a {what} that is not valid Unicode (a lone surrogate at {at})"
        )
    return value


def _index(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ModelError(f"the model sent a tool call index that is not an integer: {value!r}")
    return value


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


class _Tool:
    __slots__ = ("chunks", "complete", "id", "index", "name", "text_arguments")

    def __init__(self, index: int, id: str, name: str, text_arguments: bool) -> None:
        self.index, self.id, self.name = index, id, name
        self.text_arguments = text_arguments
        self.chunks: list[str] = []
        self.complete = False

    def snapshot(self) -> StreamedToolCall:
        text = "".join(self.chunks)
        return StreamedToolCall(
            self.index, self.id, self.name, text, self.complete, self.text_arguments
        )


_PartKind = Literal["text", "refusal", "thinking", "redacted"]


class _Part:
    """One block being assembled: text, refusal, thinking (open until signed) or redacted
    thinking; ``source`` is the provider of unsigned thinking (``ThinkingDelta.source``)."""

    __slots__ = ("chunks", "kind", "signature", "source")

    def __init__(self, kind: _PartKind, first: str = "", source: str | None = None) -> None:
        self.kind = kind
        self.chunks = [first] if first else []
        self.signature: str | None = None
        self.source = source


class ResponseBuilder:
    """Assembles streamed events into an assistant ``Msg``.

    ``add(event)`` for each event; ``partial()`` at any moment gives the message so far (text and
    thinking streamed, plus the tool calls whose arguments were complete); ``build(stop_reason)``
    gives the final ``ModelResponse`` and is strict: a tool call left incomplete raises
    ``ModelError``. Argument text is kept verbatim whatever it holds (``ToolUseBlock.arguments``):
    text that is no JSON object is stored and sent back as it came, and the tool runner answers
    such a call with an error result. ``partial()`` and ``build()`` give the
    same message id, so persisting a partial and later the final message never duplicates.
    """

    def __init__(
        self,
        *,
        id: str | None = None,
        name: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        created_at: datetime | Literal["now"] | None = "now",
    ) -> None:
        self.id = id or new_id()
        self._template = Msg.assistant(
            (), id=self.id, name=name, metadata=metadata, created_at=created_at
        )
        self._parts: list[_Part | _Tool] = []
        self._tools: dict[int, _Tool] = {}
        self.usage: Usage | None = None
        self.response: ModelResponse | None = None

    # -- feeding ----------------------------------------------------------------------------
    def add(self, event: ModelEvent) -> None:
        """Take one event. Raises ``ModelError`` for an event that is malformed (a field of the
        wrong type) or contradicts the stream so far; adapters add each event here before
        yielding it, so a bad provider answer never reaches the caller as an event."""
        if isinstance(event, TextDelta):
            self._append("refusal" if event.refusal is True else "text", _text(event.text, "text"))
        elif isinstance(event, ThinkingDelta):
            source = event.source
            if source is not None:
                source = _text(source, "reasoning source")
            self._append("thinking", _text(event.text, "thinking"), source)
        elif isinstance(event, ThinkingSignature):
            signature = _text(event.signature, "thinking signature")
            part = self._open_thinking()
            if part is None:  # a signature with no streamed text still signs a (empty) block
                part = _Part("thinking")
                self._parts.append(part)
            part.signature = signature
        elif isinstance(event, RedactedThinking):
            self._parts.append(_Part("redacted", _text(event.data, "redacted thinking")))
        elif isinstance(event, ToolCallStart):
            index = _index(event.index)
            if index in self._tools:
                raise ModelError(f"tool call index {index} started twice in one response")
            call_id, name = _text(event.id, "tool call id"), _text(event.name, "tool name")
            if not call_id or not name:
                raise ModelError(f"tool call {index} has no id or no name")
            tool = _Tool(index, call_id, name, event.text_arguments is not False)
            self._tools[index] = tool
            self._parts.append(tool)
        elif isinstance(event, ToolCallDelta):
            tool = self._tool(_index(event.index))
            if tool.complete:
                raise ModelError(f"tool call {tool.id} got arguments after it ended")
            tool.chunks.append(_text(event.arguments_delta, "tool call arguments"))
        elif isinstance(event, ToolCallEnd):
            self._tool(_index(event.index)).complete = True
        elif isinstance(event, UsageReport):
            self.usage = event.usage
        elif isinstance(event, ModelResponse):
            if not isinstance(event.message, Msg):
                raise ModelError(
                    f"the model's response holds a {type(event.message).__name__}, not a Msg"
                )
            self.response = event
        else:
            raise ModelError(f"the model yielded a {type(event).__name__}, not a model event")

    def _append(self, kind: _PartKind, text: str, source: str | None = None) -> None:
        if not text:
            return
        last = self._parts[-1] if self._parts else None
        if (
            isinstance(last, _Part)
            and last.kind == kind
            and last.signature is None
            and last.source == source
        ):
            last.chunks.append(text)
        else:
            self._parts.append(_Part(kind, text, source))

    def _open_thinking(self) -> _Part | None:
        for part in reversed(self._parts):
            if isinstance(part, _Part) and part.kind == "thinking" and part.signature is None:
                return part
        return None

    def _tool(self, index: int) -> _Tool:
        try:
            return self._tools[index]
        except KeyError:
            raise ModelError(f"tool call index {index} got arguments before it started") from None

    # -- reading ----------------------------------------------------------------------------
    @property
    def text(self) -> str:
        """All answer text streamed so far."""
        return self._joined("text")

    @property
    def thinking(self) -> str:
        """All (non-redacted) reasoning streamed so far."""
        return self._joined("thinking")

    def _joined(self, kind: str) -> str:
        parts = (p for p in self._parts if isinstance(p, _Part) and p.kind == kind)
        return "".join(c for p in parts for c in p.chunks)

    @property
    def tool_calls(self) -> tuple[StreamedToolCall, ...]:
        """Every tool call started so far, in order, each flagged ``complete`` or not."""
        return tuple(t.snapshot() for t in self._tools.values())

    def partial(self) -> Msg:
        """The assistant message so far: streamed text and thinking (signatures where received)
        and the complete tool calls; incomplete tool calls are left out. The content is empty
        when nothing was streamed. After the final ``ModelResponse``, its message."""
        if self.response is not None:
            return self.response.message
        return self._message(self._blocks(strict=False))

    def build(self, stop_reason: str) -> ModelResponse:
        """The final response. Raises ``ModelError`` for an incomplete tool call."""
        message = self._message(self._blocks(strict=True, why=stop_reason))
        return ModelResponse(message, stop_reason)

    def _blocks(self, *, strict: bool, why: str = "") -> list[Block]:
        blocks: list[Block] = []
        for part in self._parts:
            if isinstance(part, _Tool):
                call = part.snapshot()
                if strict and not call.complete:
                    raise ModelError(
                        f"the response ended (stop reason {why!r}) before the arguments of tool "
                        f"call {call.name!r} ({call.id}) were complete"
                    )
                if call.complete:
                    blocks.append(call.block())
                continue
            text = "".join(part.chunks)
            if part.kind == "text":
                if text:
                    blocks.append(TextBlock(text=text))
            elif part.kind == "refusal":
                blocks.append(TextBlock(text=text, metadata={REFUSAL_KEY: True}))
            elif part.kind == "redacted":
                blocks.append(ThinkingBlock(thinking=text, redacted=True))
            elif text or part.signature:
                meta = {REASONING_SOURCE_KEY: part.source} if part.source else None
                blocks.append(
                    ThinkingBlock(thinking=text, signature=part.signature or None, metadata=meta)
                )
        return blocks

    def _message(self, blocks: list[Block]) -> Msg:
        return self._template.replace(content=tuple(blocks), usage=self.usage)
