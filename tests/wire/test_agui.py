"""AG-UI 1.0 conversion: output validates against ag_ui.core, ids and content round-trip."""

from __future__ import annotations

import copy
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
    VideoBlock,
)
from agentledger.errors import AgentLedgerError
from agentledger.wire import (
    from_agui,
    reasoning_message_id,
    to_agui,
    to_agui_models,
    to_anthropic,
    tool_message_id,
)
from agentledger.wire.agui import normalize_agui
from tests.messages.strategies import JSON_JUNK, assert_round_trip, every_damage
from tests.wire.agui_strategies import agui_message
from tests.wire.shapes import AGUI_SHAPES

core = pytest.importorskip("ag_ui.core")
from pydantic import TypeAdapter  # noqa: E402

_adapter = TypeAdapter(core.Message)


def assert_valid_agui(dicts: list[dict[str, Any]]) -> None:
    """Each dict parses as an ``ag_ui.core`` message with no unknown field, and serialises back
    to exactly itself (so nothing is misspelled, misplaced or null)."""
    for d in dicts:
        model = _adapter.validate_python(d)
        assert not model.model_extra, d
        assert model.model_dump(by_alias=True, mode="json") == d


def _rich() -> list[Msg]:
    image = ImageBlock(media_type="image/png", data=b"\x89PNG\x00", metadata={"alt": "cat"})
    return [
        Msg.system("rules", id="s", metadata={"tag": b"\x00\x01"}, created_at=None),
        Msg.user(
            [
                TextBlock(text="look"),
                image,
                AudioBlock(media_type="audio/ogg", url="https://x.test/a.ogg"),
                VideoBlock(media_type="video/mp4", data=b"\x00\x00\x00\x18ftyp"),
                FileBlock(media_type="application/pdf", data=b"%PDF", filename="r.pdf"),
            ],
            id="u",
            name="ann",
            created_at=None,
        ),
        Msg.assistant(
            [
                ThinkingBlock(thinking="first", signature="sig-1"),
                ThinkingBlock(thinking="ENCRYPTED", redacted=True),
                TextBlock(text="Let me check."),
                ToolUseBlock(id="c1", name="zoom", input={"x": 1}, metadata={"ui": "card"}),
                ToolUseBlock(id="c2", name="ocr", input={"_raw_arguments": "{oops"}),
            ],
            id="a",
            created_at=None,
        ),
        Msg.tool(
            [
                ToolResultBlock(id="c1", name="zoom", output=[TextBlock(text="z"), image]),
                ToolResultBlock(id="c2", name="ocr", output="bad args", is_error=True),
            ],
            id="t",
            created_at=None,
        ),
        Msg.assistant(ThinkingBlock(thinking="pondering", signature="sig-2"), id="think-only"),
        Msg.assistant("done", id="a2", metadata={"score": 0.5}, created_at=None),
    ]


def test_output_validates_against_ag_ui_core() -> None:
    assert_valid_agui(to_agui(_rich()))


def test_to_agui_models_gives_core_models() -> None:
    models = to_agui_models(_rich())
    assert isinstance(models[0], core.SystemMessage)
    assert isinstance(models[2], core.ReasoningMessage)
    assert {type(m).__name__ for m in models} >= {"ToolMessage", "AssistantMessage", "UserMessage"}


def test_round_trip_is_exact() -> None:
    msgs = [m.replace(created_at=None) for m in _rich()]
    dicts = to_agui(msgs)
    back = from_agui(dicts)
    assert [m.id for m in back] == [m.id for m in msgs]
    assert back == msgs
    assert [m.digest for m in back] == [m.digest for m in msgs]
    assert from_agui(to_agui_models(msgs)) == msgs  # models are read as well as dicts


def test_derived_ids() -> None:
    dicts = to_agui(_rich())
    ids = [d["id"] for d in dicts]
    assert ids == [
        "s",
        "u",
        reasoning_message_id("a", 0),
        reasoning_message_id("a", 1),
        "a",
        tool_message_id("t", 0),
        tool_message_id("t", 1),
        reasoning_message_id("think-only", 0),
        "a2",
    ]
    assert ids[6] == "t:1" and ids[2] == "a:reasoning:0"


