"""``agentledger demo``: an offline walk through what agentledger persists, step by step.

No API key and no network: a real SQLite file (``demo.db`` in the user data directory, or
``--store``), a scripted model, and scripted conversation content. Every run writes new sessions
(``agent-demo-N``, ``demo-N``, ``own-loop-N`` with the first free ``N``), so the demo reruns on
the same store, and the store is kept: the demo ends with the commands that inspect it.

First an agent runs, is interrupted, is killed and resumes (``demo_agent``); then the ledger
shows what each save writes: an append writes the new turn, an edit writes the edited message,
an unchanged reloaded list writes nothing, history stays readable, and the stored histories
pass strict validation.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from agentledger.cli.errors import state
from agentledger.cli.options import StoreOption
from agentledger.cli.output import describe
from agentledger.cli.store import default_path
from agentledger.messages import Msg, TextBlock, decode, encode
from agentledger.store import Ledger, SaveReport, Store, open_store
from agentledger.testing.samples import sample_conversation

__all__ = ["MAX_TURNS", "register", "run_ledger_demo"]

console = Console(highlight=False, soft_wrap=True)


def _report(label: str, report: SaveReport) -> None:
    what = (
        "nothing written"
        if report.noop
        else (f"+{report.appended} appended, {report.replaced} replaced, -{report.truncated} cut")
    )
    console.print(f"  {label:<34} v{report.version:<3} {what:<42} {report.bytes_written:>7,} bytes")


def run_ledger_demo(url: str, *, turns: int = 50, first_step: int = 1, run: int = 1) -> None:
    """The ledger part of the demo: grow, edit, no-op, history, sync, validate.

    Each step opens a new ``Ledger`` (an empty cache, as a new process would have) on one store.
    """
    store = open_store(url)
    try:
        _steps(store, url, turns, first_step, run)
    finally:
        store.close()


def next_run(url: str) -> int:
    """The first ``N`` for which no session of the demo exists yet in the store."""
    with Ledger(url) as ledger:
        taken = {info.session_id for info in ledger.list_sessions()}
    run = 1
    while {f"agent-demo-{run}", f"demo-{run}", f"own-loop-{run}"} & taken:
        run += 1
    return run


def run_demo(url: str, *, turns: int = 50) -> None:
    """The whole demo: the agent (steps 1-3), then the ledger (steps 4-10), on new sessions."""
    from agentledger.cli.demo_agent import run_agent_demo

    run = next_run(url)
    session = f"agent-demo-{run}"
    run_agent_demo(url, session)
    with Ledger(url) as ledger:
        version = ledger.version(session)
        console.print(f"[bold]4. Reload the agent session in a fresh handle[/] (v{version})")
        history = ledger.messages(session)
        for i, msg in enumerate(history):
            console.print(f"  {i:>2} {describe(msg, 70)}", markup=False)
        _validate(history)
        console.print(f"  {len(history)} messages pass strict validation ✓")
    run_ledger_demo(url, turns=turns, first_step=5, run=run)
    _next_steps(url, run, turns)


def _next_steps(url: str, run: int, turns: int) -> None:
    if url.startswith("memory:"):
        console.print(
            "The memory:// store ends with the demo; rerun with --store sqlite:///demo.db to "
            "keep one and inspect it."
        )
        return
    console.print(f"[bold]Try next[/] (the store is kept: {url})")
    for command in (
        "sessions",
        f"show agent-demo-{run}",
        f"history demo-{run}",
        f"diff demo-{run} {turns} {turns + 1}",
        f"check agent-demo-{run} --provider anthropic",
    ):
        console.print(f"  agentledger {command} --store {url}", markup=False)


def _steps(url: Store, label: str, turns: int, first: int, run: int) -> None:
    session = f"demo-{run}"
    step = iter(range(first, first + 10))
    conversation = sample_conversation(turns, seed=1)
    console.print(f"[bold]{next(step)}. Grow a conversation turn by turn[/] ({label})")
    with Ledger(url) as ledger:
        for t in range(turns):
            report = ledger.save(session, conversation[: 4 * (t + 1)])
            if t < 2 or t == turns - 1:
                _report(f"turn {t + 1} ({4 * (t + 1)} messages)", report)
            elif t == 2:
                console.print("  …")

    console.print(f"[bold]{next(step)}. Replace one tool result in the middle with a preview[/]")
    with Ledger(url) as ledger:
        msgs = ledger.messages(session)
        middle = next(i for i in range(len(msgs) // 2, len(msgs)) if msgs[i].tool_results)
        preview = msgs[middle].tool_results[0].replace(output=(TextBlock(text="[preview]"),))
        msgs[middle] = msgs[middle].replace(content=(preview,))
        _report(f"edit message {middle} of {len(msgs)}", ledger.save(session, msgs))

    console.print(
        f"[bold]{next(step)}. Reload in a fresh process-like handle, rebuild, save unchanged[/]"
    )
    with Ledger(url) as ledger:
        rebuilt = [decode(encode(m)) for m in ledger.messages(session)]
        _report("save the reloaded list", ledger.save(session, rebuilt))

    console.print(
        f"[bold]{next(step)}. History is kept: the original tool result is still there[/]"
    )
    with Ledger(url) as ledger:
        before = ledger.messages(session, version=turns)[middle]
        after = ledger.messages(session)[middle]
        console.print(f"  version {turns}: {len(before.tool_results[0].text):,} chars of output")
        console.print(f"  version {turns + 1}: {after.tool_results[0].text!r}", markup=False)

    console.print(f"[bold]{next(step)}. Your own loop: sync a list of OpenAI dicts by content[/]")
    with Ledger(url) as ledger:
        live = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
        _report("sync 2 dicts", ledger.sync(f"own-loop-{run}", live))
        live.pop()
        live += [{"role": "assistant", "content": "hello again"}, {"role": "user", "content": "ok"}]
        _report("drop one, add two", ledger.sync(f"own-loop-{run}", live))
        _report("sync again, unchanged", ledger.sync(f"own-loop-{run}", live))

    console.print(f"[bold]{next(step)}. The stored history passes strict provider validation[/]")
    with Ledger(url) as ledger:
        stored = ledger.messages(session)
        _validate(stored)
        console.print(f"  {len(stored)} messages: every tool call answered exactly once ✓")


def _validate(msgs: list[Msg]) -> None:
    from agentledger.wire import check

    check(msgs, target="openai")


#: The most turns ``--turns`` takes: each is a save of 4 more messages (about 5 KB of text, 7 KB
#: stored with its version), so 1,000 make a 4,000-message session of about 8 MB in seconds;
#: with no bound, a mistyped number ran for hours and filled the disk.
MAX_TURNS = 1000


def demo(
    store: StoreOption = None,
    turns: Annotated[
        int,
        typer.Option(
            min=1,
            max=MAX_TURNS,
            help=f"Turns to grow the demo session to (at most {MAX_TURNS:,}; each adds 4 "
            "messages, about 7 KB stored).",
        ),
    ] = 50,
) -> None:
    """Run an offline demonstration on a real SQLite file (no API key needed); rerunnable."""
    if store is None:
        path = default_path().with_name("demo.db")
        path.parent.mkdir(parents=True, exist_ok=True)
        store = f"sqlite:///{path}"
    state.store = store
    run_demo(store, turns=turns)


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)
