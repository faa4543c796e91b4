"""``agentledger chat``: a terminal chat on a real model, persisted step by step.

Output streams as the model writes it. Ctrl-C during an answer interrupts that run as a *user*
interrupt (text so far is kept, unexecuted tool calls are dropped, the session stays valid);
Ctrl-C or Ctrl-D at the prompt leaves. ``--session`` resumes a conversation. Slash commands:
``/history``, ``/fork NAME``, ``/rewind N``, ``/sessions``, ``/help``, ``/quit``.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable, Iterator
from typing import Annotated

import typer
from rich.console import Console

from agentledger.agent.context import RunError, RunInterrupted
from agentledger.agent.events import TextDelta, ToolCallStart
from agentledger.agent.react import ReActAgent
from agentledger.cli.config import setting
from agentledger.cli.options import StoreOption, TenantOption
from agentledger.cli.sessions import describe
from agentledger.cli.store import resolve_store
from agentledger.errors import AgentLedgerError
from agentledger.store.aio import AsyncLedger

__all__ = ["ChatSession", "register", "resolve_model"]

HOW_TO_CONFIGURE = """No model is configured. Choose one of:
  agentledger chat --model openai:gpt-4o-mini        (set OPENAI_API_KEY)
  agentledger chat --model anthropic:claude-sonnet-4-5   (set ANTHROPIC_API_KEY)
  OPENAI_BASE_URL=http://localhost:11434/v1 agentledger chat --model openai:llama3.2
      (any OpenAI-compatible server: Ollama, vLLM, llama.cpp)
  agentledger chat --model scripted:answers.json      (offline, scripted answers)
or set AGENTLEDGER_MODEL to one of these specs."""


def resolve_model(spec: str | None) -> str | None:
    """The model spec to use: the option, else AGENTLEDGER_MODEL, else a provider whose key is
    set; ``None`` when nothing is configured."""
    if spec:
        return spec
    if os.environ.get("AGENTLEDGER_MODEL"):
        return os.environ["AGENTLEDGER_MODEL"]
    if os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"):
        return "openai:gpt-4o-mini"
    if os.environ.get("ANTHROPIC_API_KEY"):
        return "anthropic:claude-sonnet-4-5"
    return None


class ChatSession:
    """One interactive conversation: reads lines, runs the agent, handles slash commands."""

    def __init__(self, agent: ReActAgent, session: str, console: Console) -> None:
        self.agent = agent
        self.session = session
        self.console = console

    @property
    def ledger(self) -> AsyncLedger:
        return self.agent.ledger

    async def handle(self, line: str) -> bool:
        """Process one input line; False means "leave"."""
        line = line.strip()
        if not line:
            return True
        if line.startswith("/"):
            return await self._command(line)
        await self._run(line)
        return True

    async def _run(self, text: str) -> None:
        loop = asyncio.get_running_loop()
        interrupt: Callable[[], object] = lambda: self.agent.interrupt(self.session, "user")  # noqa: E731
        try:
            loop.add_signal_handler(signal.SIGINT, interrupt)
            installed = True
        except (NotImplementedError, RuntimeError):  # not the main thread, or no signals here
            installed = False
        try:
            async for event in self.agent.stream(text, self.session):
                if isinstance(event, TextDelta):
                    self.console.out(event.text, end="")
                elif isinstance(event, ToolCallStart):
                    self.console.print(f"\n[dim]→ {event.name}[/]")
                elif isinstance(event, RunInterrupted):
                    self.console.print("\n[yellow]interrupted — the session is still valid[/]")
                elif isinstance(event, RunError):
                    self.console.print(f"\n[red]{event.kind}: {event.error}[/]")
        except AgentLedgerError:
            pass  # already reported through RunError; the input is saved
        finally:
            if installed:
                loop.remove_signal_handler(signal.SIGINT)
        self.console.print()

    async def _command(self, line: str) -> bool:
        name, _, arg = line[1:].partition(" ")
        arg = arg.strip()
        if name in ("quit", "exit", "q"):
            return False
        if name == "history":
            for i, msg in enumerate(await self.ledger.messages(self.session)):
                self.console.print(f"{i:>4} {describe(msg)}", markup=False)
        elif name == "fork" and arg:
            await self.ledger.fork(self.session, arg)
            self.session = arg
            self.console.print(f"forked; now in session {arg!r}")
        elif name == "rewind" and arg.isdigit():
            msgs = await self.ledger.messages(self.session)
            report = await self.ledger.save(self.session, msgs[: int(arg)])
            self.console.print(
                f"kept {int(arg)} messages (v{report.version}; the rest stays in history)"
            )
        elif name == "sessions":
            for info in await self.ledger.list_sessions(limit=20):
                self.console.print(f"{info.session_id}  {info.title or ''}", markup=False)
        else:
            self.console.print("/history  /fork NAME  /rewind N  /sessions  /quit")
        return True


async def _chat_loop(chat: ChatSession, lines: Iterator[str]) -> None:
    for line in lines:
        if not await chat.handle(line):
            break


def _prompt_lines(console: Console) -> Iterator[str]:
    while True:
        try:
            yield console.input("[bold]you>[/] ")
        except (EOFError, KeyboardInterrupt):
            return


def chat(
    model: Annotated[str | None, typer.Option(help="Model spec, e.g. openai:gpt-4o-mini.")] = None,
    session: Annotated[str, typer.Option(help="Session id to start or resume.")] = "chat",
    system: Annotated[str | None, typer.Option(help="System prompt.")] = None,
    store: StoreOption = None,
    tenant: TenantOption = None,
) -> None:
    """Chat with a model in the terminal; Ctrl-C interrupts an answer."""
    spec = resolve_model(model)
    console = Console()
    if spec is None:
        console.print(HOW_TO_CONFIGURE, markup=False)
        raise typer.Exit(2)
    try:
        agent = ReActAgent(
            spec,
            store=AsyncLedger(resolve_store(store), tenant=setting("tenant", tenant) or "default"),
            system_prompt=system,
        )
    except AgentLedgerError as exc:
        console.print(f"[red]{exc}[/]")
        raise typer.Exit(2) from None
    chat_session = ChatSession(agent, session, console)
    asyncio.run(_chat_loop(chat_session, _prompt_lines(console)))


def register(app: typer.Typer) -> None:
    app.command("chat")(chat)
