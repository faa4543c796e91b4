"""A real pydantic-ai ``Agent`` (offline ``FunctionModel``) whose history lives in the ledger:
several turns with tools, reloads between them, history processors, failures and cancellation."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai import messages as m
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.conversation import ConversationTypeAdapter
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from agentledger import AsyncLedger, Ledger
from agentledger.errors import ConflictError, UserError
from agentledger.integrations.pydantic_ai import LedgerHistory, to_msgs

Adapter = m.ModelMessagesTypeAdapter


def as_json(messages: list[m.ModelMessage]) -> bytes:
    return Adapter.dump_json(messages)


class WeatherModel:
    """Asks for the weather of the prompt's last word, then reports the tool's answer; records
    what it was sent, so a test can check the model saw the whole history."""

    def __init__(self) -> None:
        self.seen: list[list[m.ModelMessage]] = []

    def __call__(self, messages: list[m.ModelMessage], info: AgentInfo) -> m.ModelResponse:
        self.seen.append(list(messages))
        last = messages[-1].parts[-1]
        if isinstance(last, m.ToolReturnPart):
            return m.ModelResponse(parts=[m.TextPart(f"It is {last.content}.")], model_name="w")
        city = str(last.content).split()[-1]
        call = m.ToolCallPart("get_weather", {"city": city}, tool_call_id=f"call-{len(messages)}")
        return m.ModelResponse(parts=[m.ThinkingPart("look it up", signature="sig"), call])


def weather_agent(model: WeatherModel, fail_for: str | None = None) -> Agent[None, str]:
    agent = Agent(FunctionModel(model))

    @agent.tool_plain
    async def get_weather(city: str) -> str:
        if city == fail_for:
            raise RuntimeError("weather service down")
        if city == "Nowhere":
            await asyncio.Event().wait()  # never answers: the run is cancelled meanwhile
        return f"sunny in {city}"

    return agent


async def test_turns_with_tools_persist_reload_and_continue(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/chat.db"
    model = WeatherModel()
    agent = weather_agent(model)
    result = None
    for turn, city in enumerate(["Paris", "Oslo", "Rome"]):
        with Ledger(url) as ledger:  # a new process each turn, as far as the ledger knows
            history = LedgerHistory(ledger, "chat")
            before = await history.aload()
            if result is not None:
                assert as_json(before) == as_json(result.all_messages())
            result = await agent.run(
                f"weather in {city}", message_history=before, capabilities=[history.capability()]
            )
            assert result.output == f"It is sunny in {city}."
            assert len(model.seen[-1]) == 4 * turn + 3  # the whole history reached the model
            assert as_json(await history.aload()) == as_json(result.all_messages())
            # every step was saved as it happened, and only ever appended
            steps = ledger.history("chat")
            assert all(step.replaced == step.truncated == 0 for step in steps)
            assert sum(step.appended for step in steps) == len(to_msgs(result.all_messages()))
    assert result is not None
    texts = [
        p.content for msg in result.all_messages() for p in msg.parts if isinstance(p, m.TextPart)
    ]
    assert texts == ["It is sunny in Paris.", "It is sunny in Oslo.", "It is sunny in Rome."]


async def test_an_append_after_a_reload_writes_only_the_new_messages() -> None:
    ledger = Ledger("memory://")
    agent = weather_agent(WeatherModel())
    first = await agent.run("weather in Paris")
    LedgerHistory(ledger, "s").save(first.all_messages())
    history = LedgerHistory(Ledger(ledger.store), "s")  # nothing cached
    loaded = history.load()
    assert history.save(loaded).noop
    second = await agent.run("weather in Oslo", message_history=loaded)
    report = history.save(second.all_messages())
    assert (report.appended, report.replaced, report.truncated) == (4, 0, 0)
    new_bytes = sum(len(Adapter.dump_json([msg])) for msg in second.new_messages())
    assert report.bytes_written < 3 * new_bytes  # the new turn's size, not the session's


def _redact(messages: list[m.ModelMessage]) -> list[m.ModelMessage]:
    """A history processor that rewrites every user prompt mentioning a password."""
    out: list[m.ModelMessage] = []
    for message in messages:
        if isinstance(message, m.ModelRequest):
            parts = [
                dataclasses.replace(p, content="[redacted]")
                if isinstance(p, m.UserPromptPart) and "password" in str(p.content)
                else p
                for p in message.parts
            ]
            message = dataclasses.replace(message, parts=parts)
        out.append(message)
    return out


async def test_history_processor_edits_are_persisted_and_the_original_stays_in_history() -> None:
    ledger = Ledger("memory://")
    history = LedgerHistory(ledger, "s")
    model = WeatherModel()
    agent = weather_agent(model)
    caps = [history.capability(), ProcessHistory(_redact)]
    first = await agent.run("my password is hunter2, weather in Paris", capabilities=caps)
    assert "hunter2" not in str(model.seen[0])
    stored = history.load()
    assert as_json(stored) == as_json(first.all_messages())
    assert "hunter2" not in as_json(stored).decode()
    # the prompt as typed was saved before the processor ran, and is still readable there
    assert "hunter2" in as_json(history.load(version=1)).decode()
    assert any(step.replaced for step in ledger.history("s"))
    # and no later save put it back (a result's ``conversation`` still holds it since 2.78)
    later = [step.version for step in ledger.history("s")][1:]
    assert all("hunter2" not in as_json(history.load(version=v)).decode() for v in later)
    second = await agent.run("weather in Rome", message_history=stored, capabilities=caps)
    assert as_json(history.load()) == as_json(second.all_messages())


async def test_a_failed_run_keeps_every_step_it_took() -> None:
    ledger = Ledger("memory://")
    history = LedgerHistory(ledger, "s")
    agent = weather_agent(WeatherModel(), fail_for="Atlantis")
    with pytest.raises(RuntimeError, match="weather service down"):
        await agent.run("weather in Atlantis", capabilities=[history.capability()])
    stored = history.load()
    # the prompt, the response asking for the tool, and pydantic-ai's own note of the interrupt
    assert [type(msg).__name__ for msg in stored] == [
        "ModelRequest",
        "ModelResponse",
        "ModelRequest",
    ]
    assert stored[2].state == "interrupted"
    call = stored[1].parts[-1]
    assert isinstance(call, m.ToolCallPart) and call.args == {"city": "Atlantis"}


async def test_a_cancelled_run_keeps_every_step_it_took() -> None:
    ledger = Ledger("memory://")
    history = LedgerHistory(ledger, "s")
    agent = weather_agent(WeatherModel())
    run = asyncio.create_task(agent.run("weather in Nowhere", capabilities=[history.capability()]))
    while ledger.version("s") < 2:  # the request, then the response asking for the tool
        await asyncio.sleep(0.01)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    stored = history.load()
    assert [type(msg).__name__ for msg in stored] == ["ModelRequest", "ModelResponse"]


async def test_a_run_without_the_stored_history_is_refused_before_it_saves() -> None:
    ledger = AsyncLedger("memory://")
    history = LedgerHistory(ledger, "s")
    agent = weather_agent(WeatherModel())
    first = await agent.run("weather in Paris", capabilities=[history.capability()])
    with pytest.raises(UserError, match=r"message_history=history\.load"):
        await agent.run("weather in Oslo", capabilities=[history.capability()])
    assert as_json(await history.aload()) == as_json(first.all_messages())
    assert (await history.asave(first.all_messages())).noop


def _texts(history: list[m.ModelMessage]) -> list[str]:
    return [p.content for msg in history for p in msg.parts if isinstance(p, m.UserPromptPart)]


async def test_two_runs_at_once_never_replace_each_others_turn() -> None:
    """Both start from the stored history; each run's saves are at the version its last save
    made, so the run overtaken fails with ConflictError at its next save, where it once
    replaced the other run's turn with its own."""

    async def slow(messages: list[m.ModelMessage], info: AgentInfo) -> m.ModelResponse:
        prompt = messages[-1].parts[-1].content
        await asyncio.sleep(0.2 if prompt == "turn A" else 0.02)
        return m.ModelResponse(parts=[m.TextPart(f"answer to {prompt}")])

    history = LedgerHistory(AsyncLedger("memory://"), "s")
    agent = Agent(FunctionModel(slow), capabilities=[history.capability()])
    await agent.run("first")
    a, b = history.load(), history.load()
    outcomes = await asyncio.gather(
        agent.run("turn A", message_history=a),
        agent.run("turn B", message_history=b),
        return_exceptions=True,
    )
    failed = [isinstance(o, ConflictError) for o in outcomes]
    assert sorted(failed) == [False, True]  # which one is overtaken is the scheduler's
    kept = "turn B" if failed[0] else "turn A"
    assert _texts(history.load()) == ["first", kept]


