"""The event stream names what the store holds: for any answer a model streams, a client that
applies the events ends with exactly the AG-UI messages ``to_agui`` gives for the stored answer
(ids, text, reasoning, signatures, tool calls), and every START is ended; a signature the
server sent comes back as one through a client, and no value a client made up does."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger.agent.context import MessageCommitted, ResponseStarted
from agentledger.agent.events import (
    RedactedThinking,
    ResponseBuilder,
    TextDelta,
    ThinkingDelta,
    ThinkingSignature,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)
from agentledger.agent.react import ReActAgent
from agentledger.messages import Msg, TextBlock, ThinkingBlock
from agentledger.messages.values import freeze, thaw
from agentledger.server import create_app
from agentledger.server.encode import MessagesSnapshot, frame
from agentledger.server.events import EventStream, error_code
from agentledger.server.parse import RunRequest
from agentledger.store.aio import AsyncLedger
from agentledger.testing import ScriptedModel
from agentledger.wire import to_anthropic
from agentledger.wire.agui import from_agui, normalize_agui, to_agui
from tests.server.conftest import check_order, client_for, parse_frames
from tests.wire.agui_strategies import agui_message

pytest.importorskip("ag_ui.core")


def _tool_call(n: int) -> list[Any]:
    return [
        ToolCallStart(n, f"call{n}", "f"),
        ToolCallDelta(n, f"call{n}", '{"a":'),
        ToolCallDelta(n, f"call{n}", f"{n}}}"),
        ToolCallEnd(n, f"call{n}"),
    ]


_piece = st.one_of(
    st.text(min_size=1, max_size=4).map(lambda t: [TextDelta(t)]),
    st.text(min_size=1, max_size=4).map(lambda t: [ThinkingDelta(t)]),
    st.text(min_size=1, max_size=3).map(lambda s: [ThinkingSignature(s)]),
    st.text(min_size=1, max_size=3).map(lambda d: [RedactedThinking(d)]),
    st.just("call"),
)


def apply(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """What a client holds after the events: messages by id (as @ag-ui/client builds them)."""
    held: dict[str, dict[str, Any]] = {}
    for e in events:
        kind = e["type"]
        if kind == "TEXT_MESSAGE_START":
            held.setdefault(e["messageId"], {"id": e["messageId"], "role": "assistant"})
            held[e["messageId"]].setdefault("content", "")
        elif kind == "TEXT_MESSAGE_CONTENT":
            held[e["messageId"]]["content"] += e["delta"]
        elif kind == "REASONING_MESSAGE_START":
            held[e["messageId"]] = {"id": e["messageId"], "role": "reasoning", "content": ""}
        elif kind == "REASONING_MESSAGE_CONTENT":
            held[e["messageId"]]["content"] += e["delta"]
        elif kind == "REASONING_ENCRYPTED_VALUE":
            held[e["entityId"]]["encryptedValue"] = e["encryptedValue"]
        elif kind == "TOOL_CALL_START":
            parent = held.setdefault(
                e["parentMessageId"], {"id": e["parentMessageId"], "role": "assistant"}
            )
            call = {
                "id": e["toolCallId"],
                "type": "function",
                "function": {"name": e["toolCallName"], "arguments": ""},
            }
            parent.setdefault("toolCalls", []).append(call)
        elif kind == "TOOL_CALL_ARGS":
            for message in held.values():
                for call in message.get("toolCalls", ()):
                    if call["id"] == e["toolCallId"]:
                        call["function"]["arguments"] += e["delta"]
    return held


@given(st.lists(_piece, min_size=1, max_size=10))
def test_streamed_ids_and_content_are_the_stored_ones(pieces: list[Any]) -> None:
    model_events: list[Any] = []
    calls = 0
    for piece in pieces:
        if piece == "call":
            model_events += _tool_call(calls)
            calls += 1
        else:
            model_events += piece
    builder = ResponseBuilder()
    for event in model_events:
        builder.add(event)
    answer = builder.build("end_turn").message
    stream = EventStream(RunRequest(thread_id="t", run_id="r", messages=[]))
    out = stream.started(None, 0)
    for event in [ResponseStarted(answer.id), *model_events, MessageCommitted(answer, 1)]:
        out += stream.translate(event)
    out.append(stream.finished(1, "end_turn", []))
    events = [e.model_dump(by_alias=True, mode="json") for e in out]
    check_order(events)
    held = apply(events)
    expected = {d["id"]: d for d in to_agui([answer])}
    for rid, d in expected.items():
        if d["role"] == "reasoning" and d.get("metadata"):  # redacted: marked by the snapshot
            d = {k: v for k, v in d.items() if k != "metadata"}
        assert held.get(rid, {"id": rid, "role": d["role"], "content": ""}) == d
    assert set(held) <= set(expected)


def test_error_codes_are_snake_case() -> None:
    assert error_code("ModelError") == "model_error"
    assert error_code("StoreUnavailableError") == "store_unavailable_error"


_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(-1e300, 1e300)
    | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)


@st.composite
def activity_message(draw: st.DrawFn) -> dict[str, Any]:
    """An activity message as a thread's session value gives it back (``server.activity``)."""
    content = draw(st.dictionaries(st.text(max_size=3), _json_values, max_size=3))
    sent = {"id": draw(st.text(min_size=1, max_size=4)), "role": "activity"}
    sent.update(activityType=draw(st.text(max_size=4)), content=content)
    return thaw(freeze(normalize_agui(sent)))  # type: ignore[no-any-return]


