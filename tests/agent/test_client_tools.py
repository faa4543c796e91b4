"""Per-run hooks the AG-UI server needs: client tools that wait for the client, the announced
answer id, a hook that rewinds or finds nothing new, per-run instructions."""

from __future__ import annotations

import pytest

from agentledger import Msg, TextBlock, ToolResultBlock, ToolUseBlock
from agentledger.agent.context import (
    MessageCommitted,
    ResponseStarted,
    RunFinished,
    RuntimeContext,
)
from agentledger.agent.lifecycle import CLIENT, PENDING_VALUE
from agentledger.agent.model import ToolSpec
from agentledger.agent.react import ReActAgent
from agentledger.agent.tools import tool
from agentledger.errors import UserError
from agentledger.store import MemoryStore
from agentledger.store.aio import AsyncLedger
from agentledger.testing.scripted import ScriptedModel
from agentledger.wire import check

PICK = ToolSpec(name="pick_color", description="Ask the user to pick a color.")


@tool
def server_time() -> str:
    """The server's clock."""
    return "12:00"


def ask(*names: str) -> Msg:
    return Msg.assistant([ToolUseBlock(id=f"c_{n}", name=n) for n in names])


def ctx(**kw) -> RuntimeContext:
    return RuntimeContext("s", client_tools=(PICK,), **kw)


def answer(call_id: str, text: str) -> Msg:
    return Msg.tool(ToolResultBlock(id=call_id, name="pick_color", output=text))


@pytest.fixture
def ledger() -> AsyncLedger:
    return AsyncLedger(MemoryStore())


async def test_a_client_call_ends_the_run_waiting_and_the_next_run_brings_its_result(
    ledger: AsyncLedger,
) -> None:
    model = ScriptedModel([ask("pick_color", "server_time"), Msg.assistant("Blue it is.")])
    agent = ReActAgent(model, [server_time], store=ledger)
    events = [e async for e in agent.stream("choose", ctx())]
    assert isinstance(events[-1], RunFinished) and events[-1].reason == "client_tool"
    assert {t.name for t in model.requests[0].tools} == {"pick_color", "server_time"}
    state = await ledger.load("s")
    assert state.values[PENDING_VALUE] == {"c_pick_color": {"state": CLIENT, "name": "pick_color"}}
    assert [r.id for r in state.context[-1].tool_results] == ["c_server_time"]  # ours ran

    assert await agent.recover(ctx()) == state.context  # waiting is not a crash to recover
    with pytest.raises(UserError, match="waiting for its result from the client"):
        await agent.run(None, ctx())

    final = await agent.run([answer("c_pick_color", "blue")], ctx())
    assert final is not None and final.text == "Blue it is."
    stored = await ledger.messages("s")
    check(stored, target="strict")
    assert PENDING_VALUE not in (await ledger.load("s")).values


async def test_moving_on_without_the_result_answers_the_call_with_an_error(
    ledger: AsyncLedger,
) -> None:
    model = ScriptedModel([ask("pick_color"), Msg.assistant("ok")])
    agent = ReActAgent(model, store=ledger)
    await agent.run("choose", ctx())
    await agent.run("never mind", ctx())
    stored = await ledger.messages("s")
    check(stored, target="strict")
    (result,) = stored[2].tool_results
    assert result.is_error and result.metadata["lifecycle"] == "no_client_result"
    assert stored[3].text == "never mind"


async def test_the_answer_is_stored_under_the_announced_id(ledger: AsyncLedger) -> None:
    scripted = Msg.assistant("hi", id="scripted-id")
    agent = ReActAgent(ScriptedModel([scripted]), store=ledger)
    events = [e async for e in agent.stream("hello", "s")]
    (started,) = [e for e in events if isinstance(e, ResponseStarted)]
    committed = [e.message for e in events if isinstance(e, MessageCommitted)]
    assert committed[-1].id == started.message_id != "scripted-id"
    assert (await ledger.messages("s"))[-1].id == started.message_id


async def test_a_hook_that_finds_nothing_new_ends_the_run_without_a_model_call(
    ledger: AsyncLedger,
) -> None:
    await ledger.save("s", [Msg.user("hi", id="u"), Msg.assistant("hello", id="a")])
    model = ScriptedModel([])
    agent = ReActAgent(model, store=ledger)

    def dedupe(c: RuntimeContext, msgs: list[Msg]) -> None:
        msgs[:] = [m for m in msgs if m.id not in {s.id for s in c.state.context}]

    events = [e async for e in agent.stream([Msg.user("hi", id="u")], ctx(on_state_loaded=dedupe))]
    assert isinstance(events[-1], RunFinished) and events[-1].reason == "no_new_input"
    assert model.requests == [] and (await ledger.version("s")) == 1


async def test_a_hook_may_rewind_the_context(ledger: AsyncLedger) -> None:
    old = [Msg.user("one", id="u1"), Msg.assistant("1", id="a1"), Msg.user("two", id="u2")]
    await ledger.save("s", [*old, Msg.assistant("2", id="a2")])
    model = ScriptedModel([Msg.assistant("2!")])
    agent = ReActAgent(model, store=ledger)

    def rewind(c: RuntimeContext, msgs: list[Msg]) -> None:
        del c.state.context[2:]

    events = [e async for e in agent.stream(Msg.user("TWO", id="u2"), ctx(on_state_loaded=rewind))]
    assert [m.text for m in await ledger.messages("s")] == ["one", "1", "TWO", "2!"]
    committed = [e.message.text for e in events if isinstance(e, MessageCommitted)]
    assert committed == ["TWO", "2!"]  # the kept messages were stored before the run
    assert [m.text for m in await ledger.messages("s", version=1)][2:] == ["two", "2"]


async def test_instructions_reach_the_model_and_are_never_stored(ledger: AsyncLedger) -> None:
    model = ScriptedModel([Msg.assistant("ok")])
    agent = ReActAgent(model, store=ledger, system_prompt="Be brief.")
    await agent.run("hi", ctx(instructions="The user is on the pricing page."))
    assert model.requests[0].system == "Be brief.\n\nThe user is on the pricing page."
    stored = await ledger.messages("s")
    assert all("pricing" not in m.text for m in stored)
    assert [b for m in stored for b in m.content] == [TextBlock(text="hi"), TextBlock(text="ok")]
