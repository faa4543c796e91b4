"""A run's saves are fenced, on every backend: a commit another writer makes between the run's
load (or its last save) and its next save fails the run with ``ConflictError`` and stays the
session's live context, whichever save meets it (input, middleware edit, answer, tool result,
interrupt, the recovery after an error). A run whose lease ends under it meets exactly that:
the writer here takes no lease, as a run whose lease was lost is no longer kept out by it.

And a run reports only what is durable: every message it announced (``MessageCommitted``) is
stored and nothing else, whichever of its saves fails.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from agentledger import Msg, ToolUseBlock
from agentledger.agent.context import MessageCommitted, RunError, RuntimeContext
from agentledger.agent.events import TextDelta
from agentledger.agent.middleware import Middleware
from agentledger.agent.react import ReActAgent
from agentledger.agent.tools import tool
from agentledger.errors import ConflictError, StoreUnavailableError, UserError
from agentledger.store import Ledger, SaveReport
from agentledger.store.aio import AsyncLedger
from agentledger.testing.scripted import ScriptedModel
from tests.store.backends import LedgerOn, backend, ledger_on  # noqa: F401  (fixtures)

EARLIER = [Msg.user("earlier", id="e0"), Msg.assistant("earlier answer", id="e1")]
THEIRS = [Msg.user("B's question", id="bq"), Msg.assistant("B's answer", id="ba")]


@pytest.fixture
def ledger(backend: str, ledger_on: LedgerOn) -> Iterator[Ledger]:  # noqa: F811
    """A ledger on ``backend`` whose session ``s`` holds an earlier turn."""
    opened = ledger_on(backend)
    opened.save("s", EARLIER)
    yield opened


class Other:
    """Another writer on session ``s``: ``land`` commits its turn (once, from a ledger of its
    own, taking no lease) and notes the live list and version it left."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.live: list[Msg] | None = None
        self.version = 0

    def land(self, *_: Any) -> None:
        if self.live is None:
            other = Ledger(self.ledger.store)
            self.live = [*other.messages("s"), *THEIRS]
            self.version = other.save("s", self.live).version

    def assert_kept(self) -> None:
        """Its commit is still the live context, and nothing was committed after it."""
        assert self.live is not None, "the other writer never committed"
        fresh = Ledger(self.ledger.store)
        assert [m.id for m in fresh.messages("s")] == [m.id for m in self.live]
        assert fresh.version("s") == self.version


class _Landing(Middleware):
    """Lets the other writer commit, then drops the earlier turn from the context."""

    def __init__(self, other: Other) -> None:
        self.other = other

    async def before_reasoning(self, ctx: RuntimeContext, context: list[Msg]) -> list[Msg] | None:
        self.other.land()
        return context[len(EARLIER) :]


class _BadEdit(Middleware):
    async def before_reasoning(self, ctx: RuntimeContext, context: list[Msg]) -> list[Msg] | None:
        return "not a list of messages"  # type: ignore[return-value]


def _agent(ledger: Ledger, other: Other, step: str) -> tuple[ReActAgent, RuntimeContext]:
    """An agent and a run context in which the other writer commits just before ``step``'s
    save."""
    store = AsyncLedger(ledger)
    if step == "input":
        agent = ReActAgent(ScriptedModel(["A's answer"]), store=store)
        return agent, RuntimeContext("s", on_state_loaded=other.land)
    if step == "middleware edit":
        edits = [_Landing(other)]
        agent = ReActAgent(ScriptedModel(["A's answer"]), store=store, middlewares=edits)
        return agent, RuntimeContext("s")
    if step == "answer":

        async def answer(*_: Any) -> str:
            other.land()
            return "A's answer"

        return ReActAgent(ScriptedModel([answer]), store=store), RuntimeContext("s")

    @tool
    def weather(city: str) -> str:
        """The weather in a city."""
        other.land()
        return "sunny"

    call = Msg.assistant([ToolUseBlock(id="call_1", name="weather", input={"city": "Paris"})])
    return ReActAgent(ScriptedModel([call, "done"]), [weather], store=store), RuntimeContext("s")


@pytest.mark.parametrize("step", ["input", "middleware edit", "answer", "tool result"])
async def test_a_commit_under_a_run_fails_the_save_that_meets_it(ledger: Ledger, step: str) -> None:
    """Unfenced, the run's save was re-planned over the other commit: the live context became
    the run's list, and the other turn was left only in history."""
    other = Other(ledger)
    agent, ctx = _agent(ledger, other, step)
    events = []
    with pytest.raises(ConflictError, match="moved on") as raised:
        async for event in agent.stream("A's question", ctx):
            events.append(event)
    assert isinstance(events[-1], RunError) and events[-1].kind == "ConflictError"
    assert raised.value.actual == other.version
    other.assert_kept()


