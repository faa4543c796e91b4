"""Shaping one Anthropic Messages request: system prompt, thinking, prompt-cache marks.

These are request options, decided per call from the converted history; none of them is ever
written into a stored message.

- Thinking across a provider switch. With extended thinking on, Anthropic requires the last
  assistant turn of an unfinished tool loop (the history ends with tool results) to start with
  a thinking block it signed. A turn another provider wrote (an OpenAI-compatible model started
  the loop, then the conversation moved to Claude) has none, and the request would be refused.
  Anthropic documents that thinking cannot be toggled inside a tool loop, so such a request is
  sent *without* thinking; the next user turn starts a new loop with thinking on again. This is
  logged at INFO.
- Prompt caching. ``cache`` names where a ``cache_control`` breakpoint goes: ``"system"`` (the
  last system block), ``"tools"`` (the last tool) and ``"messages"`` (the last cacheable block
  of the last turn), each ``{"type": "ephemeral"}`` with an optional ``ttl`` ("5m" or "1h").
  Thinking blocks cannot carry one, so the mark goes on the last other block of that turn.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, Literal

from agentledger.errors import UserError

__all__ = [
    "CACHE_TARGETS",
    "CacheTarget",
    "cache_targets",
    "mark_cache",
    "system_param",
    "thinking_allowed",
]

logger = logging.getLogger("agentledger.agent")

CacheTarget = Literal["system", "tools", "messages"]
CACHE_TARGETS = ("system", "tools", "messages")
_THINKING = ("thinking", "redacted_thinking")


def cache_targets(cache: Iterable[str], ttl: str | None) -> tuple[CacheTarget, ...]:
    """``cache`` checked (``UserError`` naming a bad value), in a stable order."""
    if isinstance(cache, str):
        cache = (cache,)
    wanted = set(cache)
    unknown = wanted - set(CACHE_TARGETS)
    if unknown:
        raise UserError(f"cache targets must be among {CACHE_TARGETS}, got {sorted(unknown)}")
    if ttl not in (None, "5m", "1h"):
        raise UserError(f'cache_ttl must be "5m" or "1h", got {ttl!r}')
    return tuple(t for t in CACHE_TARGETS if t in wanted)  # type: ignore[misc]


def system_param(system: str | None, hoisted: str | list[dict[str, Any]] | None) -> Any:
    """The ``system`` parameter: the caller's prompt, then the history's system messages."""
    if not hoisted:
        return system or None
    if not system:
        return hoisted
    rest = [{"type": "text", "text": hoisted}] if isinstance(hoisted, str) else hoisted
    return [{"type": "text", "text": system}, *rest]


def thinking_allowed(turns: list[dict[str, Any]]) -> bool:
    """Whether a request over ``turns`` may enable thinking (see the module docstring)."""
    if not turns or turns[-1]["role"] != "user":
        return True
    if not any(b["type"] == "tool_result" for b in turns[-1]["content"]):
        return True
    last_assistant = next((t for t in reversed(turns) if t["role"] == "assistant"), None)
    if last_assistant is None or last_assistant["content"][0]["type"] in _THINKING:
        return True
    logger.info(
        "thinking left off for this request: the tool loop it continues was started without "
        "an Anthropic thinking block (another provider's turn)"
    )
    return False


def mark_cache(body: dict[str, Any], targets: Iterable[CacheTarget], ttl: str | None) -> None:
    """Put ``cache_control`` breakpoints into a request ``body`` (changed in place)."""
    mark: dict[str, Any] = {"type": "ephemeral"}
    if ttl:
        mark["ttl"] = ttl
    for target in targets:
        if target == "system" and body.get("system"):
            system = body["system"]
            if isinstance(system, str):
                system = body["system"] = [{"type": "text", "text": system}]
            system[-1] = {**system[-1], "cache_control": dict(mark)}
        elif target == "tools" and body.get("tools"):
            body["tools"][-1] = {**body["tools"][-1], "cache_control": dict(mark)}
        elif target == "messages" and body.get("messages"):
            content = body["messages"][-1]["content"]
            for i in range(len(content) - 1, -1, -1):
                if content[i]["type"] not in _THINKING:
                    content[i] = {**content[i], "cache_control": dict(mark)}
                    break
