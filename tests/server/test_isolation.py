"""Isolation: a token never reads or writes another tenant's thread, through any route.

The routes are read from the app (``app.routes``), so a route added later is exercised without
changing this test: every method of every route is called with every path parameter set to a
thread id that other tenants hold (hostile ones included: ``../zeta/t``, ``t/messages``, ids that
spell another tenant's name), with and without ``?version=`` and ``?limit=``, and with run
bodies that resend the other tenants' message ids with new content, answer their pending
frontend tool call, and carry a media reference in another tenant's blob namespace. No answer
may show another tenant's text, and after each tenant's round every other tenant's threads
are exactly as they were: same version, same messages, same values.

Tenant names are chosen so that a careless key or path would collide: ``acme``, ``ACME``,
``acme/zeta`` and ``zeta`` (``acme`` + ``zeta/t`` against ``acme/zeta`` + ``t``).

Offloaded tool output (``ToolResultEviction``) through the server: hostile thread ids and
tool-call ids only ever write inside the offload root, and ``read_offloaded`` reads no other
tenant's or thread's file.
"""

from __future__ import annotations

import base64
import json
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from reliability import record

from agentledger.agent.providers.openai import OpenAIChatModel
from agentledger.agent.react import ReActAgent
from agentledger.agent.tools import ToolContext, tool
from agentledger.context import ToolResultEviction
from agentledger.server import create_app
from agentledger.store import Ledger
from agentledger.store.aio import AsyncLedger
from tests.agent.fake_servers import chunk, tool_delta
from tests.server.conftest import client_for, make_app, parse_frames, user
from tests.server.model_server import ModelServer, _sse, default_rules, last_text
from tests.server.stored import committed
from tests.store import pg

TENANTS = ["acme", "ACME", "acme/zeta", "zeta"]
TOKENS = {f"token-for-{i}-tenant": tenant for i, tenant in enumerate(TENANTS)}
BEARER = {tenant: f"Bearer token-for-{i}-tenant" for i, tenant in enumerate(TENANTS)}
THREADS = ["t", "zeta/t", "../zeta/t", "t/messages", "%2e%2e%2fzeta", "_blobs"]
CONFIRM = [{"name": "confirm", "description": "ask the user", "parameters": {}}]
IMAGE = base64.b64encode(os.urandom(6000)).decode()  # over the size that goes to a blob


def secret(tenant: str, thread: str = "") -> str:
    return f"SECRET<{tenant}>{thread}"


