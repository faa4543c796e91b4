"""Request options of ``AnthropicModel`` through the real SDK: prompt-cache marks that never
reach the stored messages, thinking left off for a tool loop another provider started, and
tool-call ids mapped for the request and back."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator

import anthropic
import pytest

from agentledger.agent import ModelResponse, ToolSpec
from agentledger.agent.providers import AnthropicModel
from agentledger.errors import UserError
from agentledger.messages import Msg, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from agentledger.messages.codec import encode
from tests.agent.fake_servers import (
    FakeServer,
    anthropic_sse,
    block_start,
    block_stop,
    message_delta,
    message_start,
    message_stop,
)


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as s:
        yield s


@pytest.fixture
async def client(server: FakeServer) -> AsyncIterator[anthropic.AsyncAnthropic]:
    async with anthropic.AsyncAnthropic(base_url=server.url, api_key="k", max_retries=0) as c:
        yield c


TOOL = ToolSpec(name="weather", description="Weather", parameters={"type": "object"})
EPHEMERAL = {"type": "ephemeral", "ttl": "1h"}


def _loop(first_call_id: str, thinking: bool) -> list[Msg]:
    blocks: list = [ThinkingBlock(thinking="t", signature="sig")] if thinking else []
    return [
        Msg.system("Be brief."),
        Msg.user("weather?"),
        Msg.assistant([*blocks, ToolUseBlock(id=first_call_id, name="weather", input={})]),
        Msg.tool(ToolResultBlock(id=first_call_id, name="weather", output="sun")),
    ]


async def test_cache_marks_go_on_system_tools_and_last_block_only(
    client: anthropic.AsyncAnthropic,
) -> None:
    model = AnthropicModel(
        "claude-test", client=client, cache=["system", "tools", "messages"], cache_ttl="1h"
    )
    history = _loop("toolu_1", thinking=False)
    before = [encode(m) for m in history]
    body = model.request(history, system="You help.", tools=[TOOL])
    assert body["system"][-1]["cache_control"] == EPHEMERAL
    assert "cache_control" not in body["system"][0]
    assert body["tools"][-1]["cache_control"] == EPHEMERAL
    last = body["messages"][-1]["content"]
    assert last[-1]["cache_control"] == EPHEMERAL
    marks = str(body).count("cache_control")
    assert marks == 3
    assert [encode(m) for m in history] == before  # nothing entered the stored messages
    assert "cache_control" not in str(model.request(history, tools=[TOOL])["messages"][:-1])


async def test_cache_mark_skips_thinking_and_bad_options_are_refused(
    client: anthropic.AsyncAnthropic,
) -> None:
    model = AnthropicModel("claude-test", client=client, cache="messages")
    history = [
        Msg.user("hi"),
        Msg.assistant([ThinkingBlock(thinking="t", signature="s"), TextBlock(text="x")]),
    ]
    body = model.request(history)
    content = body["messages"][-1]["content"]
    assert "cache_control" not in content[0] and content[1]["cache_control"]
    with pytest.raises(UserError, match="cache targets"):
        AnthropicModel("m", client=client, cache=["prompt"])  # type: ignore[list-item]
    with pytest.raises(UserError, match="cache_ttl"):
        AnthropicModel("m", client=client, cache_ttl="2h")  # type: ignore[arg-type]


async def test_thinking_is_left_off_for_a_loop_another_provider_started(
    client: anthropic.AsyncAnthropic,
) -> None:
    model = AnthropicModel("claude-test", client=client, thinking_budget=1024, max_tokens=4096)
    assert "thinking" not in model.request(_loop("call_1", thinking=False))
    assert model.request(_loop("toolu_1", thinking=True))["thinking"]["budget_tokens"] == 1024
    # a new user turn starts a new loop: thinking is on again
    follow = [*_loop("call_1", thinking=False), Msg.assistant("sunny"), Msg.user("thanks")]
    assert "thinking" in model.request(follow)


async def test_tool_ids_are_mapped_for_the_request_and_back(
    server: FakeServer, client: anthropic.AsyncAnthropic
) -> None:
    kimi = "functions.get_weather:0"
    model = AnthropicModel("claude-test", client=client)
    history = _loop(kimi, thinking=False)
    body = model.request(history)
    sent = body["messages"][1]["content"][0]["id"]
    assert re.fullmatch(r"[a-zA-Z0-9_-]+", sent) and sent != kimi
    assert body["messages"][2]["content"][0]["tool_use_id"] == sent
    # the reply echoes the mapped id: it comes back as the stored one
    server.reply(
        anthropic_sse(
            [
                message_start(),
                block_start(0, {"type": "tool_use", "id": sent, "name": "weather", "input": {}}),
                block_stop(0),
                message_delta("tool_use", 3),
                message_stop(),
            ]
        )
    )
    events = [e async for e in model.stream(history)]
    final = events[-1]
    assert isinstance(final, ModelResponse)
    assert final.message.tool_calls[0].id == kimi
    assert history[2].tool_calls[0].id == kimi  # the stored id never changed
