"""The agent part of ``agentledger demo``: a scripted agent on a real store, step by step.

1. A turn with two parallel tool calls: every step is committed as it completes.
2. A user interrupt while the model streams a tool call: the text is kept, the call is not.
3. A process killed while its tool runs, then resumed by a fresh agent: the call that may have
   run is answered with an error instead of being run twice.
Everything is printed as it is persisted. The scripted model needs no key and no network.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

from rich.console import Console

from agentledger.agent.context import MessageCommitted, RunInterrupted
from agentledger.agent.events import ToolCallDelta
from agentledger.agent.react import ReActAgent
from agentledger.agent.tools import Tool
from agentledger.cli.sessions import describe
from agentledger.messages import Msg, TextBlock, ThinkingBlock, ToolUseBlock
from agentledger.testing.scripted import ScriptedModel

__all__ = ["crash_child", "run_agent_demo"]

console = Console(highlight=False)
SESSION = "agent-demo"
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


def _show(event: object) -> None:
    if isinstance(event, MessageCommitted):
        console.print(f"    saved v{event.version:<3} {describe(event.message, 70)}", markup=False)
    elif isinstance(event, RunInterrupted):
        kept = describe(event.message, 60) if event.message else "nothing"
        console.print(f"    interrupted ({event.source}); kept: {kept}", markup=False)


async def _turn_one(url: str) -> None:
    model = ScriptedModel(
        [
            _calls("Paris", "Oslo", turn="t1"),
            Msg.assistant("Paris: 18°C with light rain; Oslo: 4°C and clear."),
        ]
    )
    agent = ReActAgent(model, [Tool(weather)], store=url, system_prompt="Be brief.")
    async for event in agent.stream("What's the weather in Paris and Oslo?", SESSION):
        _show(event)
    await agent.ledger.close()


async def _turn_two_interrupted(url: str) -> None:
    model = ScriptedModel(
        [_calls("Rome", text="Let me check Rome for you.", turn="t2")], pause_after=ToolCallDelta
    )
    agent = ReActAgent(model, [Tool(weather)], store=url)
    task = asyncio.create_task(_print_run(agent, "And Rome?"))
    await model.reached.wait()  # the tool call's arguments are half streamed
    console.print("    … the user presses Ctrl-C while the tool call streams")
    agent.interrupt(SESSION, "user")
    model.release.set()
    await task
    await agent.ledger.close()


async def _print_run(agent: ReActAgent, text: str) -> None:
    async for event in agent.stream(text, SESSION):
        _show(event)


def crash_child(url: str) -> None:
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
        async for event in agent.stream("Book Da Enzo for two.", SESSION):
            _show(event)

    asyncio.run(go())


async def _resume(url: str) -> None:
    model = ScriptedModel([Msg.assistant("I could not confirm the booking; please call Da Enzo.")])
    agent = ReActAgent(model, [Tool(book_table)], store=url)
    async for event in agent.stream(None, SESSION):
        _show(event)
    await agent.ledger.close()


def run_agent_demo(url: str) -> None:
    """Steps 1-3 of the demo (see the module docstring)."""
    console.print("[bold]1. An agent turn with two tool calls, persisted step by step[/]")
    asyncio.run(_turn_one(url))
    console.print("[bold]2. A user interrupt while the model streams a tool call[/]")
    asyncio.run(_turn_two_interrupted(url))
    console.print("[bold]3. A process is killed while its tool runs, then resumed[/]")
    code = f"from agentledger.cli.demo_agent import crash_child; crash_child({url!r})"
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    for line in child.stdout.splitlines():
        console.print(line, markup=False)
    console.print(f"    … the process died (exit code {child.returncode}) inside book_table")
    asyncio.run(_resume(url))
