"""A faulty model, hook or tool definition gets a typed error, never a bare ``TypeError`` or
``AttributeError``: the model's faults are ``ModelError`` (the run ends with ``RunError``, its
input kept), the caller's are ``UserError``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from agentledger import Msg, UserError, tool
from agentledger.agent.context import RunError, RuntimeContext
from agentledger.agent.events import ModelResponse, TextDelta
from agentledger.agent.react import ReActAgent
from agentledger.errors import ModelError
from agentledger.store.aio import AsyncLedger
from agentledger.testing.scripted import ScriptedModel


class Faulty:
    """A model whose stream says "he" and then does ``fault``."""

    name = "faulty"

    def __init__(self, fault: str) -> None:
        self.fault = fault

    async def stream(self, messages: Any, **kw: Any) -> AsyncIterator[Any]:
        yield TextDelta("he")
        if self.fault == "raises":
            raise RuntimeError("sdk bug")
        if self.fault == "stops":
            raise StopAsyncIteration  # an async generator turns it into RuntimeError
        if self.fault == "yields junk":
            yield "llo"
        yield ModelResponse("hello", "end_turn")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fault", "said"),
    [
        ("raises", "model 'faulty' failed: RuntimeError: sdk bug"),
        ("stops", "model 'faulty' failed: RuntimeError: async generator raised"),
        ("yields junk", "the model yielded a str, not a model event"),
        ("answers a str", "the model's response holds a str, not a Msg"),
    ],
)
def test_a_faulty_model_is_a_model_error_and_the_run_ends_with_run_error(
    fault: str, said: str
) -> None:
    async def run() -> tuple[list[Any], list[Msg]]:
        ledger = AsyncLedger("memory://")
        agent = ReActAgent(Faulty(fault), store=ledger)
        events: list[Any] = []
        with pytest.raises(ModelError, match=said):
            async for event in agent.stream("hi", "s"):
                events.append(event)
        again = ReActAgent(ScriptedModel(["fine"]), store=ledger)
        await again.run("again", "s")
        return events, await ledger.messages("s")

    events, stored = asyncio.run(run())
    assert isinstance(events[-1], RunError) and events[-1].kind == "ModelError"
    assert [m.text for m in stored] == ["hi", "again", "fine"]


@pytest.mark.parametrize(
    ("given", "said"),
    [
        (5, "got int"),
        (b"hi", "got bytes"),
        ({"role": "user", "content": "hi"}, "got dict"),
        ([Msg.user("hi"), "and you?"], "got a str at position 1"),
    ],
)
def test_input_that_is_not_messages_is_a_user_error(given: Any, said: str) -> None:
    agent = ReActAgent(ScriptedModel(["fine"]), store="memory://")
    with pytest.raises(UserError, match=said):
        asyncio.run(agent.run(given, "s"))


def _hooks() -> dict[str, Callable[[RuntimeContext, list[Msg]], None]]:
    def context_junk(ctx: RuntimeContext, msgs: list[Msg]) -> None:
        assert ctx.state is not None
        ctx.state.context.append("a note")  # type: ignore[arg-type]

    def input_junk(ctx: RuntimeContext, msgs: list[Msg]) -> None:
        msgs.append({"role": "user", "content": "x"})  # type: ignore[arg-type]

    return {"context": context_junk, "input": input_junk}


@pytest.mark.parametrize("where", ["context", "input"])
def test_a_hook_that_leaves_anything_but_messages_is_a_user_error(where: str) -> None:
    async def run() -> list[Msg]:
        ledger = AsyncLedger("memory://")
        await ledger.save("s", [Msg.user("earlier"), Msg.assistant("yes")])
        agent = ReActAgent(ScriptedModel(["fine"]), store=ledger)
        with pytest.raises(UserError, match=f"the {where} on_state_loaded left: expected"):
            await agent.run("hi", RuntimeContext("s", on_state_loaded=_hooks()[where]))
        return await ledger.messages("s")

    assert [m.text for m in asyncio.run(run())] == ["earlier", "yes"]


class Opaque:
    pass


def test_a_tool_whose_parameters_have_no_schema_is_refused_when_made() -> None:
    def private(_token: str) -> str:
        return _token

    def opaque(thing: Opaque) -> str:
        return "?"

    with pytest.raises(UserError, match="parameter '_token' starts with an underscore"):
        tool(private)
    with pytest.raises(UserError, match="tool 'opaque': its parameters have no JSON schema"):
        tool(opaque)
