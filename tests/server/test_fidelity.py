"""What a client sends is what the server keeps: generated conversations through the whole run
(parse, merge, store, snapshot, ``GET /threads/{id}/messages``), compared as JSON text, so a
value that changed type on the way (``1e400`` once became ``null``; ``true`` and ``1``, ``1``
and ``1.0`` are different text) fails.

- Every message of an accepted run comes back exactly as sent, in the run's snapshot and from
  the messages endpoint; the state too. A later run that adds messages keeps them as sent.
- A resend of the snapshot is nothing new: no model call, no new version, the same snapshot.
- A client's change is a change by JSON's rules (``server.same``): a user message whose
  metadata changed from ``1`` to ``true`` is an edit and forks the thread; ``1`` resent as
  ``1.0`` (all a JavaScript client can do with a number) is the same message, and the stored
  form stays. The same for the state and for activity messages.
"""

from __future__ import annotations

import asyncio
import json
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reliability.record import knob

from agentledger.agent.react import ReActAgent
from agentledger.server import create_app
from agentledger.server.same import same_json
from agentledger.store.aio import AsyncLedger
from agentledger.testing import ScriptedModel
from tests.server.conftest import client_for, parse_frames
from tests.wire.agui_strategies import (
    agui_message,
    content,
    json_values,
    normalized,
    tool_call,
)

EXAMPLES = knob("AGENTLEDGER_FIDELITY_EXAMPLES", 60)
_CLIENT = ("user", "system", "developer")
# values a JSON client may hold where Python's ``==`` and JSON's equality part ways
_CLOSE = [0, 1, 1.0, -0.0, 0.0, True, False, None, "1", [1], [True], {"k": 1}, {"k": True}]


def text(value: Any) -> str:
    """``value`` as JSON text: the comparison that tells ``1``, ``1.0`` and ``true`` apart."""
    return json.dumps(value, sort_keys=True)


# -- strategies -------------------------------------------------------------------------------
@st.composite
def _turn(draw: st.DrawFn) -> list[dict[str, Any]]:
    kind = draw(st.sampled_from(["client", "client", "calls", "activity"]))
    if kind == "client":
        return [draw(agui_message().filter(lambda m: m["role"] in _CLIENT))]
    if kind == "activity":
        body = st.dictionaries(st.text(max_size=4), json_values, max_size=3)
        return [{"id": "", "role": "activity", "activityType": "progress", "content": draw(body)}]
    calls = draw(st.lists(tool_call, min_size=1, max_size=2))
    answer = normalized({"id": "", "role": "assistant", "toolCalls": calls})
    results = [
        normalized({"id": "", "role": "tool", "toolCallId": "", "content": draw(content)})
        for _ in calls
    ]
    return [answer, *results]


@st.composite
def conversations(draw: st.DrawFn, prefix: str = "m") -> list[dict[str, Any]]:
    """A client's thread: its own messages, tool calls it ran and their results, activity;
    ids unique (a copy of each drawn message, renamed), ending with a user turn."""
    turns = draw(st.lists(_turn(), min_size=1, max_size=4))
    msgs = [dict(m) for turn in turns for m in turn]
    calls = answered = 0
    for i, m in enumerate(msgs):
        m["id"] = f"{prefix}{i}"
        if m["role"] == "assistant":
            m["toolCalls"] = [
                dict(c, id=f"{prefix}c{calls + k}") for k, c in enumerate(m["toolCalls"])
            ]
            answered = calls
            calls += len(m["toolCalls"])
        elif m["role"] == "tool":
            m["toolCallId"] = f"{prefix}c{answered}"
            answered += 1
    return [*msgs, {"id": f"{prefix}-go", "role": "user", "content": "go"}]


states = st.one_of(st.none(), json_values)


# -- plumbing ---------------------------------------------------------------------------------
class Server:
    """An app with an in-memory ledger and a model that always answers "ok"."""

    def __init__(self) -> None:
        self.ledger = AsyncLedger("memory://")
        self.model = ScriptedModel(["ok"] * 8)
        self.app = create_app(ReActAgent(self.model, (), store=self.ledger))

    async def run(self, client: Any, messages: list[dict[str, Any]], state: Any = None) -> Any:
        body: dict[str, Any] = {"threadId": "t", "runId": "r", "messages": messages}
        if state is not None:
            body["state"] = state
        response = await client.post("/", json=body)
        assert response.status_code == 200, response.text
        events = parse_frames(response.text)
        assert events[-1]["type"] == "RUN_FINISHED", events[-1]
        return events


