"""The formats ``agentledger export --format`` writes besides the lossless JSONL export.

``openai`` and ``anthropic`` are the request bodies those APIs take (through
``agentledger.wire``); ``import`` reads the OpenAI one back. ``markdown`` is for people: a
readable transcript, tool calls and results included. Only JSONL keeps everything (ids,
metadata, usage, history); the others are views of the current context.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from enum import StrEnum

from agentledger.messages import (
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)

__all__ = ["Format", "render"]


class Format(StrEnum):
    jsonl = "jsonl"
    openai = "openai"
    anthropic = "anthropic"
    markdown = "markdown"


def _fenced(body: str, lang: str = "") -> str:
    """``body`` in a code fence longer than any run of backticks inside it."""
    runs = re.findall(r"`+", body)
    fence = "`" * max(3, 1 + max(map(len, runs), default=0))
    return f"{fence}{lang}\n{body}\n{fence}"


def _markdown_block(block: object) -> str:
    if isinstance(block, TextBlock):
        return block.text
    if isinstance(block, ThinkingBlock):
        return "\n".join(f"> {line}" for line in (block.thinking or "(redacted)").splitlines())
    if isinstance(block, ToolUseBlock):
        arguments = json.dumps(dict(block.input), ensure_ascii=False, indent=2, default=str)
        return f"**call** `{block.name}` (`{block.id}`)\n\n{_fenced(arguments, 'json')}"
    if isinstance(block, ToolResultBlock):
        error = " (error)" if block.is_error else ""
        body = "\n".join(_markdown_block(b) for b in block.output)
        return f"**result**{error} of `{block.id}`\n\n{_fenced(body)}"
    media_type = getattr(block, "media_type", "")
    where = getattr(block, "url", None) or f"{len(getattr(block, 'data', b'') or b'')} bytes"
    return f"*[{type(block).__name__.removesuffix('Block').lower()} {media_type}, {where}]*"


def markdown(session: str, version: int, msgs: Sequence[Msg]) -> str:
    """A readable transcript of ``msgs``."""
    parts = [f"# {session}", f"version {version}, {len(msgs)} messages"]
    for msg in msgs:
        name = f" ({msg.name})" if msg.name else ""
        parts.append(f"## {msg.role}{name}")
        parts.extend(_markdown_block(b) for b in msg.content)
    return "\n\n".join(parts) + "\n"


def render(fmt: Format, session: str, version: int, msgs: Sequence[Msg]) -> str:
    """``msgs`` in ``fmt`` (not ``jsonl``, which the ledger writes itself)."""
    if fmt is Format.openai:
        from agentledger.wire import to_openai

        return json.dumps(to_openai(msgs), ensure_ascii=False, indent=2) + "\n"
    if fmt is Format.anthropic:
        from agentledger.wire import to_anthropic

        system, messages = to_anthropic(msgs)
        body = {"system": system, "messages": messages}
        return json.dumps(body, ensure_ascii=False, indent=2, default=str) + "\n"
    return markdown(session, version, msgs)
