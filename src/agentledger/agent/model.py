"""The model protocol: what the agent loop needs from an LLM, and nothing more.

A model streams one answer to a history: ``stream(messages, system=..., tools=..., settings=...)``
is an async generator of ``ModelEvent`` whose last event is a ``ModelResponse``. Every failure,
whether the provider's (HTTP 429, 500, timeouts) or the answer's (malformed stream, tool-call
arguments that are not JSON), is raised as ``agentledger.errors.ModelError`` with ``status`` and
``retryable`` set, so the loop has exactly one error type to handle.

Adapters: ``agentledger.agent.providers.OpenAIChatModel`` (OpenAI and compatible servers),
``AnthropicModel``, and ``agentledger.testing.scripted.ScriptedModel`` for tests. Any object with
a ``name`` and a matching ``stream`` method is a model; nothing needs to subclass anything.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import msgspec

from agentledger.agent.events import ModelEvent, ModelResponse
from agentledger.errors import ModelError, UserError
from agentledger.messages.msg import Msg

__all__ = ["TOOL_NAME", "Model", "ModelSettings", "ToolSpec", "complete"]


TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""The tool names every provider adapter can send (OpenAI's rule; Anthropic's allows as much)."""


def _empty_object_schema() -> dict[str, Any]:
    return {"type": "object", "properties": {}}


class ToolSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A tool as the model sees it: a name, what it does, and a JSON schema for its input."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = msgspec.field(default_factory=_empty_object_schema)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not TOOL_NAME.fullmatch(self.name):
            raise UserError(
                "a tool name must be 1 to 64 letters, digits, '_' or '-' (what OpenAI and "
                f"Anthropic both accept: any other is refused on every request), got {self.name!r}"
            )
        if not isinstance(self.parameters, Mapping):
            raise UserError(f"tool {self.name!r}: parameters must be a JSON schema object")


class ModelSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Per-call sampling settings; ``None`` leaves the provider's default.

    ``extra`` is merged into the request body as is, for provider-specific options
    (``{"top_k": 20}`` for vLLM, ``{"reasoning_effort": "low"}`` ...).
    """

    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    extra: dict[str, Any] = msgspec.field(default_factory=dict)


@runtime_checkable
class Model(Protocol):
    """An LLM that streams one assistant message for a history.

    ``stream`` must be an async generator: it yields deltas, ``UsageReport`` events and last one
    ``ModelResponse``, and raises only ``ModelError`` for anything that went wrong on the
    provider's side. It must not mutate ``messages``. ``system``, when given, is sent before the
    history as the provider's system prompt.

    A model may also name, as ``history_target``, the ``wire.validate`` target whose rules its
    provider enforces (``"openai"``, ``"anthropic"``; ``"strict"`` when it has none): the agent
    then refuses, before anything is stored, input that would leave a history it cannot send.
    """

    name: str

    def stream(
        self,
        messages: Sequence[Msg],
        *,
        system: str | None = None,
        tools: Sequence[ToolSpec] = (),
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[ModelEvent]: ...


async def complete(
    model: Model,
    messages: Sequence[Msg],
    *,
    system: str | None = None,
    tools: Sequence[ToolSpec] = (),
    settings: ModelSettings | None = None,
) -> ModelResponse:
    """Drain a model's stream and return its ``ModelResponse`` (for callers that do not stream,
    such as a summary call)."""
    response: ModelResponse | None = None
    stream = model.stream(messages, system=system, tools=tools, settings=settings)
    try:
        async for event in stream:
            if isinstance(event, ModelResponse):
                response = event
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()
    if response is None:
        raise ModelError(f"model {model.name!r} ended its stream without a response")
    return response
