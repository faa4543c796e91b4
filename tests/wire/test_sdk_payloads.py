"""Every payload we build for OpenAI Chat Completions and Anthropic Messages validates against
that SDK's own request types (openai ``ChatCompletionMessageParam``, anthropic ``MessageParam`` /
``ContentBlockParam`` / ``TextBlockParam`` / ``ToolParam``) with no key dropped, over a corpus of
every block type, media kind, tool shape and the payload cases of issue 15; and conversions
between providers are either accepted by the target's rules or refused explicitly."""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

import anthropic.types as ant
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.types.chat import ChatCompletionFunctionToolParam, ChatCompletionMessageParam
from pydantic import TypeAdapter

from agentledger import (
    AudioBlock,
    FileBlock,
    ImageBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    VideoBlock,
)
from agentledger.agent import ToolSpec
from agentledger.agent.providers import AnthropicModel, OpenAIChatModel
from agentledger.errors import HistoryError, UserError
from agentledger.wire import check, from_anthropic, from_openai, repair, to_anthropic, to_openai
from tests.wire.sdk_types import assert_sdk_exact

OPENAI_MESSAGE = TypeAdapter(ChatCompletionMessageParam)
OPENAI_TOOL = TypeAdapter(ChatCompletionFunctionToolParam)
ANTHROPIC_MESSAGE = TypeAdapter(ant.MessageParam)
ANTHROPIC_BLOCK = TypeAdapter(ant.ContentBlockParam)
ANTHROPIC_SYSTEM = TypeAdapter(list[ant.TextBlockParam])
ANTHROPIC_TOOL = TypeAdapter(ant.ToolParam)

PNG, PDF = b"\x89PNG\r\n\x1a\n", b"%PDF-1.7\n"
URL = "https://example.test/x"


def _media() -> list[Any]:
    out: list[Any] = []
    for media_type in ("image/png", "image/jpeg", "image/jpg", "image/gif", "image/webp",
                       "image/bmp", "image/svg+xml"):  # fmt: skip
        out.append(ImageBlock(media_type=media_type, data=PNG, metadata={"detail": "low"}))
    out.append(ImageBlock(media_type="image/*", url=URL))
    for media_type in ("audio/wav", "audio/mpeg", "audio/ogg", "audio/flac"):
        out.append(AudioBlock(media_type=media_type, data=b"RIFF"))
    out.append(AudioBlock(media_type="audio/wav", url=URL))
    out += [
        VideoBlock(media_type="video/mp4", data=b"v"),
        VideoBlock(media_type="video/*", url=URL),
    ]
    for media_type, data in (("application/pdf", PDF), ("text/plain", b"plain"),
                             ("text/plain", b"\xff\xfe"), ("text/csv", b"a,b"),
                             ("application/vnd.openxmlformats-officedocument"
                              ".wordprocessingml.document", b"PK"),
                             ("application/octet-stream", b"\x00")):  # fmt: skip
        out.append(FileBlock(media_type=media_type, data=data))
        out.append(FileBlock(media_type=media_type, data=data, filename="doc"))
    out.append(FileBlock(media_type="application/pdf", url=URL))
    out.append(FileBlock(media_type="text/csv", url=URL))
    for provider in ("openai", "anthropic"):
        meta = {"_provider_file": provider}
        out.append(FileBlock(media_type="application/pdf", url="file-abc", metadata=meta))
        out.append(ImageBlock(media_type="image/png", url="file-img", metadata=meta))
    return out


MEDIA = _media()
ARGUMENTS = ['{"n": 123456789012345678901234567890}', '{"a": 1, "a": 2}', '{"x": 1.0e2}',
             '{"s": "\\u00fc"}', '{"a": tru', "", "[1]"]  # fmt: skip
IDS = ["call_1", "functions.get_weather:0", "call_" + "x" * 50, "toolu_01"]


def _call(call_id: str) -> ToolUseBlock:
    return ToolUseBlock(id=call_id, name="f")


