"""``agentledger chat``: streaming, Ctrl-C as a user interrupt, slash commands, configuration."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

from rich.console import Console
from typer.testing import CliRunner

from agentledger.agent.react import ReActAgent
from agentledger.cli import app
from agentledger.cli.chat import ChatSession, _chat_loop
from agentledger.messages import Msg, ToolUseBlock
from agentledger.store.aio import AsyncLedger
from agentledger.testing.scripted import ScriptedModel
from agentledger.wire import check


def _session(tmp_path: Path, script: list, **kw) -> tuple[ChatSession, Console]:
    console = Console(record=True, width=120, force_terminal=False)
    ledger = AsyncLedger(f"sqlite:///{tmp_path / 'chat.db'}")
    agent = ReActAgent(ScriptedModel(script, **kw), store=ledger)
    return ChatSession(agent, "c", console), console


async def test_chat_streams_and_slash_commands(tmp_path: Path) -> None:
    chat, console = _session(tmp_path, [Msg.assistant("Hello!"), Msg.assistant("Bye.")])
    await _chat_loop(
        chat,
        iter(
            [
                "hi",
                "again",
                "/history",
                "/rewind 2",
                "/fork side",
                "/sessions",
                "/quit",
                "never sent",
            ]
        ),
    )
    out = console.export_text()
    assert "Hello!" in out and "Bye." in out
    assert "kept 2 messages" in out and "now in session 'side'" in out
    assert [m.text for m in await chat.ledger.messages("c")] == ["hi", "Hello!"]
    assert [m.text for m in await chat.ledger.messages("c", version=4)][-1] == "Bye."
    assert chat.session == "side"


async def test_ctrl_c_interrupts_the_answer_not_the_chat(tmp_path: Path) -> None:
    async def answer(messages, tools):
        os.kill(os.getpid(), signal.SIGINT)  # the user presses Ctrl-C while the model answers
        await asyncio.sleep(0.05)
        return Msg.assistant([ToolUseBlock(id="c1", name="rm_rf", input={})])

    chat, console = _session(tmp_path, [answer, Msg.assistant("still here")])
    await _chat_loop(chat, iter(["do it", "hello?"]))
    out = console.export_text()
    assert "interrupted" in out and "still here" in out
    history = await chat.ledger.messages("c")
    assert [m.role for m in history] == ["user", "user", "assistant"]
    check(history, target="strict")


def test_no_model_configured_says_how(monkeypatch) -> None:
    for var in ("AGENTLEDGER_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    result = CliRunner().invoke(app, ["chat", "--store", "memory://"])
    assert result.exit_code == 2
    assert "OPENAI_API_KEY" in result.output and "scripted:" in result.output


async def test_chat_writes_under_the_chosen_tenant(tmp_path: Path) -> None:
    console = Console(record=True, width=120, force_terminal=False)
    ledger = AsyncLedger(f"sqlite:///{tmp_path / 'chat.db'}", tenant="acme")
    agent = ReActAgent(ScriptedModel([Msg.assistant("Hello!")]), store=ledger)
    await _chat_loop(ChatSession(agent, "c", console), iter(["hi", "/history", "/quit"]))
    assert [m.text for m in await ledger.messages("c", tenant="acme")] == ["hi", "Hello!"]
    assert not await ledger.exists("c", tenant="default")
    assert "Hello!" in console.export_text()
