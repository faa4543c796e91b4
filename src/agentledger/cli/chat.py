"""``agentledger chat``: a terminal chat on a real model, persisted step by step.

Output streams as the model writes it. Ctrl-C during an answer interrupts that run as a *user*
interrupt (text so far is kept, unexecuted tool calls are dropped, the session stays valid);
Ctrl-C or Ctrl-D at the prompt leaves. ``--session`` resumes a conversation; a banner says which
session, model and how many messages were resumed. Slash commands: ``/history``, ``/fork NAME``,
``/undo [N]`` (removes the last N messages, as a new version: they stay in history),
``/sessions``, ``/help``, ``/quit``. A busy session, a fork onto an existing name or a bad
argument is reported and the chat goes on; a message that could not be sent is said so.
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
from agentledger.cli.errors import EXIT_USAGE, one_line
from agentledger.cli.options import StoreOption, TenantOption
from agentledger.cli.output import describe, printable
from agentledger.cli.store import open_ledger
from agentledger.errors import (
    AgentLedgerError,
    ConflictError,
    SessionBusyError,
    SessionNotFoundError,
)
from agentledger.store.aio import AsyncLedger
from agentledger.store.ids import shown

__all__ = ["ChatSession", "register", "resolve_model"]

HOW_TO_CONFIGURE = """No model is configured. Choose one of:
  agentledger chat --model openai:gpt-4o-mini        (set OPENAI_API_KEY)
  agentledger chat --model anthropic:claude-sonnet-4-5   (set ANTHROPIC_API_KEY)
  OPENAI_BASE_URL=http://localhost:11434/v1 agentledger chat --model openai:llama3.2
      (any OpenAI-compatible server: Ollama, vLLM, llama.cpp)
  agentledger chat --model scripted:answers.json      (offline, scripted answers)
