"""AnthropicModel through the real ``anthropic`` SDK against a local fake server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anthropic
import pytest

from agentledger.agent import (
    ModelResponse,
    ModelSettings,
    ResponseBuilder,
    TextDelta,
    ThinkingDelta,
    ThinkingSignature,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolSpec,
    UsageReport,
)
from agentledger.agent.providers import AnthropicModel
from agentledger.errors import AgentLedgerError, ModelError, UserError
from agentledger.messages import Msg, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from agentledger.wire.private import arguments_text
from tests.agent.fake_servers import (
    NOT_COUNTS,
    FakeServer,
    Reply,
    anthropic_sse,
    block_delta,
    block_start,
    block_stop,
    json_error,
    message_delta,
    message_start,
    message_stop,
    raw,
)
from tests.messages.strategies import JSON_JUNK, every_damage


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as s:
        yield s


@pytest.fixture
async def model(server: FakeServer) -> AsyncIterator[AnthropicModel]:
    client = anthropic.AsyncAnthropic(base_url=server.url, api_key="test-key", max_retries=0)
    async with client:
        yield AnthropicModel("claude-test", client=client, max_tokens=1024)


async def collect(model: Any, messages: list[Msg], **kw: Any) -> list[Any]:
    return [event async for event in model.stream(messages, **kw)]


HELLO = [Msg.user("hello", metadata={"_tenant": "acme"})]

THINK_AND_CALL = [
    message_start(input_tokens=30, cache_read_input_tokens=100),
    {"type": "ping"},
    block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
    block_delta(0, {"type": "thinking_delta", "thinking": "The user wants "}),
    block_delta(0, {"type": "thinking_delta", "thinking": "the weather."}),
    block_delta(0, {"type": "signature_delta", "signature": "EqQBCkYIARgCKkD=="}),
    block_stop(0),
    block_start(1, {"type": "text", "text": ""}),
    block_delta(1, {"type": "text_delta", "text": "Let me "}),
    block_delta(1, {"type": "text_delta", "text": "check."}),
    block_stop(1),
    block_start(2, {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}}),
    block_delta(2, {"type": "input_json_delta", "partial_json": ""}),
    block_delta(2, {"type": "input_json_delta", "partial_json": '{"city": '}),
    block_delta(2, {"type": "input_json_delta", "partial_json": '"Par'}),
    block_delta(2, {"type": "input_json_delta", "partial_json": 'is"}'}),
    block_stop(2),
    block_start(3, {"type": "tool_use", "id": "toolu_2", "name": "clock", "input": {}}),
    block_stop(3),
    message_delta("tool_use", 42),
    message_stop(),
]


async def test_thinking_text_and_tool_calls(server: FakeServer, model: AnthropicModel) -> None:
    server.reply(anthropic_sse(THINK_AND_CALL))
    events = await collect(model, HELLO)
    assert "".join(e.text for e in events if isinstance(e, ThinkingDelta)) == (
        "The user wants the weather."
    )
    assert [e for e in events if isinstance(e, ThinkingSignature)] == [
        ThinkingSignature("EqQBCkYIARgCKkD==")
    ]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Let me ", "check."]
    assert [e for e in events if isinstance(e, ToolCallStart)] == [
        ToolCallStart(0, "toolu_1", "weather", text_arguments=False),
        ToolCallStart(1, "toolu_2", "clock", text_arguments=False),
    ]
    assert len([e for e in events if isinstance(e, ToolCallDelta)]) == 3
    assert [e for e in events if isinstance(e, ToolCallEnd)] == [
        ToolCallEnd(0, "toolu_1"),
        ToolCallEnd(1, "toolu_2"),
    ]
    final = events[-1]
    assert isinstance(final, ModelResponse)
    assert final.stop_reason == "tool_use"
    assert final.message.content == (
        ThinkingBlock(thinking="The user wants the weather.", signature="EqQBCkYIARgCKkD=="),
        TextBlock(text="Let me check."),
        ToolUseBlock(id="toolu_1", name="weather", input={"city": "Paris"}),
        ToolUseBlock(id="toolu_2", name="clock", input={}),
    )
    usage = [e for e in events if isinstance(e, UsageReport)][-1].usage
    assert final.message.usage == usage
    assert usage.input_tokens == 130  # cached tokens included
    assert usage.cache_read_tokens == 100
    assert usage.output_tokens == 42


async def test_partial_keeps_streamed_thinking_and_complete_calls(
    server: FakeServer, model: AnthropicModel
) -> None:
    server.reply(anthropic_sse(THINK_AND_CALL))
    builder = ResponseBuilder()
    stream = model.stream(HELLO)
    async for event in stream:
        builder.add(event)
        if isinstance(event, ToolCallStart) and event.index == 1:
            break  # the first call is complete, the second has only started
    await stream.aclose()
    partial = builder.partial()
    assert partial.thinking == "The user wants the weather."
    assert partial.content[0].signature == "EqQBCkYIARgCKkD=="
    assert partial.text == "Let me check."
    assert partial.tool_calls == (
        ToolUseBlock(id="toolu_1", name="weather", input={"city": "Paris"}),
    )
    assert [(c.id, c.complete) for c in builder.tool_calls] == [
        ("toolu_1", True),
        ("toolu_2", False),
    ]


async def test_request_body(server: FakeServer, model: AnthropicModel) -> None:
    server.reply(
        anthropic_sse(
            [
                message_start(),
                block_start(0, {"type": "text", "text": ""}),
                block_delta(0, {"type": "text_delta", "text": "ok"}),
                block_stop(0),
                message_delta("end_turn", 2),
                message_stop(),
            ]
        )
    )
    history = [
        Msg.system("House rules.", metadata={"_private": True}),
        Msg.user("weather?", metadata={"_secret": "x"}),
        Msg.assistant(
            [
                ThinkingBlock(thinking="hmm", signature="sig-1", metadata={"_m": 1}),
                ToolUseBlock(id="toolu_1", name="weather", input={"city": "Oslo"}),
            ]
        ),
        Msg.tool(ToolResultBlock(id="toolu_1", name="weather", output="-3C", metadata={"_t": 1})),
    ]
    tool = ToolSpec(name="weather", description="Weather now", parameters={"type": "object"})
    settings = ModelSettings(temperature=0.5, max_tokens=256, stop=("END",))
    events = await collect(model, history, system="Be brief.", tools=[tool], settings=settings)
    assert events[-1].message.text == "ok"
    assert events[-1].stop_reason == "end_turn"
    (request,) = server.requests
    assert request.path == "/v1/messages"
    auth = request.headers.get("x-api-key") or request.headers.get("authorization", "")
    assert auth.endswith("test-key")
    assert request.body.get("extra_body") is None  # sampling fields are top-level
    body = request.body
    assert body["model"] == "claude-test"
    assert body["stream"] is True
    assert body["max_tokens"] == 256
    assert body["temperature"] == 0.5
    assert body["stop_sequences"] == ["END"]
    assert body["system"] == [
        {"type": "text", "text": "Be brief."},
        {"type": "text", "text": "House rules."},
    ]
    assert body["tools"] == [
        {"name": "weather", "description": "Weather now", "input_schema": {"type": "object"}}
    ]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "weather?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "sig-1"},
                {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "-3C"}],
        },
    ]
    assert '"_' not in json.dumps(body)


async def test_thinking_budget(server: FakeServer) -> None:
    server.reply(anthropic_sse([message_start(), message_delta("end_turn", 1), message_stop()]))
    client = anthropic.AsyncAnthropic(base_url=server.url, api_key="k", max_retries=0)
    async with client:
        model = AnthropicModel("c", client=client, max_tokens=4000, thinking_budget=2000)
        await collect(model, HELLO)
    assert server.requests[0].body["thinking"] == {"type": "enabled", "budget_tokens": 2000}


async def test_redacted_thinking(server: FakeServer, model: AnthropicModel) -> None:
    server.reply(
        anthropic_sse(
            [
                message_start(),
                block_start(0, {"type": "redacted_thinking", "data": "opaque=="}),
                block_stop(0),
                block_start(1, {"type": "text", "text": "hi"}),
                block_stop(1),
                message_delta("end_turn", 3),
                message_stop(),
            ]
        )
    )
    final = (await collect(model, HELLO))[-1]
    assert final.message.content == (
        ThinkingBlock(thinking="opaque==", redacted=True),
        TextBlock(text="hi"),
    )


async def test_invalid_tool_json_is_kept_verbatim(
    server: FakeServer, model: AnthropicModel
) -> None:
    server.reply(
        anthropic_sse(
            [
                message_start(),
                block_start(0, {"type": "tool_use", "id": "toolu_1", "name": "w", "input": {}}),
                block_delta(0, {"type": "input_json_delta", "partial_json": '{"a": tru'}),
                block_stop(0),
                message_delta("max_tokens", 9),
                message_stop(),
            ]
        )
    )
    final = (await collect(model, HELLO))[-1]
    (call,) = final.message.tool_calls
    assert call.input == {"_raw_arguments": '{"a": tru'}  # the model's text, kept
    assert arguments_text(call) == '{"a": tru'


async def test_stream_without_message_stop_is_retryable(
    server: FakeServer, model: AnthropicModel
) -> None:
    server.reply(anthropic_sse([message_start(), block_start(0, {"type": "text", "text": "x"})]))
    with pytest.raises(ModelError, match="before message_stop") as info:
        await collect(model, HELLO)
    assert info.value.retryable


async def test_overloaded_error_event_mid_stream(server: FakeServer, model: AnthropicModel) -> None:
    server.reply(
        anthropic_sse(
            [
                message_start(),
                {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            ]
        )
    )
    with pytest.raises(ModelError, match="Overloaded") as info:
        await collect(model, HELLO)
    assert info.value.status == 529
    assert info.value.retryable


async def test_rate_limit(server: FakeServer, model: AnthropicModel) -> None:
    server.reply(json_error(429, "too many", kind="rate_limit_error", headers={"retry-after": "3"}))
    with pytest.raises(ModelError, match="retry after 3") as info:
        await collect(model, HELLO)
    assert (info.value.status, info.value.retryable) == (429, True)


async def test_server_error(server: FakeServer, model: AnthropicModel) -> None:
    server.reply(json_error(500, "boom"))
    with pytest.raises(ModelError, match="boom") as info:
        await collect(model, HELLO)
    assert (info.value.status, info.value.retryable) == (500, True)


async def test_auth_error_is_not_retryable(server: FakeServer, model: AnthropicModel) -> None:
    server.reply(json_error(401, "invalid x-api-key", kind="authentication_error"))
    with pytest.raises(ModelError, match="refused the API key") as info:
        await collect(model, HELLO)
    assert (info.value.status, info.value.retryable) == (401, False)


async def test_garbage_json(server: FakeServer, model: AnthropicModel) -> None:
    server.reply(raw(200, "event: message_start\ndata: {{{garbage\n\n"))
    with pytest.raises(ModelError, match="not valid JSON"):
        await collect(model, HELLO)


@pytest.mark.parametrize(
    ("block", "delta", "what"),
    [
        ({"type": "text", "text": ""}, {"type": "text_delta", "text": "a\ud800"}, "text"),
        (
            {"type": "thinking", "thinking": ""},
            {"type": "thinking_delta", "thinking": "\udc00"},
            "thinking",
        ),
        (
            {"type": "tool_use", "id": "t1", "name": "f", "input": {}},
            {"type": "input_json_delta", "partial_json": '{"x": "\ud800"}'},
            "tool call arguments",
        ),
    ],
)
async def test_text_that_is_not_unicode_is_the_provider_s_error(
    server: FakeServer, model: AnthropicModel, block: dict, delta: dict, what: str
) -> None:
    server.reply(
        anthropic_sse(
            [
                message_start(),
                block_start(0, block),
                block_delta(0, delta),
                block_stop(0),
                message_delta("end_turn", 1),
                message_stop(),
            ]
        )
    )
    with pytest.raises(ModelError, match=f"sent a {what} that is not valid Unicode"):
        await collect(model, HELLO)


@pytest.mark.parametrize(
    ("field", "where"),
    [
        ("input_tokens", "start"),
        ("cache_read_input_tokens", "start"),
        ("cache_creation_input_tokens", "start"),
        ("output_tokens", "delta"),
    ],
)
@pytest.mark.parametrize(("value", "said"), NOT_COUNTS)
async def test_a_token_count_that_is_not_a_count_is_malformed(
    server: FakeServer, model: AnthropicModel, field: str, where: str, value: Any, said: str
) -> None:
    """Usage is read, not guessed: a count the SDK hands over as a fraction, a negative or a
    list is the provider's error, never counted as 0 (a fraction once was, silently)."""
    start, delta = message_start(), message_delta("end_turn", 1)
    (start["message"] if where == "start" else delta)["usage"][field] = value
    text = [block_start(0, {"type": "text", "text": ""}), block_stop(0)]
    server.reply(anthropic_sse([start, *text, delta, message_stop()]))
    with pytest.raises(ModelError, match=f"malformed.*usage.{field} must be {said}"):
        await collect(model, HELLO)


