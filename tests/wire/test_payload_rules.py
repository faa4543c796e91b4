"""What each provider refuses never reaches it: media it does not take become the media note,
tool ids it does not take are mapped (and back), text it refuses is left out, thinking opens a
merged assistant turn, and ``repair`` gives Anthropic a history it accepts."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

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
from agentledger.errors import UserError
from agentledger.wire import (
    FindingKind,
    ToolIds,
    check,
    from_anthropic,
    from_openai,
    from_responses,
    repair,
    to_anthropic,
    to_openai,
    validate,
    wire_tool_id,
)
from agentledger.wire.repair import CONVERSATION_START, RepairKind

NOTE = re.compile(r"^\[(image|audio|video|file) \([^)]*\)( at \S+)? omitted: .+\]$")


def _openai_part(block: object) -> dict:
    parts = to_openai([Msg.user([TextBlock(text="see"), block])])[0]["content"]
    return parts[1]


def _anthropic_part(block: object) -> dict:
    _, turns = to_anthropic([Msg.user([TextBlock(text="see"), block])])
    return turns[0]["content"][1]


@pytest.mark.parametrize(
    ("block", "kind"),
    [
        (AudioBlock(media_type="audio/wav", data=b"RIFF"), "input_audio"),
        (AudioBlock(media_type="audio/mpeg", data=b"ID3"), "input_audio"),
        (AudioBlock(media_type="audio/ogg", data=b"OggS"), None),
        (AudioBlock(media_type="audio/wav", url="https://x.test/a.wav"), None),
        (ImageBlock(media_type="image/png", data=b"png"), "image_url"),
        (ImageBlock(media_type="image/jpg", data=b"jpg"), "image_url"),
        (ImageBlock(media_type="image/bmp", data=b"BM"), None),
        (ImageBlock(media_type="image/*", url="https://x.test/i"), "image_url"),
        (FileBlock(media_type="application/pdf", data=b"%PDF"), "file"),
        (FileBlock(media_type="text/csv", data=b"a,b"), None),
        (FileBlock(media_type="application/octet-stream", data=b"\x00"), None),
        (VideoBlock(media_type="video/mp4", data=b"mp4"), None),
    ],
)
def test_openai_gets_only_media_it_takes(block: object, kind: str | None) -> None:
    part = _openai_part(block)
    if kind is None:
        assert part["type"] == "text" and NOTE.match(part["text"]), part
    else:
        assert part["type"] == kind
    if kind == "input_audio":
        assert part["input_audio"]["format"] in ("wav", "mp3")


def test_openai_pdf_without_a_name_gets_one() -> None:
    part = _openai_part(FileBlock(media_type="application/pdf", data=b"%PDF"))
    assert part["file"]["filename"] == "file.pdf"
    named = _openai_part(FileBlock(media_type="application/pdf", data=b"%PDF", filename="r.pdf"))
    assert named["file"]["filename"] == "r.pdf"


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        (ImageBlock(media_type="image/jpg", data=b"jpg"), ("image", "image/jpeg")),
        (ImageBlock(media_type="image/webp", data=b"w"), ("image", "image/webp")),
        (ImageBlock(media_type="image/bmp", data=b"BM"), None),
        (ImageBlock(media_type="image/*", url="https://x.test/i"), ("image", None)),
        (FileBlock(media_type="application/pdf", data=b"%PDF"), ("document", "application/pdf")),
        (FileBlock(media_type="text/plain", data=b"hi"), ("document", "text/plain")),
        (FileBlock(media_type="text/plain", data=b"\xff"), None),
        (FileBlock(media_type="text/csv", data=b"a,b"), None),
        (FileBlock(media_type="application/msword", data=b"d"), None),
        (FileBlock(media_type="application/octet-stream", data=b"\x00"), None),
        (FileBlock(media_type="application/pdf", url="https://x.test/r.pdf"), ("document", None)),
        (FileBlock(media_type="text/csv", url="https://x.test/r.csv"), None),
        (AudioBlock(media_type="audio/wav", data=b"RIFF"), None),
    ],
)
def test_anthropic_gets_only_media_it_takes(block: object, expected: tuple | None) -> None:
    part = _anthropic_part(block)
    if expected is None:
        assert part["type"] == "text" and NOTE.match(part["text"]), part
        return
    kind, media_type = expected
    assert part["type"] == kind
    assert part["source"].get("media_type") == media_type


def test_whitespace_text_is_not_sent_to_anthropic() -> None:
    msgs = [
        Msg.user("hi"),
        Msg.assistant([TextBlock(text=" \n"), ToolUseBlock(id="c", name="f")]),
        Msg.tool(ToolResultBlock(id="c", output=[TextBlock(text="ok"), TextBlock(text="  ")])),
        Msg.user("\t"),
        Msg.system(" "),
    ]
    system, turns = to_anthropic(msgs)
    assert system is None
    texts = [b.get("text") for t in turns for b in t["content"]]
    assert all(t is None or t.strip() for t in texts)
    assert turns[2]["content"][0]["content"] == [{"type": "text", "text": "ok"}]


def test_merged_assistant_turn_starts_with_thinking() -> None:
    msgs = [
        Msg.user("hi"),
        Msg.assistant("first"),
        Msg.assistant([ThinkingBlock(thinking="t", signature="s"), ToolUseBlock(id="c", name="f")]),
    ]
    _, turns = to_anthropic(msgs)
    assert [b["type"] for b in turns[1]["content"]] == ["thinking", "text", "tool_use"]


_ids = st.text(max_size=60) | st.sampled_from(
    ["functions.get_weather:0", "call:1", "toolu_01A", "a" * 41, "x" * 40, ""]
)


@given(tool_id=_ids)
def test_tool_ids_are_mapped_deterministically_and_back(tool_id: str) -> None:
    for provider in ("anthropic", "openai"):
        ids = ToolIds(provider)  # type: ignore[arg-type]
        wire = ids.wire(tool_id)
        assert wire == wire_tool_id(provider, tool_id)  # type: ignore[arg-type]
        assert ids.stored(wire) == tool_id
        if provider == "anthropic":
            assert re.fullmatch(r"[a-zA-Z0-9_-]+", wire)
        else:
            assert len(wire) <= 40
        ok = re.fullmatch(r"[a-zA-Z0-9_-]+", tool_id) if provider == "anthropic" else None
        if ok or (provider == "openai" and len(tool_id) <= 40):
            assert wire == tool_id


def test_tool_ids_in_a_history_round_trip() -> None:
    long_id = "call_" + "x" * 60
    msgs = [
        Msg.user("go", created_at=None),
        Msg.assistant(
            [
                ToolUseBlock(id="functions.get_weather:0", name="w"),
                ToolUseBlock(id=long_id, name="w"),
            ],
            created_at=None,
        ),
        Msg.tool(
            [
                ToolResultBlock(id="functions.get_weather:0", name="w", output="sun"),
                ToolResultBlock(id=long_id, name="w", output="rain"),
            ],
            created_at=None,
        ),
    ]
    ant = ToolIds("anthropic")
    system, turns = to_anthropic(msgs, tool_ids=ant)
    sent = [b.get("id") or b.get("tool_use_id") for t in turns[1:] for b in t["content"]]
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]+", s) for s in sent)
    back = from_anthropic(turns, system, tool_ids=ant)
    assert [c.id for c in back[1].tool_calls] == ["functions.get_weather:0", long_id]
    assert [r.id for r in back[2].tool_results] == ["functions.get_weather:0", long_id]
    oai = ToolIds("openai")
    dicts = to_openai(msgs, tool_ids=oai)
    assert all(len(c["id"]) <= 40 for c in dicts[1]["tool_calls"])
    assert dicts[1]["tool_calls"][0]["id"] == "functions.get_weather:0"  # OpenAI takes it
    back = from_openai(dicts, tool_ids=oai)
    assert [c.id for c in back[1].tool_calls] == ["functions.get_weather:0", long_id]


def test_two_ids_mapping_to_one_are_refused() -> None:
    ids = ToolIds("anthropic")
    mapped = ids.wire("a:b")
    with pytest.raises(UserError, match="would both be sent"):
        ids.wire(mapped)  # a stored id that happens to equal another's mapped form
    with pytest.raises(UserError):
        ToolIds("gemini")  # type: ignore[arg-type]


# -- repair for Anthropic ------------------------------------------------------------------------
def test_repair_fixes_a_first_assistant_message_and_a_late_developer_message() -> None:
    late = from_openai([{"role": "developer", "content": "Answer in French."}])[0]
    msgs = [Msg.system("s"), Msg.assistant("hello"), Msg.user("hi"), late, Msg.assistant("ok")]
    assert validate(msgs, target="anthropic")
    report = repair(msgs, target="anthropic")
    assert validate(report.messages, target="anthropic") == []
    assert [c.kind for c in report.changes] == [
        RepairKind.ADDED_USER_MESSAGE,
        RepairKind.SYSTEM_AS_USER,
    ]
    added, turned = report.messages[1], report.messages[4]
    assert added.role == "user" and added.text == CONVERSATION_START
    assert (turned.id, turned.role, turned.text) == (late.id, "user", "Answer in French.")
    assert repair(report.messages, target="anthropic").changes == []
    to_anthropic(report.messages)  # and it converts
    assert repair(msgs).messages == msgs  # the strict target leaves the order alone


_ids_small = st.sampled_from(["c0", "c1"])
_any_msg = st.one_of(
    st.just(Msg.user("u", created_at=None)),
    st.just(Msg.system("s", created_at=None)),
    st.just(Msg.assistant("a", created_at=None)),
    st.lists(_ids_small, max_size=2).map(
        lambda ids: Msg.assistant([ToolUseBlock(id=i, name="f") for i in ids] or "x")
    ),
    st.lists(_ids_small, min_size=1, max_size=2).map(
        lambda ids: Msg.tool([ToolResultBlock(id=i, output="r") for i in ids])
    ),
)


@given(msgs=st.lists(_any_msg, max_size=10), mode=st.sampled_from(["drop", "error_result"]))
def test_repair_for_anthropic_always_yields_an_accepted_history(msgs: list, mode: str) -> None:
    report = repair(msgs, unanswered=mode, target="anthropic")  # type: ignore[arg-type]
    assert validate(report.messages, target="anthropic") == []
    again = repair(report.messages, unanswered=mode, target="anthropic")  # type: ignore[arg-type]
    assert again.changes == [] and again.messages == report.messages


# -- an assistant message with nothing in it never reaches a provider ------------------------------
def _said_nothing(d: dict) -> bool:
    """An assistant chat message with nothing in it (blank or no content, no call, refusal or
    reasoning): what the EMPTY_ASSISTANT rule says strict providers refuse."""
    content = d.get("content")
    blank = content is None or (isinstance(content, str) and not content.strip())
    return blank and not any(d.get(k) for k in ("tool_calls", "refusal", "reasoning_content"))


_thinking = st.sampled_from(
    [
        ThinkingBlock(thinking="unsigned"),
        ThinkingBlock(thinking="signed", signature="sig"),
        ThinkingBlock(thinking="opaque", redacted=True),
        ThinkingBlock(thinking="mine", metadata={"_reasoning_source": "srv"}),
    ]
)
_turn_msg = st.one_of(
    st.just(Msg.user("u", created_at=None)),
    st.just(Msg.user(" ", created_at=None)),
    st.just(Msg.assistant("a", created_at=None)),
    st.just(Msg.assistant(" ", created_at=None)),
    st.lists(_thinking, min_size=1, max_size=2).map(lambda t: Msg.assistant(t, created_at=None)),
    st.tuples(_thinking, st.sampled_from(["", "text"])).map(
        lambda tt: Msg.assistant([tt[0], TextBlock(text=tt[1])], created_at=None)
    ),
    st.lists(_ids_small, min_size=1, max_size=2, unique=True).map(
        lambda ids: Msg.assistant([ToolUseBlock(id=i, name="f") for i in ids], created_at=None)
    ),
    st.lists(_ids_small, min_size=1, max_size=2, unique=True).map(
        lambda ids: Msg.tool([ToolResultBlock(id=i, output="r") for i in ids], created_at=None)
    ),
)


@given(msgs=st.lists(_turn_msg, max_size=8), reasoning=st.sampled_from([False, True, "srv"]))
def test_to_openai_never_writes_an_assistant_message_with_nothing_in_it(
    msgs: list[Msg], reasoning: bool | str
) -> None:
    dicts = to_openai(msgs, reasoning=reasoning)
    assert not [d for d in dicts if d["role"] == "assistant" and _said_nothing(d)], dicts
    if not validate(msgs, target="openai"):  # and what passes the check reads back valid
        assert validate(from_openai(dicts), target="openai") == []


@given(msgs=st.lists(_turn_msg.filter(lambda m: m.role != "tool"), max_size=6))
def test_anthropic_order_is_judged_on_what_to_anthropic_sends(msgs: list[Msg]) -> None:
    _, turns = to_anthropic(msgs)
    bad_order = any(
        f.kind == FindingKind.BAD_ROLE_ORDER for f in validate(msgs, target="anthropic")
    )
    assert bad_order == bool(turns and turns[0]["role"] == "assistant"), turns


def _responses_turn(calls: int, with_reasoning: bool) -> list[Msg]:
    items: list[dict] = [{"role": "user", "content": "weather in Paris?"}]
    if with_reasoning:
        summary = [{"type": "summary_text", "text": "need weather"}]
        items.append({"type": "reasoning", "id": "rs_1", "summary": summary})
    for k in range(calls):
        items.append({"type": "function_call", "call_id": f"c{k}", "name": "w", "arguments": "{}"})
    items += [
        {"type": "function_call_output", "call_id": f"c{k}", "output": "sun"} for k in range(calls)
    ]
    return from_responses(items)


@given(
    calls=st.integers(1, 4),
    with_reasoning=st.booleans(),
    reasoning=st.sampled_from([False, True]),
)
def test_a_responses_turn_has_one_shape_whatever_its_number_of_calls(
    calls: int, with_reasoning: bool, reasoning: bool
) -> None:
    msgs = _responses_turn(calls, with_reasoning)
    check(msgs, target="openai")
    dicts = to_openai(msgs, reasoning=reasoning)
    assert [d["role"] for d in dicts] == ["user", "assistant"] + ["tool"] * calls
    answer = dicts[1]
    assert answer["content"] is None and len(answer["tool_calls"]) == calls
    assert ("reasoning_content" in answer) == (reasoning and with_reasoning)
