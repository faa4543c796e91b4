"""Frontend tools: declared in RunAgentInput.tools, run by the client. The run ends with the
call pending; the next run brings the result (under any message id the client mints)."""

from __future__ import annotations

from typing import Any

from agentledger.agent.lifecycle import CLIENT, PENDING_VALUE
from agentledger.agent.tools import tool
from agentledger.store.aio import AsyncLedger
from agentledger.wire import check
from tests.server.conftest import client_for, make_app, run, snapshot, user
from tests.server.model_server import ModelServer

PICK = {
    "name": "pick_color",
    "description": "Let the user pick a color.",
    "parameters": {"type": "object", "properties": {"value": {"type": "string"}}},
}


async def start_pick(client: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    events = await run(client, "t", [user("u0", "call pick_color red")], tools=[PICK])
    return events, snapshot(events)


async def test_the_run_ends_after_the_call_with_it_pending(
    client: Any, model: ModelServer, ledger: AsyncLedger
) -> None:
    events, _ = await start_pick(client)
    types = [e["type"] for e in events]
    assert types.index("TOOL_CALL_END") < types.index("MESSAGES_SNAPSHOT")
    assert "TOOL_CALL_RESULT" not in types
    finished = events[-1]
    assert finished["type"] == "RUN_FINISHED"
    assert finished["outcome"] == {"type": "success", "pendingToolCallIds": ["call_red"]}
    (start,) = [e for e in events if e["type"] == "TOOL_CALL_START"]
    assert start["toolCallName"] == "pick_color" and start["parentMessageId"]
    assert model.requests[0]["tools"][0]["function"]["name"] == "pick_color"
    state = await ledger.load("t")
    assert state.values[PENDING_VALUE]["call_red"]["state"] == CLIENT


async def test_the_next_run_carries_the_result_under_a_client_minted_id(
    client: Any, model: ModelServer, ledger: AsyncLedger
) -> None:
    _, history = await start_pick(client)
    result = {"id": "client-made-1", "role": "tool", "toolCallId": "call_red", "content": "red"}
    events = await run(client, "t", [*history, result], tools=[PICK])
    assert "TEXT_MESSAGE_START" in [e["type"] for e in events]
    assert model.requests[-1]["messages"][-1]["content"] == "red"
    stored = await ledger.messages("t")
    check(stored, target="strict")
    assert [m.id for m in stored][2] == "client-made-1"
    assert "TOOL_CALL_RESULT" not in [e["type"] for e in events]  # the client sent it
    # a client that mints a new id for the same result on every resend: still one result
    again = {**result, "id": "client-made-2"}
    await run(client, "t", [*history, again, user("u1", "thanks")], tools=[PICK])
    stored = await ledger.messages("t")
    assert sum(len(m.tool_results) for m in stored) == 1
    assert model.user_texts()[-1] == ["call pick_color red", "thanks"]


async def test_a_hydrating_client_learns_the_pending_call(client: Any) -> None:
    await start_pick(client)
    events = await run(client, "t", [])
    assert events[-1]["outcome"]["pendingToolCallIds"] == ["call_red"]


async def test_moving_on_without_a_result_answers_the_call_with_an_error(
    client: Any, ledger: AsyncLedger
) -> None:
    _, history = await start_pick(client)
    events = await run(client, "t", [*history, user("u1", "never mind")], tools=[PICK])
    stored = await ledger.messages("t")
    check(stored, target="strict")
    (result,) = [r for m in stored for r in m.tool_results]
    assert result.is_error and result.metadata["lifecycle"] == "no_client_result"
    assert any(e["type"] == "TOOL_CALL_RESULT" for e in events)  # the server made that one


async def test_a_server_tool_runs_on_the_server_and_streams_its_result(
    model: ModelServer, ledger: AsyncLedger
) -> None:
    @tool
    def lookup(value: str) -> str:
        """Look something up."""
        return f"found {value}"

    async with client_for(make_app(model, ledger, tools=[lookup])) as client:
        events = await run(client, "t", [user("u0", "call lookup pears")])
    (result,) = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    stored = await ledger.messages("t")
    assert result["messageId"] == stored[2].id and result["content"] == "found pears"
    assert events[-1]["outcome"] == {"type": "success"}
    assert model.requests[-1]["messages"][-1]["content"] == "found pears"


async def test_a_client_cannot_answer_a_server_call_or_shadow_a_server_tool(
    model: ModelServer, ledger: AsyncLedger
) -> None:
    @tool
    def lookup(value: str) -> str:
        """Look something up."""
        return value

    async with client_for(make_app(model, ledger, tools=[lookup])) as client:
        body = {"threadId": "t", "runId": "r", "messages": [user("u", "hi")]}
        shadow = {**body, "tools": [{**PICK, "name": "lookup"}]}
        response = await client.post("/", json=shadow)
        assert response.status_code == 422 and "server tool" in response.text