async def test_delta_for_unknown_block(server: FakeServer, model: AnthropicModel) -> None:
    server.reply(
        anthropic_sse([message_start(), block_delta(5, {"type": "text_delta", "text": "?"})])
    )
    with pytest.raises(ModelError, match="unknown content block"):
        await collect(model, HELLO)


@pytest.mark.parametrize(
    "events",
    [
        [
            block_start(0, {"type": "text", "text": ""}),
            block_delta(0, {"type": "text_delta", "text": 5}),
        ],
        [block_start(0, {"type": "tool_use", "name": "w", "input": {}}), block_stop(0)],
        [
            block_start(0, {"type": "text", "text": ""}),
            block_start(0, {"type": "text", "text": ""}),
        ],
        [block_stop(3)],
        [{"type": "error", "error": "not an object"}],
    ],
)
async def test_malformed_events(
    server: FakeServer, model: AnthropicModel, events: list[dict[str, Any]]
) -> None:
    server.reply(
        anthropic_sse([message_start(), *events, message_delta("end_turn", 1), message_stop()])
    )
    with pytest.raises(ModelError):
        await collect(model, HELLO)


async def test_timeout(server: FakeServer) -> None:
    server.reply(Reply(delay=5))
    client = anthropic.AsyncAnthropic(base_url=server.url, api_key="k", max_retries=0, timeout=0.2)
    async with client:
        with pytest.raises(ModelError, match="timed out") as info:
            await collect(AnthropicModel("c", client=client), HELLO)
    assert info.value.retryable


