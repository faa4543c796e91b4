"""``OpenAIChatModel``: OpenAI chat completions, and every server that copies the API.

Streams ``chat.completions.create(stream=True)`` through the official ``openai`` SDK. The history
is checked against OpenAI's strict tool-call rules and converted by ``wire.to_openai`` (nothing
private is sent); the system prompt goes first as a system message. From the stream it reads
answer text, refusals (kept as their own text block marked ``{"refusal": True}``, sent back as
``refusal``), reasoning (``reasoning_content`` from vLLM, DeepSeek and llama.cpp, ``reasoning``
from Ollama and newer vLLM; tagged with this server, see ``send_reasoning``), tool calls
(accumulated by ``index``; parallel calls may interleave; argument text kept verbatim) and the
final usage chunk (``stream_options.include_usage``).

Usage is reported as ``input_tokens`` = ``prompt_tokens`` (cached tokens included, and also
counted in ``cache_read_tokens``), ``output_tokens`` = ``completion_tokens`` (reasoning included,
and also counted in ``reasoning_tokens``).
"""

from __future__ import annotations

import functools
import os
from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal

from agentledger._optional import require
from agentledger.agent.events import (
    ModelEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageReport,
)
from agentledger.agent.model import ModelSettings, ToolSpec
from agentledger.agent.providers import malformed, status_error
from agentledger.agent.providers._base import ProviderModel
from agentledger.errors import ModelError, UserError
from agentledger.messages import checks
from agentledger.messages.ids import new_id
from agentledger.messages.msg import Msg, Usage
from agentledger.wire.openai import to_openai
from agentledger.wire.tool_ids import ToolIds
from agentledger.wire.validate import check

__all__ = ["OpenAIChatModel"]

_PROVIDER = "OpenAI-compatible server"
_OFFICIAL_HOST = "api.openai.com"
_PLACEHOLDER_KEY = "sk-no-key-needed"  # local servers ignore the key; the SDK wants one
_STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "content_filter",
}


