"""A model that reuses tool-call ids never leaves a session that strict providers refuse: each
reused id is made unique before it is stored or streamed (``agent.call_ids``)."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger import Msg, ToolUseBlock
from agentledger.agent.context import RunFinished, RuntimeContext
from agentledger.agent.events import ToolCallStart
from agentledger.agent.react import ReActAgent
from agentledger.agent.tools import tool
from agentledger.store.aio import AsyncLedger
from agentledger.testing.scripted import ScriptedModel
from agentledger.wire import check


@tool
def lookup(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


def reply(*ids: str) -> Msg:
    return Msg.assistant([ToolUseBlock(id=i, name="lookup", input={"city": i}) for i in ids])


async def run(agent: ReActAgent, text: str, session: str = "s") -> list[object]:
    return [e async for e in agent.stream([Msg.user(text)], RuntimeContext(session))]


async def test_a_scripted_reply_replayed_on_a_stored_session_gets_fresh_ids() -> None:
    ledger = AsyncLedger("memory://")
    for turn in range(3):  # the README's example, run three times on one session
        model = ScriptedModel([reply("call_1"), Msg.assistant("done")])
        events = await run(ReActAgent(model, [lookup], store=ledger), f"turn {turn}")
        assert isinstance(events[-1], RunFinished) and events[-1].message is not None
    stored = await ledger.messages("s")
    check(stored, target="strict")  # no duplicate id: the session still runs
    assert [c.id for m in stored for c in m.tool_calls] == ["call_1", "call_1_2", "call_1_3"]


async def test_streamed_ids_are_the_stored_ids() -> None:
    ledger = AsyncLedger("memory://")
    await run(
        ReActAgent(ScriptedModel([reply("c"), Msg.assistant("ok")]), [lookup], store=ledger), "a"
    )
    model = ScriptedModel([reply("c", "c"), Msg.assistant("ok")])  # reused, and twice in one
    events = await run(ReActAgent(model, [lookup], store=ledger), "b")
    streamed = [e.id for e in events if isinstance(e, ToolCallStart)]
    stored = await ledger.messages("s")
    calls = [c.id for m in stored[4:] for c in m.tool_calls]
    results = [r.id for m in stored[4:] for r in m.tool_results]
    assert streamed == calls == ["c_2", "c_3"] and sorted(results) == calls


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.sampled_from(["a", "a_2", "b", "call_0"]), min_size=1, max_size=3),
                min_size=1, max_size=4))  # fmt: skip
def test_any_ids_a_model_sends_leave_a_valid_history(replies: list[list[str]]) -> None:
    async def scenario() -> list[Msg]:
        ledger = AsyncLedger("memory://")
        for ids in replies:
            model = ScriptedModel([reply(*ids), Msg.assistant("done")])
            await run(ReActAgent(model, [lookup], store=ledger), "go")
        return await ledger.messages("s")

    stored = asyncio.run(scenario())
    check(stored, target="strict")
    calls = [c.id for m in stored for c in m.tool_calls]
    assert len(calls) == len(set(calls)) == sum(len(ids) for ids in replies)
