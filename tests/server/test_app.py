"""The HTTP surface: routes, refusals before streaming (401/409/413/422), tenants, state,
context and forwardedProps, the event stream's shape, mounting in an existing app."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from agentledger.agent.tools import ToolContext, tool
from agentledger.messages import Msg
from agentledger.store.aio import AsyncLedger
from tests.server.conftest import client_for, make_app, parse_frames, run, snapshot, user
from tests.server.model_server import ModelServer

TOKENS = {"token-of-acme-1": "acme", "token-of-zeta-1": "zeta"}
ACME = {"Authorization": "Bearer token-of-acme-1"}
ZETA = {"Authorization": "Bearer token-of-zeta-1"}


def body(**fields: Any) -> dict[str, Any]:
    return {"threadId": "t", "runId": "r", "messages": [user("u0", "hi")], **fields}


JSON = {"content-type": "application/json"}


async def refused(client: Any, status: int, payload: Any, **kw: Any) -> str:
    if isinstance(payload, (bytes, str)):
        kw["headers"] = {**JSON, **kw.get("headers", {})}
        response = await client.post("/", content=payload, **kw)
    else:
        response = await client.post("/", json=payload, **kw)
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] and error["message"]
    return str(error["message"])


@pytest.mark.parametrize(
    ("payload", "says"),
    [
        (b"{not json", "not a valid AG-UI RunAgentInput"),
        (b"", "empty"),
        ({"runId": "r", "messages": []}, "threadId: Field required"),
        (body(messages=[{"id": "u", "role": "user", "content": 7}]), "message 0 is not a valid"),
        (body(messages=[{"id": "u", "role": "robot", "content": "x"}]), "message 0 is not a valid"),
        (body(messages=[user("u0", "hi"), {"id": "u", "role": "user"}]), "message 1 is not"),
        (body(messages=[{"role": "user", "content": "x"}]), "user.id: Field required"),
        (body(messages=[user("u0", "hi"), 7]), "message 1 is a int, not a JSON object"),
        (body(messages={"id": "u"}), "messages: Input should be a valid list"),
        (body(messages=[{"id": "u", "role": "user", "content": "x", "name": 7}]), "name"),
        (body(colour="blue"), "fields this server does not know: colour"),
        (body(resume=[{"interruptId": "i1", "status": "resolved"}]), "never raised: i1"),
        (body(threadId="a\nb"), "threadId"),
        (body(tools=[{"name": "t", "description": "d", "parameters": True}]), "JSON schema"),
        (body(tools=[{"name": "look up", "description": "d"}]), "tool name must be"),
        (  # a provider refuses both: the run would fail after storing the user's message
            body(tools=[{"name": "t", "description": "d"}, {"name": "t", "description": "e"}]),
            "declares 't' twice",
        ),
        (
            body(tools=[{"name": "t", "description": "d", "parameters": {"type": "string"}}]),
            'schema of an object ("type": "object"), got "type": "string"',
        ),
        (
            body(tools=[{"name": "t", "description": "d", "parameters": {"type": ["object"]}}]),
            'got "type": ["object"]',
        ),
        (
            body(messages=[{"id": "t1", "role": "tool", "toolCallId": "nope", "content": "x"}]),
            "orphan_result",
        ),
        (  # message metadata past 64 bits: no stored value can hold it
            body(messages=[{"id": "u", "role": "user", "content": "x", "metadata": {"n": 2**64}}]),
            "message 'u' cannot be stored",
        ),
    ],
)
async def test_a_malformed_body_is_refused_with_a_readable_422(
    client: Any, ledger: AsyncLedger, payload: Any, says: str
) -> None:
    assert says in await refused(client, 422, payload)
    assert await ledger.list_sessions() == []  # nothing was stored


def _with_number(literal: str, where: str) -> bytes:
    """A body whose part metadata (or forwardedProps) holds ``literal`` as a JSON number."""
    metadata = literal if where == "part" else "1"
    props = literal if where == "props" else "{}"
    template = (
        '{"threadId":"t","runId":"r","forwardedProps":PROPS,"messages":[{"id":"u","role":"user",'
        '"content":[{"type":"text","text":"x","metadata":{"f":METADATA}}]}]}'
    )
    return template.replace("PROPS", props).replace("METADATA", metadata).encode()


@pytest.mark.parametrize("where", ["part", "props"])
@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e400", "-1e400"])
async def test_a_number_json_cannot_hold_is_refused_not_turned_into_null(
    client: Any, ledger: AsyncLedger, literal: str, where: str
) -> None:
    """``NaN``/``Infinity`` are not JSON, and 1e400 fits no float: the protocol's models read
    them as non-finite floats, which a JSON dump of the messages turned into ``null``."""
    says = await refused(client, 422, _with_number(literal, where))
    assert "not a valid AG-UI RunAgentInput" in says
    assert await ledger.list_sessions() == []
    response = await client.post("/", content=_with_number("1e300", where), headers=JSON)
    assert response.status_code == 200


@pytest.mark.parametrize(
    ("content_type", "encoding"),
    [
        (None, None),
        ("text/plain", None),
        ("text/plain;charset=UTF-8", None),
        ("application/x-www-form-urlencoded", None),
        ("multipart/form-data; boundary=x", None),
        ("application/jsonp", None),
        ("json", None),
        ("application/json", "gzip"),
        ("application/json", "br"),
    ],
)
async def test_a_run_body_not_sent_as_json_is_refused_with_415(
    client: Any, model: ModelServer, ledger: AsyncLedger, content_type: Any, encoding: Any
) -> None:
    """A web page can make a browser post a text, form or untyped body to a server on the
    user's machine without asking it first (no CORS preflight), and such a body can be valid
    JSON: only a body declared as JSON, uncompressed, is run."""
    headers = {"content-type": content_type, "content-encoding": encoding}
    sent = json.dumps(body()).encode()
    response = await client.post("/", content=sent, headers={k: v for k, v in headers.items() if v})
    assert response.status_code == 415, response.text
    assert response.json()["error"]["code"] == "unsupported_media_type"
    assert await ledger.list_sessions() == [] and model.requests == []


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "application/json; charset=utf-8",
        "Application/JSON",
        "application/x+json",
    ],
)
async def test_a_run_body_declared_as_json_is_run(client: Any, content_type: str) -> None:
    sent = json.dumps(body()).encode()
    response = await client.post("/", content=sent, headers={"content-type": content_type})
    assert response.status_code == 200 and parse_frames(response.text)[-1]["type"] == "RUN_FINISHED"


async def test_a_body_over_the_limit_is_refused_with_413(
    model: ModelServer, ledger: AsyncLedger
) -> None:
    async with client_for(make_app(model, ledger, max_body=2000)) as client:
        big = body(messages=[user("u0", "x" * 3000)])
        assert "limit" in await refused(client, 413, big)

        async def chunks() -> Any:  # no content-length: counted as it arrives
            for _ in range(10):
                yield b" " * 500

        response = await client.post("/", content=chunks(), headers=JSON)
        assert response.status_code == 413
        assert (await client.post("/", json=body())).status_code == 200


async def test_a_second_concurrent_run_on_a_thread_gets_409(
    client: Any, model: ModelServer, ledger: AsyncLedger
) -> None:
    first = asyncio.create_task(client.post("/", json=body(messages=[user("u0", "slow 20")])))
    while not model.requests:
        await asyncio.sleep(0.01)
    message = await refused(client, 409, body(messages=[user("u1", "hi")]))
    assert "busy" in message or "running" in message
    assert "u1" not in [m.id for m in await ledger.messages("t")]
    done = await first
    assert parse_frames(done.text)[-1]["type"] == "RUN_FINISHED"
    assert (await client.post("/", json=body(messages=[user("u1", "hi")]))).status_code == 200


async def test_tokens_map_to_tenants_and_threads_stay_in_theirs(
    model: ModelServer, ledger: AsyncLedger
) -> None:
    async with client_for(make_app(model, ledger, auth=TOKENS)) as client:
        assert "Bearer" in await refused(client, 401, body())
        await refused(client, 401, body(), headers={"Authorization": "Bearer wrong-token-9"})
        await run(client, "t", [user("u0", "acme secret")], headers=ACME)
        assert (await client.get("/threads/t/messages", headers=ZETA)).status_code == 404
        assert (await client.get("/threads", headers=ZETA)).json() == {"threads": []}
        events = await run(client, "t", [user("z0", "zeta here")], headers=ZETA)
        assert [d["content"] for d in snapshot(events)] == ["zeta here", "echo: zeta here"]
        acme = (await client.get("/threads/t/messages", headers=ACME)).json()
        assert [d["content"] for d in acme["messages"]] == ["acme secret", "echo: acme secret"]
        assert (await client.get("/health")).json() == {"status": "ok"}
    assert [s.tenant for s in await ledger.list_sessions(tenant="acme")] == ["acme"]


async def test_the_thread_endpoints(client: Any, ledger: AsyncLedger) -> None:
    await run(client, "t", [user("u0", "first")], state={"step": 1})
    await run(client, "t", [user("u1", "second")], state={"step": 2})
    latest = (await client.get("/threads/t/messages")).json()
    assert latest["version"] == await ledger.version("t") and latest["state"] == {"step": 2}
    assert [d["id"] for d in latest["messages"]] == [m.id for m in await ledger.messages("t")]
    old = (await client.get("/threads/t/messages?version=2")).json()
    assert [d["content"] for d in old["messages"]] == ["first"]
    (info,) = (await client.get("/threads")).json()["threads"]
    assert info["threadId"] == "t" and info["messages"] == 4
    assert (await client.get("/threads/nope/messages")).status_code == 404
    assert (await client.get("/threads/t/messages?version=x")).status_code == 422


async def test_a_ledger_closed_under_the_app_is_a_server_error_not_the_clients(
    client: Any, ledger: AsyncLedger
) -> None:
    """Closed by its owner while the app still serves: HTTP 500 (422 blamed the client's
    input), and the health check says the store is gone."""
    await ledger.close()
    for path in ("/threads", "/threads/t/messages"):
        response = await client.get(path)
        assert response.status_code == 500, response.text
        assert response.json()["error"]["code"] == "server_error"
    assert "is closed" in await refused(client, 500, body())
    assert (await client.get("/health")).status_code == 503


async def test_threads_page_after_a_cursor(model: ModelServer, ledger: AsyncLedger) -> None:
    for i in range(5):
        await ledger.save(f"t{i}", [Msg.user(f"thread {i}", id="q")], tenant="acme")
        await ledger.save(f"t{i}", [Msg.user(f"zeta {i}", id="q")], tenant="zeta")
    every = [i.session_id for i in await ledger.list_sessions(tenant="acme")]
    async with client_for(make_app(model, ledger, auth=TOKENS)) as client:
        seen, query = [], {"limit": "2"}
        while True:
            page = (await client.get("/threads", params=query, headers=ACME)).json()
            seen += [t["threadId"] for t in page["threads"]]
            if "next" not in page:
                break
            query["after"] = page["next"]
        assert seen == every and len(page["threads"]) == 1
        whole = (await client.get("/threads", headers=ACME)).json()
        assert "next" not in whole and len(whole["threads"]) == 5
        zeta = (await client.get("/threads?limit=1", headers=ZETA)).json()["next"]
        for cursor, says in (("junk", "not a list_sessions cursor"), (zeta, "another tenant")):
            response = await client.get("/threads", params={"after": cursor}, headers=ACME)
            assert response.status_code == 422, response.text
            error = response.json()["error"]
            assert error["code"] == "invalid_input" and says in error["message"]


async def test_state_is_stored_and_sent_back(client: Any, ledger: AsyncLedger) -> None:
    events = await run(client, "t", [user("u0", "hi")], state={"cart": [1, 2]})
    assert events[-3] == {"type": "STATE_SNAPSHOT", "snapshot": {"cart": [1, 2]}}
    assert (await ledger.load("t")).values["agui.state"] == {"cart": [1, 2]}


@pytest.mark.parametrize("form", ["hydrate", "resend", "new message"])
@pytest.mark.parametrize("sent", [{"step": 2}, {}, [1, "two"], None, 0, "x"])
async def test_the_state_a_client_sends_is_kept_whatever_its_messages(
    client: Any, ledger: AsyncLedger, form: str, sent: Any
) -> None:
    """Every run takes the client's state as the thread's (``{}``, a fresh client's default,
    never replaces a stored state; ``null`` is no state): a run with no messages (hydrating)
    as well, whose snapshot once sent back the stored state over the client's."""
    first = await run(client, "t", [user("u0", "hi")], state={"step": 1})
    version = await ledger.version("t")
    messages = {
        "hydrate": [],
        "resend": snapshot(first),
        "new message": [*snapshot(first), user("u1", "again")],
    }[form]
    events = await run(client, "t", messages, runId="r2", state=sent)
    kept = {"step": 1} if sent in ({}, None) else sent  # null: no state sent
    assert (await ledger.load("t")).values["agui.state"] == kept
    (state,) = [e["snapshot"] for e in events if e["type"] == "STATE_SNAPSHOT"]
    assert state == kept
    if form != "new message":
        assert await ledger.version("t") == version + (kept != {"step": 1})


