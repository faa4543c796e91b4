"""pydantic-ai histories stored in the ledger: exact round trips on every backend, incremental
saves, sessions written by others, and what is refused. Agent runs: ``test_pydantic_ai_agent``."""

from __future__ import annotations

import dataclasses
import importlib
import itertools
import json
import sys
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic_ai import messages as m

from agentledger import Ledger
from agentledger.errors import AgentLedgerError, CodecError, MissingDependencyError, UserError
from agentledger.integrations.pydantic_ai import METADATA_KEY, LedgerHistory, from_msgs, to_msgs
from agentledger.messages import (
    ImageBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from agentledger.wire.anthropic import to_anthropic
from agentledger.wire.openai import to_openai
from tests.integrations import pai_strategies as pst
from tests.store.backends import LedgerOn, backend, ledger_on  # noqa: F401 (fixtures)

Adapter = m.ModelMessagesTypeAdapter
_sessions = itertools.count()


def as_json(messages: Sequence[m.ModelMessage]) -> bytes:
    return Adapter.dump_json(list(messages))


@pytest.fixture
def ledger(backend: str, ledger_on: LedgerOn) -> Ledger:  # noqa: F811
    """A ledger on a fresh store of each kind, shared by one test's Hypothesis examples."""
    return ledger_on(backend)


@settings(max_examples=100, deadline=None)
@given(pst.histories)
def test_conversion_is_exact_and_deterministic(history: list[m.ModelMessage]) -> None:
    msgs = to_msgs(history)
    assert as_json(from_msgs(msgs)) == as_json(history)
    assert to_msgs(history) == msgs  # same content, same ids: a re-save writes nothing
    assert len({msg.id for msg in msgs}) == len(msgs)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(history=pst.histories, more=pst.histories)
def test_store_and_reload_exactly_on_every_backend(
    ledger: Ledger,
    history: list[m.ModelMessage],
    more: list[m.ModelMessage],
) -> None:
    session = f"s{next(_sessions)}"
    LedgerHistory(ledger, session).save(history)
    fresh = LedgerHistory(Ledger(ledger.store), session)  # nothing cached: read from the store
    loaded = fresh.load()
    assert as_json(loaded) == as_json(history)
    assert fresh.save(loaded).noop
    report = fresh.save([*loaded, *more])
    assert report.replaced == report.truncated == 0
    assert report.appended == len(to_msgs([*history, *more])) - len(to_msgs(history))
    assert as_json(LedgerHistory(Ledger(ledger.store), session).load()) == as_json(
        [*history, *more]
    )


def sample_history() -> list[m.ModelMessage]:
    return [
        m.ModelRequest(
            parts=[
                m.SystemPromptPart("Be brief."),
                m.UserPromptPart(["Größe?", m.BinaryContent(b"\x89PNG", media_type="image/png")]),
            ]
        ),
        m.ModelResponse(
            parts=[
                m.ThinkingPart("hmm", signature="c2ln", provider_name="anthropic"),
                m.ToolCallPart("measure", '{"unit": "cm",  "x": 1.0e2}', tool_call_id="c1"),
            ],
            provider_details={"z": 1, "a": [1, {"y": 2, "b": 3}]},
        ),
        m.ModelRequest(parts=[m.ToolReturnPart("measure", "12 cm", tool_call_id="c1")]),
        m.ModelResponse(parts=[m.TextPart("12 cm.")]),
    ]


def test_messages_are_native_blocks_and_the_rest_stays_private() -> None:
    msgs = to_msgs(sample_history())
    assert [msg.role for msg in msgs] == ["system", "user", "assistant", "tool", "assistant"]
    assert msgs[1].content == (
        TextBlock(text="Größe?"),
        ImageBlock(media_type="image/png", data=b"\x89PNG"),
    )
    thinking, call = msgs[2].content
    assert thinking == ThinkingBlock(thinking="hmm", signature="c2ln")
    assert isinstance(call, ToolUseBlock) and dict(call.input) == {"unit": "cm", "x": 100.0}
    assert msgs[3].content[0] == ToolResultBlock(id="c1", name="measure", output="12 cm")
    assert msgs[4].text == "12 cm."
    # what a provider is sent holds the content and none of the kept details
    sent = json.dumps(to_openai(msgs))
    assert METADATA_KEY not in sent and "provider_details" not in sent
    assert "12 cm." in sent and "measure" in sent


@settings(max_examples=60, deadline=None)
@given(
    arguments=pst.json_objects | st.builds(lambda s: {"_raw_arguments": s}, pst.texts),
    as_text=st.booleans(),
)
def test_tool_arguments_reach_every_provider_as_the_object_they_hold(
    arguments: dict[str, Any], as_text: bool
) -> None:
    """A parameter named ``_raw_arguments`` is the model's, not agentledger's marker."""
    call = m.ToolCallPart("f", json.dumps(arguments) if as_text else arguments, "c1")
    history = [
        m.ModelRequest(parts=[m.UserPromptPart("go")]),
        m.ModelResponse(parts=[call]),
        m.ModelRequest(parts=[m.ToolReturnPart("f", "ok", "c1")]),
    ]
    msgs = to_msgs(history)
    assert as_json(from_msgs(msgs)) == as_json(history)
    assume(msgs[1].tool_calls)  # text past 64 bits is kept whole, beside the blocks
    assert to_anthropic(msgs)[1][1]["content"][0]["input"] == arguments
    assert json.loads(to_openai(msgs)[1]["tool_calls"][0]["function"]["arguments"]) == arguments


@settings(max_examples=40, deadline=None)
@given(
    signature=pst.texts.filter(bool),
    provider=st.sampled_from([None, "openai", "google-gla", "bedrock", "anthropic"]),
)
def test_only_anthropics_thinking_signature_is_sent_to_anthropic_as_one(
    signature: str, provider: str | None
) -> None:
    """pydantic-ai keeps OpenAI's encrypted reasoning and Google's thought signatures in
    ``ThinkingPart.signature`` too: sent to Anthropic as a signature, each would get that
    request refused, and every later one over the session."""
    thinking = m.ThinkingPart("hmm", signature=signature, provider_name=provider)
    history = [
        m.ModelRequest(parts=[m.UserPromptPart("go")]),
        m.ModelResponse(parts=[thinking, m.TextPart("hi")]),
    ]
    msgs = to_msgs(history)
    assert as_json(from_msgs(msgs)) == as_json(history)  # kept for pydantic-ai either way
    sent = to_anthropic(msgs)[1][1]["content"]
    ours = provider == "anthropic"
    assert msgs[1].content[0].signature == (signature if ours else None)  # type: ignore[union-attr]
    assert [b["type"] for b in sent] == (["thinking", "text"] if ours else ["text"])


def test_a_session_written_by_agentledger_loads_into_pydantic_ai() -> None:
    msgs = [
        Msg.system("Be brief."),
        Msg.user(
            [TextBlock(text="look"), ImageBlock(media_type="image/png", url="https://e.x/a.png")]
        ),
        Msg.assistant([ToolUseBlock(id="c1", name="look", input={"at": "a.png"})]),
        Msg.tool(ToolResultBlock(id="c1", name="look", output="a cat", is_error=False)),
        Msg.assistant("A cat."),
    ]
    history = from_msgs(msgs)
    assert [type(msg).__name__ for msg in history] == [
        "ModelRequest",
        "ModelRequest",
        "ModelResponse",
        "ModelRequest",
        "ModelResponse",
    ]
    prompt = history[1].parts[0]
    assert isinstance(prompt, m.UserPromptPart) and prompt.content[0] == "look"
    assert isinstance(prompt.content[1], m.ImageUrl)
    call = history[2].parts[0]
    assert isinstance(call, m.ToolCallPart) and call.args == {"at": "a.png"}
    ret = history[3].parts[0]
    assert isinstance(ret, m.ToolReturnPart) and (ret.tool_call_id, ret.content) == ("c1", "a cat")
    # stored back through the adapter it is exact from then on
    assert as_json(from_msgs(to_msgs(history))) == as_json(history)


def test_a_legacy_retry_prompt_loads_as_pydantic_ai_itself_loads_it() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the part is deprecated; old histories still hold it
        legacy = [
            m.ModelRequest(
                parts=[m.RetryPromptPart("bad city", tool_name="get_weather", tool_call_id="c1")]
            )
        ]
    pydantic_ai_itself = Adapter.validate_json(as_json(legacy))
    assert as_json(from_msgs(to_msgs(legacy))) == as_json(pydantic_ai_itself)


def test_what_cannot_be_stored_or_loaded_is_refused_clearly() -> None:
    with pytest.raises(UserError, match="ModelRequest or ModelResponse"):
        to_msgs(["not a message"])  # type: ignore[list-item]
    damaged = to_msgs(sample_history())[0]
    damaged = damaged.replace(metadata={METADATA_KEY: "{not json"})
    with pytest.raises(CodecError, match="damaged"):
        from_msgs([damaged])
    with pytest.raises(CodecError, match="ToolUseBlock"):
        from_msgs(
            [Msg.user("hi"), Msg.assistant([ToolUseBlock(id="c", name="t")]).replace(role="system")]
        )


@pytest.mark.parametrize(
    "message",
    [
        m.ModelRequest(parts=[m.UserPromptPart("half a pair \ud800")]),
        m.ModelResponse(parts=[m.TextPart("x\udc00")]),
        m.ModelRequest(parts=[m.ToolReturnPart("f", {"k": "\ud800"}, tool_call_id="c")]),
    ],
)
def test_text_no_json_can_hold_is_refused_as_codec_error(message: m.ModelMessage) -> None:
    """pydantic-ai's own serializer raises ``PydanticSerializationError`` on a lone surrogate;
    the caller gets this library's ``CodecError`` naming the message, and nothing is stored."""
    with pytest.raises(CodecError, match=r"messages\[1\] cannot be written as JSON"):
        to_msgs([sample_history()[0], message])
    with Ledger("memory://") as ledger:
        history = LedgerHistory(ledger, "s")
        with pytest.raises(CodecError):
            history.save([sample_history()[0], message])
        assert not ledger.exists("s")


_JUNK = (None, True, 0, 1.5, "", "x", b"b", [], ["a", 1], {}, {"a": [1]}, float("nan"), object())


def _every_part_damage(history: list[m.ModelMessage]) -> Iterator[list[m.ModelMessage]]:
    """``history`` with one field of one part set to each of ``_JUNK``: pydantic-ai's dataclasses
    take any value (those its own constructors refuse are skipped)."""
    for at, message in enumerate(history):
        for index, part in enumerate(message.parts):
            for field, junk in itertools.product(dataclasses.fields(part), _JUNK):
                parts = list(message.parts)
                try:
                    parts[index] = dataclasses.replace(part, **{field.name: junk})
                    changed = dataclasses.replace(message, parts=parts)
                except Exception:  # pydantic-ai's own checks refuse it first
                    continue
                yield [*history[:at], changed, *history[at + 1 :]]


def test_every_damage_of_a_part_is_converted_exactly_or_refused() -> None:
    """Any field of any part holding any value: converted so that pydantic-ai reads the stored
    messages back as it reads its own JSON of them, or refused with a typed error (a value its
    serializer writes and its validator then refuses, a tool return's ``retry`` or ``outcome``
    or a part's ``part_kind``, raised pydantic's ``ValidationError``)."""
    converted = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pydantic warns of the values it serializes as given
        for history in _every_part_damage(sample_history()):
            try:
                msgs = to_msgs(history)
            except AgentLedgerError:
                continue
            assert Adapter.dump_json(from_msgs(msgs)) == Adapter.dump_json(
                Adapter.validate_json(as_json(history))
            )
            converted += 1
    assert converted > 50


def test_without_pydantic_ai_the_import_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(sys.modules):
        if name.startswith("agentledger.integrations.pydantic_ai"):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "pydantic_ai", None)  # type: ignore[arg-type]
    with pytest.raises(MissingDependencyError, match=r"agentledger\[pydantic-ai\]"):
        importlib.import_module("agentledger.integrations.pydantic_ai")


def test_a_message_changed_in_place_is_saved_whatever_was_seen_before() -> None:
    """Conversions are remembered by content: the same objects edited in place are new content."""
    ledger = Ledger("memory://")
    history = LedgerHistory(ledger, "s")
    messages = sample_history()
    history.save(messages)
    loaded = history.load()
    for label, current in (("saved", messages), ("loaded", loaded)):
        final = current[-1].parts[0]
        assert isinstance(final, m.TextPart)
        final.content = f"edited in the {label} list"
        report = history.save(current)
        assert (report.appended, report.replaced, report.truncated) == (0, 1, 0)
        assert as_json(LedgerHistory(Ledger(ledger.store), "s").load()) == as_json(current)
    assert history.save(loaded).noop


@pytest.mark.parametrize("ledger", ["sqlite:///x.db", None, 5])
def test_a_history_needs_a_ledger(ledger: object) -> None:
    from agentledger.errors import UserError

    with pytest.raises(UserError, match="LedgerHistory takes a Ledger or an AsyncLedger"):
        LedgerHistory(ledger, "s")  # type: ignore[arg-type]