def snapshot(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return next(e for e in events if e["type"] == "MESSAGES_SNAPSHOT")["messages"]


def state_of(events: list[dict[str, Any]]) -> Any:
    return next(e for e in events if e["type"] == "STATE_SNAPSHOT")["snapshot"]


async def served(client: Any) -> list[dict[str, Any]]:
    return (await client.get("/threads/t/messages")).json()["messages"]


# -- properties -------------------------------------------------------------------------------
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(conversations(), conversations("n"), states, states)
def test_what_a_client_sends_is_kept_as_sent(
    sent: list[dict[str, Any]], more: list[dict[str, Any]], state: Any, later_state: Any
) -> None:
    async def check() -> None:
        server = Server()
        async with client_for(server.app) as client:
            events = await server.run(client, sent, state)
            thread = snapshot(events)
            assert text(thread[: len(sent)]) == text(sent)
            assert text(await served(client)) == text(thread)
            if state is not None:
                assert text(state_of(events)) == text(state)

            version = await server.ledger.version("t")
            again = await server.run(client, thread, state)
            assert text(snapshot(again)) == text(thread)
            assert len(server.model.requests) == 1  # nothing new: no model call
            assert await server.ledger.version("t") == version

            events = await server.run(client, [*thread, *more], later_state)
            grown = snapshot(events)
            assert text(grown[: len(thread) + len(more)]) == text([*thread, *more])
            assert text(await served(client)) == text(grown)
            kept = later_state if later_state is not None else state_of(again)
            if kept != {} or state is None:  # ``{}`` never replaces a stored state
                assert text(state_of(events)) == text(kept)

    asyncio.run(check())


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(conversations(), st.data(), st.sampled_from(_CLOSE))
def test_a_change_is_a_change_by_json_rules(
    sent: list[dict[str, Any]], data: st.DataObject, before: Any
) -> None:
    """A client message's metadata goes from ``before`` to ``after``: an edit that forks the
    thread when the two differ as JSON, nothing new (and the stored form kept) when not.
    Half the time ``after`` is one that Python's ``==`` takes for ``before``."""
    twins = [value for value in _CLOSE if value == before]
    after = data.draw(st.sampled_from(_CLOSE) | st.sampled_from(twins))
    mine = [k for k, m in enumerate(sent) if m["role"] in _CLIENT]
    k = data.draw(st.sampled_from(mine))
    sent = [*sent[:k], dict(sent[k], metadata={"k": before}), *sent[k + 1 :]]

    async def check() -> None:
        server = Server()
        async with client_for(server.app) as client:
            thread = snapshot(await server.run(client, sent))
            edited = dict(thread[k], metadata={"k": after})
            events = await server.run(client, [*thread[:k], edited, *thread[k + 1 :]])
            now = snapshot(events)
            if same_json(before, after):
                assert text(now) == text(thread)
                assert len(server.model.requests) == 1
            else:
                assert text(now[: len(thread)]) == text([*thread[:k], edited, *thread[k + 1 :]])
                assert len(server.model.requests) == 2  # the fork is answered
            assert text(await served(client)) == text(now)

    asyncio.run(check())


@pytest.mark.parametrize(("before", "after"), [(1, True), (0, False), ({"a": [1]}, {"a": [True]})])
async def test_a_state_or_activity_change_from_a_number_to_a_bool_is_kept(
    before: Any, after: Any
) -> None:
    """Regression: ``sent == stored`` took ``true`` for ``1``, so the new state and the new
    activity content were dropped as unchanged."""
    server = Server()

    def activity(value: Any) -> dict[str, Any]:
        return {"id": "a", "role": "activity", "activityType": "p", "content": {"v": value}}

    async with client_for(server.app) as client:
        go = {"id": "u", "role": "user", "content": "go"}
        thread = snapshot(await server.run(client, [go, activity(before)], {"v": before}))
        assert thread[1] == activity(before)
        events = await server.run(client, [thread[0], activity(after), *thread[2:]], {"v": after})
        assert text(state_of(events)) == text({"v": after})
        assert text(snapshot(events)[1]) == text(activity(after))


# -- same_json against a reference ------------------------------------------------------------
def _reference(value: Any) -> Any:
    """JSON's equality as a key: numbers by exact value, bools apart, objects unordered."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return (type(value).__name__, value)
    if isinstance(value, (int, float)):
        return ("number", Fraction(value))
    if isinstance(value, dict):
        return ("object", frozenset((k, _reference(v)) for k, v in value.items()))
    return ("array", tuple(map(_reference, value)))


def _retyped(value: Any) -> Any:
    """``value`` with some numbers written another way and some bools as numbers."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int) and abs(value) < 2**53:
        return float(value)
    if isinstance(value, dict):
        return {k: _retyped(v) for k, v in reversed(value.items())}
    if isinstance(value, list):
        return tuple(map(_retyped, value))  # a stored (frozen) array
    return value


_values = st.recursive(
    st.sampled_from(_CLOSE) | json_values,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner),
    max_leaves=8,
)


@given(_values, _values | _values.map(_retyped), st.booleans())
def test_same_json_is_json_equality(a: Any, b: Any, swap: bool) -> None:
    a, b = (b, a) if swap else (a, b)
    thawed = json.loads(json.dumps(b))  # tuples as lists, for the reference
    assert same_json(a, b) is (_reference(a) == _reference(thawed))
    assert same_json(a, a)
