"""``agentledger chat``: streaming, Ctrl-C as a user interrupt, slash commands, configuration."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from agentledger.agent.react import ReActAgent
from agentledger.cli import app
from agentledger.cli.chat import ChatSession, _chat_loop
from agentledger.errors import MissingDependencyError
from agentledger.messages import Msg, ToolUseBlock
from agentledger.store import Ledger
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
                "/undo 2",
                "/fork side",
                "/sessions",
                "/quit",
                "never sent",
            ]
        ),
    )
    out = console.export_text()
    assert "Hello!" in out and "Bye." in out
    assert "removed the last 2 messages, 2 left" in out and "now in session 'side'" in out
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


async def test_slash_commands_explain_bad_arguments_and_keep_going(tmp_path: Path) -> None:
    chat, console = _session(tmp_path, [Msg.assistant("One."), Msg.assistant("Two.")])
    await _chat_loop(
        chat,
        iter(
            [
                "a",
                "/undo abc",
                "/undo ²",  # a digit to str.isdigit, not to int()
                "/undo 0",
                "/undo 99",
                "/undo " + "9" * 5000,  # int() refuses it: the chat ended with a ValueError
                "/undo " + "x" * 100_000,  # was echoed whole
                "/frobnicate",
                "/fork",
                "/undo",
                "b",
            ]
        ),
    )
    out = console.export_text()
    assert "usage: /undo [N] removes the last N messages (N >= 1), got 'abc'" in out
    assert "got '²'" in out and "x" * 81 not in out
    assert "x" * 80 + "'…" in out and "100,000 characters)" in out  # wrapped at 120 columns
    assert "got '0'" in out and out.count("only 2 messages to undo; nothing changed") == 2
    assert "unknown command /frobnicate; commands: /history" in out
    assert "usage: /fork NAME" in out
    assert "removed the last 1 message, 1 left (v3; v2 still loads)" in out
    assert [m.text for m in await chat.ledger.messages("c")] == ["a", "b", "Two."]
    assert [m.text for m in await chat.ledger.messages("c", version=2)] == ["a", "One."]


async def test_fork_onto_an_existing_session_keeps_the_chat(tmp_path: Path) -> None:
    chat, console = _session(tmp_path, [Msg.assistant("One."), Msg.assistant("Two.")])
    await chat.ledger.save("taken", [Msg.user("mine")])
    await _chat_loop(chat, iter(["/fork x", "a", "/fork taken", "b"]))
    out = console.export_text()
    assert "nothing to fork yet" in out
    assert "session 'taken' already exists; still in 'c'" in out
    assert chat.session == "c" and len(await chat.ledger.messages("c")) == 4
    assert [m.text for m in await chat.ledger.messages("taken")] == ["mine"]


async def test_a_busy_session_says_the_message_was_not_sent(tmp_path: Path) -> None:
    chat, console = _session(tmp_path, [Msg.assistant("One.")])
    with chat.ledger.sync.lease("c"):
        await _chat_loop(chat, iter(["lost?"]))
    await _chat_loop(chat, iter(["again"]))
    out = console.export_text()
    assert "not sent: session 'c' is busy" in out
    assert [m.text for m in await chat.ledger.messages("c")] == ["again", "One."]


def _script(tmp_path: Path) -> str:
    path = tmp_path / "answers.json"
    path.write_text('[{"text": "Hi from the script."}]')
    return f"scripted:{path}"


def test_chat_command_banner_tenant_and_busy_session(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    args = ["chat", "--model", _script(tmp_path), "--store", url, "--tenant", "acme"]
    result = CliRunner().invoke(app, args, input="hello\n")
    assert result.exit_code == 0, result.output
    assert "session 'chat' (tenant 'acme')" in result.stdout and "a new session" in result.stdout
    assert "Hi from the script." in result.stdout
    with Ledger(url, tenant="acme") as ledger:
        assert [m.text for m in ledger.messages("chat")] == ["hello", "Hi from the script."]
        with ledger.lease("chat"):
            busy = CliRunner().invoke(app, args, input="hello\n")
    assert busy.exit_code == 4 and busy.stdout == ""
    assert busy.stderr.startswith("error: session 'chat' (tenant 'acme') is already running")
    result = CliRunner().invoke(app, args, input="")
    assert "resumed 2 messages (v" in result.stdout


def test_a_missing_extra_shows_the_whole_install_hint(monkeypatch) -> None:
    def missing(*args, **kwargs):
        raise MissingDependencyError('this needs: pip install "agentledger[openai]"')

    monkeypatch.setattr("agentledger.cli.chat.ReActAgent", missing)
    result = CliRunner().invoke(app, ["chat", "--model", "openai:x", "--store", "memory://"])
    assert result.exit_code == 1
    assert result.stderr == 'error: this needs: pip install "agentledger[openai]"\n'


async def test_undo_never_cuts_a_message_another_writer_added_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat, console = _session(tmp_path, [Msg.assistant("One.")])
    await _chat_loop(chat, iter(["a"]))
    load = chat.ledger.load

    async def load_then_another_writer(session: str, **kw: Any) -> Any:
        state = await load(session, **kw)
        await chat.ledger.save(session, [*state.context, Msg.user("late")])
        return state

    monkeypatch.setattr(chat.ledger, "load", load_then_another_writer)
    await _chat_loop(chat, iter(["/undo"]))
    assert "the session changed meanwhile; nothing undone" in console.export_text()
    assert [m.text for m in await chat.ledger.messages("c")] == ["a", "One.", "late"]
