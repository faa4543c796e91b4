"""OpenAIChatModel through the real ``openai`` SDK against a local fake server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import openai
import pytest

from agentledger.agent import (
    ModelResponse,
    ModelSettings,
    ResponseBuilder,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolSpec,
    UsageReport,
    complete,
)
from agentledger.agent.providers import OpenAIChatModel
from agentledger.errors import AgentLedgerError, HistoryError, ModelError, UserError
from agentledger.messages import Msg, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock, Usage
from agentledger.wire import to_openai
from tests.agent.fake_servers import (
    NOT_COUNTS,
    FakeServer,
    Reply,
    chunk,
    json_error,
    openai_sse,
    raw,
    tool_delta,
    usage_chunk,
)
from tests.messages.strategies import JSON_JUNK, every_damage


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as s:
        yield s


@pytest.fixture
async def model(server: FakeServer) -> AsyncIterator[OpenAIChatModel]:
    client = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="test-key", max_retries=0)
    async with client:
        yield OpenAIChatModel("test-model", client=client)


async def collect(model: Any, messages: list[Msg], **kw: Any) -> list[Any]:
    return [event async for event in model.stream(messages, **kw)]


HELLO = [Msg.user("hello", metadata={"_tenant": "acme", "lang": "en"})]


async def test_streamed_text_and_usage(server: FakeServer, model: OpenAIChatModel) -> None:
    server.reply(
        openai_sse(
            [
                chunk({"role": "assistant", "content": ""}),
                chunk({"content": "Hel"}),
                chunk({"content": "lo, "}),
                chunk({"content": "world"}),
                chunk({}, finish="stop"),
                usage_chunk(12, 5, cached=4),
            ]
        )
    )
    events = await collect(model, HELLO)
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hel", "lo, ", "world"]
    usage = [e for e in events if isinstance(e, UsageReport)]
    assert usage[-1].usage.input_tokens == 12
    assert usage[-1].usage.output_tokens == 5
    assert usage[-1].usage.cache_read_tokens == 4
    final = events[-1]
    assert isinstance(final, ModelResponse)
    assert final.stop_reason == "end_turn"
    assert final.message.role == "assistant"
    assert final.message.content == (TextBlock(text="Hello, world"),)
    assert final.message.usage == usage[-1].usage


async def test_request_body_has_converted_history_and_nothing_private(
    server: FakeServer, model: OpenAIChatModel
) -> None:
    server.reply(openai_sse([chunk({"content": "ok"}), chunk({}, finish="stop")]))
    history = [
        Msg.user("weather in Paris?", metadata={"_secret": "s3"}),
        Msg.assistant(
            [
                ThinkingBlock(thinking="look it up", signature="sig"),
                ToolUseBlock(
                    id="call_1", name="weather", input={"city": "Paris"}, metadata={"_x": 1}
                ),
            ]
        ),
        Msg.tool(ToolResultBlock(id="call_1", name="weather", output="18C", metadata={"_t": 2})),
    ]
    tool = ToolSpec(
        name="weather",
        description="Current weather",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}},
    )
    settings = ModelSettings(temperature=0.2, max_tokens=64, extra={"top_k": 5})
    await collect(model, history, system="Be brief.", tools=[tool], settings=settings)
    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer test-key"
    body = request.body
    assert body["model"] == "test-model"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["temperature"] == 0.2
    assert body["max_tokens"] == 64  # a non-OpenAI base URL: the field compatible servers know
    assert body["top_k"] == 5
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "weather",
                "description": "Current weather",
                "parameters": tool.parameters,
            },
        }
    ]
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "weather in Paris?"},
        {
            "role": "assistant",
            "content": None,  # Anthropic's signed thinking is not sent to another provider
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city":"Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "18C"},
    ]
    assert '"_' not in json.dumps(body)  # no private key anywhere


async def test_reasoning_fields_become_thinking(server: FakeServer, model: OpenAIChatModel) -> None:
    server.reply(
        openai_sse(
            [
                chunk({"role": "assistant", "reasoning_content": "Let me "}),
                chunk({"reasoning_content": "think."}),
                chunk({"reasoning": " More."}),  # Ollama / newer vLLM spelling
                chunk({"content": "42"}),
                chunk({}, finish="stop"),
                usage_chunk(3, 9, reasoning=6),
            ]
        )
    )
    events = await collect(model, HELLO)
    assert "".join(e.text for e in events if isinstance(e, ThinkingDelta)) == "Let me think. More."
    final = events[-1]
    source = {"_reasoning_source": model.source}  # this server wrote it
    assert final.message.content == (
        ThinkingBlock(thinking="Let me think. More.", metadata=source),
        TextBlock(text="42"),
    )
    assert final.message.usage.reasoning_tokens == 6
    follow_up = [*HELLO, final.message, Msg.user("and?")]
    assert "reasoning_content" not in model.request(follow_up)["messages"][1]
    model.send_reasoning = True  # only this server's own reasoning goes back, when asked
    assert model.request(follow_up)["messages"][1]["reasoning_content"] == "Let me think. More."
    other = OpenAIChatModel("m", base_url="http://elsewhere.test/v1", send_reasoning=True)
    assert "reasoning_content" not in other.request(follow_up)["messages"][1]
    await other.aclose()


async def test_streamed_refusal_is_kept_as_a_refusal(
    server: FakeServer, model: OpenAIChatModel
) -> None:
    server.reply(
        openai_sse(
            [
                chunk({"role": "assistant", "content": "", "refusal": None}),
                chunk({"content": "Sorry. "}),
                chunk({"refusal": "I can't "}),
                chunk({"refusal": "help with that."}),
                chunk({}, finish="stop"),
            ]
        )
    )
    final = (await collect(model, HELLO))[-1]
    assert final.message.content == (
        TextBlock(text="Sorry. "),
        TextBlock(text="I can't help with that.", metadata={"refusal": True}),
    )
    sent = model.request([*HELLO, final.message, Msg.user("ok")])["messages"][1]
    assert sent == {"role": "assistant", "content": "Sorry. ", "refusal": "I can't help with that."}


async def test_parallel_tool_calls_interleaved_by_index(
    server: FakeServer, model: OpenAIChatModel
) -> None:
    server.reply(
        openai_sse(
            [
                chunk({"role": "assistant", "content": None}),
                tool_delta(0, "", id="call_a", name="weather"),
                tool_delta(0, '{"ci'),
                tool_delta(1, "", id="call_b", name="time"),
                tool_delta(1, '{"tz": '),
                tool_delta(0, 'ty": "Pa'),
                tool_delta(1, '"CET"}'),
                tool_delta(0, 'ris"}'),
                chunk({}, finish="tool_calls"),
                usage_chunk(20, 30),
            ]
        )
    )
    events = await collect(model, HELLO)
    starts = [e for e in events if isinstance(e, ToolCallStart)]
    assert starts == [ToolCallStart(0, "call_a", "weather"), ToolCallStart(1, "call_b", "time")]
    assert [e.index for e in events if isinstance(e, ToolCallDelta)] == [0, 1, 0, 1, 0]
    assert [e for e in events if isinstance(e, ToolCallEnd)] == [
        ToolCallEnd(0, "call_a"),
        ToolCallEnd(1, "call_b"),
    ]
    final = events[-1]
    assert final.stop_reason == "tool_use"
    assert final.message.tool_calls == (
        ToolUseBlock(id="call_a", name="weather", arguments='{"city": "Paris"}'),
        ToolUseBlock(id="call_b", name="time", arguments='{"tz": "CET"}'),
    )


async def test_builder_partial_mid_stream(server: FakeServer, model: OpenAIChatModel) -> None:
    server.reply(
        openai_sse(
            [
                chunk({"content": "Checking."}),
                tool_delta(0, '{"city": "Oslo"}', id="call_a", name="weather"),
                tool_delta(1, '{"tz"', id="call_b", name="time"),
                tool_delta(1, ': "UTC"}'),
                chunk({}, finish="tool_calls"),
            ]
        )
    )
    builder = ResponseBuilder()
    async for event in model.stream(HELLO):
        builder.add(event)
        if isinstance(event, ToolCallDelta) and event.index == 1:
            break  # interrupted after the second call's first argument delta
    partial = builder.partial()
    assert partial.text == "Checking."
    assert partial.tool_calls == ()  # no call has ended (OpenAI ends them at finish_reason)
    assert [(c.id, c.complete) for c in builder.tool_calls] == [
        ("call_a", False),
        ("call_b", False),
    ]


async def test_tool_call_with_invalid_json_is_kept_verbatim(
    server: FakeServer, model: OpenAIChatModel
) -> None:
    server.reply(
        openai_sse(
            [
                tool_delta(0, '{"city": ', id="call_a", name="weather"),
                chunk({}, finish="length"),
            ]
        )
    )
    final = (await collect(model, HELLO))[-1]
    assert final.stop_reason == "max_tokens"
    (call,) = final.message.tool_calls
    assert call.input == {"_raw_arguments": '{"city": '}
    assert to_openai([final.message])[0]["tool_calls"][0]["function"]["arguments"] == '{"city": '


async def test_no_choices_is_a_model_error(server: FakeServer, model: OpenAIChatModel) -> None:
    server.reply(openai_sse([usage_chunk(1, 0)]))
    with pytest.raises(ModelError, match="no choices"):
        await collect(model, HELLO)


async def test_cut_off_stream_is_retryable(server: FakeServer, model: OpenAIChatModel) -> None:
    server.reply(openai_sse([chunk({"content": "Hel"})], done=False))
    with pytest.raises(ModelError, match="before a finish_reason") as info:
        await collect(model, HELLO)
    assert info.value.retryable


async def test_rate_limit_is_retryable_with_status(
    server: FakeServer, model: OpenAIChatModel
) -> None:
    server.reply(
        json_error(429, "slow down", kind="rate_limit_error", headers={"retry-after": "7"})
    )
    with pytest.raises(ModelError, match=r"rate limiting.*slow down.*retry after 7") as info:
        await collect(model, HELLO)
    assert info.value.status == 429
    assert info.value.retryable


async def test_server_error_is_retryable(server: FakeServer, model: OpenAIChatModel) -> None:
    server.reply(raw(500, "<html>Internal Server Error</html>", content_type="text/html"))
    with pytest.raises(ModelError) as info:
        await collect(model, HELLO)
    assert info.value.status == 500
    assert info.value.retryable


async def test_bad_request_is_not_retryable(server: FakeServer, model: OpenAIChatModel) -> None:
    server.reply(json_error(400, "messages: invalid", kind="invalid_request_error"))
    with pytest.raises(ModelError, match=r"rejected the request.*messages: invalid") as info:
        await collect(model, HELLO)
    assert info.value.status == 400
    assert not info.value.retryable


async def test_garbage_json_in_stream(server: FakeServer, model: OpenAIChatModel) -> None:
    server.reply(raw(200, 'data: {"choices": [ nope\n\n'))
    with pytest.raises(ModelError, match="not valid JSON"):
        await collect(model, HELLO)


@pytest.mark.parametrize(
    "data",
    [
        {"choices": [{"index": 0, "delta": 5}]},
        {"choices": [{"index": 0, "delta": {"content": 5}, "finish_reason": "stop"}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": 3}]},
        tool_delta(0, "{}", id="c1", name=5),  # type: ignore[arg-type]
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": None}]}}]},
        [1, 2],
    ],
)
async def test_unreadable_chunk_shapes(
    server: FakeServer, model: OpenAIChatModel, data: object
) -> None:
    server.reply(raw(200, f"data: {json.dumps(data)}\n\ndata: [DONE]\n\n"))
    with pytest.raises(ModelError, match=r"malformed|not a string"):
        await collect(model, HELLO)


@pytest.mark.parametrize(
    ("events", "what"),
    [
        ([chunk({"role": "assistant", "content": "a\ud800"})], "text"),
        ([chunk({"reasoning_content": "r\udc00"}), chunk({"content": "x"})], "thinking"),
        ([tool_delta(0, '{"x": "\ud800"}', id="c1", name="f")], "tool call arguments"),
        ([tool_delta(0, "{}", id="c\ud800", name="f")], "tool call id"),
        ([tool_delta(0, "{}", id="c1", name="f\ud800")], "tool name"),
    ],
)
async def test_text_that_is_not_unicode_is_the_provider_s_error(
    server: FakeServer, model: OpenAIChatModel, events: list[dict[str, Any]], what: str
) -> None:
    """A JSON ``"\\ud800"`` escape reads as a lone surrogate, which no message can hold: the
    stream is refused as malformed (``ModelError``), never raised as the caller's ``UserError``
    when the message is built."""
    server.reply(openai_sse([*events, chunk({}, finish="stop"), usage_chunk(1, 1)]))
    with pytest.raises(ModelError, match=f"sent a {what} that is not valid Unicode"):
        await collect(model, HELLO)


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ((), "prompt_tokens"),
        ((), "completion_tokens"),
        (("prompt_tokens_details",), "cached_tokens"),
        (("completion_tokens_details",), "reasoning_tokens"),
    ],
)
@pytest.mark.parametrize(("value", "said"), NOT_COUNTS)
async def test_a_token_count_that_is_not_a_count_is_malformed(
    server: FakeServer,
    model: OpenAIChatModel,
    path: tuple[str, ...],
    field: str,
    value: Any,
    said: str,
) -> None:
    """Usage is read, not guessed: a count the SDK hands over as a fraction, a negative or a
    list is the server's error, never counted as 0 (a fraction once was, silently)."""
    usage = usage_chunk(3, 4)
    counts = usage["usage"]
    for key in path:
        counts = counts[key]
    counts[field] = value
    server.reply(openai_sse([chunk({"content": "x"}), chunk({}, finish="stop"), usage]))
    with pytest.raises(ModelError, match=f"malformed.*usage.{field} must be {said}"):
        await collect(model, HELLO)


