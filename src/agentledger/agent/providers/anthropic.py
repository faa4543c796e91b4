"""``AnthropicModel``: the Anthropic Messages API, streamed.

Uses ``anthropic.AsyncAnthropic().messages.create(stream=True)`` and reads the raw server-sent
events: ``message_start`` (input usage), ``content_block_start``/``_delta``/``_stop`` for text,
thinking (with its signature), redacted thinking and tool use (``input_json_delta``), and
``message_delta`` (stop reason, output usage). The history is checked against Anthropic's rules
and converted by ``wire.to_anthropic``; system messages in the history are hoisted after the
``system`` argument. Block types this adapter does not model (server tools, citations) are
skipped.

Usage: ``input_tokens`` counts every input token, cached ones included (Anthropic's
``input_tokens`` + ``cache_read_input_tokens`` + ``cache_creation_input_tokens``), so it means the
same as for OpenAI; the cache counts are also reported on their own.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any, Literal

from agentledger._optional import require
from agentledger.agent.events import (
    ModelEvent,
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
from agentledger.agent.providers import malformed, status_error
from agentledger.agent.providers._base import ProviderModel
from agentledger.agent.providers.anthropic_request import (
    CacheTarget,
    cache_targets,
    mark_cache,
    system_param,
    thinking_allowed,
)
from agentledger.errors import ModelError, UserError
from agentledger.messages import checks
from agentledger.messages.msg import Msg, Usage
from agentledger.wire.anthropic import to_anthropic
from agentledger.wire.tool_ids import ToolIds
from agentledger.wire.validate import check

__all__ = ["AnthropicModel"]

_PROVIDER = "Anthropic"
_OFFICIAL_HOST = "api.anthropic.com"
_PLACEHOLDER_KEY = "sk-ant-no-key-needed"
# Errors sent inside a stream (HTTP status already 200): their type says what happened.
_STREAM_ERRORS = {
    "overloaded_error": 529,
    "api_error": 500,
    "rate_limit_error": 429,
    "timeout_error": 504,
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
}


class AnthropicModel(ProviderModel):
    """A Claude model: ``AnthropicModel("claude-sonnet-4-5", thinking_budget=2048)``.

    Without ``client``, an ``AsyncAnthropic`` client is made from ``base_url``/``api_key``,
    falling back to ``ANTHROPIC_BASE_URL``/``ANTHROPIC_API_KEY`` (or ``ANTHROPIC_AUTH_TOKEN``); a
    custom base URL without a key gets a placeholder key (compatible local servers ignore it).
    It is owned by the model (``await model.aclose()`` or ``async with model``); a ``client`` you
    pass stays yours. ``max_tokens`` is required by the API; ``ModelSettings.max_tokens``
    overrides it per call. ``thinking_budget`` turns on extended thinking with that many tokens
    (left off for a request that continues a tool loop another provider started, see
    ``anthropic_request``). ``cache`` puts prompt-cache breakpoints on ``"system"``, ``"tools"``
    and/or ``"messages"`` of every request (``cache_ttl`` "5m" or "1h"); they are request
    options only and never reach a stored message. Tool-call ids outside Anthropic's pattern
    are mapped for the request and back (``wire.ToolIds``).
    """

    provider = _PROVIDER
    history_target = "anthropic"  # the rules ``request`` checks (``wire.validate``)

    def __init__(
        self,
        model: str,
        *,
        client: Any = None,
        base_url: str | None = None,
        api_key: str | None = None,
        max_tokens: int = 4096,
        thinking_budget: int | None = None,
        timeout: float | None = None,
        max_retries: int = 2,
        cache: Iterable[CacheTarget] = (),
        cache_ttl: Literal["5m", "1h"] | None = None,
    ) -> None:
        if not model:
            raise UserError("AnthropicModel needs a model name")
        self.cache = cache_targets(cache, cache_ttl)
        self.cache_ttl = cache_ttl
        if thinking_budget is not None and thinking_budget >= max_tokens:
            raise UserError(
                f"thinking_budget ({thinking_budget}) must be below max_tokens ({max_tokens})"
            )
        self.model = model
        self.name = f"anthropic:{model}"
        self.max_tokens = max_tokens
        self.thinking_budget = thinking_budget
        self._owns_client = client is None
        if client is None:
            anthropic = require("anthropic", "anthropic")
            base_url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
            api_key = api_key or os.environ.get("ANTHROPIC_API_KEY") or None
            options: dict[str, Any] = {"max_retries": max_retries}
            if api_key is None and not os.environ.get("ANTHROPIC_AUTH_TOKEN"):
                if base_url is None or _OFFICIAL_HOST in base_url:
                    raise UserError(
                        f"no API key for {self.name}: "
                        "set the ANTHROPIC_API_KEY environment variable"
                    )
                api_key = _PLACEHOLDER_KEY  # a compatible local server ignores it
            if api_key is not None:
                options["api_key"] = api_key
            if base_url is not None:
                options["base_url"] = base_url
            if timeout is not None:
                options["timeout"] = timeout
            client = anthropic.AsyncAnthropic(**options)
        self.client = client

    def __repr__(self) -> str:
        return f"AnthropicModel({self.model!r})"

    def request(
        self,
        messages: Sequence[Msg],
        *,
        system: str | None = None,
        tools: Sequence[ToolSpec] = (),
        settings: ModelSettings | None = None,
    ) -> dict[str, Any]:
        """The keyword arguments of the ``messages.create`` call ``stream`` makes.

        Raises ``HistoryError`` when the history breaks Anthropic's rules.
        """
        return self._request(messages, system, tools, settings)[0]

    def _request(
        self,
        messages: Sequence[Msg],
        system: str | None,
        tools: Sequence[ToolSpec],
        settings: ModelSettings | None,
    ) -> tuple[dict[str, Any], ToolIds]:
        check(messages, target="anthropic")
        ids = ToolIds("anthropic")
        hoisted, turns = to_anthropic(messages, tool_ids=ids)
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "messages": turns,
            "stream": True,
        }
        system_value = system_param(system, hoisted)
        if system_value:
            body["system"] = system_value
        if tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in tools
            ]
        if self.thinking_budget is not None and thinking_allowed(turns):
            body["thinking"] = {"type": "enabled", "budget_tokens": self.thinking_budget}
        if settings is not None:
            if settings.max_tokens is not None:
                body["max_tokens"] = settings.max_tokens
            if settings.stop:
                body["stop_sequences"] = list(settings.stop)
            # Sampling fields go as extra body: recent SDKs no longer take them as arguments
            # (and recent models refuse them), so they are sent only when asked for.
            extra = {
                k: v
                for k, v in (("temperature", settings.temperature), ("top_p", settings.top_p))
                if v is not None
            }
            extra.update(settings.extra)
            if extra:
                body["extra_body"] = extra
        mark_cache(body, self.cache, self.cache_ttl)
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
        anthropic = require("anthropic", "anthropic")
        request, ids = self._request(messages, system, tools, settings)
        convert = functools.partial(_convert, anthropic)
        async for event in self._events(
            self.client.messages.create(**request), _EventReader(ids), convert
        ):
            yield event


def _convert(anthropic: Any, exc: Exception) -> ModelError:
    """The ``ModelError`` for an exception raised by the SDK."""
    if isinstance(exc, ModelError):
        return exc
    if isinstance(exc, anthropic.APIStatusError):
        status, detail = exc.status_code, _detail(exc)
        if status < 400:  # an error event inside a 200 stream: its type tells the status
            status = _STREAM_ERRORS.get(_error_type(exc) or "")
            if status is None:
                return ModelError(f"{_PROVIDER} reported an error mid-stream: {detail}")
        retry_after = exc.response.headers.get("retry-after")
        return status_error(_PROVIDER, status, detail, retry_after=retry_after)
    if isinstance(exc, anthropic.APITimeoutError):
        return ModelError(f"{_PROVIDER} timed out: {exc}", retryable=True)
    if isinstance(exc, anthropic.APIConnectionError):
        cause = exc.__cause__ or exc
        return ModelError(f"cannot reach {_PROVIDER}: {cause}", retryable=True)
    if isinstance(exc, ValueError):  # the SDK's json.loads of an SSE data line
        return malformed(_PROVIDER, f"a stream event is not valid JSON ({exc})")
    return ModelError(f"{_PROVIDER} call failed: {type(exc).__name__}: {exc}")


def _error_type(exc: Any) -> str | None:
    body = getattr(exc, "body", None)
    error = body.get("error") if isinstance(body, dict) else None
    kind = error.get("type") if isinstance(error, dict) else None
    return kind if isinstance(kind, str) else None


def _detail(exc: Any) -> str:
    body = getattr(exc, "body", None)
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return f"{error.get('type', 'error')}: {error['message']}"
    return str(getattr(exc, "message", None) or exc)


class _EventReader:
    """Turns raw Messages API stream events into model events."""

    def __init__(self, ids: ToolIds) -> None:
        self.ids = ids  # the request's tool-id mapping: reply ids are mapped back through it
        self.blocks: dict[int, str] = {}  # content block index -> block type
        self.tools: dict[int, tuple[int, str]] = {}  # block index -> (tool ordinal, call id)
        self.usage: dict[str, int] = {}
        self.stop_reason: str | None = None
        self.started = False
        self.stopped = False

    def feed(self, event: Any) -> list[ModelEvent]:
        kind = getattr(event, "type", None)
        if kind == "message_start":
            self.started = True
            return self._usage(getattr(getattr(event, "message", None), "usage", None))
        if not self.started:
            raise malformed(_PROVIDER, f"{kind!r} event before message_start")
        if kind == "content_block_start":
            return self._start(event.index, event.content_block)
        if kind == "content_block_delta":
            return self._delta(event.index, event.delta)
        if kind == "content_block_stop":
            if event.index not in self.blocks:
                raise malformed(_PROVIDER, f"stop for unknown content block {event.index}")
            if event.index in self.tools:
                ordinal, call_id = self.tools[event.index]
                return [ToolCallEnd(ordinal, call_id)]
            return []
        if kind == "message_delta":
            self.stop_reason = getattr(event.delta, "stop_reason", None) or self.stop_reason
            return self._usage(getattr(event, "usage", None))
        if kind == "message_stop":
            self.stopped = True
        return []  # ping and event types added after this adapter was written

    def _start(self, index: int, block: Any) -> list[ModelEvent]:
        if index in self.blocks:
            raise malformed(_PROVIDER, f"content block {index} started twice")
        btype = getattr(block, "type", None)
        self.blocks[index] = str(btype)
        if btype == "text":
            return [TextDelta(block.text)] if getattr(block, "text", "") else []
        if btype == "thinking":
            return [ThinkingDelta(block.thinking)] if getattr(block, "thinking", "") else []
        if btype == "redacted_thinking":
            return [RedactedThinking(block.data)]
        if btype == "tool_use":
            ordinal = len(self.tools)
            call_id = self.ids.stored(block.id)
            self.tools[index] = (ordinal, call_id)
            start = ToolCallStart(ordinal, call_id, block.name, text_arguments=False)
            events: list[ModelEvent] = [start]
            initial = getattr(block, "input", None)
            if initial:  # normally {} with the input streamed as JSON deltas
                events.append(ToolCallDelta(ordinal, call_id, json.dumps(initial)))
            return events
        return []

    def _delta(self, index: int, delta: Any) -> list[ModelEvent]:
        btype = self.blocks.get(index)
        if btype is None:
            raise malformed(_PROVIDER, f"delta for unknown content block {index}")
        dtype = getattr(delta, "type", None)
        if dtype == "text_delta" and btype == "text":
            return [TextDelta(delta.text)] if delta.text else []
        if dtype == "thinking_delta" and btype == "thinking":
            return [ThinkingDelta(delta.thinking)] if delta.thinking else []
        if dtype == "signature_delta" and btype == "thinking":
            return [ThinkingSignature(delta.signature)]
        if dtype == "input_json_delta" and index in self.tools:
            ordinal, call_id = self.tools[index]
            text = delta.partial_json
            return [ToolCallDelta(ordinal, call_id, text)] if text else []
        if btype in ("text", "thinking", "tool_use") and dtype in (
            "text_delta",
            "thinking_delta",
            "signature_delta",
            "input_json_delta",
        ):
            raise malformed(_PROVIDER, f"a {dtype} inside a {btype} block")
        return []  # citations and deltas of block types this adapter skips

    def _usage(self, usage: Any) -> list[ModelEvent]:
        if usage is None:
            return []
        for field in (
            "input_tokens",
            "output_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
        ):
            value = getattr(usage, field, None)
            if value is not None:  # message_delta counts are cumulative
                self.usage[field] = checks.count("usage", field, value)  # else malformed
        u = self.usage
        cache_read = u.get("cache_read_input_tokens", 0)
        cache_write = u.get("cache_creation_input_tokens", 0)
        return [
            UsageReport(
                Usage(
                    input_tokens=u.get("input_tokens", 0) + cache_read + cache_write,
                    output_tokens=u.get("output_tokens", 0),
                    cache_read_tokens=cache_read,
                    cache_write_tokens=cache_write,
                )
            )
        ]

    def finish(self) -> str:
        """Check that the stream ended properly; the stop reason."""
        if not self.started:
            raise malformed(_PROVIDER, "the stream has no message_start event")
        if not self.stopped:
            raise malformed(
                _PROVIDER, "the stream ended before message_stop (cut off?)", retryable=True
            )
        return self.stop_reason or "end_turn"
