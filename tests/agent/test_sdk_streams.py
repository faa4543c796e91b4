"""Streams built with the SDKs' own chunk and event models, served by a local HTTP server, read
once by our adapters and once by each SDK's own accumulator (``client.chat.completions.stream``
and ``client.messages.stream``): the assistant message we build says exactly what the SDK's
final message says (text, refusal, reasoning, thinking with signatures, redacted thinking, tool
calls with their argument text byte for byte), for any stream Hypothesis draws."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest
from anthropic.types import (
    InputJSONDelta,
    Message,
    MessageDeltaUsage,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawContentBlockStopEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStopEvent,
    RedactedThinkingBlock,
    SignatureDelta,
)
from anthropic.types import (
    TextBlock as AntTextBlock,
)
from anthropic.types import (
    TextDelta as AntTextDelta,
)
from anthropic.types import (
    ThinkingBlock as AntThinkingBlock,
)
from anthropic.types import (
    ThinkingDelta as AntThinkingDelta,
)
from anthropic.types import (
    ToolUseBlock as AntToolUseBlock,
)
from anthropic.types import (
    Usage as AntUsage,
)
from anthropic.types.raw_message_delta_event import Delta as MessageDelta
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.types.chat import ChatCompletionChunk
from openai.types.chat.chat_completion_chunk import (
    Choice,
    ChoiceDelta,
    ChoiceDeltaToolCall,
    ChoiceDeltaToolCallFunction,
)
from openai.types.completion_usage import CompletionUsage

from agentledger.agent import ModelResponse
from agentledger.agent.providers import AnthropicModel, OpenAIChatModel
from agentledger.messages import Msg, TextBlock, ThinkingBlock
from agentledger.wire.private import arguments_object, arguments_text
from tests.agent.fake_servers import FakeServer, Reply
from tests.messages.strategies import json_texts

HELLO = [Msg.user("hello")]
_SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_pieces = st.text(st.characters(codec="utf-8"), min_size=1, max_size=6)


def _sse(items: list[Any], *, named: bool, done: bool) -> Reply:
    lines = []
    for item in items:
        data = item.model_dump_json(exclude_unset=True)
        lines.append(f"event: {item.type}\ndata: {data}\n\n" if named else f"data: {data}\n\n")
    if done:
        lines.append("data: [DONE]\n\n")
    return Reply(body="".join(lines).encode(), content_type="text/event-stream")


def _split(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    return [text[a:b] for a, b in itertools.pairwise(points) if text[a:b]]


# -- OpenAI ---------------------------------------------------------------------------------------
def _chunk(delta: ChoiceDelta | None = None, finish: Any = None, usage: Any = None) -> Any:
    choices = [] if delta is None else [Choice(index=0, delta=delta, finish_reason=finish)]
    fields: dict[str, Any] = {"usage": usage} if usage is not None else {}
    return ChatCompletionChunk(
        id="chatcmpl-1",
        object="chat.completion.chunk",
        created=1700000000,
        model="m",
        choices=choices,
        **fields,
    )


@st.composite
def openai_streams(draw: st.DrawFn) -> list[Any]:
    """Text, refusal and reasoning pieces and parallel tool calls, interleaved at random; calls
    start in index order (as servers send them, and as the SDK's accumulator requires)."""
    kinds = st.sampled_from(["content", "refusal", "reasoning"])
    texts = [(k, draw(_pieces)) for k in draw(st.lists(kinds, max_size=5))]
    calls = draw(st.lists(json_texts, max_size=3))
    pieces = [_split(t, draw(st.lists(st.integers(0, 99), max_size=4))) for t in calls]
    chunks = [_chunk(ChoiceDelta(role="assistant", content=""))]
    started = 0
    while True:
        actions = [("text", None)] if texts else []
        if started < len(calls):
            actions.append(("start", started))
        actions += [("args", k) for k in range(started) if pieces[k]]
        if not actions:
            break
        action, k = draw(st.sampled_from(actions))
        if action == "text":
            kind, value = texts.pop(0)
            field = "reasoning_content" if kind == "reasoning" else kind
            chunks.append(_chunk(ChoiceDelta.model_validate({field: value})))
            continue
        function = ChoiceDeltaToolCallFunction(
            arguments=pieces[k].pop(0) if action == "args" else ""
        )
        if action == "start":
            started += 1
            function = ChoiceDeltaToolCallFunction(name=f"tool{k}", arguments="")
            call = ChoiceDeltaToolCall(index=k, id=f"call_{k}", type="function", function=function)
        else:
            call = ChoiceDeltaToolCall(index=k, function=function)
        chunks.append(_chunk(ChoiceDelta(tool_calls=[call])))
    finish = "tool_calls" if calls else "stop"  # the SDK's helper raises on "length"
    chunks.append(_chunk(ChoiceDelta(), finish=finish))
    usage = CompletionUsage(prompt_tokens=5, completion_tokens=7, total_tokens=12)
    chunks.append(_chunk(usage=usage))
    return chunks


@pytest.fixture(scope="module")
def server() -> Iterator[FakeServer]:
    with FakeServer() as s:
        yield s


async def _openai_both(server: FakeServer, chunks: list[Any]) -> tuple[Msg, Any]:
    reply = _sse(chunks, named=False, done=True)
    server.reply(reply, reply)
    client = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="k", max_retries=0)
    async with client:
        ours = [e async for e in OpenAIChatModel("m", client=client).stream(HELLO)][-1]
        messages: Any = [{"role": "user", "content": "hello"}]
        async with client.chat.completions.stream(model="m", messages=messages) as stream:
            theirs = await stream.get_final_completion()
    assert isinstance(ours, ModelResponse)
    return ours.message, theirs