async def test_a_run_on_a_history_the_session_has_moved_past_is_refused_before_it_saves() -> None:
    ledger = AsyncLedger("memory://")
    history = LedgerHistory(ledger, "s")
    agent = weather_agent(WeatherModel())
    first = await agent.run("weather in Paris", capabilities=[history.capability()])
    stale = first.all_messages()
    await agent.run("and Rome?", message_history=stale, capabilities=[history.capability()])
    version = await ledger.version("s")
    with pytest.raises(ConflictError, match="not where the run's message_history begins"):
        await agent.run("and Oslo?", message_history=stale, capabilities=[history.capability()])
    assert await ledger.version("s") == version  # nothing saved
    again = await agent.run(
        "and Oslo?", message_history=history.load(), capabilities=[history.capability()]
    )
    assert _texts(again.all_messages()) == ["weather in Paris", "and Rome?", "and Oslo?"]


async def test_a_conversation_paused_for_approval_is_stored_whole_and_resumed(
    tmp_path: Path,
) -> None:
    """``Conversation`` carries usage, its id and the deferred tool calls a paused run waits on;
    all of it is stored with the messages in one commit and comes back in a new process."""
    agent = Agent(TestModel(), output_type=[str, DeferredToolRequests])

    @agent.tool_plain(requires_approval=True)
    def delete_file(path: str) -> str:
        return f"deleted {path}"

    url = f"jsonl:///{tmp_path}/store"
    with Ledger(url) as ledger:
        history = LedgerHistory(ledger, "ops")
        started = history.load_conversation()
        assert started.conversation_id == "ops" and not started.messages
        paused = await agent.run(
            "delete a", conversation=started, capabilities=[history.capability()]
        )
        assert isinstance(paused.output, DeferredToolRequests)
    with Ledger(url) as ledger:
        history = LedgerHistory(ledger, "ops")
        conversation = history.load_conversation()
        assert ConversationTypeAdapter.dump_json(conversation) == ConversationTypeAdapter.dump_json(
            paused.conversation
        )
        pending = conversation.deferred_tool_requests
        assert pending is not None and [c.tool_name for c in pending.approvals] == ["delete_file"]
        done = await agent.run(
            conversation=conversation,
            deferred_tool_results=pending.build_results(approve_all=True),
            capabilities=[history.capability()],
        )
        assert "deleted a" in str(done.output)
        stored = history.load_conversation()
        assert stored.deferred_tool_requests is None
        assert stored.usage.requests == done.conversation.usage.requests == 2
        assert as_json(stored.messages) == as_json(done.all_messages())


async def test_a_streamed_run_is_persisted_whole() -> None:
    """``run_stream`` skips the step hooks for its final, streamed answer; the end-of-run save
    still stores it."""
    agent = Agent(TestModel())

    @agent.tool_plain
    def weather(city: str) -> str:
        return "rain"

    history = LedgerHistory(Ledger("memory://"), "s")
    async with agent.run_stream("hi", capabilities=[history.capability()]) as run:
        await run.get_output()
    assert len(run.all_messages()) == 4
    assert as_json(history.load()) == as_json(run.all_messages())