@settings(max_examples=300)
@given(st.lists(agui_message(), max_size=6), st.lists(activity_message(), max_size=2))
def test_the_closing_snapshot_frame_is_what_the_protocols_encoder_writes(
    sent: list[dict[str, Any]], activity: list[dict[str, Any]]
) -> None:
    """The server writes ``MESSAGES_SNAPSHOT`` itself (``server.encode``); for any thread a
    store can hold, with activity messages among it, the frame holds the JSON ag_ui's own
    encoder writes for the same messages."""
    from ag_ui.core import MessagesSnapshotEvent
    from ag_ui.encoder import EventEncoder

    messages = [*activity, *to_agui(from_agui(sent))]
    ours = frame(MessagesSnapshot(messages))
    theirs = EventEncoder().encode(MessagesSnapshotEvent(messages=messages))
    assert ours.startswith("data: {") and ours.endswith("}\n\n") and "\n" not in ours[:-2]
    assert json.loads(ours[len("data: ") :]) == json.loads(theirs[len("data: ") :])


async def test_our_signed_reasoning_keeps_its_signature_through_a_client_to_a_new_thread() -> None:
    """A client takes a thread from MESSAGES_SNAPSHOT to a thread the server has never seen
    (so none of its ids are known there): the Anthropic signature this server streamed as
    ``encryptedValue`` is stored as one again and sent to Anthropic byte for byte; a value a
    client put there itself (another provider's) is kept for the client, never sent."""
    signed = ThinkingBlock(thinking="think", signature="EqQBCkYIARgC+/==")
    model = ScriptedModel([Msg.assistant([signed, TextBlock(text="hi")]), "ok", "ok"])
    ledger = AsyncLedger("memory://")
    app = create_app(ReActAgent(model, (), store=ledger))

    async def run(thread: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        body = {"threadId": thread, "runId": "r", "messages": messages}
        response = await client.post("/", json=body)
        events = parse_frames(response.text)
        assert events[-1]["type"] == "RUN_FINISHED", events[-1]
        snapshot: list[dict[str, Any]] = next(
            e for e in events if e["type"] == "MESSAGES_SNAPSHOT"
        )["messages"]
        return snapshot

    async with client_for(app) as client:
        held = await run("a", [{"id": "u1", "role": "user", "content": "hello"}])
        foreign = {"id": "r9", "role": "reasoning", "content": "x", "encryptedValue": "gAAAAB=="}
        await run("b", [*held, foreign, {"id": "u2", "role": "user", "content": "more"}])
    stored = await ledger.messages("b")
    thinking = [b for m in stored for b in m.content if isinstance(b, ThinkingBlock)]
    assert [b.signature for b in thinking] == [signed.signature, None]
    _, turns = to_anthropic(stored)
    sent = [b for t in turns for b in t["content"] if b["type"] == "thinking"]
    assert sent == [{"type": "thinking", "thinking": "think", "signature": signed.signature}]