class OpenAIChatModel(ProviderModel):
    """A chat-completions model: ``OpenAIChatModel("gpt-4o-mini")`` or, for a local server,
    ``OpenAIChatModel("qwen3", base_url="http://localhost:8000/v1")``.

    Without ``client``, an ``AsyncOpenAI`` client is made from ``base_url``/``api_key``, falling
    back to ``OPENAI_BASE_URL``/``OPENAI_API_KEY``; a custom base URL without a key gets a
    placeholder key (local servers ignore it). That client is owned by the model: close it with
    ``await model.aclose()`` or ``async with model``. A ``client`` you pass stays yours.

    ``send_reasoning=True`` sends back, as ``reasoning_content``, the reasoning this same server
    wrote (thinking blocks tagged with ``self.source``, the server's base URL), for servers that
    want it (DeepSeek and vLLM reasoning parsers in a tool loop). Off by default: strict
    OpenAI-compatible servers reject the unknown key, and no other provider's reasoning is ever
    sent.

    ``max_tokens_param`` names the request field for ``ModelSettings.max_tokens``; by default
    ``max_completion_tokens`` for api.openai.com (its reasoning models refuse ``max_tokens``)
    and ``max_tokens`` elsewhere (what compatible servers know).
    """

    provider = _PROVIDER
    history_target = "openai"  # the rules ``request`` checks (``wire.validate``)

    def __init__(
        self,
        model: str,
        *,
        client: Any = None,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | None = None,
        max_retries: int = 2,
        max_tokens_param: Literal["max_tokens", "max_completion_tokens"] | None = None,
        send_reasoning: bool = False,
    ) -> None:
        if not model:
            raise UserError("OpenAIChatModel needs a model name")
        self.model = model
        self.name = f"openai:{model}"
        self._owns_client = client is None
        if client is None:
            openai = require("openai", "openai")
            base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
            api_key = api_key or os.environ.get("OPENAI_API_KEY") or None
            if api_key is None:
                if base_url is None or _OFFICIAL_HOST in base_url:
                    raise UserError(
                        f"no API key for {self.name}: set the OPENAI_API_KEY environment "
                        "variable (or OPENAI_BASE_URL to use a local OpenAI-compatible server)"
                    )
                api_key = _PLACEHOLDER_KEY
            options: dict[str, Any] = {"max_retries": max_retries}
            if timeout is not None:
                options["timeout"] = timeout
            client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, **options)
        self.client = client
        if max_tokens_param is None:
            official = _OFFICIAL_HOST in str(getattr(client, "base_url", _OFFICIAL_HOST))
            max_tokens_param = "max_completion_tokens" if official else "max_tokens"
        self.max_tokens_param = max_tokens_param
        self.send_reasoning = send_reasoning
        self.source = f"openai-chat:{client.base_url}"

    def __repr__(self) -> str:
        return f"OpenAIChatModel({self.model!r}, base_url={str(self.client.base_url)!r})"

    def request(
        self,
        messages: Sequence[Msg],
        *,
        system: str | None = None,
        tools: Sequence[ToolSpec] = (),
        settings: ModelSettings | None = None,
    ) -> dict[str, Any]:
        """The keyword arguments of the ``chat.completions.create`` call ``stream`` makes.

        Raises ``HistoryError`` when the history breaks OpenAI's tool-call rules.
        """
        return self._request(messages, system, tools, settings)[0]

    def _request(
        self,
        messages: Sequence[Msg],
        system: str | None,
        tools: Sequence[ToolSpec],
        settings: ModelSettings | None,
    ) -> tuple[dict[str, Any], ToolIds]:
        check(messages, target="openai")
        ids = ToolIds("openai")
        reasoning = self.source if self.send_reasoning else False
        wire = to_openai(messages, reasoning=reasoning, tool_ids=ids)
        if system:
            wire.insert(0, {"role": "system", "content": system})
        body: dict[str, Any] = {
            "model": self.model,
            "messages": wire,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in tools
            ]
        if settings is not None:
            if settings.temperature is not None:
                body["temperature"] = settings.temperature
            if settings.top_p is not None:
                body["top_p"] = settings.top_p
            if settings.max_tokens is not None:
                body[self.max_tokens_param] = settings.max_tokens
            if settings.stop:
                body["stop"] = list(settings.stop)
            if settings.extra:
                body["extra_body"] = dict(settings.extra)
        return body, ids

    async def stream(
        self,
        messages: Sequence[Msg],
        *,
        system: str | None = None,
        tools: Sequence[ToolSpec] = (),
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[ModelEvent]:
        """Stream one assistant message; see ``agentledger.agent.model.Model``."""
        openai = require("openai", "openai")
        request, ids = self._request(messages, system, tools, settings)
        convert = functools.partial(_convert, openai)
        reader = _ChunkReader(self.source, ids)
        async for event in self._events(
            self.client.chat.completions.create(**request), reader, convert
        ):
            yield event


def _convert(openai: Any, exc: Exception) -> ModelError:
    """The ``ModelError`` for an exception raised by the SDK."""
    if isinstance(exc, ModelError):
        return exc
    if isinstance(exc, openai.APIStatusError):
        retry_after = exc.response.headers.get("retry-after")
        return status_error(_PROVIDER, exc.status_code, _detail(exc), retry_after=retry_after)
    if isinstance(exc, openai.APITimeoutError):
        return ModelError(f"{_PROVIDER} timed out: {exc}", retryable=True)
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc
        return ModelError(f"cannot reach {_PROVIDER}: {cause}", retryable=True)
    if isinstance(exc, openai.APIError):  # an error object inside the stream
        return ModelError(f"{_PROVIDER} reported an error mid-stream: {_detail(exc)}")
    if isinstance(exc, ValueError):  # the SDK's json.loads of an SSE data line
        return malformed(_PROVIDER, f"a stream event is not valid JSON ({exc})")
    return ModelError(f"{_PROVIDER} call failed: {type(exc).__name__}: {exc}")


def _detail(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
    return str(getattr(exc, "message", None) or exc)


class _ToolAcc:
    """A tool call being read: started once its name is known; arguments buffered until then."""

    __slots__ = ("buffered", "ended", "id", "index", "name", "ordinal", "started")

    def __init__(self, index: int) -> None:
        self.index = index  # the provider's
        self.ordinal = -1  # ours: 0, 1, ... in order of start
        self.id: str | None = None
        self.name: str | None = None
        self.buffered: list[str] = []
        self.started = False
        self.ended = False


class _ChunkReader:
    """Turns chat-completion chunks into model events (choice 0 only)."""

    def __init__(self, source: str, ids: ToolIds) -> None:
        self.source = source  # tags the reasoning this server writes (``ThinkingDelta.source``)
        self.ids = ids  # the request's tool-id mapping: reply ids are mapped back through it
        self.tools: dict[int, _ToolAcc] = {}
        self.started = 0
        self.finish_reason: str | None = None
        self.saw_choice = False

    def feed(self, chunk: Any) -> list[ModelEvent]:
        events: list[ModelEvent] = []
        for choice in getattr(chunk, "choices", None) or ():
            if (getattr(choice, "index", 0) or 0) != 0:
                continue  # n > 1 is not supported; other choices are ignored
            self.saw_choice = True
            delta = getattr(choice, "delta", None)
            if delta is not None:
                events.extend(self._delta(delta))
            finish = getattr(choice, "finish_reason", None)
            if finish is not None:
                if not isinstance(finish, str) or not finish:
                    raise malformed(_PROVIDER, f"finish_reason {finish!r} is not a string")
                self.finish_reason = finish
                events.extend(self._end_tools())
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            events.append(UsageReport(_usage(usage)))
        return events

    def _delta(self, delta: Any) -> list[ModelEvent]:
        events: list[ModelEvent] = []
        reasoning = getattr(delta, "reasoning_content", None) or getattr(delta, "reasoning", None)
        if isinstance(reasoning, str) and reasoning:
            events.append(ThinkingDelta(reasoning, source=self.source))
        for field in ("content", "refusal"):
            text = getattr(delta, field, None)
            if text:  # the builder refuses a non-string
                events.append(TextDelta(text, refusal=field == "refusal"))
        for position, call in enumerate(getattr(delta, "tool_calls", None) or ()):
            events.extend(self._tool_call(call, position))
        return events

    def _tool_call(self, call: Any, position: int) -> list[ModelEvent]:
        index = getattr(call, "index", None)
        call_id = getattr(call, "id", None) or None
        if isinstance(call_id, str):
            call_id = self.ids.stored(call_id)
        if not isinstance(index, int):  # some servers omit it: match by id, else a new call
            known = [t.index for t in self.tools.values() if call_id and t.id == call_id]
            index = known[0] if known else len(self.tools) + position
        tool = self.tools.get(index)
        if tool is None:
            tool = self.tools[index] = _ToolAcc(index)
        if tool.ended:
            raise malformed(_PROVIDER, f"tool call {index} got a delta after the response ended")
        function = getattr(call, "function", None)
        name = getattr(function, "name", None) if function is not None else None
        arguments = getattr(function, "arguments", None) if function is not None else None
        for field, value in (("id", call_id), ("name", name), ("arguments", arguments)):
            if value is not None and not isinstance(value, str):
                raise malformed(_PROVIDER, f"tool call {field} {value!r} is not a string")
        if call_id and tool.id is None:
            tool.id = call_id
        if name and tool.name is None:
            tool.name = name
        if arguments:
            tool.buffered.append(arguments)
        events: list[ModelEvent] = []
        if not tool.started and tool.name:
            tool.started = True
            tool.ordinal = self.started
            self.started += 1
            tool.id = tool.id or f"call_{new_id()}"  # servers that send no id still need one
            events.append(ToolCallStart(tool.ordinal, tool.id, tool.name))
        if tool.started and tool.buffered:
            text = "".join(tool.buffered)
            tool.buffered.clear()
            events.append(ToolCallDelta(tool.ordinal, tool.id or "", text))
        return events

    def _end_tools(self) -> list[ModelEvent]:
        events: list[ModelEvent] = []
        for tool in sorted(self.tools.values(), key=lambda t: t.ordinal):
            if tool.ended:
                continue
            if not tool.started:
                raise malformed(_PROVIDER, f"tool call {tool.index} has no function name")
            tool.ended = True
            events.append(ToolCallEnd(tool.ordinal, tool.id or ""))
        return events

    def finish(self) -> str:
        """Check that the stream ended properly; the normalized stop reason."""
        if not self.saw_choice:
            raise malformed(_PROVIDER, "the response has no choices")
        if self.finish_reason is None:
            raise malformed(
                _PROVIDER, "the stream ended before a finish_reason (cut off?)", retryable=True
            )
        return _STOP_REASONS.get(self.finish_reason, self.finish_reason)


def _usage(usage: Any) -> Usage:
    """The stream's token counts; a count that is absent or null is 0, and one that is not a
    count (a fraction, a negative, a list) makes the event malformed, rather than 0."""

    def count(obj: Any, field: str) -> int:
        value = getattr(obj, field, None) if obj is not None else None
        return 0 if value is None else checks.count("usage", field, value)

    return Usage(
        input_tokens=count(usage, "prompt_tokens"),
        output_tokens=count(usage, "completion_tokens"),
        cache_read_tokens=count(getattr(usage, "prompt_tokens_details", None), "cached_tokens"),
        reasoning_tokens=count(
            getattr(usage, "completion_tokens_details", None), "reasoning_tokens"
        ),
    )
