"""What a run saves always passes the check its model's requests must pass.

A run's input, what its ``on_state_loaded`` hook makes of the loaded history, and the model's
answer were once saved before anything checked them: a tool result for no call, a resent
stored call, a blank answer, an answer holding a tool result. The run then failed, and so did
every later run of the session, since the stored history itself failed the check. Now each is
checked before it is saved: input or a hook's edit that fails is refused with ``HistoryError``
and the session stays as it was; a blank answer is not saved (as an empty one was not); any
other answer that no history may hold is the model's ``ModelError``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger import Msg, ThinkingBlock, ToolResultBlock, ToolUseBlock
from agentledger.agent.context import RunError, RunFinished, RuntimeContext
from agentledger.agent.events import ModelResponse
from agentledger.agent.react import ReActAgent
from agentledger.errors import HistoryError, ModelError, UserError
from agentledger.store.aio import AsyncLedger
from agentledger.testing.scripted import ScriptedModel
from agentledger.wire import validate

CALL = ToolUseBlock(id="c1", name="lookup", input={"city": "Paris"})
STORED = [
    Msg.user("weather in Paris?", id="u1"),
    Msg.assistant(CALL, id="a1"),
    Msg.tool(ToolResultBlock(id="c1", name="lookup", output="sunny"), id="t1"),
    Msg.assistant("sunny in Paris", id="a2"),
]
#: Messages a caller may send, valid after the stored history or not.
INPUTS = {
    "user": Msg.user("and Rome?"),
    "blank user": Msg.user("  "),
    "assistant": Msg.assistant("noted"),
    "blank assistant": Msg.assistant(" "),
    "call": Msg.assistant(ToolUseBlock(id="c9", name="lookup", input={"city": "Oslo"})),
    "its result": Msg.tool(ToolResultBlock(id="c9", name="lookup", output="snow")),
    "a second result": Msg.tool(ToolResultBlock(id="c1", name="lookup", output="again")),
    "an orphan result": Msg.tool(ToolResultBlock(id="zz", name="lookup", output="?")),
    "a user's tool call": Msg.user(ToolUseBlock(id="c8", name="lookup", input={})),
    "thinking from a user": Msg.user(ThinkingBlock(thinking="hm")),
    "a stored call resent": STORED[1],
    "system": Msg.system("be brief"),
}


class Answers:
    """A model that answers ``message``, whatever it is (``ScriptedModel`` takes only
    assistant messages)."""

    name = "answers"

    def __init__(self, message: Msg) -> None:
        self.message = message

    async def stream(self, messages: Any, **kw: Any) -> AsyncIterator[ModelResponse]:
        yield ModelResponse(self.message, "end_turn")


#: Models answering what the model may answer.
ANSWERS: dict[str, Callable[[], Any]] = {
    "text": lambda: ScriptedModel(["fine"]),
    "blank": lambda: ScriptedModel(["  \n"]),
    "a tool result": lambda: Answers(Msg.assistant(ToolResultBlock(id="c7", name="t", output="x"))),
    "a user message": lambda: Answers(Msg.user("I am the user")),
}
#: What a hook may make of the loaded history.
HOOKS = {
    "none": lambda context: context,
    "drop the answer": lambda context: context[:3],
    "drop the call": lambda context: [context[0], *context[2:]],
    "keep the first": lambda context: context[:1],
}


async def _run(inputs: list[str], answer: str, hook: str) -> tuple[Any, list[Msg], int, int]:
    ledger = AsyncLedger("memory://")
    version = (await ledger.save("s", STORED)).version

    def edit(ctx: RuntimeContext, msgs: list[Msg]) -> None:
        assert ctx.state is not None
        ctx.state.context[:] = HOOKS[hook](list(ctx.state.context))

    agent = ReActAgent(ANSWERS[answer](), store=ledger, on_state_loaded=edit)
    ctx = RuntimeContext(session_id="s", on_state_loaded=edit)
    try:
        events = [e async for e in agent.stream([INPUTS[i] for i in inputs], ctx)]
        outcome: Any = events[-1]
    except (HistoryError, ModelError) as exc:
        outcome = exc
    stored = await ledger.messages("s")
    after = (await ledger.history("s"))[-1].version
    again = ReActAgent(ScriptedModel(["still here"]), store=ledger)
    await again.run("hello again", "s")  # the session is never bricked
    return outcome, stored, version, after


@settings(max_examples=150, deadline=None)
@given(
    inputs=st.lists(st.sampled_from(sorted(INPUTS)), min_size=1, max_size=3),
    answer=st.sampled_from(sorted(ANSWERS)),
    hook=st.sampled_from(sorted(HOOKS)),
)
def test_whatever_a_run_is_given_it_saves_only_a_history_that_passes(
    inputs: list[str], answer: str, hook: str
) -> None:
    outcome, stored, version, after = asyncio.run(_run(inputs, answer, hook))
    assert validate(stored, target="strict") == []
    context = HOOKS[hook](list(STORED))
    given_history = [*context, *(INPUTS[i] for i in inputs)]
    if validate(given_history, target="strict"):
        assert isinstance(outcome, HistoryError)
        assert after == version and stored == STORED  # refused: nothing saved
        return
    assert stored[: len(given_history)] == given_history
    if answer in ("a tool result", "a user message"):
        assert isinstance(outcome, ModelError) and len(stored) == len(given_history)
    elif answer == "blank":
        assert isinstance(outcome, RunFinished) and outcome.message is None
        assert len(stored) == len(given_history)
    else:
        assert isinstance(outcome, RunFinished) and stored[-1].text == "fine"


def test_a_refused_input_says_why_and_the_run_ends_with_a_run_error() -> None:
    async def run() -> tuple[list[Any], list[Msg]]:
        ledger = AsyncLedger("memory://")
        await ledger.save("s", STORED)
        agent = ReActAgent(ScriptedModel(["fine"]), store=ledger)
        events: list[Any] = []
        try:
            async for event in agent.stream(INPUTS["an orphan result"], "s"):
                events.append(event)
        except HistoryError as exc:
            assert "orphan_result" in str(exc) and "'zz'" in str(exc)
        return events, await ledger.messages("s")

    events, stored = asyncio.run(run())
    assert isinstance(events[-1], RunError) and events[-1].kind == "HistoryError"
    assert stored == STORED


class AnthropicScript(ScriptedModel):
    history_target = "anthropic"  # as AnthropicModel: one system prompt, before everything


def test_an_agent_checks_by_the_rules_of_its_models_provider() -> None:
    """A system message in mid-conversation passes the strict check, and Anthropic refuses
    it: an agent on such a model refuses it as input, before it is stored."""

    async def run(model: ScriptedModel) -> list[Msg]:
        ledger = AsyncLedger("memory://")
        await ledger.save("s", STORED)
        agent = ReActAgent(model, store=ledger)
        assert agent.history_target == getattr(model, "history_target", "strict")
        try:
            await agent.run([Msg.system("answer in French"), Msg.user("and Rome?")], "s")
        except HistoryError as exc:
            assert "bad_role_order" in str(exc)
        return await ledger.messages("s")

    assert asyncio.run(run(AnthropicScript(["bien"]))) == STORED
    assert asyncio.run(run(ScriptedModel(["bien"])))[-1].text == "bien"


def test_a_model_naming_no_history_target_it_has_is_refused() -> None:
    model = ScriptedModel(["x"])
    model.history_target = "agui"  # type: ignore[attr-defined]
    with pytest.raises(UserError, match="history_target must be one of"):
        ReActAgent(model, store="memory://")
