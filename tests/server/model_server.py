"""A scripted OpenAI-compatible model server for the server tests (and the JS client test).

The agent under test talks to it with the real ``openai`` provider, so every request body the
model received is recorded (``server.requests``) and can be asserted: which messages it saw,
how often each user message appears. Replies follow rules on the last message of the request,
so concurrent and repeated runs stay deterministic:

- a tool result → ``done: <result text>``;
- ``call <tool> [arg]`` → a call of ``<tool>`` with ``{"value": arg}``;
- ``think <text>`` → reasoning ``hmm`` then the answer ``<text>``;
- ``slow <n>`` → ``n`` words streamed 50 ms apart (``n`` defaults to 40);
- ``fail`` → HTTP 500 (the provider's retries are turned off in these tests);
- ``break`` → a little text, then the stream ends mid-answer with garbage;
- anything else → ``echo: <text>``.

``server.rules`` may be replaced by a function ``(body) -> list[bytes] | int`` for one test.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.agent.fake_servers import chunk, tool_delta


def _sse(chunks: list[dict[str, Any]], done: bool = True) -> list[bytes]:
    lines = [f"data: {json.dumps(c)}\n\n".encode() for c in chunks]
    return lines + ([b"data: [DONE]\n\n"] if done else [])


def text_reply(text: str) -> list[bytes]:
    return _sse(
        [
            chunk({"role": "assistant", "content": ""}),
            chunk({"content": text}),
            chunk(finish="stop"),
        ]
    )


def last_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def default_rules(body: dict[str, Any]) -> list[bytes] | int:
    last = body["messages"][-1]
    text = last_text(last)
    if last["role"] == "tool":
        return text_reply(f"done: {text}")
    word, _, rest = text.partition(" ")
    if word == "call":
        name, _, arg = rest.partition(" ")
        args = json.dumps({"value": arg})
        return _sse(
            [
                chunk({"role": "assistant"}),
                tool_delta(0, "", id=f"call_{arg or name}", name=name),
                tool_delta(0, args),
                chunk(finish="tool_calls"),
            ]
        )
    if word == "think":
        return _sse(
            [
                chunk({"role": "assistant", "reasoning_content": "hmm"}),
                chunk({"content": rest}),
                chunk(finish="stop"),
            ]
        )
    if word == "slow":
        n = int(rest) if rest.isdigit() else 40
        return [
            b"SLOW",
            *_sse([chunk({"content": f"w{i} "}) for i in range(n)] + [chunk(finish="stop")]),
        ]
    if word == "fail":
        return 500
    if word == "break":
        return [*_sse([chunk({"content": "partial "})], done=False), b"data: {not json\n\n"]
    return text_reply(f"echo: {text}")


class ModelServer:
    """See the module docstring. Use as a context manager; ``url`` is the OpenAI base URL."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.rules: Callable[[dict[str, Any]], list[bytes] | int] = default_rules
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
                with server._lock:
                    server.requests.append(body)
                reply = server.rules(body)
                try:
                    if isinstance(reply, int):
                        payload = json.dumps({"error": {"message": "scripted failure"}}).encode()
                        self.send_response(reply)
                        self.send_header("content-type", "application/json")
                        self.send_header("content-length", str(len(payload)))
                        self.end_headers()
                        self.wfile.write(payload)
                        return
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.end_headers()
                    slow = reply[:1] == [b"SLOW"]
                    for part in reply[1:] if slow else reply:
                        self.wfile.write(part)
                        self.wfile.flush()
                        if slow:
                            time.sleep(0.05)
                except OSError:  # the agent went away (an abort): nothing to answer
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
        return f"http://{host}:{port}/v1"

    def user_texts(self) -> list[list[str]]:
        """For each request, the text of every user message the model saw."""
        return [
            [last_text(m) for m in body["messages"] if m["role"] == "user"]
            for body in self.requests
        ]

    def __enter__(self) -> ModelServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
