"""Anthropic Messages API conversion: alternation, tool-result turns, thinking, media."""

from __future__ import annotations

import copy
import itertools
from typing import Any

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
    UserError,
)
from agentledger.errors import AgentLedgerError
from agentledger.wire import from_anthropic, to_anthropic

from ..messages.strategies import every_damage
from .conftest import PDF, PNG
from .shapes import ANTHROPIC_SHAPES


def _roles_alternate(turns: list[dict]) -> bool:
    roles = [t["role"] for t in turns]
    return all(a != b for a, b in itertools.pairwise(roles))


def test_consecutive_tool_results_and_user_text_become_one_user_turn() -> None:
    msgs = [
        Msg.user("go"),
        Msg.assistant([ToolUseBlock(id="a", name="f"), ToolUseBlock(id="b", name="g")]),
        Msg.tool(ToolResultBlock(id="a", output="A")),
        Msg.tool(ToolResultBlock(id="b", output="B", is_error=True)),
        Msg.user("and now?"),
    ]
    system, turns = to_anthropic(msgs)
    assert system is None
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    assert turns[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "a", "content": "A"},
        {"type": "tool_result", "tool_use_id": "b", "content": "B", "is_error": True},
        {"type": "text", "text": "and now?"},
    ]


def test_tool_results_come_first_in_a_merged_user_turn() -> None:
    msgs = [
        Msg.assistant(ToolUseBlock(id="a", name="f")),
        Msg.user("interjection"),
        Msg.tool(ToolResultBlock(id="a", output="A")),
    ]
    _, turns = to_anthropic(msgs)
    assert [b["type"] for b in turns[1]["content"]] == ["tool_result", "text"]


def test_system_messages_are_hoisted() -> None:
    one, _ = to_anthropic([Msg.system("be brief"), Msg.user("hi")])
    assert one == "be brief"
    two, turns = to_anthropic([Msg.system("a"), Msg.user("hi"), Msg.system("b")])
    assert two == [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    assert turns == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


def test_round_trip_keeps_roles_pairing_media_and_thinking(history: list[Msg]) -> None:
    system, turns = to_anthropic(history)
    back = from_anthropic(turns, system)
    assert [m.role for m in back] == ["system", "user", "assistant", "tool", "assistant", "user"]
    asst = back[2]
    assert asst.content[0] == ThinkingBlock(thinking="Look closer.", signature="sig-abc")
    assert asst.tool_calls == history[2].tool_calls
    assert back[3].tool_results == history[3].tool_results  # ids, names, outputs, is_error
    image, note, document = back[1].content[1:]
    assert isinstance(image, ImageBlock) and (image.data, image.media_type) == (PNG, "image/png")
    assert isinstance(note, TextBlock) and "audio" in note.text  # the API takes no audio
    assert isinstance(document, FileBlock)
    assert (document.data, document.media_type, document.filename) == (
        PDF,
        "application/pdf",
        "report.pdf",
    )
    for original, copy_ in zip(history[3:], back[3:]):
        assert copy_.content == original.content


def test_redacted_and_unsigned_thinking() -> None:
    msg = Msg.assistant(
        [
            ThinkingBlock(thinking="opaque==", redacted=True),
            ThinkingBlock(thinking="no signature (another provider)"),
            TextBlock(text="hi"),
        ]
    )
    _, turns = to_anthropic([Msg.user("q"), msg])
    assert turns[1]["content"] == [
        {"type": "redacted_thinking", "data": "opaque=="},
        {"type": "text", "text": "hi"},
    ]
    back = from_anthropic(turns)
    assert back[1].content[0] == ThinkingBlock(thinking="opaque==", redacted=True)


def test_media_sources() -> None:
    msg = Msg.user(
        [
            ImageBlock(media_type="image/jpeg", url="https://x.test/a.jpg"),
            FileBlock(media_type="text/plain", data=b"plain words", filename="notes.txt"),
            AudioBlock(media_type="audio/wav", data=b"RIFF"),
        ]
    )
    _, turns = to_anthropic([msg])
    image, doc, note = turns[0]["content"]
    assert image == {"type": "image", "source": {"type": "url", "url": "https://x.test/a.jpg"}}
    assert doc == {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": "plain words"},
        "title": "notes.txt",
    }
    assert note["type"] == "text"
    back = from_anthropic(turns)[0].content
    assert back[0] == msg.content[0]
    assert back[1] == msg.content[1]


def test_consecutive_assistant_messages_merge_and_empty_text_is_not_sent() -> None:
    blank_then_b = [TextBlock(text=""), TextBlock(text="b")]
    msgs = [Msg.user("q"), Msg.assistant("a"), Msg.assistant(blank_then_b)]
    _, turns = to_anthropic(msgs)
    assert turns[1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
    }


def test_from_anthropic_splits_user_turns_and_never_mutates() -> None:
    turns = [
        {"role": "user", "content": "go", "_session_tag": "x"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {"q": 1}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": [{"type": "text", "text": "r"}],
                },
                {"type": "text", "text": "more"},
            ],
        },
    ]
    before = copy.deepcopy(turns)
    msgs = from_anthropic(turns, "sys", ids="derived")
    again = from_anthropic(turns, "sys", ids="derived")
    assert turns == before
    assert msgs == again and [m.digest for m in msgs] == [m.digest for m in again]
    assert [m.role for m in msgs] == ["system", "user", "assistant", "tool", "user"]
    assert msgs[1].metadata == {"_session_tag": "x"}
    assert msgs[3].tool_results[0] == ToolResultBlock(id="t1", name="f", output="r")
    assert len({m.id for m in msgs}) == 5


