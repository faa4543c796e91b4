"""Fixtures for the server tests: the scripted model server, an app on it, a client that checks
every frame and every event it receives."""

from __future__ import annotations

import json
import re
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from agentledger.agent.providers.openai import OpenAIChatModel
from agentledger.agent.react import ReActAgent
from agentledger.server import create_app
from agentledger.store.aio import AsyncLedger
from tests.server.model_server import ModelServer

core = pytest.importorskip("ag_ui.core")
from pydantic import BaseModel, TypeAdapter  # noqa: E402

_events = TypeAdapter(core.Event)
_FRAME = re.compile(r"data: (\{.*\})\n\n")


@pytest.fixture
def model() -> Iterator[ModelServer]:
    with ModelServer() as server:
        yield server


@pytest.fixture
def ledger() -> AsyncLedger:
    return AsyncLedger("memory://")


def make_app(model: ModelServer, ledger: AsyncLedger, **kw: Any) -> Any:
    tools = kw.pop("tools", ())
    lease_wait = kw.pop("lease_wait", 0.0)
    llm = OpenAIChatModel("test-model", base_url=model.url, api_key="test", max_retries=0)
    agent = ReActAgent(llm, tools, store=ledger, lease_wait=lease_wait)
    return create_app(agent, **kw)


@pytest.fixture
def app(model: ModelServer, ledger: AsyncLedger) -> Any:
    return make_app(model, ledger)


@pytest.fixture
async def client(app: Any) -> Any:
    async with client_for(app) as c:
        yield c


def parse_frames(body: str) -> list[dict[str, Any]]:
    """The events of an SSE body, checking the framing and each event against ag_ui.core:
    ``data: <json>\\n\\n`` only, LF only, camelCase as the models write it, no null."""
    assert "\r" not in body
    frames = body.split("\n\n")
    assert frames[-1] == "", "the body must end with a complete frame"
    events = []
    for raw in frames[:-1]:
        match = _FRAME.fullmatch(raw + "\n\n")
        assert match, f"not a data frame: {raw!r}"
        event = json.loads(match.group(1))
        model = _events.validate_python(event)
        assert model.model_dump(by_alias=True, mode="json") == event
        assert not _nulls(model), (_nulls(model), raw)
        events.append(event)
    check_order(events)
    return events


_STATE = frozenset(("snapshot", "delta"))  # STATE_SNAPSHOT's and STATE_DELTA's JSON


def _nulls(value: Any, path: str = "") -> list[str]:
    """Where a protocol field of ``value`` (a parsed ``ag_ui.core`` model) was written as
    ``null``. The application's own JSON (state, message metadata, activity content, unknown
    fields a client sent) is not walked: ``null`` is a value there."""
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _nulls(v, f"{path}[{i}]")]
    if not isinstance(value, BaseModel):
        return []
    found = []
    for name in type(value).model_fields:
        field_value = getattr(value, name)
        if field_value is None and name in value.model_fields_set and name not in _STATE:
            found.append(f"{path}.{name}")
        found += _nulls(field_value, f"{path}.{name}")
    return found


def check_order(events: list[dict[str, Any]]) -> None:
    """RUN_STARTED first, every START ended, snapshots then RUN_FINISHED or RUN_ERROR last."""
    types = [e["type"] for e in events]
    assert types[0] == "RUN_STARTED"
    assert events[0]["protocolVersion"] == "1.0"
    assert types[-1] in ("RUN_FINISHED", "RUN_ERROR")
    assert types.count("RUN_STARTED") == 1 and types.count(types[-1]) == 1
    open_: dict[str, set[str]] = {
        "TEXT_MESSAGE": set(),
        "REASONING_MESSAGE": set(),
        "TOOL_CALL": set(),
    }
    for e in events:
        kind, _, step = e["type"].rpartition("_")
        if kind not in open_:
            continue
        key = e.get("messageId") or e.get("toolCallId")
        if step == "START":
            assert key not in open_[kind], e
            open_[kind].add(key)
            if kind == "TOOL_CALL":
                assert e.get("parentMessageId"), e
        elif step in ("CONTENT", "ARGS"):
            assert key in open_[kind], e
        elif step == "END":
            assert key in open_[kind], e
            open_[kind].remove(key)
    assert all(not keys for keys in open_.values()), open_
    if "MESSAGES_SNAPSHOT" in types:
        assert types[-3:-1] == ["STATE_SNAPSHOT", "MESSAGES_SNAPSHOT"]


async def run(
    client: Any, thread: str, messages: list[dict[str, Any]], **fields: Any
) -> list[dict[str, Any]]:
    """POST one run and return its checked events (raises on an HTTP error)."""
    headers = fields.pop("headers", None)
    body = {"threadId": thread, "runId": fields.pop("runId", "run"), "messages": messages}
    response = await client.post("/", json={**body, **fields}, headers=headers)
    assert response.status_code == 200, response.text
    return parse_frames(response.text)


def snapshot(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    (snap,) = [e for e in events if e["type"] == "MESSAGES_SNAPSHOT"]
    return snap["messages"]


def user(id: str, text: str) -> dict[str, Any]:
    return {"id": id, "role": "user", "content": text}


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """``app`` on a real uvicorn server on 127.0.0.1 (for disconnects); yields its URL."""
    import uvicorn

    sock = socket.socket()
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # inherited: no 40 ms stalls
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        threading.Event().wait(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def client_for(app: Any) -> httpx.AsyncClient:
    """An async client on ``app`` (use as ``async with``)."""
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://agui.test")
