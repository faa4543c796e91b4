"""OpenAI chat-completions conversion: round trips, ids, media, arguments, derived ids."""

from __future__ import annotations

import copy
import json

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
from agentledger.wire import derived_id, from_openai, to_openai

from .conftest import PDF, PNG, WAV


def test_round_trip_keeps_ids_roles_pairing_and_media(history: list[Msg]) -> None:
    dicts = to_openai(history, include_ids=True)
    back = from_openai(dicts)
    # the two-result tool message becomes two OpenAI messages and so two Msgs
    assert [m.id for m in back] == [
        "m-sys", "m-user", "m-asst", "m-tool", "m-tool:1", "m-final", "m-thanks",
    ]  # fmt: skip
    roles = [m.role for m in back]
    assert roles == ["system", "user", "assistant", "tool", "tool", "assistant", "user"]
    for copy_, original in [(0, 0), (1, 1), (5, 4), (6, 5)]:
        assert back[copy_] == history[original]
        assert back[copy_].digest == history[original].digest
    asst = back[2]
    assert [c.id for c in asst.tool_calls] == ["call-1", "call-2"]
    assert asst.tool_calls[0].input == {"factor": 2, "area": (1, 2)}
    assert asst.thinking == ""  # signed (Anthropic's) thinking is never sent to OpenAI
    assert asst.text == "Checking."
    results = back[3].tool_results + back[4].tool_results
    assert [(r.id, r.name, r.text) for r in results] == [
        ("call-1", "zoom", "zoomed"),
        ("call-2", "ocr", "failed"),
    ]
    image, audio, file = back[1].content[1:]
    assert isinstance(image, ImageBlock) and (image.data, image.media_type) == (PNG, "image/png")
    assert isinstance(audio, AudioBlock) and (audio.data, audio.media_type) == (WAV, "audio/wav")
    assert isinstance(file, FileBlock) and (file.data, file.media_type) == (PDF, "application/pdf")
    assert file.filename == "report.pdf"


def test_output_shape_is_plain_chat_completions(history: list[Msg]) -> None:
    dicts = to_openai(history)
    assert all("id" not in d for d in dicts)
    json.dumps(dicts)  # plain JSON, nothing else
    asst = dicts[2]
    assert "reasoning_content" not in asst
    assert asst["tool_calls"][0] == {
        "id": "call-1",
        "type": "function",
        # built from input: compact, keys sorted, the same text before and after a reload
        "function": {"name": "zoom", "arguments": '{"area":[1,2],"factor":2}'},
    }
    assert dicts[3] == {"role": "tool", "tool_call_id": "call-1", "content": "zoomed"}
    assert dicts[1]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64,iVBORw0KGgoAAWJpbmFyef8="},
    }


def test_tool_only_assistant_has_null_content_and_thinking_only_has_empty() -> None:
    call = ToolUseBlock(id="c", name="f")
    (d_call,) = to_openai([Msg.assistant(call, created_at=None)])
    (d_think,) = to_openai([Msg.assistant(ThinkingBlock(thinking="t"))], reasoning=True)
    assert d_call["content"] is None
    assert d_think == {"role": "assistant", "content": "", "reasoning_content": "t"}


def test_reasoning_goes_only_where_asked() -> None:
    mine = ThinkingBlock(thinking="mine", metadata={"_reasoning_source": "srv-a"})
    other = ThinkingBlock(thinking="other", metadata={"_reasoning_source": "srv-b"})
    read = ThinkingBlock(thinking="read")  # from a caller's dicts: no source
    signed = ThinkingBlock(thinking="signed", signature="sig")
    msgs = [Msg.assistant([b, TextBlock(text="x")]) for b in (mine, other, read, signed)]
    sent = {
        str(mode): [d.get("reasoning_content") for d in to_openai(msgs, reasoning=mode)]
        for mode in (False, True, "srv-a")
    }
    assert sent == {
        "False": [None, None, None, None],
        "True": ["mine", "other", "read", None],
        "srv-a": ["mine", None, None, None],
    }
    with pytest.raises(UserError, match="reasoning must be"):
        to_openai(msgs, reasoning=1)  # type: ignore[arg-type]


