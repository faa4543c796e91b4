"""Three turns with the full history resent every turn (as AG-UI clients do), against
agentledger's server and pydantic-ai's ``AGUIAdapter``, each with an instant in-process model
and driven in-process (``httpx.ASGITransport``): what is stored after three turns, duplicates,
what the model saw, and the latency of a run. Prints one JSON line per setup.

    python -m tests.server.resend_compare agentledger
    <peers venv>/bin/python tests/server/resend_compare.py pydantic-ai

(the second needs ``pydantic-ai-slim[ag-ui]``, e.g. 2.68.0, in that interpreter).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from typing import Any

import httpx

CONVERSATIONS = 20


def events_of(body: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: ")]


def history_after(history: list[dict[str, Any]], events: list[dict[str, Any]]) -> list[dict]:
    """What a client holds after a run: the snapshot if sent, else the streamed answer added."""
    snap = [e for e in events if e["type"] == "MESSAGES_SNAPSHOT"]
    if snap:
        return list(snap[-1]["messages"])
    answers: dict[str, dict[str, Any]] = {}
    for e in events:
        if e["type"] == "TEXT_MESSAGE_START":
            answers[e["messageId"]] = {"id": e["messageId"], "role": "assistant", "content": ""}
        elif e["type"] == "TEXT_MESSAGE_CONTENT":
            answers[e["messageId"]]["content"] += e["delta"]
    return [*history, *answers.values()]


async def drive(app: Any, seen: list[int]) -> dict[str, Any]:
    latencies: list[float] = []
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://x", timeout=60) as client:
        for c in range(CONVERSATIONS):
            history: list[dict[str, Any]] = []
            for n in range(3):
                history.append({"id": f"c{c}-u{n}", "role": "user", "content": f"turn {n}"})
                body = {"threadId": f"thread-{c}", "runId": f"r{n}", "messages": history,
                        "state": {}, "tools": [], "context": [], "forwardedProps": {}}  # fmt: skip
                began = time.perf_counter()
                response = await client.post("/", json=body)
                latencies.append(time.perf_counter() - began)
                assert response.status_code == 200, response.text
                history = history_after(history, events_of(response.text))
    return {
        "p50 ms": round(statistics.median(latencies) * 1000, 2),
        "model saw user messages on turn 3": seen[-1],
    }


def agentledger(store: str) -> dict[str, Any]:
    from agentledger import Msg
    from agentledger.server import create_app
    from agentledger.testing import ScriptedModel

    seen: list[int] = []

    def answer(messages: list[Msg], tools: Any) -> str:
        seen.append(sum(m.role == "user" for m in messages))
        return "ok"

    app = create_app(model=ScriptedModel([answer] * (CONVERSATIONS * 3 + 5)), store=store)
    result = asyncio.run(drive(app, seen))
    ledger = app.state.agent.ledger.sync
    stored = ledger.messages("thread-0")
    texts = [m.text for m in stored if m.role == "user"]
    return {"system": f"agentledger {store.partition(':')[0]}", **result,
            "stored after 3 turns": len(stored),
            "duplicated user messages": len(texts) - len(set(texts))}  # fmt: skip


def pydantic_ai(mode: str) -> dict[str, Any]:
    from pydantic_ai import Agent
    from pydantic_ai.conversation_store import InMemoryConversationStore
    from pydantic_ai.messages import ModelResponse, TextPart, UserPromptPart
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.ui.ag_ui import AGUIAdapter
    from starlette.applications import Starlette
    from starlette.routing import Route

    seen: list[int] = []

    def answer(messages: list[Any], info: Any) -> ModelResponse:
        prompts = [p for m in messages for p in m.parts if isinstance(p, UserPromptPart)]
        seen.append(len(prompts))
        return ModelResponse(parts=[TextPart("ok")])

    async def stream(messages: list[Any], info: Any) -> Any:
        answer(messages, info)
        yield "ok"

    agent = Agent(FunctionModel(answer, stream_function=stream))
    store = InMemoryConversationStore()

    async def endpoint(request: Any) -> Any:
        kw = {"conversation_store": store} if mode == "server" else {}
        return await AGUIAdapter.dispatch_request(
            request, agent=agent, manage_message_history=mode, **kw
        )

    app = Starlette(routes=[Route("/", endpoint, methods=["POST"])])
    result = asyncio.run(drive(app, seen))
    stored: list[Any] = []
    if mode == "server":
        conversation = asyncio.run(store.load("thread-0"))
        stored = conversation.messages if conversation else []
    prompts = [p.content for m in stored for p in m.parts if isinstance(p, UserPromptPart)]
    return {"system": f"pydantic-ai AGUIAdapter, history managed by the {mode}", **result,
            "stored after 3 turns": len(stored),
            "duplicated user messages": len(prompts) - len(set(map(str, prompts)))}  # fmt: skip


def main() -> None:
    which = sys.argv[1] if len(sys.argv) > 1 else "agentledger"
    if which == "agentledger":
        with tempfile.TemporaryDirectory() as tmp:
            for store in ("memory://", f"sqlite:///{tmp}/threads.db"):
                print(json.dumps(agentledger(store)))
    else:
        for mode in ("client", "server"):
            print(json.dumps(pydantic_ai(mode)))


if __name__ == "__main__":
    main()
