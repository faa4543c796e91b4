"""The ReAct loop: step-wise persistence, interrupts (seed 003), the load hook (seed 001)."""

from __future__ import annotations

import asyncio
import threading
from contextlib import aclosing, contextmanager

import pytest

from agentledger import Msg, ToolUseBlock
from agentledger.agent.context import (
    MessageCommitted,
    RunError,
    RunFinished,
    RunInterrupted,
    RuntimeContext,
)
from agentledger.agent.events import TextDelta, ToolCallDelta, ToolCallEnd
from agentledger.agent.interrupts import PartialReasoningPolicy, UnexecutedCallPolicy
from agentledger.agent.react import ReActAgent
from agentledger.agent.tools import tool
from agentledger.errors import ModelError, SessionBusyError, UserError
from agentledger.store import Ledger, MemoryStore
from agentledger.store.aio import AsyncLedger
from agentledger.testing.scripted import ScriptedModel
from agentledger.wire import check

calls: list[str] = []


@tool
def lookup(city: str) -> str:
    """Weather for a city."""
    calls.append(city)
    return f"sunny in {city}"


def call_msg(*names: str, text: str = "") -> Msg:
    blocks = [ToolUseBlock(id=f"call_{n}", name="lookup", input={"city": n}) for n in names]
    return Msg.assistant(([] if not text else [_text(text)]) + blocks)


def _text(t: str):
    from agentledger import TextBlock

    return TextBlock(text=t)


@pytest.fixture
def ledger() -> AsyncLedger:
    calls.clear()
    return AsyncLedger(MemoryStore())


def make_agent(ledger: AsyncLedger, script: list, **kw) -> tuple[ReActAgent, ScriptedModel]:
    model = ScriptedModel(script, **{k: kw.pop(k) for k in ["pause_after"] if k in kw})
    return ReActAgent(model, [lookup], store=ledger, system_prompt="be brief", **kw), model


async def stored(ledger: AsyncLedger, session: str = "s") -> list[Msg]:
    return await ledger.messages(session)


# -- the happy path ------------------------------------------------------------------------
async def test_run_persists_every_step_and_never_stores_the_system_prompt(
    ledger: AsyncLedger,
) -> None:
    agent, model = make_agent(ledger, [call_msg("Paris", "Oslo"), Msg.assistant("Both sunny.")])
    events = [e async for e in agent.stream("weather?", RuntimeContext("s"))]
    versions = [e.version for e in events if isinstance(e, MessageCommitted)]
    assert versions == sorted(versions) and len(versions) == 5  # input, call, 2 results, answer
    history = await stored(ledger)
    assert [m.role for m in history] == ["user", "assistant", "tool", "tool", "assistant"]
    assert sorted(calls) == ["Oslo", "Paris"]
    assert all(m.role != "system" for m in history)
    assert model.requests[0].system == "be brief"
    check(history, target="strict")
    assert isinstance(events[-1], RunFinished) and events[-1].message.text == "Both sunny."
    assert (await ledger.load("s")).values == {}  # no pending tool-call records left


async def test_input_is_saved_before_the_model_is_called(ledger: AsyncLedger) -> None:
    seen: list[int] = []

    def answer(messages, tools):
        seen.append(len(ledger.sync.messages("s")))
        return "hi"

    agent, _ = make_agent(ledger, [answer])
    await agent.run("hello", "s")
    assert seen == [1]


# -- seed 003: interrupts never leave an unanswered tool call ----------------------------------
async def _interrupt_at(ledger: AsyncLedger, pause_after, script, source="user", **kw):
    agent, model = make_agent(ledger, script, pause_after=pause_after, **kw)
    task = asyncio.create_task(agent.run("go", RuntimeContext("s")))
    await asyncio.wait_for(model.reached.wait(), 5)
    assert agent.interrupt("s", source)
    model.release.set()
    result = await asyncio.wait_for(task, 5)
    return result, await stored(ledger), agent


async def test_user_interrupt_while_tool_arguments_stream(ledger: AsyncLedger) -> None:
    _, history, _ = await _interrupt_at(
        ledger, ToolCallDelta, [call_msg("Paris", text="Let me check")]
    )
    assert [m.role for m in history] == ["user", "assistant"]
    assert history[1].tool_calls == () and history[1].text == "Let me check"
    assert calls == []
    check(history, target="strict")


async def test_user_interrupt_after_complete_call_before_acting(ledger: AsyncLedger) -> None:
    _, history, _ = await _interrupt_at(ledger, -1, [call_msg("Paris", text="checking")])
    assert history[-1].tool_calls == () and history[-1].text == "checking"
    assert calls == []
    check(history, target="strict")