def test_shapes_of_calls_results_and_reasoning() -> None:
    dicts = {d["id"]: d for d in to_agui(_rich())}
    assert dicts["a"]["toolCalls"] == [
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "zoom", "arguments": '{"x":1}'},
            "metadata": {"ui": "card"},
        },
        {"id": "c2", "type": "function", "function": {"name": "ocr", "arguments": "{oops"}},
    ]
    assert dicts["t:1"] == {
        "id": "t:1",
        "role": "tool",
        "toolCallId": "c2",
        "content": "bad args",
        "error": "bad args",
    }
    assert dicts["a:reasoning:0"] == {
        "id": "a:reasoning:0",
        "role": "reasoning",
        "content": "first",
        "encryptedValue": "sig-1",
        "metadata": {"agentledger": {"signedBy": "anthropic"}},
    }
    assert dicts["s"]["metadata"] == {"tag": {"$bytes": "AAE="}}


def test_client_messages_with_their_own_ids() -> None:
    dicts = [
        {"id": "d1", "role": "developer", "content": "dev rules"},
        {"id": "u1", "role": "user", "content": "hi"},
        {"id": "r1", "role": "reasoning", "content": "client-side thought"},
        {"id": "act", "role": "activity", "activityType": "progress", "content": {"pct": 5}},
        {
            "id": "a1",
            "role": "assistant",
            "toolCalls": [
                {"id": "fe", "type": "function", "function": {"name": "pick", "arguments": "{}"}}
            ],
        },
        {"id": "x1", "role": "tool", "toolCallId": "fe", "content": "", "error": "user cancelled"},
        {"id": "x1:9", "role": "tool", "toolCallId": "fe2", "content": "loose"},
    ]
    before = copy.deepcopy(dicts)
    msgs = from_agui(dicts)
    assert dicts == before
    assert [(m.id, m.role) for m in msgs] == [
        ("d1", "system"),
        ("u1", "user"),
        ("r1", "assistant"),
        ("a1", "assistant"),
        ("x1", "tool"),
        ("x1:9", "tool"),  # not the next result index of x1: a message of its own
    ]
    cancelled = msgs[4].tool_results[0]
    assert (cancelled.name, cancelled.is_error, cancelled.text) == ("pick", True, "user cancelled")
    assert to_agui(msgs[:1]) == [dicts[0]]  # developer stays developer
    assert all(m.created_at is None for m in msgs)


def test_legacy_binary_parts_are_read() -> None:
    (msg,) = from_agui(
        [
            {
                "id": "u",
                "role": "user",
                "content": [
                    {"type": "binary", "mimeType": "image/png", "data": "iVBO"},
                    {"type": "binary", "mimeType": "application/zip", "url": "https://x.test/z"},
                ],
            }
        ]
    )
    assert msg.content == (
        ImageBlock(media_type="image/png", data=b"\x89PN"),
        FileBlock(media_type="application/zip", url="https://x.test/z"),
    )


def test_bad_input_is_refused() -> None:
    with pytest.raises(UserError, match="id"):
        from_agui([{"role": "user", "content": "x"}])
    with pytest.raises(UserError, match="role"):
        from_agui([{"id": "x", "role": "robot", "content": "x"}])
    ok, bad = {"id": "a", "role": "user", "content": "x"}, {"id": "x", "role": "user", "name": 7}
    with pytest.raises(UserError, match=r"message 1 .*user\.name: Input should be a valid string"):
        from_agui([ok, {**bad, "content": "x"}])
    with pytest.raises(UserError, match="not a JSON object"):
        from_agui(["hello"])
    for value in (10**30, [2**64], {"deep": -(2**63) - 1}):  # kept only by a fix: past 64 bits
        with pytest.raises(UserError, match=r"message 'u' cannot be stored: .*64 bits"):
            from_agui([{"id": "u", "role": "user", "content": "hi", "metadata": {"n": value}}])
        with pytest.raises(UserError, match=r"message 't' cannot be stored: .*64 bits"):
            from_agui([{"id": "t", "role": "tool", "toolCallId": "c", "content": "r",
                        "metadata": {"n": value}}])  # fmt: skip
    with pytest.raises(UserError, match="base64"):
        from_agui(
            [
                {
                    "id": "x",
                    "role": "user",
                    "content": [
                        {
                            "type": "image",
                            "source": {"type": "data", "value": "!!", "mimeType": "image/png"},
                        }
                    ],
                }
            ]
        )