def corpus() -> list[list[Msg]]:
    """Histories covering every block type, media kind, tool shape and the issue's cases."""
    calls = [
        ToolUseBlock(id=f"{tid}-{n}" if n else tid, name="f", arguments=args)
        for n, (tid, args) in enumerate(zip(IDS * 2, ARGUMENTS, strict=False))
    ]
    results = [
        ToolResultBlock(id=c.id, name="f", output=out, is_error=n % 2 == 1)
        for n, (c, out) in enumerate(
            zip(calls, ["ok", "", [TextBlock(text="a"), TextBlock(text=" ")], MEDIA[:4],
                        MEDIA[4:12], MEDIA[12:], [TextBlock(text="t"), MEDIA[0]]], strict=False)
        )
    ]  # fmt: skip
    developer = from_openai([{"role": "developer", "content": "Use metric."}])[0]
    return [
        [Msg.user("hi")],
        [Msg.system("s1"), Msg.system([TextBlock(text="s2"), MEDIA[0]]), Msg.user("x", name="ann")],
        [Msg.user([TextBlock(text="see"), *MEDIA])],
        [Msg.user(" "), Msg.user("\n\t"), Msg.user("real")],
        [
            Msg.user("go"),
            Msg.assistant(
                [
                    ThinkingBlock(thinking="signed", signature="sig=="),
                    ThinkingBlock(thinking="b64data", redacted=True),
                    ThinkingBlock(thinking="unsigned", metadata={"_reasoning_source": "srv"}),
                    TextBlock(text="Let me check."),
                    TextBlock(text="I can't.", metadata={"refusal": True}),
                    MEDIA[0],
                    *calls,
                ]
            ),
            Msg.tool(results),
            Msg.assistant("done"),
            developer,
            Msg.user("thanks"),
        ],
        [Msg.assistant("I start"), Msg.user("ok")],
        [
            Msg.user("a"),
            Msg.assistant("b"),
            Msg.assistant([ThinkingBlock(thinking="t", signature="s"), _call("c")]),
            Msg.tool(ToolResultBlock(id="c", output="r")),
        ],
        [Msg.user("refuse"), Msg.assistant(TextBlock(text="No.", metadata={"refusal": True}))],
    ]


def _openai_ok(msgs: list[Msg], **options: Any) -> list[dict[str, Any]]:
    dicts = to_openai(msgs, **options)
    json.dumps(dicts)
    for i, d in enumerate(dicts):
        # ``reasoning_content`` is the one key compatible servers add, sent only when asked
        strict = {k: v for k, v in d.items() if k != "reasoning_content"}
        assert options.get("reasoning") or strict == d
        assert_sdk_exact(OPENAI_MESSAGE, strict, f"messages[{i}]")
        if d["role"] == "user" and isinstance(d["content"], list):
            for part in d["content"]:
                if part["type"] == "input_audio":
                    assert part["input_audio"]["format"] in ("wav", "mp3")
                if part["type"] == "file" and "file_data" in part["file"]:
                    assert part["file"]["filename"]
    return dicts


def _anthropic_ok(system: Any, turns: list[dict[str, Any]]) -> None:
    json.dumps([system, turns])
    if isinstance(system, list):
        assert_sdk_exact(ANTHROPIC_SYSTEM, system, "system")
    roles = [t["role"] for t in turns]
    assert all(a != b for a, b in itertools.pairwise(roles)), roles
    for i, turn in enumerate(turns):
        assert set(turn) == {"role", "content"} and turn["role"] in ("user", "assistant")
        ANTHROPIC_MESSAGE.validate_python(turn)
        assert turn["content"], f"messages[{i}] is empty"
        for j, block in enumerate(turn["content"]):
            assert_sdk_exact(ANTHROPIC_BLOCK, block, f"messages[{i}].content[{j}]")
            if block["type"] == "text":
                assert block["text"].strip()
            if block["type"] == "tool_use":  # media types are Literals of the SDK types
                assert re.fullmatch(r"[a-zA-Z0-9_-]+", block["id"])


@pytest.mark.parametrize("n", range(len(corpus())))
def test_corpus_payloads_validate_against_the_sdk_types(n: int) -> None:
    msgs = corpus()[n]
    for reasoning in (False, True):
        _openai_ok(repair(msgs).messages, reasoning=reasoning)
    fixed = repair(msgs, target="anthropic").messages
    check(fixed, target="anthropic")
    _anthropic_ok(*to_anthropic(fixed))