async def test_a_null_token_count_is_none_reported(
    server: FakeServer, model: OpenAIChatModel
) -> None:
    usage = usage_chunk(3, 4)
    usage["usage"]["prompt_tokens_details"] = None
    usage["usage"]["completion_tokens"] = None
    server.reply(openai_sse([chunk({"content": "x"}), chunk({}, finish="stop"), usage]))
    final = (await collect(model, HELLO))[-1]
    assert final.message.usage == Usage(input_tokens=3)


async def test_error_object_mid_stream(server: FakeServer, model: OpenAIChatModel) -> None:
    server.reply(openai_sse([chunk({"content": "x"}), {"error": {"message": "backend exploded"}}]))
    with pytest.raises(ModelError, match="backend exploded"):
        await collect(model, HELLO)


async def test_timeout_is_retryable(server: FakeServer) -> None:
    server.reply(Reply(delay=5))
    client = openai.AsyncOpenAI(
        base_url=f"{server.url}/v1", api_key="k", max_retries=0, timeout=0.2
    )
    async with client:
        with pytest.raises(ModelError, match="timed out") as info:
            await collect(OpenAIChatModel("m", client=client), HELLO)
    assert info.value.retryable


async def test_invalid_history_is_refused_before_sending(
    server: FakeServer, model: OpenAIChatModel
) -> None:
    unanswered = [Msg.user("hi"), Msg.assistant(ToolUseBlock(id="c1", name="t")), Msg.user("?")]
    with pytest.raises(HistoryError):
        await collect(model, unanswered)
    assert server.requests == []