@pytest.mark.parametrize("sent", [{"step": 2}, {}])
async def test_a_hydrating_run_on_no_thread_makes_none_and_keeps_the_clients_state(
    client: Any, ledger: AsyncLedger, sent: Any
) -> None:
    events = await run(client, "new", [], state=sent)
    assert [e["snapshot"] for e in events if e["type"] == "STATE_SNAPSHOT"] == [sent]
    assert not await ledger.exists("new")
    response = await client.post("/", json=body(threadId="new", messages=[], state=10**30))
    assert response.status_code == 422 and "state cannot be stored" in response.text


async def test_context_and_forwarded_props_reach_the_run(
    model: ModelServer, ledger: AsyncLedger
) -> None:
    seen: dict[str, Any] = {}

    @tool
    def inspect_run(value: str, ctx: ToolContext) -> str:
        """Report what the run was given."""
        seen.update(ctx.attributes["agui"])
        return "ok"

    context = [{"description": "current page", "value": "/pricing"}]
    async with client_for(make_app(model, ledger, tools=[inspect_run])) as client:
        await run(
            client,
            "t",
            [user("u0", "call inspect_run x")],
            context=context,
            forwardedProps={"locale": "fr"},
        )
    assert seen["context"] == context and seen["forwardedProps"] == {"locale": "fr"}
    system = model.requests[0]["messages"][0]
    assert system["role"] == "system" and "current page: /pricing" in system["content"]
    assert all("pricing" not in m.text for m in await ledger.messages("t"))


async def test_reasoning_streams_under_the_ids_the_snapshot_gives(client: Any) -> None:
    events = await run(client, "t", [user("u0", "think the answer")])
    types = [e["type"] for e in events]
    assert types[1:8] == [
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "STATE_SNAPSHOT",
    ]
    ids = [d["id"] for d in snapshot(events)]
    assert ids[1:] == [events[1]["messageId"], events[4]["messageId"]]
    assert ids[1] == f"{ids[2]}:reasoning:0"


async def test_mounted_in_an_existing_fastapi_app(model: ModelServer, ledger: AsyncLedger) -> None:
    from fastapi import FastAPI

    host = FastAPI()
    host.mount("/agent", make_app(model, ledger))
    async with client_for(host) as client:
        response = await client.post("/agent/", json=body())
        assert response.status_code == 200
        assert json.loads(response.text.split("\n")[0][6:])["type"] == "RUN_STARTED"
        assert (await client.get("/agent/health")).json() == {"status": "ok"}
