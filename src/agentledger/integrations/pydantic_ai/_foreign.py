"""Skeletons for messages this adapter did not write, so any session loads into pydantic-ai.

A ``Msg`` written by agentledger's own agent, a wire converter or a caller has no
``_pydantic_ai`` metadata. Its blocks are read as the parts they plainly are: system text as
system prompts, user text and media as one user prompt, tool results as tool returns, assistant
text, thinking, tool calls and media as the response's parts. A block that no pydantic-ai part of
that role can hold is refused with ``CodecError`` rather than dropped.
"""

from __future__ import annotations

from typing import Any

from agentledger.errors import CodecError
from agentledger.integrations.pydantic_ai._parts import MEDIA_BLOCKS, URL_KINDS
from agentledger.messages import (
    Block,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from agentledger.wire.private import RAW_ARGUMENTS_KEY

__all__ = ["foreign_skeleton"]

_URL_KIND_OF = {cls: kind for kind, cls in URL_KINDS.items()}


def foreign_skeleton(msg: Msg) -> dict[str, Any]:
    """What ``convert`` would have kept for ``msg``: one message, its parts read off its blocks."""
    timestamp = msg.created_at.isoformat() if msg.created_at is not None else None
    if msg.role == "assistant":
        message: dict[str, Any] = {"kind": "response", "timestamp": timestamp}
        if msg.usage is not None:
            message["usage"] = {}  # every count is filled from the Usage
        parts = [_response_part(msg, block) for block in msg.content]
    else:
        message = {"kind": "request", "timestamp": timestamp}
        parts = _request_parts(msg, timestamp)
    return {"message": message, "parts": parts}


def _request_parts(msg: Msg, timestamp: str | None) -> list[dict[str, Any]]:
    stamp = {"timestamp": timestamp} if timestamp is not None else {}
    if msg.role == "tool":
        return [_tool_return(msg, block, stamp) for block in msg.content]
    if msg.role == "system":
        return [_text_part(msg, block, "system-prompt", stamp) for block in msg.content]
    if len(msg.content) == 1 and isinstance(msg.content[0], TextBlock):
        return [_text_part(msg, msg.content[0], "user-prompt", stamp)]
    fields = {"part_kind": "user-prompt", "content": None, **stamp}
    items = [_item(msg, block) for block in msg.content]
    return [{"fields": fields, "fill": "items", "items": items, "native": ["content"]}]


def _text_part(msg: Msg, block: Block, kind: str, stamp: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(block, TextBlock):
        _refuse(msg, block)
    return {
        "fields": {"part_kind": kind, "content": None, **stamp},
        "fill": "text",
        "native": ["content"],
    }


def _tool_return(msg: Msg, block: Block, stamp: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(block, ToolResultBlock):
        _refuse(msg, block)
    fields = {
        "part_kind": "tool-return",
        "tool_name": None,
        "tool_call_id": None,
        "content": None,
        "outcome": "failed" if block.is_error else "success",
        **stamp,
    }
    skeleton: dict[str, Any] = {
        "fields": fields,
        "fill": "tool_return",
        "native": ["tool_name", "tool_call_id", "content"],
    }
    if len(block.output) == 1 and isinstance(block.output[0], TextBlock):
        skeleton["content"] = "text"
    else:
        skeleton["content"] = "items"
        skeleton["items"] = [_item(msg, b) for b in block.output]
    return skeleton


def _response_part(msg: Msg, block: Block) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {
            "fields": {"part_kind": "text", "content": None},
            "fill": "text",
            "native": ["content"],
        }
    if isinstance(block, ThinkingBlock):
        fields = {"part_kind": "thinking", "content": None, "signature": None}
        if block.signature is not None:  # Anthropic's, the only kind a ThinkingBlock holds
            fields["provider_name"] = "anthropic"
        return {"fields": fields, "fill": "thinking", "native": ["content", "signature"]}
    if isinstance(block, ToolUseBlock):
        raw = len(block.input) == 1 and isinstance(block.input.get(RAW_ARGUMENTS_KEY), str)
        fields = {"part_kind": "tool-call", "tool_name": None, "args": None, "tool_call_id": None}
        return {
            "fields": fields,
            "fill": "tool_call",
            "args": "raw" if raw else "object",
            "native": ["tool_name", "args", "tool_call_id"],
        }
    if isinstance(block, MEDIA_BLOCKS) and block.data is not None:
        fields = {"part_kind": "file", "content": None}
        return {"fields": fields, "fill": "file", "item": _item(msg, block), "native": ["content"]}
    _refuse(msg, block)
    raise AssertionError("unreachable")


def _item(msg: Msg, block: Block) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"str": True}
    if isinstance(block, MEDIA_BLOCKS):
        if block.data is not None:
            media = {"data": None, "media_type": None, "kind": "binary"}
            return {"media": media, "native": ["data", "media_type"]}
        kind = _URL_KIND_OF[type(block)]
        return {
            "media": {"url": None, "kind": kind, "media_type": None},
            "native": ["url", "media_type"],
        }
    _refuse(msg, block)
    raise AssertionError("unreachable")


def _refuse(msg: Msg, block: Block) -> None:
    raise CodecError(
        f"message {msg.id!r} ({msg.role}) holds a {type(block).__name__}, which no pydantic-ai "
        "part of that role can hold"
    )