async def test_an_interrupted_run_does_not_save_what_it_kept_over_another_commit(
    ledger: Ledger,
) -> None:
    other = Other(ledger)
    model = ScriptedModel([Msg.assistant("a long answer")], pause_after=TextDelta)
    agent = ReActAgent(model, store=AsyncLedger(ledger))
    events: list[object] = []

    async def run() -> None:
        async for event in agent.stream("A's question", "s"):
            events.append(event)

    task = asyncio.create_task(run())
    await asyncio.wait_for(model.reached.wait(), 10)
    other.land()
    agent.interrupt("s")
    with pytest.raises(ConflictError):
        await task
    assert isinstance(events[-1], RunError) and events[-1].kind == "ConflictError"
    other.assert_kept()


async def test_a_cancelled_run_does_not_save_what_it_kept_over_another_commit(
    ledger: Ledger, caplog: pytest.LogCaptureFixture
) -> None:
    """The cancellation goes on (not turned into the save's error); the save is logged."""
    other = Other(ledger)
    model = ScriptedModel([Msg.assistant("a long answer")], pause_after=TextDelta)
    agent = ReActAgent(model, store=AsyncLedger(ledger))
    task = asyncio.create_task(agent.run("A's question", "s"))
    await asyncio.wait_for(model.reached.wait(), 10)
    other.land()
    with caplog.at_level(logging.WARNING, logger="agentledger.agent"):
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert "was cancelled and what it kept was not saved" in caplog.text
    other.assert_kept()


async def test_the_recovery_save_after_an_error_does_not_replace_another_commit(
    ledger: Ledger,
) -> None:
    """One middleware edits the context (unsaved yet) while another writer commits, the next
    fails: the run's error stays its own, and says the edit was not saved either."""
    other = Other(ledger)
    agent = ReActAgent(
        ScriptedModel(["A's answer"]),
        store=AsyncLedger(ledger),
        middlewares=[_Landing(other), _BadEdit()],
    )
    events = []
    with pytest.raises(UserError):
        async for event in agent.stream("A's question", "s"):
            events.append(event)
    last = events[-1]
    assert isinstance(last, RunError) and last.kind == "UserError"
    assert "not saved either" in last.error and "moved on" in last.error
    other.assert_kept()


class _FailingSave(Ledger):
    """A ledger whose ``fail_at``-th save fails, uncommitted, with ``StoreUnavailableError``;
    ``failed_at`` is the session's version then."""

    def __init__(self, ledger: Ledger, fail_at: int) -> None:
        super().__init__(ledger.store)
        self.fail_at, self.saves = fail_at, 0
        self.failed_at: int | None = None

    def save_state(self, *args: Any, **kwargs: Any) -> SaveReport:
        self.saves += 1
        if self.saves == self.fail_at:
            self.failed_at = self.version("s")
            raise StoreUnavailableError("the disk is full: not committed, retrying later is safe")
        return super().save_state(*args, **kwargs)


@tool
def lookup(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


@pytest.mark.parametrize("fail_at", range(1, 9))
async def test_a_run_announces_exactly_what_is_stored_whichever_save_fails(
    ledger: Ledger, fail_at: int
) -> None:
    """A run with a tool call makes seven saves; the one at ``fail_at`` fails, not committed,
    and the run fails with it. The run's recovery once saved again what that save had not,
    while the run still reported "not committed, retrying later is safe" (PostgreSQL, a pooled
    connection killed while the model ran): a caller retrying the turn, as told, stored it
    twice. Nothing is committed after a save the run reports as failed."""
    failing = _FailingSave(ledger, fail_at)
    call = Msg.assistant([ToolUseBlock(id="call_1", name="lookup", input={"city": "Paris"})])
    agent = ReActAgent(ScriptedModel([call, "done"]), [lookup], store=AsyncLedger(failing))
    events: list[object] = []
    try:
        async for event in agent.stream("A's question", "s"):
            events.append(event)
    except StoreUnavailableError:
        last = events[-1]
        assert isinstance(last, RunError) and last.kind == "StoreUnavailableError"
        assert last.version == Ledger(ledger.store).version("s") == failing.failed_at
    else:
        assert failing.failed_at is None
    announced = [e.message.id for e in events if isinstance(e, MessageCommitted)]
    stored = [m.id for m in Ledger(ledger.store).messages("s")]
    assert stored == [m.id for m in EARLIER] + announced