def test_refuses_what_it_cannot_represent() -> None:
    with pytest.raises(UserError, match="unsupported content block"):
        from_anthropic([{"role": "assistant", "content": [{"type": "server_tool_use"}]}])
    with pytest.raises(UserError, match="user or assistant"):
        from_anthropic([{"role": "system", "content": "x"}])
    with pytest.raises(UserError, match="tool_use"):
        to_anthropic([Msg.user(ToolUseBlock(id="a", name="f"))])


_msg = st.one_of(
    st.text(min_size=1, max_size=5).map(lambda t: Msg.user(t)),
    st.text(min_size=1, max_size=5).map(lambda t: Msg.assistant(t)),
    st.integers(0, 3).map(lambda n: Msg.assistant(ToolUseBlock(id=f"c{n}", name="f"))),
    st.integers(0, 3).map(lambda n: Msg.tool(ToolResultBlock(id=f"c{n}", output="r"))),
    st.text(max_size=5).map(lambda t: Msg.system(t)),
)


@given(st.lists(_msg, max_size=12))
def test_turns_always_alternate_and_are_never_empty(msgs: list[Msg]) -> None:
    _, turns = to_anthropic(msgs)
    assert _roles_alternate(turns)
    assert all(t["content"] for t in turns)
    for turn in turns:
        types = [b["type"] for b in turn["content"]]
        if turn["role"] == "user":  # results first
            assert types == sorted(types, key=lambda t: t != "tool_result")
        else:
            assert "tool_result" not in types


@pytest.mark.parametrize("shape", ANTHROPIC_SHAPES, ids=["media", "assistant", "result", "text"])
def test_every_damage_of_a_turn_is_read_or_refused(shape: dict[str, Any]) -> None:
    """Each turn changed in every way ``every_damage`` knows (any JSON at any path, a key
    removed, a block repeated): refused with a typed error, or read into messages written as
    turns that read and are written again the same."""
    call = ANTHROPIC_SHAPES[1]  # the call a tool result answers
    for where, turn in every_damage(shape):
        try:
            msgs = from_anthropic([call, turn])
        except AgentLedgerError:
            continue
        try:
            system, turns = to_anthropic(msgs)
        except AgentLedgerError:
            continue  # read, but not a history Anthropic takes as it is (a lone result, say)
        again = from_anthropic(turns, system)
        assert to_anthropic(again) == (system, turns), where