def test_invalid_json_arguments_are_kept_verbatim_without_crashing() -> None:
    raw = '{"city": "Par'  # cut off by an interrupt
    dicts = [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "w", "arguments": raw}},
                {"id": "c2", "type": "function", "function": {"name": "w", "arguments": "[1]"}},
                {"id": "c3", "type": "function", "function": {"name": "w", "arguments": ""}},
            ],
        },
    ]
    msgs = from_openai(dicts)
    calls = msgs[1].tool_calls
    assert calls[0].input == {"_raw_arguments": raw}
    assert calls[1].input == {"_raw_arguments": "[1]"}
    assert calls[2].input == {}
    out = to_openai(msgs)  # sent back byte for byte, the empty text included
    assert [c["function"]["arguments"] for c in out[1]["tool_calls"]] == [raw, "[1]", ""]


def test_tool_result_name_comes_from_its_call() -> None:
    msgs = from_openai(
        [
            {"role": "assistant", "tool_calls": [_call("c1", "search", "{}")]},
            {"role": "tool", "tool_call_id": "c1", "content": "found"},
        ]
    )
    assert msgs[1].tool_results[0].name == "search"


def test_developer_role_round_trips() -> None:
    msgs = from_openai([{"role": "developer", "content": "rules"}])
    assert msgs[0].role == "system"
    assert to_openai(msgs) == [{"role": "developer", "content": "rules"}]


def test_media_forms() -> None:
    parts = [
        {"type": "image_url", "image_url": {"url": "https://x.test/cat.jpg", "detail": "low"}},
        {"type": "image_url", "image_url": {"url": "data:image/gif,GIF89a%00"}},
        {"type": "file", "file": {"file_id": "file-123", "filename": "a.pdf"}},
        {"type": "file", "file": {"file_data": "JVBERg==", "filename": "b.pdf"}},
        {"type": "input_audio", "input_audio": {"data": "SUQz", "format": "mp3"}},
    ]
    (msg,) = from_openai([{"role": "user", "content": parts}])
    url_image, gif, handle, pdf, mp3 = msg.content
    assert isinstance(url_image, ImageBlock)
    assert (url_image.url, url_image.media_type) == ("https://x.test/cat.jpg", "image/jpeg")
    assert (gif.media_type, gif.data) == ("image/gif", b"GIF89a\x00")  # type: ignore[union-attr]
    assert isinstance(handle, FileBlock) and handle.url == "file-123"
    assert (pdf.media_type, pdf.data) == ("application/pdf", b"%PDF")  # type: ignore[union-attr]
    assert (mp3.media_type, mp3.data) == ("audio/mpeg", b"ID3")  # type: ignore[union-attr]
    out = to_openai([msg])[0]["content"]
    assert out[0] == parts[0]
    assert out[2] == parts[2]
    assert out[3]["file"]["file_data"] == "data:application/pdf;base64,JVBERg=="
    assert out[4] == parts[4]


def test_unsupported_media_becomes_a_note_not_an_error() -> None:
    video = VideoBlock(media_type="video/mp4", data=b"\x00")
    image = ImageBlock(media_type="image/png", data=PNG)
    result = ToolResultBlock(id="c", output=[TextBlock(text="see"), image])
    out = to_openai([Msg.user([TextBlock(text="x"), video]), Msg.tool(result)])
    assert "video" in out[0]["content"][1]["text"]
    assert out[1]["content"][0] == {"type": "text", "text": "see"}
    assert "omitted" in out[1]["content"][1]["text"]


def test_blocks_in_the_wrong_message_are_refused() -> None:
    with pytest.raises(UserError, match="tool_result"):
        to_openai([Msg.user(ToolResultBlock(id="c"))])
    with pytest.raises(UserError, match="unsupported role"):
        from_openai([{"role": "function", "content": "x"}])
    with pytest.raises(UserError, match="tool_call_id"):
        from_openai([{"role": "tool", "content": "x"}])
    with pytest.raises(UserError, match="malformed"):
        from_openai([{"role": "user", "content": [{"type": "image_url"}]}])


def test_private_top_level_keys_go_to_metadata_and_never_come_back() -> None:
    dicts = [{"role": "user", "content": "hi", "_trace": {"span": 7}}]
    (msg,) = from_openai(dicts)
    assert msg.metadata == {"_trace": {"span": 7}}
    assert to_openai([msg]) == [{"role": "user", "content": "hi"}]