@pytest.fixture(params=["sqlite", "jsonl", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'threads.db'}"
    elif request.param == "jsonl":
        yield f"jsonl:///{tmp_path / 'threads'}"
    else:
        url = pg.require_server()
        with pg.fresh_schema(url) as schema:
            yield f"{url}?schema={schema}"


def _user_parts(text: str) -> list[dict[str, Any]]:
    return [
        {"type": "text", "text": text},
        {"type": "image", "source": {"type": "data", "value": IMAGE, "mimeType": "image/png"}},
    ]


async def _seed(client: Any, tenant: str, thread: str) -> None:
    first = {"id": "u0", "role": "user", "content": _user_parts(secret(tenant, thread))}
    body = {"threadId": thread, "runId": "seed", "messages": [first], "tools": CONFIRM}
    response = await client.post("/", json=body, headers={"Authorization": BEARER[tenant]})
    events = parse_frames(response.text)
    assert events[-1]["type"] == "RUN_FINISHED", events[-1]
    if thread == "t":  # and a frontend tool call left waiting for the client
        ask = [*events[-2]["messages"], user("u1", "call confirm x")]
        body = {"threadId": thread, "runId": "seed2", "messages": ask, "tools": CONFIRM}
        response = await client.post("/", json=body, headers={"Authorization": BEARER[tenant]})
        assert parse_frames(response.text)[-1]["outcome"]["pendingToolCallIds"] == ["call_x"]


def _bodies(thread: str, tenant: str) -> list[dict[str, Any]]:
    """Run bodies aimed at other tenants' copies of ``thread``."""
    resent = {"id": "u0", "role": "user", "content": f"overwritten by {tenant}"}
    call = {"id": "call_x", "type": "function", "function": {"name": "confirm", "arguments": "{}"}}
    asked = {"id": "a1", "role": "assistant", "toolCalls": [call]}
    answer = {"id": "r1", "role": "tool", "toolCallId": "call_x", "content": "yes"}
    reference = {"id": "b1", "role": "user", "content": json.dumps({"$blob": "0" * 32})}
    return [
        {"messages": [resent, reference]},
        {"messages": [resent, asked, answer], "tools": CONFIRM},
        {"messages": [answer], "tools": CONFIRM},
        {"messages": []},
    ]


def _calls(app: Any, tenant: str) -> Iterator[tuple[str, str, dict[str, Any] | None]]:
    """Every (method, url, JSON body) this test sends for ``tenant``: each route's methods,
    path parameters set to each thread id, with and without query values."""
    for route in app.routes:
        methods = sorted((getattr(route, "methods", None) or {"GET"}) - {"HEAD"})
        convertors = getattr(route, "param_convertors", {})
        for method in methods:
            body_too = method in ("POST", "PUT", "PATCH")
            for thread in THREADS if convertors or body_too else [None]:
                path = route.path_format
                for name, convertor in convertors.items():
                    slashes = "/" if type(convertor).__name__ == "PathConvertor" else ""
                    path = path.replace("{" + name + "}", quote(thread or "", safe=slashes))
                if body_too:
                    for n, extra in enumerate(_bodies(thread or "t", tenant)):
                        yield method, path, {"threadId": thread, "runId": f"x{n}", **extra}
                    continue
                for query in ("", "?version=1", "?version=2", "?limit=1000"):
                    yield method, path + query, None


async def test_no_route_crosses_tenants(model: ModelServer, store_url: str) -> None:
    ledger = AsyncLedger(store_url)
    app = make_app(model, ledger, auth=TOKENS)
    requests: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    async with client_for(app) as client:
        for tenant in TENANTS:
            for thread in THREADS:
                await _seed(client, tenant, thread)
        with Ledger(store_url) as reader:
            for tenant in TENANTS:
                before = {other: committed(reader, other) for other in TENANTS if other != tenant}
                assert all(len(threads) == len(THREADS) for threads in before.values())
                others = [secret(other) for other in TENANTS if other != tenant]
                for method, url, body in _calls(app, tenant):
                    headers = {"Authorization": BEARER[tenant]}
                    response = await client.request(method, url, json=body, headers=headers)
                    route = f"{method} {url.split('?')[0]}"
                    assert response.status_code < 500, (route, response.text[:300])
                    leaked = [s for s in others if s in response.text]
                    assert not leaked, (route, body, leaked)
                    requests[method] += 1
                    outcomes[str(response.status_code)] += 1
                after = {other: committed(reader, other) for other in TENANTS if other != tenant}
                assert after == before, f"{tenant}'s requests changed another tenant's threads"
                mine = reader.messages("t", tenant=tenant)  # the resent u0 forked its own thread
                assert mine[0].id == "u0" and mine[0].text == f"overwritten by {tenant}"
                kept = reader.messages("t", tenant=tenant, version=1)
                assert secret(tenant, "t") in kept[0].text  # the earlier branch stays readable
        routes = {(getattr(r, "path", ""), str(getattr(r, "methods", ""))) for r in app.routes}
    await ledger.close()
    record(
        "isolation",
        f"server: every route, four tenants ({store_url.split(':')[0]})",
        routes=len(routes),
        requests=sum(requests.values()),
        by_method=requests,
        outcomes=dict(sorted(outcomes.items())),
        other_tenants_changed=0,
        leaks=0,
    )


# -- offloaded tool output -------------------------------------------------------------------
CALL_IDS = ["../../../../escape", "/abs", "..\\..\\win%2e%2e%2f", "x" * 300 + "\u202eb"]
OFFLOAD_THREADS = ["t", "../../escape", "/etc"]


def _rules(body: dict[str, Any]) -> list[bytes] | int:
    """``read <path>`` calls ``read_offloaded``; the rest as the scripted model."""
    text = last_text(body["messages"][-1])
    if body["messages"][-1]["role"] == "user" and text.startswith("read "):
        args = json.dumps({"path": text.removeprefix("read ")})
        return _sse(
            [
                chunk({"role": "assistant"}),
                tool_delta(0, "", id="call_read", name="read_offloaded"),
                tool_delta(0, args),
                chunk(finish="tool_calls"),
            ]
        )
    return default_rules(body)


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


async def test_offloaded_output_stays_in_its_root_and_its_thread(
    model: ModelServer, tmp_path: Path
) -> None:
    model.rules = _rules
    root, around = tmp_path / "offload", tmp_path / "around"
    around.mkdir()
    outside_before = set(tmp_path.parent.iterdir())

    @tool
    def big(value: str, ctx: ToolContext) -> str:
        """Return a large result."""
        return secret(ctx.tenant, ctx.session_id) + " " + "x" * 2000

    eviction = ToolResultEviction(root, limit=500, preview=100)
    ledger = AsyncLedger(f"sqlite:///{around / 'threads.db'}")
    llm = OpenAIChatModel("test-model", base_url=model.url, api_key="test", max_retries=0)
    agent = ReActAgent(llm, [big, eviction.read_tool], store=ledger, middlewares=[eviction])
    app = create_app(agent, auth=TOKENS)
    async with client_for(app) as client:

        async def say(tenant: str, thread: str, text: str, n: int) -> str:
            body = {"threadId": thread, "runId": "r", "messages": [user(f"m{n}", text)]}
            response = await client.post("/", json=body, headers={"Authorization": BEARER[tenant]})
            assert response.status_code == 200, response.text
            assert parse_frames(response.text)[-1]["type"] == "RUN_FINISHED", response.text
            return response.text

        n = 0
        for tenant in TENANTS[:2]:
            for thread in OFFLOAD_THREADS:
                for call_id in CALL_IDS:
                    n += 1
                    await say(tenant, thread, f"call big {call_id}", n)
        written = _files(root)
        assert len(written) == n  # one file per evicted result (each text names its thread)
        assert all(p.resolve().is_relative_to(root.resolve()) for p in written)
        assert set(tmp_path.parent.iterdir()) == outside_before
        assert _files(tmp_path) == written | _files(around)  # the store's own files aside
        folders = {p.parent: p for p in sorted(written)}  # one file of each tenant's thread
        paths = sorted(p.relative_to(root).as_posix() for p in folders.values())
        reads: Counter[str] = Counter()
        for path in paths:
            owner = next(t for t in TENANTS[:2] if secret(t) in (root / path).read_text())
            for tenant in TENANTS:
                n += 1
                text = await say(tenant, "t", f"read {path}", n)
                own = tenant == owner and f"{secret(tenant, 't')} " in (root / path).read_text()
                if own:
                    assert secret(tenant, "t") in text
                    reads["own thread: read"] += 1
                else:
                    assert "SECRET<" not in text.replace(secret(tenant, "t"), ""), path
                    assert "belongs to another session" in text or "not an offload path" in text
                    reads["other tenant or thread: refused"] += 1
    await ledger.close()
    assert reads["own thread: read"] == 2  # the check can see a file when it may be read
    record(
        "isolation",
        "offloaded tool output: hostile thread and tool-call ids",
        files_written=len(written),
        outside_root=0,
        reads=dict(reads),
    )