async def test_complete_drains_the_stream(server: FakeServer, model: OpenAIChatModel) -> None:
    server.reply(openai_sse([chunk({"content": "done"}), chunk({}, finish="stop")]))
    response = await complete(model, HELLO)
    assert response.message.text == "done"


async def test_owned_client_from_environment(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.reply(openai_sse([chunk({"content": "local"}), chunk({}, finish="stop")]))
    async with OpenAIChatModel("llama3", max_retries=0) as local:
        response = await complete(local, HELLO)
    assert response.message.text == "local"
    assert server.requests[0].headers["authorization"].startswith("Bearer ")  # placeholder key


def test_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(UserError, match="OPENAI_API_KEY"):
        OpenAIChatModel("gpt-4o-mini")


async def test_long_tool_ids_are_mapped_for_the_request_and_back(
    server: FakeServer, model: OpenAIChatModel
) -> None:
    long_id = "call_" + "x" * 60
    history = [
        Msg.user("go"),
        Msg.assistant(ToolUseBlock(id=long_id, name="weather", input={})),
        Msg.tool(ToolResultBlock(id=long_id, name="weather", output="sun")),
    ]
    sent = model.request(history)["messages"]
    wire_id = sent[1]["tool_calls"][0]["id"]
    assert len(wire_id) <= 40 and sent[2]["tool_call_id"] == wire_id
    server.reply(  # a server that echoes the id it was given
        openai_sse(
            [tool_delta(0, "{}", id=wire_id, name="weather"), chunk({}, finish="tool_calls")]
        )
    )
    final = (await collect(model, history))[-1]
    assert final.message.tool_calls[0].id == long_id


async def test_every_damage_of_a_chunk_is_read_or_a_model_error(
    server: FakeServer, model: OpenAIChatModel
) -> None:
    """A provider that returns garbage: each chunk of a stream with reasoning, text, a tool
    call and usage, changed in every way ``every_damage`` knows (any JSON at any path, a key
    removed, an entry repeated), is read or ends the stream with a typed error."""
    chunks = [
        chunk({"role": "assistant", "content": ""}),
        chunk({"reasoning_content": "hmm"}),
        chunk({"content": "hi"}),
        tool_delta(0, '{"q":', id="c1", name="f"),
        tool_delta(0, " 1}"),
        chunk(finish="tool_calls"),
        usage_chunk(10, 5),
    ]
    for at, original in enumerate(chunks):
        for where, damaged in every_damage(original, JSON_JUNK):
            sent = [*chunks[:at], damaged, *chunks[at + 1 :]]
            server.reply(raw(200, "".join(f"data: {json.dumps(c)}\n\n" for c in sent)))
            try:
                await collect(model, HELLO)
            except AgentLedgerError:
                continue
            except Exception as exc:
                raise AssertionError(f"chunk {at}, {where}: {exc!r}") from exc
