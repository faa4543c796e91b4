"""``Runner.run(agent, ..., session=LedgerSession(...))`` end to end, against a local server.

The real Agents SDK and openai client talk HTTP to a scripted Responses-API server
(``responses_server``); three turns with a function tool, one of them streamed. Then a new
session over the same store reloads the conversation: every item, id, ``call_id``, argument
string and ``encrypted_content`` comes back, and is what the SDK sent the model on the last turn.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import (
    Agent,
    OpenAIResponsesModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

from agentledger import Ledger
from agentledger.integrations.openai_agents import LedgerSession
from tests.agent.fake_servers import FakeServer

from .responses_server import call, message, reasoning, response, response_stream

SECRET = "gAAAAABn\u00e9+/secret==" * 3


@pytest.fixture(autouse=True)
def _no_tracing() -> Iterator[None]:
    set_tracing_disabled(True)
    yield


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return {"Oslo": "rain", "Bergen": "more rain"}.get(city, "sun")


def _agent(server: FakeServer) -> Agent[Any]:
    client = AsyncOpenAI(base_url=server.url, api_key="x", max_retries=0)
    model = OpenAIResponsesModel(model="scripted", openai_client=client)
    return Agent(name="forecaster", instructions="Answer briefly.", model=model, tools=[weather])


def _ids(items: list[dict[str, Any]]) -> list[tuple[str | None, str | None]]:
    return [(i.get("id"), i.get("call_id")) for i in items]


async def test_runner_turns_with_a_tool_reload_with_every_id(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'agents.db'}"
    with FakeServer() as server:
        server.reply(
            # turn 1: reason, call the tool, answer
            response([reasoning("rs_1", "Look it up.", SECRET),
                      call("fc_1", "call_1", "weather", '{"city": "Oslo"}')], "resp_1"),
            response([message("msg_1", "Rain in Oslo.")], "resp_2"),
            # turn 2, streamed: the same with another city
            response_stream([call("fc_2", "call_2", "weather", '{"city":"Bergen"}')], "resp_3"),
            response_stream([message("msg_2", "More rain in Bergen.")], "resp_4"),
            # turn 3: a plain answer
            response([message("msg_3", "You asked about Oslo and Bergen.")], "resp_5"),
        )  # fmt: skip
        agent = _agent(server)
        with Ledger(url) as ledger:
            session = LedgerSession("trip", ledger)
            first = await Runner.run(agent, "Weather in Oslo?", session=session)
            assert first.final_output == "Rain in Oslo."
            streamed = Runner.run_streamed(agent, "And Bergen?", session=session)
            async for _ in streamed.stream_events():
                pass
            assert streamed.final_output == "More rain in Bergen."
            third = await Runner.run(agent, "What did I ask?", session=session)
            assert third.final_output == "You asked about Oslo and Bergen."
            live = await session.get_items()
            # every save of the three turns only appended rows
            history = ledger.history("trip")
            assert sum(v.appended for v in history) == len(live)
            assert all(v.replaced == v.truncated == 0 for v in history)

        requests = [r.body for r in server.requests]
        assert [r.path for r in server.requests] == ["/responses"] * 5
        # the tool ran with the model's arguments, and the SDK sent the answers back
        assert requests[1]["input"][-1]["output"] == "rain"
        assert requests[3]["input"][-1]["output"] == "more rain"
        # the encrypted reasoning went back to the model byte for byte
        sent_reasoning = [i for i in requests[4]["input"] if i.get("type") == "reasoning"]
        assert sent_reasoning[0]["encrypted_content"].encode() == SECRET.encode()

    with Ledger(url) as ledger:  # a new process: reload from the store alone
        reloaded = await LedgerSession("trip", ledger).get_items()
    assert reloaded == live
    assert _ids(reloaded) == [
        (None, None),  # "Weather in Oslo?"
        ("rs_1", None), ("fc_1", "call_1"), (None, "call_1"), ("msg_1", None),
        (None, None),  # "And Bergen?"
        ("fc_2", "call_2"), (None, "call_2"), ("msg_2", None),
        (None, None),  # "What did I ask?"
        ("msg_3", None),
    ]  # fmt: skip
    assert reloaded[2]["arguments"] == '{"city": "Oslo"}'  # the model's own spelling
    assert reloaded[1]["encrypted_content"] == SECRET
    # the last request held the whole conversation, as the session now holds it
    assert requests[4]["input"] == reloaded[:-1]