def test_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(UserError, match="ANTHROPIC_API_KEY"):
        AnthropicModel("claude-sonnet-4-5")


def test_thinking_budget_must_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UserError, match="thinking_budget"):
        AnthropicModel("c", client=object(), max_tokens=1000, thinking_budget=1000)


async def test_every_damage_of_an_event_is_read_or_a_model_error(
    server: FakeServer, model: AnthropicModel
) -> None:
    """A provider that returns garbage: each event of a stream with thinking, text and a tool
    call, changed in every way ``every_damage`` knows (any JSON at any path, a key removed, an
    entry repeated), is read or ends the stream with a typed error."""
    events = [
        message_start(),
        block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        block_delta(0, {"type": "thinking_delta", "thinking": "hmm"}),
        block_delta(0, {"type": "signature_delta", "signature": "sig"}),
        block_stop(0),
        block_start(1, {"type": "text", "text": ""}),
        block_delta(1, {"type": "text_delta", "text": "hi"}),
        block_stop(1),
        block_start(2, {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}),
        block_delta(2, {"type": "input_json_delta", "partial_json": '{"q": 1}'}),
        block_stop(2),
        message_delta("tool_use", 5),
        message_stop(),
    ]
    for at, original in enumerate(events):
        for where, damaged in every_damage(original, JSON_JUNK):
            sent = [*events[:at], damaged, *events[at + 1 :]]
            body = "".join(f"event: {_name(e)}\ndata: {json.dumps(e)}\n\n" for e in sent)
            server.reply(raw(200, body))
            try:
                await collect(model, HELLO)
            except AgentLedgerError:
                continue
            except Exception as exc:
                raise AssertionError(f"event {at}, {where}: {exc!r}") from exc


def _name(event: object) -> str:
    """The SSE event name of ``event``: its type, when it still has one that is text."""
    kind = event.get("type") if isinstance(event, dict) else None
    return kind if isinstance(kind, str) else "unknown"
