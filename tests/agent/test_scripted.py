"""ScriptedModel: streaming, recording, pausing, errors and script files; ResponseBuilder."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agentledger.agent import (
    Model,
    ModelResponse,
    ModelSettings,
    RedactedThinking,
    ResponseBuilder,
    TextDelta,
    ThinkingDelta,
    ThinkingSignature,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolSpec,
    UsageReport,
    complete,
)
from agentledger.errors import ModelError, UserError
from agentledger.messages import (
    ImageBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    Usage,
    encode,
)
from agentledger.testing.scripted import ScriptedModel
from agentledger.wire.private import arguments_object, arguments_text

RICH = Msg.assistant(
    [
        ThinkingBlock(thinking="The user wants two lookups.", signature="sig-abc"),
        TextBlock(text="Looking both up now."),
        ToolUseBlock(id="call_1", name="search", input={"query": "paris weather", "limit": 3}),
        ToolUseBlock(id="call_2", name="clock", input={"tz": "Europe/Paris", "nested": [1, {}]}),
    ],
    usage=Usage(input_tokens=50, output_tokens=20),
)
HELLO = [Msg.user("hi")]


async def collect(model: Model, messages: list[Msg] = HELLO, **kw: Any) -> list[Any]:
    return [event async for event in model.stream(messages, **kw)]


async def test_deltas_reassemble_to_the_scripted_message() -> None:
    model = ScriptedModel([RICH], chunk_size=3)
    assert isinstance(model, Model)
    events = await collect(model)
    assert len([e for e in events if isinstance(e, ThinkingDelta)]) > 1
    assert len([e for e in events if isinstance(e, TextDelta)]) > 1
    assert events.count(ThinkingSignature("sig-abc")) == 1
    assert [e for e in events if isinstance(e, ToolCallStart)] == [
        ToolCallStart(0, "call_1", "search"),
        ToolCallStart(1, "call_2", "clock"),
    ]
    assert len([e for e in events if isinstance(e, ToolCallDelta) and e.index == 0]) > 1
    assert [e for e in events if isinstance(e, ToolCallEnd)] == [
        ToolCallEnd(0, "call_1"),
        ToolCallEnd(1, "call_2"),
    ]
    assert UsageReport(RICH.usage) in events
    final = events[-1]
    assert final == ModelResponse(RICH, "tool_use")

    builder = ResponseBuilder(id=RICH.id, created_at=RICH.created_at)
    for event in events[:-1]:
        builder.add(event)
    assert builder.build("tool_use").message == RICH
    assert builder.partial() == RICH


async def test_plain_string_turn_and_end_turn() -> None:
    model = ScriptedModel(["Hello there, human."])
    response = await complete(model, HELLO)
    assert response.stop_reason == "end_turn"
    assert response.message.role == "assistant"
    assert response.message.text == "Hello there, human."


async def test_requests_are_recorded() -> None:
    model = ScriptedModel(["one", ModelError("down", status=503, retryable=True), "three"])
    tools = [ToolSpec(name="search", description="web search")]
    settings = ModelSettings(temperature=0)
    first = [Msg.user("q1")]
    await complete(model, first, system="sys", tools=tools, settings=settings)
    with pytest.raises(ModelError) as info:
        await complete(model, [*first, Msg.user("q2")])
    assert (info.value.status, info.value.retryable) == (503, True)
    await complete(model, first)
    assert len(model.requests) == 3
    assert model.requests[0].messages == tuple(first)
    assert model.requests[0].system == "sys"
    assert model.requests[0].tools == tuple(tools)
    assert model.requests[0].settings == settings
    assert [m.text for m in model.requests[1].messages] == ["q1", "q2"]
    assert model.remaining == 0


async def test_running_out_raises_model_error() -> None:
    model = ScriptedModel(["only"])
    await complete(model, HELLO)
    with pytest.raises(ModelError, match=r"run out.*1 turns scripted.*call 2"):
        await complete(model, HELLO)
    assert len(model.requests) == 2


async def test_callable_turns_see_the_request() -> None:
    def echo(messages: list[Msg], tools: tuple[ToolSpec, ...]) -> str:
        return f"{len(messages)} messages, tools: {[t.name for t in tools]}"

    async def call_tool(messages: list[Msg], tools: tuple[ToolSpec, ...]) -> Msg:
        await asyncio.sleep(0)
        return Msg.assistant(ToolUseBlock(id="c9", name=tools[0].name, input={"x": 1}))

    model = ScriptedModel([echo, call_tool])
    tools = [ToolSpec(name="calc")]
    assert (await complete(model, HELLO, tools=tools)).message.text == "1 messages, tools: ['calc']"
    response = await complete(model, HELLO, tools=tools)
    assert response.message.tool_calls == (ToolUseBlock(id="c9", name="calc", input={"x": 1}),)
    assert response.stop_reason == "tool_use"


async def test_redacted_thinking_and_media_pass_through() -> None:
    msg = Msg.assistant(
        [
            ThinkingBlock(thinking="opaque", redacted=True),
            ImageBlock(media_type="image/png", data=b"\x89PNG"),
            TextBlock(text="a chart"),
        ]
    )
    events = await collect(ScriptedModel([msg]))
    assert RedactedThinking("opaque") in events
    assert events[-1].message == msg  # media has no delta form but arrives in the final message


async def test_pause_after_first_argument_delta_then_cancel() -> None:
    model = ScriptedModel([RICH], pause_after=ToolCallDelta)
    builder = ResponseBuilder()

    async def consume() -> None:
        async for event in model.stream(HELLO):
            builder.add(event)

    task = asyncio.create_task(consume())
    await asyncio.wait_for(model.reached.wait(), 5)
    assert isinstance(model.paused_at, ToolCallDelta)
    assert model.paused_at.index == 0
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    partial = builder.partial()
    assert partial.thinking == RICH.thinking
    assert partial.content[0].signature == "sig-abc"
    assert partial.text == RICH.text
    assert partial.tool_calls == ()  # the first call was still streaming
    (call,) = builder.tool_calls
    assert (call.id, call.complete) == ("call_1", False)


async def test_pause_before_response_then_release() -> None:
    model = ScriptedModel([RICH], pause_after=-1)
    seen: list[Any] = []

    async def consume() -> None:
        async for event in model.stream(HELLO):
            seen.append(event)

    task = asyncio.create_task(consume())
    await asyncio.wait_for(model.reached.wait(), 5)
    assert isinstance(model.paused_at, UsageReport)  # the last event before ModelResponse
    assert not any(isinstance(e, ModelResponse) for e in seen)
    assert len([e for e in seen if isinstance(e, ToolCallEnd)]) == 2  # both calls complete
    model.release.set()
    await asyncio.wait_for(task, 5)
    assert isinstance(seen[-1], ModelResponse)
    assert not model.reached.is_set()


async def test_pause_only_selected_turns_with_predicate() -> None:
    model = ScriptedModel(
        ["first answer", RICH],
        pause_after={1: lambda e: isinstance(e, ToolCallEnd) and e.index == 0},
    )
    await complete(model, HELLO)  # turn 0 does not pause
    assert not model.reached.is_set()
    task = asyncio.create_task(complete(model, HELLO))
    await asyncio.wait_for(model.reached.wait(), 5)
    assert model.paused_at == ToolCallEnd(0, "call_1")
    model.release.set()
    assert (await asyncio.wait_for(task, 5)).message == RICH


async def test_pause_after_nth_event() -> None:
    model = ScriptedModel(["abcdefgh"], chunk_size=2, pause_after=2)
    task = asyncio.create_task(complete(model, HELLO))
    await asyncio.wait_for(model.reached.wait(), 5)
    assert model.paused_at == TextDelta("cd")
    model.release.set()
    assert (await task).message.text == "abcdefgh"


def test_bad_scripts_are_refused() -> None:
    with pytest.raises(UserError):
        ScriptedModel("not a list")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="not assistant"):
        ScriptedModel([Msg.user("hi")])
    with pytest.raises(UserError, match="turn 0"):
        ScriptedModel([42])  # type: ignore[list-item]
    with pytest.raises(UserError, match="pause_after"):
        ScriptedModel(["x"], pause_after="soon")  # type: ignore[arg-type]


def test_from_file(tmp_path: Path) -> None:
    codec_msg = Msg.assistant("from the codec", usage=Usage(input_tokens=1))
    turns = [
        "plain text",
        {
            "thinking": "hmm",
            "text": "calling",
            "tool_calls": [{"name": "search", "arguments": {"q": "x"}}, {"name": "noop"}],
            "usage": {"input_tokens": 7, "output_tokens": 3},
        },
        json.loads(encode(codec_msg)),
        {"role": "assistant", "content": [{"type": "text", "text": "no id"}]},
        {"error": {"message": "slow down", "status": 429, "retryable": True}},
    ]
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"turns": turns}))
    model = ScriptedModel.from_file(path)
    assert model.name == "scripted:script.json"
    script = model.script
    assert script[0].text == "plain text"
    assert script[1].content == (
        ThinkingBlock(thinking="hmm"),
        TextBlock(text="calling"),
        ToolUseBlock(id="call_1_0", name="search", input={"q": "x"}),
        ToolUseBlock(id="call_1_1", name="noop"),
    )
    assert script[1].usage == Usage(input_tokens=7, output_tokens=3)
    assert script[2] == codec_msg
    assert script[3].text == "no id"
    assert isinstance(script[4], ModelError)
    assert (script[4].status, script[4].retryable) == (429, True)


async def test_from_file_plays(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps([{"tool_calls": [{"name": "t", "arguments": {"a": 1}}]}]))
    response = await complete(ScriptedModel.from_file(path), HELLO)
    assert response.message.tool_calls == (ToolUseBlock(id="call_0_0", name="t", input={"a": 1}),)


async def test_from_file_plays_arguments_shaped_like_the_raw_marker_as_that_object(
    tmp_path: Path,
) -> None:
    arguments = {"_raw_arguments": "[1, 2]"}  # a tool parameter of that name, not our marker
    path = tmp_path / "s.json"
    path.write_text(json.dumps([{"tool_calls": [{"name": "t", "arguments": arguments}]}]))
    (call,) = (await complete(ScriptedModel.from_file(path), HELLO)).message.tool_calls
    assert arguments_object(call) == arguments
    assert json.loads(arguments_text(call)) == arguments


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ('[{"tool_calls": [{"name": "t", "arguments": [1]}]}]', "must be an object"),
        ("{nope", "not valid JSON"),
        ('{"a": 1}', "list of turns"),
        ('[{"text": "x", "bogus": 1}]', "unknown keys"),
        ('[{"tool_calls": [{"arguments": {}}]}]', "needs a name"),
        ('[{"role": "assistant", "content": [{"type": "nope"}]}]', "not a valid message"),
    ],
)
def test_from_file_errors(tmp_path: Path, content: str, match: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(UserError, match=match):
        ScriptedModel.from_file(path)


def test_from_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="cannot read"):
        ScriptedModel.from_file(tmp_path / "missing.json")


# -- ResponseBuilder details ------------------------------------------------------------------
def test_builder_block_boundaries() -> None:
    b = ResponseBuilder()
    for event in [
        ThinkingDelta("a"),
        ThinkingDelta("b"),
        ThinkingSignature("s1"),
        ThinkingDelta("c"),  # a new thinking block after a signature
        TextDelta("x"),
        ToolCallStart(0, "t0", "f"),
        ToolCallDelta(0, "t0", "{}"),
        ToolCallEnd(0, "t0"),
        TextDelta("y"),
    ]:
        b.add(event)
    assert b.partial().content == (
        ThinkingBlock(thinking="ab", signature="s1"),
        ThinkingBlock(thinking="c"),
        TextBlock(text="x"),
        ToolUseBlock(id="t0", name="f"),
        TextBlock(text="y"),
    )
    assert b.text == "xy"
    assert b.thinking == "abc"


def test_builder_partial_keeps_invalid_complete_call_verbatim() -> None:
    b = ResponseBuilder()
    b.add(ToolCallStart(0, "t0", "f"))
    b.add(ToolCallDelta(0, "t0", "[1, 2]"))
    b.add(ToolCallEnd(0, "t0"))
    assert b.partial().tool_calls == (
        ToolUseBlock(id="t0", name="f", input={"_raw_arguments": "[1, 2]"}),
    )
    assert b.build("tool_use").message.tool_calls == b.partial().tool_calls


def test_builder_keeps_arguments_json_cannot_hold() -> None:
    b = ResponseBuilder()
    b.add(ToolCallStart(0, "t0", "f"))
    b.add(ToolCallDelta(0, "t0", '{"x": NaN, "n": 18446744073709551616}'))
    b.add(ToolCallEnd(0, "t0"))
    (call,) = b.build("tool_use").message.tool_calls
    assert call.input == {"_raw_arguments": '{"x": NaN, "n": 18446744073709551616}'}
    assert call.arguments == '{"x": NaN, "n": 18446744073709551616}'


def test_builder_strict_build_and_contradictions() -> None:
    b = ResponseBuilder()
    b.add(ToolCallStart(0, "t0", "f"))
    b.add(ToolCallDelta(0, "t0", '{"a"'))
    with pytest.raises(ModelError, match="before the arguments"):
        b.build("end_turn")
    with pytest.raises(ModelError, match="started twice"):
        b.add(ToolCallStart(0, "t0", "f"))
    with pytest.raises(ModelError, match="before it started"):
        b.add(ToolCallDelta(3, "t3", "{}"))
    b.add(ToolCallEnd(0, "t0"))
    with pytest.raises(ModelError, match="after it ended"):
        b.add(ToolCallDelta(0, "t0", "}"))


def test_builder_partial_is_stable_and_empty_at_start() -> None:
    b = ResponseBuilder()
    assert b.partial().content == ()
    b.add(TextDelta("hi"))
    first, second = b.partial(), b.partial()
    assert first.id == second.id == b.id
    assert first == second
    b.add(UsageReport(Usage(output_tokens=1)))
    b.add(UsageReport(Usage(output_tokens=5)))  # cumulative: the latest wins
    response = b.build("end_turn")
    assert response.message.id == b.id
    assert response.message.usage == Usage(output_tokens=5)
