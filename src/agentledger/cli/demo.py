"""``agentledger demo``: an offline walk through what the ledger persists, step by step.

No API key and no network: a real SQLite file in a temporary directory (or ``--store``), and
scripted conversation content. Each step prints what was written, so a newcomer can see the
claims hold: an append writes the new turn, an edit writes the edited message, an unchanged
reloaded list writes nothing, and history stays readable.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from agentledger.cli.options import StoreOption
from agentledger.messages import Msg, TextBlock, decode, encode
from agentledger.store import Ledger, SaveReport, Store, open_store
from agentledger.testing.samples import sample_conversation

__all__ = ["register", "run_ledger_demo"]

console = Console(highlight=False)


def _report(label: str, report: SaveReport) -> None:
    what = (
        "nothing written"
        if report.noop
        else (f"+{report.appended} appended, {report.replaced} replaced, -{report.truncated} cut")
    )
    console.print(f"  {label:<34} v{report.version:<3} {what:<42} {report.bytes_written:>7,} bytes")


def run_ledger_demo(url: str, *, turns: int = 50) -> None:
    """The ledger part of the demo: grow, edit, no-op, history, sync, validate.

    Each step opens a new ``Ledger`` (an empty cache, as a new process would have) on one store.
    """
    store = open_store(url)
    try:
        _steps(store, url, turns)
    finally:
        store.close()


def _steps(url: Store, label: str, turns: int) -> None:
    session = "demo"
    conversation = sample_conversation(turns, seed=1)
    console.print(f"[bold]1. Grow a conversation turn by turn[/] ({label})")
    with Ledger(url) as ledger:
        ledger.delete(session)
        for t in range(turns):
            report = ledger.save(session, conversation[: 4 * (t + 1)])
            if t < 2 or t == turns - 1:
                _report(f"turn {t + 1} ({4 * (t + 1)} messages)", report)
            elif t == 2:
                console.print("  …")

    console.print("[bold]2. Replace one tool result in the middle with a preview[/]")
    with Ledger(url) as ledger:
        msgs = ledger.messages(session)
        middle = len(msgs) // 2 - 2  # a tool result
        preview = msgs[middle].tool_results[0].replace(output=(TextBlock(text="[preview]"),))
        msgs[middle] = msgs[middle].replace(content=(preview,))
        _report(f"edit message {middle} of {len(msgs)}", ledger.save(session, msgs))

    console.print("[bold]3. Reload in a fresh process-like handle, rebuild, save unchanged[/]")
    with Ledger(url) as ledger:
        rebuilt = [decode(encode(m)) for m in ledger.messages(session)]
        _report("save the reloaded list", ledger.save(session, rebuilt))

    console.print("[bold]4. History is kept: the original tool result is still there[/]")
    with Ledger(url) as ledger:
        before = ledger.messages(session, version=turns)[middle]
        after = ledger.messages(session)[middle]
        console.print(f"  version {turns}: {len(before.tool_results[0].text):,} chars of output")
        console.print(f"  version {turns + 1}: {after.tool_results[0].text!r}", markup=False)

    console.print("[bold]5. Your own loop: sync a list of OpenAI dicts by content[/]")
    with Ledger(url) as ledger:
        live = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
        _report("sync 2 dicts", ledger.sync("own-loop", live))
        live.pop()
        live += [{"role": "assistant", "content": "hello again"}, {"role": "user", "content": "ok"}]
        _report("drop one, add two", ledger.sync("own-loop", live))
        _report("sync again, unchanged", ledger.sync("own-loop", live))

    console.print("[bold]6. The stored history passes strict provider validation[/]")
    with Ledger(url) as ledger:
        stored = ledger.messages(session)
        _validate(stored)
        console.print(f"  {len(stored)} messages: every tool call answered exactly once ✓")


def _validate(msgs: list[Msg]) -> None:
    from agentledger.wire import check

    check(msgs, target="openai")


def demo(
    store: StoreOption = None,
    turns: Annotated[int, typer.Option(help="Turns to grow the demo session to.")] = 50,
) -> None:
    """Run an offline demonstration on a real SQLite file (no API key needed)."""
    if store:
        run_ledger_demo(store, turns=turns)
        return
    with tempfile.TemporaryDirectory(prefix="agentledger-demo-") as tmp:
        run_ledger_demo(f"sqlite:///{Path(tmp) / 'demo.db'}", turns=turns)


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)