_media = st.sampled_from([ImageBlock, AudioBlock, VideoBlock, FileBlock])


@given(
    parts=st.lists(
        st.one_of(
            st.text(max_size=10).map(lambda t: TextBlock(text=t)),
            st.tuples(_media, st.binary(max_size=16)).map(
                lambda p: p[0](media_type="application/x-test", data=p[1])
            ),
        ),
        min_size=2,
        max_size=5,
    ),
    n_results=st.integers(1, 4),
)
def test_user_and_tool_content_round_trips(parts: list, n_results: int) -> None:
    results = [ToolResultBlock(id=f"c{i}", output=parts) for i in range(n_results)]
    calls = [ToolUseBlock(id=f"c{i}", name="") for i in range(n_results)]
    msgs = [
        Msg.user(parts, id="u", created_at=None),
        Msg.assistant(calls, id="a", created_at=None),
        Msg.tool(results, id="t", created_at=None),
    ]
    dicts = to_agui(msgs)
    assert_valid_agui(dicts)
    assert from_agui(dicts) == msgs


# -- every AG-UI message a client can send comes back unchanged (issue 13, item 5) ------------
def test_client_reasoning_id_comes_back() -> None:
    sent = [
        {"id": "u", "role": "user", "content": "hi"},
        {"id": "r-1", "role": "reasoning", "content": "thinking it over"},
        {"id": "a", "role": "assistant", "content": "hello"},
    ]
    msgs = from_agui(sent)
    assert [m.id for m in msgs] == ["u", "r-1", "a"]
    (thought,) = msgs[1].content
    assert isinstance(thought, ThinkingBlock) and thought.thinking == "thinking it over"
    assert to_agui(msgs) == sent


def test_tool_error_text_comes_back_and_reaches_the_model() -> None:
    sent = [
        {
            "id": "a",
            "role": "assistant",
            "toolCalls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"id": "t", "role": "tool", "toolCallId": "c", "content": "partial", "error": "Timeout"},
    ]
    msgs = from_agui(sent)
    result = msgs[1].tool_results[0]
    assert result.is_error and result.text == "partial\nTimeout"
    assert to_agui(msgs) == sent


def test_encrypted_values_on_every_kind_come_back() -> None:
    call = {
        "id": "c",
        "type": "function",
        "function": {"name": "f", "arguments": '{"x":1}'},
        "encryptedValue": "ev-call",
    }
    sent = [
        {"id": "s", "role": "system", "content": "rules", "encryptedValue": "ev-sys"},
        {"id": "d", "role": "developer", "content": "dev", "encryptedValue": "ev-dev"},
        {"id": "u", "role": "user", "content": "hi", "encryptedValue": "ev-user"},
        {"id": "r", "role": "reasoning", "content": "hm", "encryptedValue": "sig"},
        {"id": "a", "role": "assistant", "toolCalls": [call], "encryptedValue": "ev-a"},
        {"id": "t", "role": "tool", "toolCallId": "c", "content": "ok", "encryptedValue": "ev-t"},
    ]
    msgs = from_agui(sent)
    assert to_agui(msgs) == sent
    assert msgs[3].content[0].signature is None  # the client's value: a fix, never a signature


_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)