async def test_user_interrupt_after_blank_text_and_a_call_persists_nothing(
    ledger: AsyncLedger,
) -> None:
    """The call is dropped and what is left is blank text: a message strict providers refuse,
    so it is not saved (it was, and every later run of the session failed)."""
    result, history, _ = await _interrupt_at(ledger, -1, [call_msg("Paris", text="\n\n")])
    assert [m.role for m in history] == ["user"] and result is None
    check(history, target="strict")


async def test_user_interrupt_during_text_only_reasoning_keeps_text(ledger: AsyncLedger) -> None:
    result, history, _ = await _interrupt_at(
        ledger, TextDelta, [Msg.assistant("A long answer " * 20)]
    )
    assert history[-1].role == "assistant" and history[-1].text
    assert "A long answer".startswith(history[-1].text[:5])
    assert result is not None and result.text == history[-1].text


async def test_user_interrupt_during_tool_call_only_reasoning_persists_nothing(
    ledger: AsyncLedger,
) -> None:
    result, history, _ = await _interrupt_at(ledger, ToolCallEnd, [call_msg("Paris")])
    assert [m.role for m in history] == ["user"] and result is None


@pytest.mark.parametrize("policy", list(PartialReasoningPolicy))
async def test_system_interrupt_policies(
    ledger: AsyncLedger, policy: PartialReasoningPolicy
) -> None:
    _, history, _ = await _interrupt_at(
        ledger,
        TextDelta,
        [Msg.assistant("partial words here")],
        source="system",
        reasoning_policy=policy,
    )
    if policy is PartialReasoningPolicy.SAVE:
        assert [m.role for m in history] == ["user", "assistant"]
    else:
        assert [m.role for m in history] == ["user"]


async def test_error_results_policy_keeps_calls_answered(ledger: AsyncLedger) -> None:
    _, history, _ = await _interrupt_at(
        ledger,
        -1,
        [call_msg("Paris")],
        unexecuted_calls=UnexecutedCallPolicy.ERROR_RESULTS,
    )
    assert [m.role for m in history] == ["user", "assistant", "tool"]
    assert history[2].tool_results[0].is_error and calls == []
    check(history, target="strict")


