"""Wire dicts of every shape each format holds, for the properties that walk each one's damages
(``every_damage``)."""

from __future__ import annotations

from typing import Any

#: One Responses item of each shape the Agents SDK stores, with the nested parts each holds.
ITEM_SHAPES: list[dict[str, Any]] = [
    {"role": "user", "content": "hi"},
    {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "look"},
            {"type": "input_image", "image_url": "https://x.test/a.png", "detail": "low"},
        ],
    },
    {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [
            {
                "type": "output_text",
                "text": "see",
                "annotations": [{"type": "url_citation", "url": "https://x.test", "title": "t"}],
            },
            {"type": "refusal", "refusal": "no"},
        ],
    },
    {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "f", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c1", "output": "done"},
    {
        "type": "function_call_output",
        "call_id": "c1",
        "output": [{"type": "input_file", "file_id": "file_1"}],
    },
    {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "s"}],
        "content": [{"type": "reasoning_text", "text": "r"}],
        "encrypted_content": "gAAAAB==",
    },
    {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search"}},
    {"type": "item_reference", "id": "msg_0"},
]

#: One chat-completions message of each role, with every kind of content part.
CHAT_SHAPES: list[dict[str, Any]] = [
    {"role": "system", "content": "be brief"},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": "https://x.test/a.png", "detail": "low"}},
            {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
            {"type": "file", "file": {"file_id": "file_1"}},
        ],
    },
    {
        "role": "assistant",
        "content": None,
        "reasoning_content": "hmm",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "done"},
    {"role": "assistant", "content": "ok", "refusal": None, "name": "bot"},
]

#: One AG-UI message of each role, with every kind of content part (a legacy ``binary`` one
#: too), as a client sends them.
AGUI_SHAPES: list[dict[str, Any]] = [
    {"id": "u1", "role": "user", "content": "hi"},
    {
        "id": "u2",
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {
                "type": "image",
                "source": {"type": "data", "value": "iVBORw0KGgo=", "mimeType": "image/png"},
            },
            {"type": "document", "source": {"type": "url", "value": "https://x.test/a.pdf"}},
            {"type": "binary", "mimeType": "image/png", "data": "iVBORw0KGgo="},
        ],
    },
    {
        "id": "a1",
        "role": "assistant",
        "content": "ok",
        "toolCalls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    },
    {"id": "t1", "role": "tool", "toolCallId": "c1", "content": "done", "error": "boom"},
    {"id": "s1", "role": "system", "content": "be brief"},
    {"id": "d1", "role": "developer", "content": "dev"},
    {"id": "r1", "role": "reasoning", "content": "think", "encryptedValue": "e=="},
]

#: One Anthropic Messages-API turn of each role, with every kind of content block.
ANTHROPIC_SHAPES: list[dict[str, Any]] = [
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
            },
            {"type": "document", "source": {"type": "url", "url": "https://x.test/a.pdf"}},
        ],
    },
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "t", "signature": "sig"},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "text", "text": "x"},
            {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"q": 1}},
        ],
    },
    {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_1",
                "content": [{"type": "text", "text": "r"}],
                "is_error": False,
            }
        ],
    },
    {"role": "user", "content": "plain"},
]