@given(
    value=_text.filter(bool),
    thinking=_text,
    mark=st.sampled_from([None, "anthropic", "openai", True]),
)
def test_an_encrypted_value_is_a_signature_only_where_we_marked_it_anthropic(
    value: str, thinking: str, mark: Any
) -> None:
    """A client's ``encryptedValue`` (OpenAI's encrypted reasoning, say) is kept and given
    back, never sent to Anthropic as a signature: Anthropic refuses a request holding one it
    did not make, and every later request over that history."""
    reasoning: dict[str, Any] = {"id": "r", "role": "reasoning", "content": thinking}
    reasoning["encryptedValue"] = value
    if mark is not None:
        reasoning["metadata"] = {"agentledger": {"signedBy": mark}}
    call = {"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{}"}}
    sent = [
        {"id": "u1", "role": "user", "content": "weather?"},
        reasoning,
        {"id": "a1", "role": "assistant", "toolCalls": [call]},
        {"id": "t1", "role": "tool", "toolCallId": "c1", "content": "sunny"},
    ]
    msgs = from_agui(sent)
    assert to_agui(msgs) == sent
    signed = [b.signature for m in msgs for b in m.content if isinstance(b, ThinkingBlock)]
    assert signed == [value if mark == "anthropic" else None]
    _, turns = to_anthropic(msgs)
    thinking_sent = [b for t in turns for b in t["content"] if b["type"] == "thinking"]
    expected = {"type": "thinking", "thinking": thinking, "signature": value}
    assert thinking_sent == ([expected] if mark == "anthropic" else [])


@given(signature=_text.filter(bool), thinking=_text)
def test_our_own_signed_reasoning_comes_back_signed_through_a_client(
    signature: str, thinking: str
) -> None:
    msgs = [
        Msg.user("weather?", id="u", created_at=None),
        Msg.assistant(
            [ThinkingBlock(thinking=thinking, signature=signature), ToolUseBlock(id="c", name="w")],
            id="a",
            created_at=None,
        ),
        Msg.tool(ToolResultBlock(id="c", name="w", output="sunny"), id="t", created_at=None),
    ]
    held = [normalize_agui(d) for d in to_agui(msgs)]  # a client's copy of the snapshot
    back = from_agui(held)
    assert back == msgs
    assert to_anthropic(back) == to_anthropic(msgs)


def test_unknown_fields_and_odd_metadata_come_back() -> None:
    sent = [
        {
            "id": "u",
            "role": "user",
            "content": [{"type": "text", "text": "one part", "id": "p1", "metadata": "note"}],
            "subagentRunId": "sub-1",
            "futureField": {"x": [1, 2]},
            "metadata": {"_private": 1, "agentledger": {"mine": True}, "$bytes": "AAE="},
        },
        {"id": "a", "role": "assistant", "name": "", "content": "", "toolCalls": []},
    ]
    msgs = from_agui(sent)
    assert msgs[0].text == "one part"
    assert "_private" not in msgs[0].metadata  # a client cannot write private metadata
    assert to_agui(msgs) == sent
    assert_valid_agui([d for d in to_agui(msgs) if "futureField" not in d])


def test_a_fix_never_patches_an_edited_message_back() -> None:
    (msg,) = from_agui([{"id": "u", "role": "user", "content": [{"type": "text", "text": "x"}]}])
    assert to_agui([msg])[0]["content"] == [{"type": "text", "text": "x"}]
    edited = msg.replace(content="y")  # same metadata (and fix), new content
    assert to_agui([edited]) == [{"id": "u", "role": "user", "content": "y"}]


@given(st.lists(agui_message(), max_size=6))
def test_every_client_message_round_trips_exactly(sent: list[dict[str, Any]]) -> None:
    before = copy.deepcopy(sent)
    msgs = from_agui(sent)
    assert sent == before
    assert to_agui(msgs) == sent
    again = from_agui(to_agui(msgs))
    assert again == msgs and [m.digest for m in again] == [m.digest for m in msgs]
    for msg in msgs:  # what the run holds is what a store gives back, type for type
        assert_round_trip(msg)
    # a server reads its request's messages once, normalized, and converts them as they are
    parsed = [normalize_agui(d, i) for i, d in enumerate(sent)]
    read = from_agui(parsed, normalized=True)
    assert read == msgs and [m.digest for m in read] == [m.digest for m in msgs]


