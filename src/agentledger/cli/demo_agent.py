"""The agent part of ``agentledger demo``: a scripted agent on a real store, step by step.

1. A turn with two parallel tool calls: every step is committed as it completes.
2. A user interrupt while the model streams a tool call: the text is kept, the call is not.
3. A process killed while its tool runs, then resumed by a fresh agent: the call that may have
   run is answered with an error instead of being run twice.
Everything is printed as it is persisted, versions included: a version not printed as a message
records which tool calls have started (so a crash can never make a resumed run repeat one). The
scripted model needs no key and no network. Step 3 needs a store that outlives a process, so on
``memory://`` it is described instead of run.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console

from agentledger.agent.context import MessageCommitted, RunInterrupted
from agentledger.agent.events import ToolCallDelta
from agentledger.agent.react import ReActAgent
from agentledger.agent.tools import Tool
from agentledger.cli.sessions import describe
from agentledger.messages import Msg, TextBlock, ThinkingBlock, ToolUseBlock
from agentledger.store import Ledger
from agentledger.testing.scripted import ScriptedModel

__all__ = ["crash_child", "run_agent_demo", "shown_logs"]

console = Console(highlight=False, soft_wrap=True)
_FORECASTS = {"Paris": "18°C, light rain", "Oslo": "4°C, clear", "Rome": "22°C, sunny"}


def weather(city: str) -> str:
    """Today's forecast for a city."""
    return _FORECASTS.get(city, "unknown city")


def book_table(restaurant: str, people: int) -> str:
    """Book a restaurant table (a side effect: it must never run twice by accident)."""
    return f"booked {restaurant} for {people}"


def _calls(*cities: str, text: str = "", turn: str) -> Msg:
    blocks: list = [ThinkingBlock(thinking="I should look up the forecasts.", signature="sig")]
    if text:
        blocks.append(TextBlock(text=text))
    blocks += [
        ToolUseBlock(id=f"{turn}-{c.lower()}", name="weather", input={"city": c}) for c in cities
    ]
    return Msg.assistant(blocks)


class _Printer:
    """Prints what each event committed, and names the versions no message explains."""

    last = 0  # the last version printed

    def show(self, event: object) -> None:
        if isinstance(event, MessageCommitted):
            self._gap(event.version)
            console.print(
                f"    saved v{event.version:<3} {describe(event.message, 70)}", markup=False
            )
        elif isinstance(event, RunInterrupted):
            self._gap(event.version + (event.message is None))
            kept = describe(event.message, 60) if event.message else "nothing"
            saved = f"saved v{event.version}, " if event.message else ""
            console.print(f"    interrupted ({event.source}); {saved}kept: {kept}", markup=False)

    def _gap(self, version: int) -> None:
        if self.last and version > self.last + 1:
            span = f"v{self.last + 1}" + (
                f"..v{version - 1}" if version - 1 > self.last + 1 else ""
            )
            console.print(f"    saved {span:<4} tool calls marked as started (never run twice)")
        self.last = version


printer = _Printer()
_show = printer.show


@contextmanager
def shown_logs() -> Iterator[None]:
    """Print the library's warnings as indented demo lines instead of bare stderr lines."""

    class _Indented(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            console.print(f"    logged: {record.getMessage()}", markup=False, style="dim")

    logger = logging.getLogger("agentledger")
    handler, propagate = _Indented(logging.WARNING), logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


async def _turn_one(url: str, session: str) -> None:
    model = ScriptedModel(
        [
            _calls("Paris", "Oslo", turn="t1"),
            Msg.assistant("Paris: 18°C with light rain; Oslo: 4°C and clear."),
        ]
    )
    agent = ReActAgent(model, [Tool(weather)], store=url, system_prompt="Be brief.")
    async for event in agent.stream("What's the weather in Paris and Oslo?", session):
        _show(event)
    await agent.ledger.close()


async def _turn_two_interrupted(url: str, session: str) -> None:
    model = ScriptedModel(
        [_calls("Rome", text="Let me check Rome for you.", turn="t2")], pause_after=ToolCallDelta
    )
    agent = ReActAgent(model, [Tool(weather)], store=url)
    task = asyncio.create_task(_print_run(agent, "And Rome?", session))
    await model.reached.wait()  # the tool call's arguments are half streamed
    console.print("    … the user presses Ctrl-C while the tool call streams")
    agent.interrupt(session, "user")
    model.release.set()
    await task
    await agent.ledger.close()


async def _print_run(agent: ReActAgent, text: str, session: str) -> None:
    async for event in agent.stream(text, session):
        _show(event)


def crash_child(url: str, session: str) -> None:
    """Run in a child process: the booking tool starts, then the process dies (kill -9)."""

    def book(restaurant: str, people: int) -> str:
        os._exit(9)  # the table may or may not be booked: nobody will ever know

    model = ScriptedModel(
        [
            Msg.assistant(
                ToolUseBlock(
                    id="t3-book", name="book_table", input={"restaurant": "Da Enzo", "people": 2}
                )
            )
        ]
    )
    agent = ReActAgent(model, [Tool(book, name="book_table")], store=url)

    async def go() -> None:
        async for event in agent.stream("Book Da Enzo for two.", session):
            _show(event)

    asyncio.run(go())


async def _resume(url: str, session: str) -> None:
    model = ScriptedModel([Msg.assistant("I could not confirm the booking; please call Da Enzo.")])
    agent = ReActAgent(model, [Tool(book_table)], store=url)
    async for event in agent.stream(None, session):
        _show(event)
    await agent.ledger.close()


def run_agent_demo(url: str, session: str) -> None:
    """Steps 1-3 of the demo (see the module docstring), on ``session``, a new one."""
    printer.last = 0
    console.print("[bold]1. An agent turn with two tool calls, persisted step by step[/]")
    asyncio.run(_turn_one(url, session))
    console.print("[bold]2. A user interrupt while the model streams a tool call[/]")
    asyncio.run(_turn_two_interrupted(url, session))
    console.print("[bold]3. A process is killed while its tool runs, then resumed[/]")
    if url.startswith("memory:"):
        console.print(
            "    (skipped: a memory:// store dies with its process; "
            "use --store sqlite:///demo.db to see it)"
        )
        return
    code = (
        "import sys; from agentledger.cli.demo_agent import crash_child; crash_child(*sys.argv[1:])"
    )
    child = subprocess.run(
        [sys.executable, "-c", code, url, session], capture_output=True, text=True
    )
    for line in child.stdout.splitlines():
        console.print(line, markup=False)
    console.print(f"    … the process died (exit code {child.returncode}) inside book_table")
    with Ledger(url) as ledger:
        printer.last = ledger.version(session)
        started = ledger.load(session).values.get("tool_calls", {})
    for call_id, call in started.items():
        console.print(
            f"    the store says {call['name']} ({call_id}) {call['state']}: it may have run"
        )
    with shown_logs():
        asyncio.run(_resume(url, session))
