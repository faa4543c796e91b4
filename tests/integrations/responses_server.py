"""Replies of a scripted Responses-API server, for driving the real OpenAI clients offline.

Use with ``tests.agent.fake_servers.FakeServer`` (point ``AsyncOpenAI(base_url=server.url)`` at
it): ``response(output)`` answers ``POST /responses`` like the API does without streaming,
``response_stream(output)`` with the server-sent events of a streamed one. Bodies are built
through the openai SDK's own ``Response`` model, so a shape the SDK would not parse fails here.
"""

from __future__ import annotations

import json
from typing import Any

from openai.types.responses import Response

from tests.agent.fake_servers import Reply

__all__ = ["call", "message", "reasoning", "response", "response_stream"]


def _body(output: list[dict[str, Any]], response_id: str) -> dict[str, Any]:
    body = {
        "id": response_id,
        "object": "response",
        "created_at": 1_700_000_000,
        "model": "scripted",
        "status": "completed",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 2},
            "total_tokens": 15,
        },
    }
    out: dict[str, Any] = Response.model_validate(body).model_dump(mode="json", exclude_unset=True)
    return out


def response(output: list[dict[str, Any]], response_id: str = "resp_1") -> Reply:
    """A non-streamed reply whose output is ``output`` (items as the API writes them)."""
    return Reply(body=json.dumps(_body(output, response_id)).encode())


def response_stream(output: list[dict[str, Any]], response_id: str = "resp_1") -> Reply:
    """The same reply streamed: created, each item added and done, completed."""
    body = _body(output, response_id)
    created = {**body, "status": "in_progress", "output": []}
    events: list[dict[str, Any]] = [{"type": "response.created", "response": created}]
    for index, item in enumerate(body["output"]):
        events.append({"type": "response.output_item.added", "output_index": index, "item": item})
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append({"type": "response.completed", "response": body})
    lines = [
        f"event: {e['type']}\ndata: {json.dumps({**e, 'sequence_number': n})}\n\n"
        for n, e in enumerate(events)
    ]
    return Reply(body="".join(lines).encode(), content_type="text/event-stream")


def message(item_id: str, text: str) -> dict[str, Any]:
    """An assistant output message with one ``output_text`` part."""
    part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
    return {"id": item_id, "type": "message", "role": "assistant", "status": "completed",
            "content": [part]}  # fmt: skip


def call(item_id: str, call_id: str, name: str, arguments: str) -> dict[str, Any]:
    """A ``function_call`` output item."""
    return {"id": item_id, "type": "function_call", "call_id": call_id, "name": name,
            "arguments": arguments, "status": "completed"}  # fmt: skip


def reasoning(item_id: str, summary: str, encrypted: str) -> dict[str, Any]:
    """A ``reasoning`` output item with a summary and encrypted content."""
    return {"id": item_id, "type": "reasoning", "encrypted_content": encrypted,
            "summary": [{"type": "summary_text", "text": summary}]}  # fmt: skip