def test_objects_in_a_list_of_part_metadata_are_read_as_the_store_reads_them() -> None:
    """A client's part metadata holding objects inside a list: the message a run holds is the
    one a store gives back (found by the property above once it compared types: the objects
    stayed plain dicts, a bytes tag among them undone only on the way back)."""
    meta = {"a": [{"$bytes": "cQ=="}], "b": [{"c": 1}, [{"$map": {"$bytes": 2}}]]}
    part = {"type": "text", "text": "x", "metadata": meta}
    (msg,) = from_agui([{"id": "u", "role": "user", "content": [part]}])
    assert_round_trip(msg)
    got = msg.content[0].metadata
    assert got["a"] == (b"q",) and got["b"] == ({"c": 1}, ({"$bytes": 2},))
    assert to_agui([msg])[0]["content"][0]["metadata"] == meta


@pytest.mark.parametrize("kind", ["url", "file"])
def test_a_media_locator_with_control_characters_is_refused(kind: str) -> None:
    part = {"type": "image", "source": {"type": kind, "value": "\x00blob:" + "ab" * 16}}
    with pytest.raises(UserError, match="control character"):
        from_agui([{"id": "u", "role": "user", "content": [part]}])


def _texts(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], bool]]:
    """Where ``value`` holds text: (path, True) for a key, (path, False) for a string."""
    if isinstance(value, str):
        return [(path, False)]
    if isinstance(value, dict):
        found = [((*path, key), True) for key in value]
        return found + [t for key, item in value.items() for t in _texts(item, (*path, key))]
    if isinstance(value, list):
        return [t for i, item in enumerate(value) for t in _texts(item, (*path, i))]
    return []


def _with_surrogate(value: Any, path: tuple[Any, ...], in_key: bool) -> Any:
    """A copy of ``value`` with a lone surrogate added to the key or string at ``path``."""
    if not path:
        return value + "\ud800"
    head, rest = path[0], path[1:]
    if isinstance(value, list):
        return [_with_surrogate(v, rest, in_key) if i == head else v for i, v in enumerate(value)]
    if in_key and not rest:
        return {(k + "\udfff" if k == head else k): v for k, v in value.items()}
    return {k: _with_surrogate(v, rest, in_key) if k == head else v for k, v in value.items()}


@given(st.lists(agui_message(), min_size=1, max_size=3), st.data())
def test_text_utf8_cannot_encode_is_refused_by_where_the_client_put_it(
    sent: list[dict[str, Any]], data: st.DataObject
) -> None:
    """A lone surrogate anywhere in a client's message, in a string or a key, is refused with
    ``UserError`` naming the message and the place in it (it was named by an internal
    ``_agui.patch`` path, or, in a key, escaped as pydantic's own serialization error)."""
    index = data.draw(st.integers(0, len(sent) - 1))
    path, in_key = data.draw(st.sampled_from(_texts(sent[index])))
    sent[index] = _with_surrogate(sent[index], path, in_key)
    with pytest.raises(UserError, match=rf"^message {index} "):
        from_agui(sent)


@pytest.mark.parametrize("shape", AGUI_SHAPES, ids=lambda d: d["id"])
def test_every_damage_of_a_client_message_is_read_or_refused(shape: dict[str, Any]) -> None:
    """Each AG-UI message changed in every way ``every_damage`` knows (any JSON at any path,
    a key removed, a part repeated; JSON only, as a client sends): refused with a typed error,
    or read into messages whose AG-UI form validates and reads back as the same messages (a
    legacy binary part whose mimeType was not a string raised AttributeError)."""
    call = AGUI_SHAPES[2]  # the call a tool message answers
    for where, d in every_damage(shape, JSON_JUNK):
        try:
            msgs = from_agui([call, d])
        except AgentLedgerError:
            continue
        written = to_agui(msgs)
        assert_valid_agui(written)
        assert from_agui(written) == msgs, where
