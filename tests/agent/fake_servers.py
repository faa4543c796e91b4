"""A local HTTP server that answers like OpenAI and Anthropic, for adapter tests without a network.

``FakeServer`` runs a stdlib ``ThreadingHTTPServer`` on 127.0.0.1 (random port) in a background
thread. Tests queue replies (``server.reply(...)``) and read back what the client sent
(``server.requests``: path, headers and parsed JSON body). Each connection is closed after one
reply (HTTP/1.0), so stopping the server never waits on an idle keep-alive connection.

Reply builders: ``openai_sse(chunks)`` and ``anthropic_sse(events)`` (recorded-style streams),
``json_error(status, ...)`` for error bodies, ``raw(status, body)`` for garbage. The chunk and
event helpers below write the shapes the real APIs send.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds to wait before answering (timeout tests)


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class FakeServer:
    """See the module docstring. Use as a context manager."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self._replies: deque[Reply] = deque()
        self._stopping = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw_body = self.rfile.read(length)
                try:
                    body: Any = json.loads(raw_body)
                except ValueError:
                    body = raw_body
                server.requests.append(
                    Request(
                        "POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body
                    )
                )
                reply = server._replies.popleft() if server._replies else _no_reply()
                if reply.delay and server._stopping.wait(reply.delay):
                    return
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", reply.content_type)
                    self.send_header("content-length", str(len(reply.body)))
                    self.send_header("connection", "close")
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(reply.body)
                except OSError:  # the client gave up (timeout tests)
                    pass

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def reply(self, *replies: Reply) -> None:
        self._replies.extend(replies)

    def __enter__(self) -> FakeServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def _no_reply() -> Reply:
    return json_error(500, "the test queued no reply for this request")


# -- reply builders ---------------------------------------------------------------------------
def openai_sse(chunks: list[dict[str, Any]], *, done: bool = True) -> Reply:
    lines = [f"data: {json.dumps(c)}\n\n" for c in chunks]
    if done:
        lines.append("data: [DONE]\n\n")
    return Reply(body="".join(lines).encode(), content_type="text/event-stream")


def anthropic_sse(events: list[dict[str, Any]]) -> Reply:
    lines = [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events]
    return Reply(body="".join(lines).encode(), content_type="text/event-stream")


def json_error(
    status: int, message: str, *, kind: str = "api_error", headers: dict[str, str] | None = None
) -> Reply:
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return Reply(status=status, body=json.dumps(body).encode(), headers=headers or {})


def raw(status: int, body: str, content_type: str = "text/event-stream") -> Reply:
    return Reply(status=status, body=body.encode(), content_type=content_type)


#: Token counts a provider might send that are not counts, with what the refusal says of each.
NOT_COUNTS = [
    (1.5, "an int, got float"),
    (-1, "from 0 to"),
    (2**70, "from 0 to"),
    ([1], "an int, got list"),
]


# -- OpenAI chunk shapes ----------------------------------------------------------------------
def chunk(delta: dict[str, Any] | None = None, finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "test-model",
        "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}],
    }


def usage_chunk(prompt: int, completion: int, cached: int = 0, reasoning: int = 0) -> dict:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "test-model",
        "choices": [],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
            "completion_tokens_details": {"reasoning_tokens": reasoning},
        },
    }


def tool_delta(
    index: int, arguments: str, *, id: str | None = None, name: str | None = None
) -> dict[str, Any]:
    call: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if id is not None:
        call["id"] = id
        call["type"] = "function"
    if name is not None:
        call["function"]["name"] = name
    return chunk({"tool_calls": [call]})


# -- Anthropic event shapes -------------------------------------------------------------------
def message_start(input_tokens: int = 10, **usage: int) -> dict[str, Any]:
    return {
        "type": "message_start",
        "message": {
            "id": "msg_test",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": 1, **usage},
        },
    }


def block_start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def block_delta(index: int, delta: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": delta}


def block_stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def message_delta(stop_reason: str, output_tokens: int) -> dict[str, Any]:
    return {
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": None},
        "usage": {"output_tokens": output_tokens},
    }


def message_stop() -> dict[str, Any]:
    return {"type": "message_stop"}