or set AGENTLEDGER_MODEL (or model = "..." in the config file) to one of these specs.
openai: and anthropic: need their extra: pip install "agentledger[openai]" (or [anthropic])."""

COMMANDS = "/history  /fork NAME  /undo [N]  /sessions  /help  /quit"


def resolve_model(spec: str | None) -> str | None:
    """The model spec to use: the option, else AGENTLEDGER_MODEL, else a provider whose key is
    set; ``None`` when nothing is configured."""
    if spec:
        return spec
    if os.environ.get("AGENTLEDGER_MODEL"):
        return os.environ["AGENTLEDGER_MODEL"]
    configured = setting("model", None)
    if configured:
        return configured
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

    async def banner(self, model: str) -> None:
        """Say where the chat is: session, tenant, store, model, and what was resumed."""
        ledger = self.ledger.sync
        count = len(await self.ledger.messages(self.session))
        version = await self.ledger.version(self.session)
        resumed = f"resumed {count} messages (v{version})" if version else "a new session"
        self.console.print(
            f"session {self.session!r} (tenant {ledger.tenant!r}) in "
            f"{ledger.store.location or 'memory://'}: {resumed}; model {model}",
            markup=False,
            style="dim",
        )
        self.console.print(f"{COMMANDS}; Ctrl-C interrupts an answer", markup=False, style="dim")

    async def _run(self, text: str) -> None:
        loop = asyncio.get_running_loop()
        interrupt: Callable[[], object] = lambda: self.agent.interrupt(self.session, "user")  # noqa: E731
        try:
            loop.add_signal_handler(signal.SIGINT, interrupt)
            installed = True
        except (NotImplementedError, RuntimeError):  # not the main thread, or no signals here
            installed = False
        reported = False
        try:
            async for event in self.agent.stream(text, self.session):
                if isinstance(event, TextDelta):
                    self.console.out(printable(event.text), end="")
                elif isinstance(event, ToolCallStart):
                    self.console.print(f"\n→ {event.name}", markup=False, style="dim")
                elif isinstance(event, RunInterrupted):
                    self.console.print("\ninterrupted — the session is still valid", style="yellow")
                elif isinstance(event, RunError):
                    reported = True
                    said = printable(f"{event.kind}: {event.error}")
                    self.console.print(f"\n{said}", markup=False, style="red")
        except SessionBusyError:
            self._say(
                f"not sent: session {self.session!r} is busy (another run is using it); "
                "send your message again when it is done",
                "red",
            )
            return
        except AgentLedgerError as exc:
            if not reported:  # a RunError already said it; the input is saved either way
                self._say(f"{type(exc).__name__}: {exc}", "red")
        finally:
            if installed:
                loop.remove_signal_handler(signal.SIGINT)
        self.console.print()

    def _say(self, text: str, style: str | None = None) -> None:
        self.console.print(printable(one_line(text)), markup=False, style=style)

    async def _command(self, line: str) -> bool:
        name, _, arg = line[1:].partition(" ")
        arg = arg.strip()
        if name in ("quit", "exit", "q"):
            return False
        if name == "history":
            for i, msg in enumerate(await self.ledger.messages(self.session)):
                self.console.print(f"{i:>4} {describe(msg)}", markup=False)
        elif name == "fork":
            await self._fork(arg)
        elif name == "undo":
            await self._undo(arg)
        elif name == "sessions":
            for info in await self.ledger.list_sessions(limit=20):
                line = printable(f"{info.session_id}  {info.title or ''}")
                self.console.print(line, markup=False)
        elif name == "help":
            self._say(COMMANDS)
        else:
            self._say(f"unknown command /{name}; commands: {COMMANDS}", "yellow")
        return True

    async def _fork(self, name: str) -> None:
        if not name or " " in name:
            self._say("usage: /fork NAME (the new session's id)", "yellow")
            return
        try:
            await self.ledger.fork(self.session, name)
        except ConflictError:
            self._say(f"session {shown(name)} already exists; still in {self.session!r}", "yellow")
        except SessionNotFoundError:
            self._say(f"nothing to fork yet: {self.session!r} has no messages", "yellow")
        except AgentLedgerError as exc:  # a bad id, say
            self._say(f"cannot fork: {exc}", "yellow")
        else:
            self.session = name
            self._say(f"forked; now in session {name!r}")

    async def _undo(self, arg: str) -> None:
        number = arg.lstrip("0") if arg else "1"
        if not (number.isascii() and number.isdigit()):
            self._say(
                f"usage: /undo [N] removes the last N messages (N >= 1), got {shown(arg)}", "yellow"
            )
            return
        # past 18 digits, more than any list holds (and int() refuses 4,300 digits and more)
        count = int(number) if len(number) <= 18 else None
        state = await self.ledger.load(self.session)
        msgs = state.context
        if count is None or count > len(msgs):
            self._say(f"only {len(msgs)} messages to undo; nothing changed", "yellow")
            return
        try:  # at the version read: what another writer added meanwhile is not cut unseen
            report = await self.ledger.save(
                self.session, msgs[: len(msgs) - count], expected_version=state.version
            )
        except ConflictError:
            self._say("the session changed meanwhile; nothing undone (look, then undo again)")
            return
        self._say(
            f"removed the last {count} message{'s' * (count > 1)}, {len(msgs) - count} left "
            f"(v{report.version}; v{report.version - 1} still loads)"
        )


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
    console = Console(soft_wrap=True)
    if spec is None:
        typer.echo(HOW_TO_CONFIGURE, err=True)
        raise typer.Exit(EXIT_USAGE)
    ledger = AsyncLedger(open_ledger(store, tenant, create=True))
    agent = ReActAgent(spec, store=ledger, system_prompt=system)
    with ledger.sync.lease(session):  # busy now: say so before anything is typed
        pass
    chat_session = ChatSession(agent, session, console)

    async def run() -> None:
        await chat_session.banner(spec)
        await _chat_loop(chat_session, _prompt_lines(console))

    asyncio.run(run())


def register(app: typer.Typer) -> None:
    app.command("chat")(chat)