def test_whole_requests_validate_including_tools_and_cache_marks() -> None:
    tool = ToolSpec(name="f", description="d", parameters={"type": "object", "properties": {}})
    history = repair(corpus()[4], target="anthropic").messages
    model = AnthropicModel(
        "m", base_url="http://127.0.0.1:9", cache=["system", "tools", "messages"]
    )
    body = model.request(history, system="Be brief.", tools=[tool])
    _anthropic_ok(body["system"], body["messages"])
    for t in body["tools"]:
        assert_sdk_exact(ANTHROPIC_TOOL, t, "tools")
    oai = OpenAIChatModel("m", base_url="http://127.0.0.1:9", send_reasoning=True)
    body = oai.request(repair(corpus()[4]).messages, system="Be brief.", tools=[tool])
    assert "reasoning_content" not in str(body)  # no thinking there came from this server
    for i, d in enumerate(body["messages"]):
        assert_sdk_exact(OPENAI_MESSAGE, d, f"messages[{i}]")
    for t in body["tools"]:
        assert_sdk_exact(OPENAI_TOOL, t, "tools")


def test_the_checker_catches_a_dropped_key() -> None:
    with pytest.raises(AssertionError, match="reasoning_content"):
        assert_sdk_exact(
            OPENAI_MESSAGE, {"role": "assistant", "content": "", "reasoning_content": "r"}
        )
    with pytest.raises(AssertionError, match="bogus"):
        assert_sdk_exact(ANTHROPIC_BLOCK, {"type": "text", "text": "x", "bogus": 1})
    with pytest.raises(Exception, match="format"):  # an iterable item is validated, not skipped
        assert_sdk_exact(
            OPENAI_MESSAGE,
            {
                "role": "user",
                "content": [{"type": "input_audio", "input_audio": {"data": "", "format": "ogg"}}],
            },
        )


# -- any history drawn from the corpus pieces -------------------------------------------------
_pool = [m for history in corpus() for m in history]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_pool), max_size=8))
def test_any_history_converts_to_an_accepted_payload(msgs: list[Msg]) -> None:
    _openai_ok(repair(msgs).messages)
    fixed = repair(msgs, target="anthropic").messages
    system, turns = to_anthropic(fixed)
    assert not turns or turns[0]["role"] == "user"
    _anthropic_ok(system, turns)


# -- cross-provider conversions ------------------------------------------------------------------
def test_anthropic_to_msg_to_anthropic_is_byte_exact_for_signatures() -> None:
    system = [{"type": "text", "text": "s"}]
    turns = [
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hm \u00fc", "signature": "EqQBCkYIARgC+/=="},
                {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a=="},
                {"type": "text", "text": "ok"},
                {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"n": 10**30}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "r"}],
        },
    ]
    back_system, back_turns = to_anthropic(from_anthropic(turns, system))
    assert json.dumps(back_turns) == json.dumps(turns)
    assert back_system == "s"


def test_openai_history_goes_to_anthropic_or_is_refused_explicitly() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/jpg;base64,AAAA"}}
    arguments = '{"n": 18446744073709551616}'
    call = {"id": "functions.get_weather:0", "type": "function"}
    call["function"] = {"name": "w", "arguments": arguments}
    dicts = [
        {"role": "assistant", "content": "Hi, I start."},
        {"role": "user", "content": [image]},
        {"role": "assistant", "content": None, "reasoning_content": "hmm", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "sun"},
        {"role": "developer", "content": "Be brief."},
    ]
    msgs = from_openai(dicts)
    with pytest.raises(HistoryError):
        check(msgs, target="anthropic")  # refused explicitly, with the way out below
    fixed = repair(msgs, target="anthropic").messages
    check(fixed, target="anthropic")
    system, turns = to_anthropic(fixed)
    _anthropic_ok(system, turns)
    assert [t["role"] for t in turns] == ["user", "assistant", "user", "assistant", "user"]
    image = turns[2]["content"][0]
    assert image["source"]["media_type"] == "image/jpeg"
    sent = turns[3]["content"][0]
    assert sent["input"] == {"n": 2**64} and sent["type"] == "tool_use"  # unsigned thinking left
    with pytest.raises(UserError):
        to_anthropic([Msg.user([ToolUseBlock(id="c", name="f")])])  # no format can carry it