# -- derived ids (Ledger.sync) -------------------------------------------------------------------
def _call(call_id: str, name: str, arguments: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


CALLER_DICTS = [
    {"role": "system", "content": "sys"},
    {"role": "user", "content": [{"type": "text", "text": "hi"}], "_mine": True},
    {"role": "assistant", "content": None, "tool_calls": [_call("c1", "f", '{"a": 1}')]},
    {"role": "tool", "tool_call_id": "c1", "content": "1"},
    {"role": "assistant", "content": "done", "id": "kept-id"},
]


def test_derived_ids_are_deterministic_and_input_is_never_mutated() -> None:
    before = copy.deepcopy(CALLER_DICTS)
    first = from_openai(CALLER_DICTS, ids="derived")
    second = from_openai(CALLER_DICTS, ids="derived")
    assert before == CALLER_DICTS
    assert first == second
    assert [m.digest for m in first] == [m.digest for m in second]
    assert all(m.created_at is None for m in first)
    assert first[0].id == derived_id(CALLER_DICTS[0])
    assert first[0].id.startswith("oai-")
    assert first[4].id == "kept-id"
    assert len({m.id for m in first}) == len(first)


def test_given_ids_mode_does_not_mutate_either() -> None:
    before = copy.deepcopy(CALLER_DICTS)
    from_openai(CALLER_DICTS)
    assert before == CALLER_DICTS


def test_a_changed_dict_changes_only_its_own_message() -> None:
    base = from_openai(CALLER_DICTS, ids="derived")
    edited = copy.deepcopy(CALLER_DICTS)
    edited[3]["content"] = "2"
    changed = from_openai(edited, ids="derived")
    differs = [i for i, (a, b) in enumerate(zip(base, changed)) if a != b]
    assert differs == [3]
    assert base[3].id != changed[3].id


def test_derived_id_depends_on_content_and_occurrence_not_on_private_keys() -> None:
    d = {"role": "user", "content": "same"}
    a, b = from_openai([d, d], ids="derived")
    assert a.id != b.id  # a repeat gets an id of its own
    assert (a.id, b.id) == (derived_id(d), derived_id(d, 1))
    (c,) = from_openai([{**d, "_note": 1}], ids="derived")
    assert c.id == a.id and c != a  # same id, but the metadata is part of the message


def test_derived_ids_do_not_depend_on_position() -> None:
    """Dropping, inserting or moving dicts leaves every other dict's message as it was, so a
    shifted list is stored by writing what it added."""
    dicts = [{"role": "user", "content": f"m{i}"} for i in range(6)] + [
        {"role": "user", "content": "m1"}  # a repeat of dict 1: its second occurrence
    ]
    before = from_openai(dicts, ids="derived")
    shifted = from_openai([{"role": "user", "content": "new"}, *dicts[2:]], ids="derived")
    assert shifted[1:5] == before[2:6]  # moved, unchanged
    # with the first m1 gone, its repeat is the first occurrence: the one message renumbered
    assert shifted[5].id == before[1].id == derived_id(dicts[1]) != before[6].id


def test_ids_mode_is_checked() -> None:
    with pytest.raises(UserError):
        from_openai([], ids="random")  # type: ignore[arg-type]


# -- properties ----------------------------------------------------------------------------------
_text = st.text(max_size=20)
_user_blocks = st.lists(
    st.one_of(
        _text.map(lambda t: TextBlock(text=t)),
        st.binary(max_size=32).map(lambda b: ImageBlock(media_type="image/webp", data=b)),
        st.binary(max_size=32).map(lambda b: AudioBlock(media_type="audio/mpeg", data=b)),
        st.builds(
            FileBlock,
            media_type=st.just("application/pdf"),
            data=st.binary(max_size=32),
            filename=st.text(min_size=1, max_size=8),  # without one it gets "file.pdf"
        ),
    ),
    min_size=2,
    max_size=5,
)


@given(blocks=_user_blocks, msg_id=st.text(min_size=1, max_size=8))
def test_user_content_round_trips_exactly(blocks: list, msg_id: str) -> None:
    msg = Msg.user(blocks, id=msg_id, created_at=None)
    (back,) = from_openai(to_openai([msg], include_ids=True))
    assert back == msg
    assert back.digest == msg.digest


@given(
    inputs=st.lists(
        st.dictionaries(
            st.text(max_size=5),
            st.integers(-(2**63), 2**63 - 1) | st.text(max_size=5) | st.booleans(),
            max_size=3,
        ),
        min_size=1,
        max_size=3,
    ),
    text=_text,
)
def test_tool_call_inputs_round_trip(inputs: list[dict], text: str) -> None:
    calls = [ToolUseBlock(id=f"c{i}", name="t", input=inp) for i, inp in enumerate(inputs)]
    msg = Msg.assistant([TextBlock(text=text), *calls], id="a", created_at=None)
    (back,) = from_openai(to_openai([msg], include_ids=True))
    if text:
        assert back == msg
    assert back.tool_calls == msg.tool_calls