@_SETTINGS
@given(chunks=openai_streams())
def test_openai_adapter_matches_the_sdk_accumulator(server: FakeServer, chunks: list[Any]) -> None:
    msg, completion = asyncio.run(_openai_both(server, chunks))
    sdk = completion.choices[0].message
    texts = [b for b in msg.content if isinstance(b, TextBlock)]
    refused = "".join(b.text for b in texts if b.metadata.get("refusal"))
    said = "".join(b.text for b in texts if not b.metadata.get("refusal"))
    assert said == (sdk.content or "")
    assert refused == (sdk.refusal or "")
    thinking = "".join(b.thinking for b in msg.content if isinstance(b, ThinkingBlock))
    assert thinking == (getattr(sdk, "reasoning_content", None) or "")
    calls = [(c.id, c.name, arguments_text(c)) for c in msg.tool_calls]
    assert calls == [(c.id, c.function.name, c.function.arguments) for c in sdk.tool_calls or []]
    assert msg.usage is not None and msg.usage.output_tokens == completion.usage.completion_tokens


# -- Anthropic ------------------------------------------------------------------------------------
@st.composite
def anthropic_streams(draw: st.DrawFn) -> list[Any]:
    usage = AntUsage(input_tokens=3, output_tokens=1)
    start = Message(id="msg_1", type="message", role="assistant", model="m", content=[],
                    stop_reason=None, stop_sequence=None, usage=usage)  # fmt: skip
    events: list[Any] = [RawMessageStartEvent(type="message_start", message=start)]
    kinds = draw(st.lists(st.sampled_from(["text", "thinking", "redacted", "tool"]), max_size=5))
    for index, kind in enumerate(kinds):
        deltas: list[Any] = []
        if kind == "text":
            block: Any = AntTextBlock(type="text", text="")
            deltas = [
                AntTextDelta(type="text_delta", text=p) for p in draw(st.lists(_pieces, max_size=3))
            ]
        elif kind == "thinking":
            block = AntThinkingBlock(type="thinking", thinking="", signature="")
            deltas = [
                AntThinkingDelta(type="thinking_delta", thinking=p)
                for p in draw(st.lists(_pieces, max_size=3))
            ]
            deltas.append(
                SignatureDelta(
                    type="signature_delta",
                    signature=draw(st.sampled_from(["EqQBCkYI+/==", "c2ln"])),
                )
            )
        elif kind == "redacted":
            block = RedactedThinkingBlock(
                type="redacted_thinking", data="EmwKAhgBEgy3va3pzix/LafPsn4a"
            )
        else:
            block = AntToolUseBlock(type="tool_use", id=f"toolu_{index}", name="f", input={})
            text = draw(json_texts.filter(lambda t: isinstance(_object(t), dict)))
            cuts = draw(st.lists(st.integers(0, 99), max_size=4))
            deltas = [
                InputJSONDelta(type="input_json_delta", partial_json=p) for p in _split(text, cuts)
            ]
        events.append(
            RawContentBlockStartEvent(type="content_block_start", index=index, content_block=block)
        )
        events += [
            RawContentBlockDeltaEvent(type="content_block_delta", index=index, delta=d)
            for d in deltas
        ]
        events.append(RawContentBlockStopEvent(type="content_block_stop", index=index))
    stop = "tool_use" if "tool" in kinds else "end_turn"
    events.append(
        RawMessageDeltaEvent(
            type="message_delta",
            delta=MessageDelta(stop_reason=stop),
            usage=MessageDeltaUsage(output_tokens=9),
        )
    )
    events.append(RawMessageStopEvent(type="message_stop"))
    return events


def _no_constant(name: str) -> Any:
    raise ValueError(name)


def _object(text: str) -> Any:
    """The object a strict-JSON text holds (no NaN), or None: Anthropic streams only that."""
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


async def _anthropic_both(server: FakeServer, events: list[Any]) -> tuple[Msg, Any]:
    reply = _sse(events, named=True, done=False)
    server.reply(reply, reply)
    client = anthropic.AsyncAnthropic(base_url=server.url, api_key="k", max_retries=0)
    async with client:
        ours = [e async for e in AnthropicModel("m", client=client).stream(HELLO)][-1]
        messages: Any = [{"role": "user", "content": "hello"}]
        async with client.messages.stream(model="m", max_tokens=64, messages=messages) as s:
            theirs = await s.get_final_message()
    assert isinstance(ours, ModelResponse)
    return ours.message, theirs


def _sdk_blocks(message: Any) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for block in message.content:
        if block.type == "text":
            if not block.text:
                continue
            if out and out[-1][0] == "text":  # adjacent text of one turn is one block here
                out[-1] = ("text", out[-1][1] + block.text)
                continue
            out.append(("text", block.text))
        elif block.type == "thinking":
            out.append(("thinking", block.thinking, block.signature))
        elif block.type == "redacted_thinking":
            out.append(("redacted", block.data))
        else:
            out.append(("tool_use", block.id, block.name, block.input))
    return out


def _our_blocks(msg: Msg) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for block in msg.content:
        if isinstance(block, TextBlock):
            out.append(("text", block.text))
        elif isinstance(block, ThinkingBlock):
            out.append(
                ("redacted", block.thinking)
                if block.redacted
                else ("thinking", block.thinking, block.signature)
            )
        else:
            out.append(("tool_use", block.id, block.name, arguments_object(block)))
    return out


@_SETTINGS
@given(events=anthropic_streams())
def test_anthropic_adapter_matches_the_sdk_accumulator(
    server: FakeServer, events: list[Any]
) -> None:
    msg, message = asyncio.run(_anthropic_both(server, events))
    assert _our_blocks(msg) == _sdk_blocks(message)
    assert msg.usage is not None and msg.usage.output_tokens == message.usage.output_tokens
