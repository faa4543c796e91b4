"""A middleware's edit becomes the session's state only if the model could be sent it.

The agent saves a ``before_reasoning`` edit before it calls the model. An edit that leaves a
history the strict check refuses (a tool call without its result, a result without its call)
would otherwise be committed first and refused after, and every later run of the session would
fail on it, with or without that middleware.
"""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger import Msg, ToolResultBlock, ToolUseBlock
from agentledger.agent.context import ContextEditFailed, RunFinished, RuntimeContext
from agentledger.agent.middleware import Middleware
from agentledger.agent.react import ReActAgent
from agentledger.errors import UserError
from agentledger.store.aio import AsyncLedger
from agentledger.testing.scripted import ScriptedModel
from agentledger.wire import validate

HISTORY = [
    Msg.user("weather in Paris and Rome?", id="u1"),
    Msg.assistant(
        [
            ToolUseBlock(id="c1", name="lookup", input={"city": "Paris"}),
            ToolUseBlock(id="c2", name="lookup", input={"city": "Rome"}),
        ],
        id="a1",
    ),
    Msg.tool(ToolResultBlock(id="c1", name="lookup", output="sunny"), id="t1"),
    Msg.tool(ToolResultBlock(id="c2", name="lookup", output="rain"), id="t2"),
    Msg.assistant("sunny in Paris, rain in Rome", id="a2"),
]


class Returns(Middleware):
    """Returns the messages of the context at ``picks`` (any order, any repeats)."""

    def __init__(self, picks: list[int]) -> None:
        self.picks = picks
        self.given: list[Msg] = []

    async def before_reasoning(self, ctx: RuntimeContext, context: list[Msg]) -> list[Msg]:
        self.given = list(context)
        return [context[i % len(context)] for i in self.picks]


async def _run(picks: list[int]) -> tuple[list[object], list[Msg], list[Msg], list[Msg]]:
    """The events of a run whose middleware returns ``picks``, the context it was given, the
    session after it and after a second run without the middleware."""
    ledger = AsyncLedger("memory://")
    await ledger.save("s", HISTORY)
    middleware = Returns(picks)
    agent = ReActAgent(ScriptedModel(["noted"]), store=ledger, middlewares=[middleware])
    events = [e async for e in agent.stream("and Oslo?", "s")]
    stored = await ledger.messages("s")
    again = ReActAgent(ScriptedModel(["fine"]), store=ledger)  # the session still runs
    await again.run("thanks", "s")
    return events, middleware.given, stored, await ledger.messages("s")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, len(HISTORY)), max_size=8))
def test_an_edit_is_saved_only_when_the_model_could_be_sent_it(picks: list[int]) -> None:
    events, context, stored, after = asyncio.run(_run(picks))
    assert validate(stored, target="strict") == []
    assert validate(after, target="strict") == []
    assert context[: len(HISTORY)] == HISTORY and context[-1].text == "and Oslo?"
    failed = [e for e in events if isinstance(e, ContextEditFailed)]
    edited = [context[i % len(context)] for i in picks]
    if validate(edited, target="strict"):
        assert [(f.middleware, f.kind) for f in failed] == [("Returns", "HistoryError")]
        assert stored[:-1] == context  # the run went on from the context as it was
    else:
        assert failed == []
        assert stored[:-1] == edited
    assert isinstance(events[-1], RunFinished) and stored[-1].text == "noted"


def test_an_edit_dropping_a_result_is_reported_and_not_saved() -> None:
    events, _, stored, _ = asyncio.run(_run([0, 1, 2, 4, 5]))  # t2 dropped: c2 unanswered
    (failed,) = [e for e in events if isinstance(e, ContextEditFailed)]
    assert "unanswered_call" in failed.error and "c2" in failed.error
    assert [m.id for m in stored[: len(HISTORY)]] == ["u1", "a1", "t1", "t2", "a2"]


@pytest.mark.parametrize(
    ("returned", "said"),
    [
        ("not a list", "expected a list of Msg, got str"),
        (42, "expected a list of Msg, got int"),
        ([{"role": "user", "content": "hi"}], "expected a list of Msg, got a dict at position 0"),
    ],
)
async def test_an_edit_that_is_not_a_list_of_messages_is_a_user_error(
    returned: object, said: str
) -> None:
    class Odd(Middleware):
        async def before_reasoning(self, ctx: RuntimeContext, context: list[Msg]) -> object:
            return returned

    ledger = AsyncLedger("memory://")
    await ledger.save("s", HISTORY)
    agent = ReActAgent(ScriptedModel(["noted"]), store=ledger, middlewares=[Odd()])
    with pytest.raises(UserError, match=f"Odd.before_reasoning: {said}"):
        await agent.run("and Oslo?", "s")
    assert (await ledger.messages("s"))[: len(HISTORY)] == HISTORY
