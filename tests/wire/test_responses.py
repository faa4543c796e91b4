"""Responses-API items ↔ Msg: exact round trips, ids, kept keys, SDK-valid output, sync()."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any, get_args

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from agentledger import Ledger, Msg, TextBlock, ToolResultBlock, ToolUseBlock, UserError
from agentledger.errors import AgentLedgerError
from agentledger.messages import decode, encode
from agentledger.wire import from_openai, from_responses, to_openai, to_responses

from ..messages.strategies import damaged, every_damage
from ..messages.strategies import messages as any_messages
from .conftest import PDF, PNG
from .responses_types import ResponseInputItemParam, assert_valid_item
from .shapes import ITEM_SHAPES

# -- strategies: items as the Responses API and the Agents SDK write them ------------------------
_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=20)
_ids = st.from_regex(r"[a-z]{2,4}_[A-Za-z0-9]{1,12}", fullmatch=True)
_opaque_b64 = st.binary(max_size=40).map(lambda b: __import__("base64").b64encode(b).decode())
_status = st.sampled_from(["in_progress", "completed", "incomplete"])


def _optional(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional=fields)


_annotation = st.fixed_dictionaries(
    {
        "type": st.just("url_citation"),
        "url": st.just("https://example.com/a"),
        "title": _text,
        "start_index": st.integers(0, 9),
        "end_index": st.integers(0, 9),
    }
) | st.fixed_dictionaries(
    {
        "type": st.just("file_citation"),
        "file_id": _ids,
        "filename": _text,
        "index": st.integers(0, 9),
    }
)
_input_text = st.fixed_dictionaries({"type": st.just("input_text"), "text": _text})
_image_source = st.fixed_dictionaries(
    {
        "image_url": st.sampled_from(
            ["https://example.com/cat.png", "data:image/png;base64,iVBORw=="]
        )
    }
) | st.fixed_dictionaries({"file_id": _ids})
_input_image = st.builds(
    lambda src, detail: {"type": "input_image", "detail": detail, **src},
    _image_source,
    st.sampled_from(["auto", "low", "high"]),
)
_file_source = st.sampled_from(
    [
        {"file_data": "data:application/pdf;base64,JVBERi0xLjcK", "filename": "r.pdf"},
        {"file_data": "JVBERi0xLjcK", "filename": "raw.pdf"},  # raw base64, kept as given
        {"file_id": "file-abc"},
        {"file_url": "https://example.com/r.pdf"},
    ]
)
_input_file = st.builds(lambda src: {"type": "input_file", **src}, _file_source)
_input_parts = st.lists(_input_text | _input_image | _input_file, max_size=3)


@st.composite
def _message(draw: st.DrawFn) -> dict[str, Any]:
    if draw(st.booleans()):  # an output message, as a model returns it
        parts = st.fixed_dictionaries(
            {
                "type": st.just("output_text"),
                "text": _text,
                "annotations": st.lists(_annotation, max_size=2),
            },
            optional={"logprobs": st.just([])},
        ) | st.fixed_dictionaries({"type": st.just("refusal"), "refusal": _text})
        item = {"id": draw(_ids), "type": "message", "role": "assistant", "status": draw(_status)}
        item["content"] = draw(st.lists(parts, max_size=3))
        return item | draw(_optional(phase=st.sampled_from(["commentary", "final_answer"])))
    item = {"role": draw(st.sampled_from(["user", "system", "developer", "assistant"]))}
    item["content"] = draw(
        _text | (_input_parts if item["role"] == "user" else st.lists(_input_text, max_size=2))
    )
    return item | draw(_optional(type=st.just("message")))


def _arguments() -> st.SearchStrategy[str]:
    obj = st.dictionaries(
        _text, st.integers() | st.floats(allow_nan=False) | _text | st.none(), max_size=3
    )
    spelled = st.builds(
        lambda o, ascii_, seps: json.dumps(o, ensure_ascii=ascii_, separators=seps),
        obj,
        st.booleans(),
        st.sampled_from([(",", ":"), (", ", ": ")]),
    )
    odd = st.sampled_from(
        ['{"a": 1.0e2}', '{"a":1,"a":2}', '{"n": 123456789012345678901234567890}', "{", "", "[1]"]
    )
    return spelled | odd


_call = st.builds(
    lambda base, extra: base | extra,
    st.fixed_dictionaries(
        {
            "type": st.just("function_call"),
            "call_id": _ids,
            "name": _text,
            "arguments": _arguments(),
        }
    ),
    _optional(id=_ids, status=_status, namespace=st.just("ns")),
)
_output_parts = st.lists(
    _input_text
    | st.fixed_dictionaries(
        {"type": st.just("input_image")},
        optional={"image_url": st.just("https://x.test/a.png"), "detail": st.just("low")},
    ).filter(lambda p: "image_url" in p)
    | st.fixed_dictionaries({"type": st.just("input_file"), "file_id": _ids}),
    max_size=3,
)
_output = st.builds(
    lambda base, extra: base | extra,
    st.fixed_dictionaries(
        {"type": st.just("function_call_output"), "call_id": _ids, "output": _text | _output_parts}
    ),
    _optional(id=_ids, status=_status),
)
_summary = st.lists(
    st.fixed_dictionaries({"type": st.just("summary_text"), "text": _text}), max_size=2
)
_reasoning = st.builds(
    lambda base, extra: base | extra,
    st.fixed_dictionaries({"id": _ids, "type": st.just("reasoning"), "summary": _summary}),
    _optional(
        encrypted_content=st.none() | _opaque_b64,
        status=_status,
        content=st.lists(
            st.fixed_dictionaries({"type": st.just("reasoning_text"), "text": _text}), max_size=2
        ),
    ),
)
_opaque = st.sampled_from(
    [
        {"type": "item_reference", "id": "msg_1"},
        {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAAB\u00e9=="},
        {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": True},
        {"type": "custom_tool_call", "call_id": "c", "name": "grep", "input": "a\nb"},
        {"type": "custom_tool_call_output", "call_id": "c", "output": "ok"},
        {
            "type": "web_search_call",
            "id": "ws_1",
            "status": "completed",
            "action": {"type": "search", "query": "q", "sources": []},
        },
    ]
)
items = st.lists(_message() | _call | _output | _reasoning | _opaque, max_size=8)


# -- round trips ----------------------------------------------------------------------------------
@given(items)
@settings(suppress_health_check=[HealthCheck.too_slow])
def test_items_round_trip_exactly_and_validate(given_items: list[dict[str, Any]]) -> None:
    msgs = from_responses(given_items)
    assert len(msgs) == len(given_items)
    back = to_responses(msgs)
    assert back == given_items
    assert json.dumps(back, sort_keys=True) == json.dumps(given_items, sort_keys=True)
    # through the codec (what every store keeps) too
    reloaded = [decode(encode(m)) for m in msgs]
    assert to_responses(reloaded) == given_items
    for item in back:
        assert_valid_item(item)


@given(items.filter(bool), st.data())
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_a_damaged_item_round_trips_or_is_refused(
    given_items: list[dict[str, Any]], data: st.DataObject
) -> None:
    """An item changed anyhow (a field holding any JSON, a field gone, a part repeated) is
    read and written back as it was, through the codec too, or refused with a typed error;
    never a crash, never an item that comes back otherwise (a reasoning part without a type,
    or of another kind, moved to the other field)."""
    at = data.draw(st.integers(0, len(given_items) - 1))
    _, item = data.draw(damaged(given_items[at]))
    changed = [*given_items[:at], item, *given_items[at + 1 :]]
    try:
        msgs = from_responses(changed)
    except AgentLedgerError:
        return
    assert to_responses(msgs) == changed
    assert to_responses([decode(encode(m)) for m in msgs]) == changed


@pytest.mark.parametrize("shape", ITEM_SHAPES, ids=lambda item: str(item.get("type", "easy")))
def test_every_damage_of_an_item_round_trips_or_is_refused(shape: dict[str, Any]) -> None:
    """Each item shape changed in every way ``every_damage`` knows (any JSON at any path, a key
    removed, a part repeated): read and written back as it was, through the codec too, or
    refused with a typed error."""
    call = ITEM_SHAPES[3]  # named before the outputs, as a list has it
    for where, item in every_damage(shape):
        try:
            msgs = from_responses([call, item])
        except AgentLedgerError:
            continue
        assert to_responses(msgs) == [call, item], where
        assert to_responses([decode(encode(m)) for m in msgs]) == [call, item], where


@pytest.mark.parametrize(
    ("summary", "content"),
    [
        ([], [{"type": "reasoning_text_v2", "text": "a newer kind"}]),
        ([], [{"text": "no type"}]),
        ([{"text": "no type"}], []),
        ([{"type": "reasoning_text", "text": "a content type"}], []),
        ([{"type": "summary_text", "text": "s"}], [{"type": "summary_text", "text": "c"}]),
    ],
)
def test_reasoning_parts_are_written_where_they_were_read(
    summary: list[dict[str, Any]], content: list[dict[str, Any]]
) -> None:
    """A reasoning part is written back in the field it was read from, as it was, whatever its
    type says (the writer placed it by type: a newer kind of content part moved to the
    summary, and a part without a type got one)."""
    item = {"type": "reasoning", "id": "rs_1", "summary": summary}
    if content:
        item["content"] = content
    msgs = from_responses([item])
    assert to_responses(msgs) == [item]
    assert to_responses([decode(encode(m)) for m in msgs]) == [item]


@given(items)
def test_item_ids_are_message_ids(given_items: list[dict[str, Any]]) -> None:
    msgs = from_responses(given_items, ids="derived")
    for item, msg in zip(given_items, msgs, strict=True):
        if "id" in item and item["type"] != "item_reference":
            assert msg.id == item["id"]
    assert from_responses(given_items, ids="derived") == msgs  # derived ids are deterministic


def _json(value: Any) -> Any:
    """A generated TypedDict value as JSON gives it: the iterators Hypothesis draws for
    ``Iterable`` fields become lists; anything else JSON cannot hold raises ``TypeError``
    (an ``object`` field draws any Python value, a ``range`` of 10**18 items included)."""

    def listed(v: Any) -> list[Any]:
        if isinstance(v, Iterator):
            return list(itertools.islice(v, 20))
        raise TypeError(f"not JSON: {type(v).__name__}")

    return json.loads(json.dumps(value, default=listed))


_sdk_items = st.one_of([st.from_type(member) for member in get_args(ResponseInputItemParam)])


# ``object`` fields draw any Python value, and Hypothesis warns when it describes such a draw
@pytest.mark.filterwarnings(
    "ignore:Generating overly large repr:hypothesis.errors.HypothesisWarning"
)
@given(st.lists(_sdk_items, max_size=4))
@settings(suppress_health_check=list(HealthCheck))
def test_every_kind_the_sdk_defines_round_trips_or_is_refused(given_items: list[Any]) -> None:
    """Any value of the SDK's own ``ResponseInputItemParam`` (every kind the Agents SDK may
    persist): read and written back unchanged, or refused with a typed error, never dropped."""
    try:
        given_items = _json(given_items)
    except (ValueError, TypeError):
        assume(False)  # not JSON (a NaN, an ``object`` field's odd value): no API item
    try:
        msgs = from_responses(given_items)
    except AgentLedgerError:
        return  # refused explicitly (an empty id, a surrogate, an integer over 64 bits ...)
    assert to_responses(msgs) == given_items
    assert to_responses([decode(encode(m)) for m in msgs]) == given_items


def test_encrypted_content_and_argument_strings_are_kept_byte_for_byte() -> None:
    secret = "gAAAAABo\u00e9x+/==" + "\U0001f600"
    arguments = '{"city": "M\\u00fcnchen", "n": 1.0e2,"big": 123456789012345678901234567890}'
    given_items = [
        {"id": "rs_1", "type": "reasoning", "summary": [], "encrypted_content": secret},
        {
            "id": "fc_1",
            "type": "function_call",
            "call_id": "call_1",
            "name": "w",
            "arguments": arguments,
        },
    ]
    back = to_responses([decode(encode(m)) for m in from_responses(given_items)])
    assert back[0]["encrypted_content"].encode() == secret.encode()
    assert back[1]["arguments"].encode() == arguments.encode()


def test_mapping_of_the_core_items() -> None:
    msgs = from_responses(
        [
            {"role": "developer", "content": "Be brief."},
            {"role": "user", "content": [{"type": "input_text", "text": "Weather?"}]},
            {"id": "rs_1", "type": "reasoning",
             "summary": [{"type": "summary_text", "text": "Look it up."}]},
            {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "weather",
             "arguments": '{"city":"Oslo"}'},
            {"type": "function_call_output", "call_id": "call_1", "output": "rain"},
            {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": "Rain.", "annotations": []}]},
        ]
    )  # fmt: skip
    assert [m.role for m in msgs] == [
        "system",
        "user",
        "assistant",
        "assistant",
        "tool",
        "assistant",
    ]
    assert msgs[2].thinking == "Look it up." and msgs[2].id == "rs_1"
    assert msgs[3].tool_calls == (
        ToolUseBlock(id="call_1", name="weather", input={"city": "Oslo"}),
    )
    assert msgs[3].id == "fc_1"
    result = msgs[4].tool_results[0]
    assert (result.id, result.name, result.text) == ("call_1", "weather", "rain")
    assert msgs[5].text == "Rain." and msgs[5].id == "msg_1"
    # the same history converts to chat completions, with the OpenAI-only keys left out
    chat = to_openai(msgs)
    assert chat[0]["role"] == "developer"
    assert "_responses" not in json.dumps(chat)


def test_unknown_item_kinds_and_keys_are_kept_verbatim() -> None:
    given_items = [
        {"type": "frobnicate_call", "id": "fr_1", "payload": {"deep": [1, None, "x"]}},
        {"role": "user", "content": "hi", "future_key": {"a": 1}},
        {
            "type": "function_call",
            "call_id": "c",
            "name": "f",
            "arguments": "{}",
            "caller": {"type": "direct"},
        },
    ]
    msgs = from_responses(given_items)
    assert msgs[0].id == "fr_1" and msgs[0].content == ()
    assert to_responses(msgs) == given_items
    assert "future_key" not in json.dumps(to_openai(msgs[1:2]))


def test_foreign_messages_become_valid_items(history: list[Msg]) -> None:
    out = to_responses(history)
    for item in out:
        assert_valid_item(item)
    kinds = [item.get("type", "message") for item in out]
    assert kinds == [
        "message", "message", "message", "function_call", "function_call",
        "function_call_output", "function_call_output", "message", "message",
    ]  # fmt: skip
    # audio has no place in Responses input: a note, never a silent drop
    assert any("audio" in p.get("text", "") for p in out[1]["content"])
    assert out[1]["content"][1] == {
        "type": "input_image",
        "image_url": "data:image/png;base64," + __import__("base64").b64encode(PNG).decode(),
        "detail": "auto",
    }
    assert out[1]["content"][3]["filename"] == "report.pdf"
    assert out[1]["content"][3]["file_data"].endswith(__import__("base64").b64encode(PDF).decode())
    assert [(i["call_id"], i["output"]) for i in out[5:7]] == [
        ("call-1", "zoomed"),
        ("call-2", "failed"),
    ]


@given(any_messages)
def test_any_message_gives_valid_items(msg: Msg) -> None:
    try:
        out = to_responses([msg])
    except UserError:
        assume(False)  # a block that no format can hold in that role: refused, by design
    for item in out:
        assert_valid_item(item)


def test_edited_messages_are_written_from_their_new_content() -> None:
    msgs = from_responses(
        [
            {
                "id": "fc_1",
                "type": "function_call",
                "call_id": "c1",
                "name": "f",
                "arguments": '{"a": 1.0}',
            }
        ]
    )
    edited = msgs[0].replace(content=[ToolUseBlock(id="c1", name="f", input={"a": 2})])
    assert to_responses([edited]) == [
        {
            "id": "fc_1",
            "type": "function_call",
            "call_id": "c1",
            "name": "f",
            "arguments": '{"a":2}',
        }
    ]
    # a message that no longer fits one item is written like any other message
    grown = msgs[0].replace(content=[TextBlock(text="x"), *msgs[0].content])
    assert [i.get("type") for i in to_responses([grown])] == [None, "function_call"]


@pytest.mark.parametrize(
    ("item", "match"),
    [
        ({"role": "tool", "content": "x"}, "unsupported message role"),
        ({"type": "function_call", "call_id": "c", "name": "f"}, "malformed"),
        ({"type": "function_call_output", "call_id": "", "output": "x"}, "call_id"),
        ({"role": "user", "content": [{"type": "input_audio"}]}, "unsupported content part"),
        (
            {"role": "user", "content": [{"type": "input_image", "detail": "auto"}]},
            "image_url or file_id",
        ),
        ({"id": 3, "type": "message", "role": "user", "content": "x"}, "id must be"),
        (
            {"id": "rs", "type": "reasoning", "summary": [{"type": "summary_text"}]},
            "needs a string text",
        ),
    ],
)
def test_malformed_items_are_refused(item: dict[str, Any], match: str) -> None:
    with pytest.raises(UserError, match=match):
        from_responses([item])


# -- sync() -------------------------------------------------------------------------------------
def test_sync_takes_responses_items_and_mixed_lists() -> None:
    chat = [{"role": "user", "content": "weather?"}]
    call = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "c1",
        "name": "weather",
        "arguments": "{}",
    }
    output = {"type": "function_call_output", "call_id": "c1", "output": "rain"}
    with Ledger("memory://") as ledger:
        ledger.sync("s", [*chat, call, output])
        stored = ledger.messages("s")
        assert [m.role for m in stored] == ["user", "assistant", "tool"]
        assert stored[0] == from_openai(chat, ids="derived")[0]  # chat dicts convert as before
        assert stored[1].id == "fc_1" and stored[2].tool_results[0].name == "weather"
        assert to_responses(stored[1:]) == [call, output]
        # the same list again writes nothing; one more item appends one row
        assert ledger.sync("s", [*chat, call, output]).noop
        report = ledger.sync("s", [*chat, call, output, Msg.assistant("Rain.")])
        assert (report.appended, report.replaced) == (1, 0)
        # a chat tool message answering a Responses call is named after it
        ledger.sync("t", [call, {"role": "tool", "tool_call_id": "c1", "content": "x"}])
        assert ledger.messages("t")[1].tool_results[0] == ToolResultBlock(
            id="c1", name="weather", output="x"
        )


def test_parallel_calls_held_one_per_item_are_one_turn_for_every_provider() -> None:
    """The Responses API holds each call of a turn as an item of its own, so a history has
    consecutive assistant messages before the results: one turn for validation, and one
    message when sent to Chat Completions or Anthropic."""
    from agentledger.wire import check, repair, to_anthropic, validate

    def call(n: str) -> dict[str, Any]:
        args = json.dumps({"city": n})
        return {"type": "function_call", "call_id": f"c_{n}", "name": "w", "arguments": args}

    items = [
        {"role": "user", "content": "Paris and Oslo?"},
        call("Paris"),
        call("Oslo"),
        {"type": "function_call_output", "call_id": "c_Paris", "output": "rain"},
        {"type": "function_call_output", "call_id": "c_Oslo", "output": "snow"},
        {"role": "assistant", "content": "Rain, then snow."},
    ]
    msgs = from_responses(items)
    for target in ("strict", "openai", "anthropic"):
        check(msgs, target=target)
    assert not repair(msgs).changes
    sent = to_openai(msgs)
    assert [d["role"] for d in sent] == ["user", "assistant", "tool", "tool", "assistant"]
    assert [c["id"] for c in sent[1]["tool_calls"]] == ["c_Paris", "c_Oslo"]
    _, turns = to_anthropic(msgs)
    assert [b["type"] for b in turns[1]["content"]] == ["tool_use", "tool_use"]
    # a late result is still one: a user message between the calls ends the turn
    late = [msgs[0], msgs[1], Msg.user("wait"), *msgs[2:]]
    assert any(f.kind.value == "late_result" for f in validate(late, target="openai"))


def test_a_null_name_on_a_call_output_stays_null() -> None:
    item = {"type": "function_call_output", "call_id": "0", "output": [], "name": None}
    assert to_responses(from_responses([item])) == [item]