async def test_cancelling_the_task_is_a_user_interrupt(ledger: AsyncLedger) -> None:
    agent, model = make_agent(ledger, [call_msg("Paris", text="hm")], pause_after=ToolCallDelta)
    task = asyncio.create_task(agent.run("go", "s"))
    await asyncio.wait_for(model.reached.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    history = await stored(ledger)
    assert [m.role for m in history] == ["user", "assistant"] and history[1].tool_calls == ()
    check(history, target="strict")


class _HeldSaves(Ledger):
    """A ledger whose saves, once ``hold`` is set, wait in their thread for ``go``;
    ``saving`` is set when one waits and ``running`` counts the saves under way."""

    def __init__(self) -> None:
        super().__init__("memory://")
        self.hold, self.saving, self.go = False, threading.Event(), threading.Event()
        self.running = 0

    def save_state(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.running += 1
        try:
            if self.hold:
                self.saving.set()
                assert self.go.wait(10)
            return super().save_state(*args, **kwargs)
        finally:
            self.running -= 1


async def test_a_run_cancelled_again_while_its_last_save_waits_ends_after_that_save() -> None:
    """Cancelled in the model's stream, the run saves what a user interrupt keeps; cancelled
    again and again while that save waits in its thread (as a cancel scope delivers), it used
    to end at once: its lease went to the next run while the save still wrote the session."""
    held = _HeldSaves()
    ledger = AsyncLedger(held)
    agent, model = make_agent(ledger, [Msg.assistant("a long answer")], pause_after=TextDelta)
    task = asyncio.create_task(agent.run("go", "s"))
    await asyncio.wait_for(model.reached.wait(), 5)
    held.hold = True
    task.cancel()
    await asyncio.to_thread(held.saving.wait, 10)
    for _ in range(5):
        task.cancel()
        await asyncio.sleep(0)
    assert not task.done()  # it waits for its save
    held.go.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert held.running == 0
    async with ledger.lease("s", wait=0):
        history = await stored(ledger)
    assert [m.role for m in history] == ["user", "assistant"]
    assert history[1].text.startswith("a")


class _Logged(Ledger):
    """A ledger that logs its saves and its leases' takes and releases, in order."""

    def __init__(self) -> None:
        super().__init__("memory://")
        self.log: list[str] = []

    def save_state(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.log.append("save")
        return super().save_state(*args, **kwargs)

    @contextmanager
    def lease(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        with super().lease(*args, **kwargs):
            self.log.append("take")
            try:
                yield
            finally:
                self.log.append("give back")


async def test_a_stream_closed_early_saves_before_it_gives_the_lease_back() -> None:
    """Closed at its first committed message, the stream gave the lease back and only then
    (its inner generator left to the garbage collector) made the run's final save."""
    logged = _Logged()
    agent, _ = make_agent(AsyncLedger(logged), [Msg.assistant("an answer")])
    async with aclosing(agent.stream("go", "s")) as events:
        async for event in events:
            if isinstance(event, MessageCommitted):
                break
    while len(asyncio.all_tasks()) > 1:  # whatever the stream left to finish, finished
        await asyncio.sleep(0)
    assert logged.log[0] == "take" and logged.log[-1] == "give back"
    assert logged.log.count("give back") == 1


async def test_interrupt_while_a_tool_runs_answers_the_call(ledger: AsyncLedger) -> None:
    started = asyncio.Event()

    @tool
    async def slow(x: int) -> str:
        """Slow."""
        started.set()
        await asyncio.sleep(30)
        return "never"

    model = ScriptedModel([Msg.assistant(ToolUseBlock(id="c1", name="slow", input={"x": 1}))])
    agent = ReActAgent(model, [slow], store=ledger)
    task = asyncio.create_task(agent.run("go", "s"))
    await asyncio.wait_for(started.wait(), 5)
    agent.interrupt("s")
    await asyncio.wait_for(task, 5)
    history = await stored(ledger)
    assert [m.role for m in history] == ["user", "assistant", "tool"]
    assert history[2].tool_results[0].is_error
    check(history, target="strict")


async def test_fresh_agent_continues_an_interrupted_store(ledger: AsyncLedger) -> None:
    await _interrupt_at(ledger, ToolCallDelta, [call_msg("Paris", text="Let me")])
    agent, model = make_agent(ledger, [call_msg("Rome"), Msg.assistant("Rome is sunny.")])
    final = await agent.run("and Rome?", "s")
    assert final is not None and final.text == "Rome is sunny."
    for request in model.requests:
        check(list(request.messages), target="strict")
    check(await stored(ledger), target="strict")


# -- seed 001: the load hook ---------------------------------------------------------------
async def test_on_state_loaded_sees_state_and_edits_input(ledger: AsyncLedger) -> None:
    await ledger.save("s", [Msg.user("old", id="u1"), Msg.assistant("reply", id="a1")])
    seen = {}

    def hook(ctx: RuntimeContext, msgs: list[Msg]) -> None:
        seen["version"] = ctx.state.version
        seen["ids"] = [m.id for m in ctx.state.context]
        known = {m.id for m in ctx.state.context}
        msgs[:] = [m for m in msgs if m.id not in known]  # dedupe a resent transcript
        msgs.append(Msg.user("injected", id="inj"))

    agent, model = make_agent(ledger, [Msg.assistant("ok")])
    resent = [Msg.user("old", id="u1"), Msg.assistant("reply", id="a1"), Msg.user("new", id="u2")]
    await agent.run(resent, RuntimeContext("s", on_state_loaded=hook))
    assert seen == {"version": 1, "ids": ["u1", "a1"]}
    assert [m.id for m in await stored(ledger)][:4] == ["u1", "a1", "u2", "inj"]
    assert [m.id for m in model.requests[0].messages] == ["u1", "a1", "u2", "inj"]


# -- failures ------------------------------------------------------------------------------
async def test_model_error_keeps_input_and_session_usable(ledger: AsyncLedger) -> None:
    agent, _ = make_agent(ledger, [ModelError("rate limited", status=429, retryable=True)])
    events = []
    with pytest.raises(ModelError):
        async for event in agent.stream("hello", "s"):
            events.append(event)
    assert isinstance(events[-1], RunError) and events[-1].kind == "ModelError"
    assert [m.text for m in await stored(ledger)] == ["hello"]
    agent2, _ = make_agent(ledger, [Msg.assistant("back")])
    assert (await agent2.run("again", "s")).text == "back"
    assert [m.role for m in await stored(ledger)] == ["user", "user", "assistant"]


async def test_second_run_on_busy_session_fails_clearly(ledger: AsyncLedger) -> None:
    agent, model = make_agent(ledger, [Msg.assistant("slow answer")], pause_after=TextDelta)
    task = asyncio.create_task(agent.run("one", "s"))
    await asyncio.wait_for(model.reached.wait(), 5)
    other, _ = make_agent(ledger, [Msg.assistant("x")])
    with pytest.raises(SessionBusyError):
        await other.run("two", "s")
    model.release.set()
    await task
    assert [m.text for m in await stored(ledger)] == ["one", "slow answer"]


async def test_max_iters_stops_with_a_valid_history(ledger: AsyncLedger) -> None:
    script = [call_msg(f"c{i}") for i in range(3)]
    agent, _ = make_agent(ledger, script, max_iters=2)
    events = [e async for e in agent.stream("loop", "s")]
    assert isinstance(events[-1], RunFinished) and events[-1].reason == "max_iters"
    check(await stored(ledger), target="strict")


async def test_tool_errors_become_error_results(ledger: AsyncLedger) -> None:
    @tool
    def boom() -> str:
        """Fails."""
        raise RuntimeError("kaput")

    model = ScriptedModel(
        [
            Msg.assistant([ToolUseBlock(id="c1", name="boom"), ToolUseBlock(id="c2", name="nope")]),
            Msg.assistant("sorry"),
        ]
    )
    agent = ReActAgent(model, [boom], store=ledger)
    await agent.run("go", "s")
    results = {r.id: r for m in await stored(ledger) for r in m.tool_results}
    assert results["c1"].is_error and "kaput" in results["c1"].text
    assert results["c2"].is_error and "no tool" in results["c2"].text


async def test_a_result_no_store_can_hold_is_an_error_result_not_a_crashed_run(
    ledger: AsyncLedger,
) -> None:
    """A tool returned text with a lone surrogate (UTF-8 cannot encode it): the run used to
    raise ``UserError`` with the call saved and unanswered; the model now reads why."""

    @tool
    def odd() -> str:
        """Returns text no block can hold."""
        return "half a pair: \ud800"

    model = ScriptedModel([Msg.assistant([ToolUseBlock(id="c1", name="odd")]), "noted"])
    agent = ReActAgent(model, [odd], store=ledger)
    assert (await agent.run("go", "s")).text == "noted"
    history = await stored(ledger)
    check(history)
    (result,) = history[2].tool_results
    assert result.is_error and "odd returned what cannot be kept" in result.text
    assert "lone surrogate" in model.requests[1].messages[-1].tool_results[0].text


async def test_interrupt_between_answer_and_acting_persists_no_call(ledger: AsyncLedger) -> None:
    """The pre-acting check: the answer is complete, the interrupt lands before it is saved."""
    from agentledger.agent.middleware import Middleware

    class InterruptNow(Middleware):
        async def after_reasoning(self, ctx: RuntimeContext, message: Msg) -> Msg:
            agent.interrupt(ctx)
            return message

    model = ScriptedModel([call_msg("Paris", text="on it")])
    agent = ReActAgent(model, [lookup], store=ledger, middlewares=[InterruptNow()])
    events = [e async for e in agent.stream("go", "s")]
    assert isinstance(events[-1], RunInterrupted)
    history = await stored(ledger)
    assert [m.role for m in history] == ["user", "assistant"]
    assert history[1].tool_calls == () and history[1].text == "on it" and calls == []
    check(history, target="strict")


async def test_a_run_is_stored_under_the_ledgers_tenant() -> None:
    from agentledger.store import Ledger

    ledger = Ledger(MemoryStore(), tenant="acme")
    agent = ReActAgent(ScriptedModel([Msg.assistant("hi")]), [], store=ledger)
    ctx = RuntimeContext("s")
    await agent.run("hello", ctx)
    assert ctx.tenant == "acme"
    assert [m.text for m in ledger.messages("s")] == ["hello", "hi"]
    assert not ledger.exists("s", tenant="default")
    other = RuntimeContext("s", tenant="named")  # an explicit tenant still wins
    agent = ReActAgent(ScriptedModel([Msg.assistant("there")]), [], store=ledger)
    await agent.run("hello", other)
    assert ledger.exists("s", tenant="named")


# -- cost: a step works on what it adds ------------------------------------------------------------
async def test_a_run_compares_only_what_each_step_added_and_checks_it_after_the_first_check(
    ledger: AsyncLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    from agentledger.store import ledger as ledger_module

    validate_module = importlib.import_module("agentledger.wire.validate")
    earlier = [m for i in range(100) for m in (Msg.user(f"q{i}"), Msg.assistant(f"a{i}"))]
    await ledger.save("s", earlier)
    compared: list[int] = []  # messages each save compared with the committed list
    checked: list[tuple[int, int]] = []  # (where each check started, messages it was given)
    real_diff, real_validator = ledger_module.diff_list, validate_module._Validator

    def diff_list(committed, messages, known=(), *, kept=()):  # type: ignore[no-untyped-def]
        compared.append(len(messages) - sum(c for *_, c in kept))
        return real_diff(committed, messages, known, kept=kept)

    def validator(msgs, target, start=0, before=None):  # type: ignore[no-untyped-def]
        checked.append((start, len(msgs)))
        return real_validator(msgs, target, start, before)

    monkeypatch.setattr(ledger_module, "diff_list", diff_list)
    monkeypatch.setattr(validate_module, "_Validator", validator)
    script = [call_msg("Paris"), call_msg("Rome"), Msg.assistant("both sunny")]
    agent, _ = make_agent(ledger, script)
    await agent.run("weather?", "s")
    assert len(await stored(ledger)) == 200 + 1 + 2 * 2 + 1
    assert len(compared) >= 6
    assert max(compared) <= 1  # each save, the first included: the message it adds, or nothing
    # the input with the history, whole; then each step's context from where the last ended
    assert [c for c in checked if c[1] > 1] == [(0, 201), (201, 201), (201, 203), (203, 205)]
    assert checked.count((0, 1)) == 3  # each answer on its own, before it is saved


async def test_a_runs_first_check_walks_only_what_came_since_the_last_run(
    ledger: AsyncLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    validate_module = importlib.import_module("agentledger.wire.validate")
    starts: list[int] = []
    real = validate_module._Validator

    def validator(msgs, target, start=0, before=None):  # type: ignore[no-untyped-def]
        if msgs[0].text == "first":  # a check of the session's history, not of an answer alone
            starts.append(start)
        return real(msgs, target, start, before)

    monkeypatch.setattr(validate_module, "_Validator", validator)
    agent, _ = make_agent(ledger, [Msg.assistant("one"), Msg.assistant("two"), "three"])
    await agent.run("first", "s")
    await agent.run("second", "s")
    other = Msg.user("written by someone else")  # a new version the agent did not write
    await ledger.save("s", [*await stored(ledger), Msg.assistant("noted"), other])
    await agent.run("third", "s")
    # each run checks its input from where the last check ended, then its context (which the
    # input check passed: nothing more to walk)
    assert starts == [0, 1, 1, 3, 3, 7]
    assert [m.text for m in await stored(ledger)][-3:] == [other.text, "third", "three"]


async def test_the_model_is_sent_the_very_history_that_passed_the_check(
    ledger: AsyncLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One immutable snapshot is checked and sent: nothing can change between the two, and a
    model cannot change what the checker remembers as passed."""
    from agentledger.wire import HistoryChecker

    checked: list[object] = []
    real_check = HistoryChecker.check

    def check_and_keep(self: HistoryChecker, msgs):  # type: ignore[no-untyped-def]
        checked.append(real_check(self, msgs))
        return checked[-1]

    monkeypatch.setattr(HistoryChecker, "check", check_and_keep)
    agent, model = make_agent(ledger, [call_msg("Paris"), Msg.assistant("sunny")])
    sent: list[object] = []
    real_stream = model.stream

    def stream(messages, **kw):  # type: ignore[no-untyped-def]
        sent.append(messages)
        return real_stream(messages, **kw)

    monkeypatch.setattr(model, "stream", stream)
    await agent.run("weather?", "s")
    assert len(sent) == 2 and all(isinstance(m, tuple) for m in sent)
    assert len(checked) == 3  # the input with the history, then the context of each step
    assert all(s is c for s, c in zip(sent, checked[1:], strict=True))


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("lease_wait", float("nan")),
        ("lease_wait", -1),
        ("lease_wait", "5"),
        ("max_iters", 2.5),
        ("max_iters", 0),
        ("max_iters", True),
    ],
)
def test_an_option_a_run_cannot_use_is_refused_when_the_agent_is_made(
    option: str, value: object
) -> None:
    """Not at the first run: a NaN lease wait, say, used to fail only when a run took the
    lease."""
    with pytest.raises(UserError, match=option):
        ReActAgent(ScriptedModel([]), [], store="memory://", **{option: value})


def test_an_agent_may_wait_for_its_session_as_long_as_it_takes() -> None:
    agent = ReActAgent(ScriptedModel([]), [], store="memory://", lease_wait=float("inf"))
    assert agent.lease_wait == float("inf")
