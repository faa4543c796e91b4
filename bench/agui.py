"""``python -m bench.agui``: what one AG-UI run costs the server as the thread grows, beside
pydantic-ai's AG-UI adapter.

python -m bench.agui           # 400, 4,000 and 12,000 messages; writes the "## AG-UI runs" section
python -m bench.agui --quick   # 400 and 4,000 messages, fewer runs
python -m bench.agui --sizes 40 --systems agentledger --out /tmp/b.md

An AG-UI client resends the whole thread with every run (``RunAgentInput.messages``), so a run
costs at least the reading of the thread; what it costs beyond that is the server's. Each system
serves its AG-UI endpoint in process (an ASGI app driven by ``httpx``, no sockets), on a thread
seeded (untimed) with the first ``n`` messages of the benchmark workload (``bench.workload``:
turns of user, tool call, ~4,000-character tool result, answer) in AG-UI form, and a model that
answers "ok" at once. A timed run is one request, from sending the body (built beforehand) to the
last byte of the event stream: the client's thread plus one new user message. After each run the
client holds what a client of that server holds: agentledger's closing ``MESSAGES_SNAPSHOT``;
for pydantic-ai, which sends none, its thread plus the answer it streamed.

- ``agentledger``: ``create_app`` over a SQLite ledger (``synchronous=NORMAL``): each run merges
  the client's messages with the stored thread by id, commits the new user message and the
  answer, and closes with the thread's snapshot.
- ``pydantic-ai (client history)``: ``AGUIAdapter.dispatch_request`` as its docs show it: the
  history is the client's, converted on every run; nothing is stored.
- ``pydantic-ai (server history)``: the same with ``manage_message_history="server"`` and the
  ``InMemoryConversationStore`` (the one store the package ships): the run continues the stored
  history with the client's new turn and saves what it added, in memory.

Figures: the median over the timed runs (after one untimed) of the process's CPU time and of the
wall time per run; the ratio of each to agentledger's at the same size, and each system's cost
at its largest size against its cost at the smallest. Standard library only at import: the same
module is the child, in each system's interpreter.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import choices
from bench.runner import PEERS_PYTHON, ROOT, run_child
from bench.systems import get
from bench.systems.base import emit
from bench.workload import TURN

OUT = ROOT / "bench" / "out"
SYSTEMS = {  # name -> (interpreter of, label)
    "agentledger": ("agentledger-sqlite", "agentledger (SQLite)"),
    "pydantic-ai-client": ("pydantic-ai", "pydantic-ai (client history)"),
    "pydantic-ai-server": ("pydantic-ai", "pydantic-ai (server history, in memory)"),
}
FULL = {"sizes": [400, 4000, 12000], "runs": 9, "timeout": 1200}
QUICK = {"sizes": [400, 4000], "runs": 5, "timeout": 600}
MAX_BODY = 256 * 1024 * 1024  # agentledger's default 8 MiB refuses a 12,000-message thread


# -- the child: one system at one size ---------------------------------------------------------
def _frames(body: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in body.split("\n") if line.startswith("data: ")]


def _body(thread_id: str, run: int, messages: list[dict[str, Any]]) -> bytes:
    return json.dumps(
        {
            "threadId": thread_id,
            "runId": f"run-{run}",
            "messages": messages,
            "state": {},
            "tools": [],
            "context": [],
            "forwardedProps": {},
        }
    ).encode()


async def _agentledger(spec: dict[str, Any], thread: list[dict[str, Any]]) -> dict[str, Any]:
    from importlib.metadata import version

    from agentledger.server import create_app
    from agentledger.store.aio import AsyncLedger
    from agentledger.testing import ScriptedModel
    from agentledger.wire.agui import from_agui

    ledger = AsyncLedger(f"sqlite:///{spec['workdir']}/agui.db")
    await ledger.save("t", from_agui(thread))
    model = ScriptedModel(["ok"] * (spec["runs"] + 2))
    app = create_app(model=model, store=ledger, max_body=MAX_BODY)

    def after(held: list[dict[str, Any]], frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
        (snapshot,) = [f for f in frames if f["type"] == "MESSAGES_SNAPSHOT"]
        return snapshot["messages"]  # type: ignore[no-any-return]

    out = await _drive(app, spec, thread, after)
    out["versions"] = {"agentledger": "0.1.0", "fastapi": version("fastapi")}
    stored = len(await ledger.messages("t"))
    out["ok"] = out["ok"] and stored == len(thread) + 2 * (spec["runs"] + 1)
    await ledger.close()
    return out


async def _pydantic_ai(spec: dict[str, Any], thread: list[dict[str, Any]]) -> dict[str, Any]:
    from importlib.metadata import version

    from pydantic_ai import Agent
    from pydantic_ai.conversation import Conversation
    from pydantic_ai.conversation_store import InMemoryConversationStore
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.ui.ag_ui import AGUIAdapter
    from starlette.applications import Starlette
    from starlette.routing import Route

    async def streamed(messages: Any, info: Any) -> Any:
        yield "ok"

    answer = FunctionModel(
        lambda messages, info: ModelResponse(parts=[TextPart("ok")]), stream_function=streamed
    )
    agent = Agent(answer)
    server = spec["system"] == "pydantic-ai-server"
    store = InMemoryConversationStore()
    if server:
        seeded = Conversation(messages=AGUIAdapter.load_messages(_models(thread)))
        seeded.conversation_id = "t"
        await store.save(seeded)
    options: dict[str, Any] = (
        {"manage_message_history": "server", "conversation_store": store, "conversation_id": "t"}
        if server
        else {}
    )

    async def endpoint(request: Any) -> Any:
        return await AGUIAdapter.dispatch_request(request, agent=agent, **options)

    app = Starlette(routes=[Route("/", endpoint, methods=["POST"])])

    def after(held: list[dict[str, Any]], frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
        starts = [f for f in frames if f["type"] == "TEXT_MESSAGE_START"]
        text = "".join(f["delta"] for f in frames if f["type"] == "TEXT_MESSAGE_CONTENT")
        return [*held, {"id": starts[-1]["messageId"], "role": "assistant", "content": text}]

    out = await _drive(app, spec, thread, after)
    out["versions"] = {"pydantic-ai-slim": version("pydantic-ai-slim")}
    if server:
        conversation = await store.load("t")
        expected = len(AGUIAdapter.load_messages(_models(thread))) + 2 * (spec["runs"] + 1)
        out["ok"] = out["ok"] and conversation is not None
        out["ok"] = out["ok"] and len(conversation.messages) == expected
    return out


def _models(thread: list[dict[str, Any]]) -> list[Any]:
    from ag_ui.core import Message
    from pydantic import TypeAdapter

    return TypeAdapter(list[Message]).validate_python(thread)


async def _drive(app: Any, spec: dict[str, Any], thread: list[dict[str, Any]], after: Any) -> Any:
    """One untimed run, then ``runs`` timed ones, each the client's thread plus a new message."""
    import httpx

    transport = httpx.ASGITransport(app=app)
    held = list(thread)
    cpu: list[float] = []
    wall: list[float] = []
    ok = True
    async with httpx.AsyncClient(transport=transport, base_url="http://agui", timeout=600) as c:
        for run in range(spec["runs"] + 1):
            held.append({"id": f"question-{run}", "role": "user", "content": f"question {run}"})
            body = _body("t", run, held)
            started, started_cpu = time.perf_counter(), time.process_time()
            response = await c.post("/", content=body, headers={"content-type": "application/json"})
            elapsed, elapsed_cpu = time.perf_counter() - started, time.process_time() - started_cpu
            frames = _frames(response.text) if response.status_code == 200 else []
            finished = any(f["type"] == "RUN_FINISHED" for f in frames)
            if not finished:
                sys.stderr.write(f"run {run}: HTTP {response.status_code} {response.text[-500:]}\n")
                return {"ok": False, "error": f"run {run} did not finish"}
            held = after(held, frames)
            if run:
                cpu.append(elapsed_cpu)
                wall.append(elapsed)
    return {
        "ok": ok,
        "cpu": statistics.median(cpu),
        "wall": statistics.median(wall),
        "body_bytes": len(body),
        "runs": len(cpu),
    }


def _child(spec: dict[str, Any]) -> int:
    thread = json.loads(Path(spec["thread"]).read_text())[: spec["messages"]]
    drive = _agentledger if spec["system"] == "agentledger" else _pydantic_ai
    try:
        emit(asyncio.run(drive(spec, thread)))
    except Exception as exc:
        traceback.print_exc()
        emit({"ok": False, "error": f"{type(exc).__name__}: {exc}".splitlines()[0][:300]})
    return 0


# -- the parent --------------------------------------------------------------------------------
def _thread_file(turns: int, seed: int) -> str:
    """The workload's first ``turns`` turns in AG-UI form, written once per size and seed."""
    from agentledger.wire.agui import to_agui
    from bench import workload

    jsonl, _ = workload.ensure(str(OUT), turns, seed)
    path = OUT / f"agui-thread-{turns}-{seed}.json"
    if not path.exists():
        path.write_text(json.dumps(to_agui(workload.load_msgs(jsonl, turns))))
    return str(path)


def run(sizes: list[int], systems: list[str], mode: dict[str, Any], seed: int, root: str) -> Any:
    """Results by system and size; each child's store is made under ``root``."""
    thread = _thread_file(max(sizes) // TURN, seed)
    results: dict[str, dict[int, Any]] = {}
    for name in systems:
        spec_of = get(SYSTEMS[name][0])
        for n in sizes:
            if spec_of.interpreter == "peers" and not PEERS_PYTHON.exists():
                results.setdefault(name, {})[n] = {"ok": False, "error": "no bench/.venv-peers"}
                continue
            sys.stderr.write(f"{name} @ {n:,} messages ... ")
            sys.stderr.flush()
            started = time.perf_counter()
            workdir = tempfile.mkdtemp(prefix=f"{name}-{n}-", dir=root)
            child = {"system": name, "messages": n, "runs": mode["runs"], "thread": thread}
            child["workdir"] = workdir
            args = ["bench.agui", "--child", json.dumps(child)]
            stdout, stderr, _, timed_out = run_child(spec_of, args, mode["timeout"])
            lines = [json.loads(x) for x in stdout.splitlines() if x.startswith("{")]
            rec = lines[-1] if lines else {"ok": False, "error": "no result"}
            if timed_out:
                rec = {"ok": False, "error": f"killed after {mode['timeout']} s"}
            if "error" in rec and stderr:
                sys.stderr.write(stderr[-2000:])
            results.setdefault(name, {})[n] = rec
            status = "ok" if rec.get("ok") else rec.get("error", "wrong result")
            sys.stderr.write(f"{status} in {time.perf_counter() - started:.1f} s\n")
    return results


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    ms = seconds * 1000
    return f"{ms:,.0f}" if ms >= 100 else f"{ms:.1f}" if ms >= 10 else f"{ms:.2f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "—" if a is None or b is None or b == 0 else f"{a / b:.2f}x"


def section(results: Any, sizes: list[int], meta: dict[str, Any]) -> str:
    def fig(name: str, n: int, key: str) -> float | None:
        rec = results.get(name, {}).get(n, {})
        return rec.get(key) if rec.get("ok") else None

    head = "| system | " + " | ".join(f"{n:,} messages" for n in sizes)
    head += f" | {sizes[-1]:,} vs {sizes[0]:,} |\n|---|" + "---:|" * (len(sizes) + 1) + "\n"
    parts = [
        "## AG-UI runs\n\n",
        "What one AG-UI run costs the server as the thread grows, in process, with a model that "
        "answers at once: the client resends the thread and one new message, the server answers "
        '"ok". See `bench/agui.py` for what each system does with the thread; agentledger '
        "also commits the run to SQLite and closes with the thread's snapshot, pydantic-ai "
        "(client history) stores nothing, pydantic-ai (server history) saves in memory. "
        f"Median of {meta['runs']} runs after one untimed; the body a client sends is "
        + ", ".join(
            f"{rec['body_bytes'] / 2**20:.1f} MiB at {n:,}"
            for n in sizes
            if (rec := results.get("agentledger", {}).get(n, {})).get("body_bytes")
        )
        + ".\n\n",
    ]
    for key, title in (("cpu", "CPU time per run, ms"), ("wall", "wall time per run, ms")):
        parts.append(f"{title} (in brackets: against agentledger at the same size):\n\n{head}")
        for name, (_, label) in SYSTEMS.items():
            if name not in results:
                continue
            cells = []
            for n in sizes:
                value, ours = fig(name, n, key), fig("agentledger", n, key)
                rel = "" if name == "agentledger" or value is None else f" ({_ratio(value, ours)})"
                err = results[name].get(n, {}).get("error")
                cells.append(f"{_ms(value)}{rel}" if value is not None else f"failed: {err}")
            growth = _ratio(fig(name, sizes[-1], key), fig(name, sizes[0], key))
            parts.append(f"| {label} | " + " | ".join(cells) + f" | {growth} |\n")
        parts.append("\n")
    m = meta["machine"]
    versions = "; ".join(
        f"{SYSTEMS[s][1]}: " + ", ".join(f"{k} {v}" for k, v in rec["versions"].items())
        for s, by_size in results.items()
        if (rec := by_size.get(sizes[0], {})).get("versions")
    )
    parts.append(
        f"Generated by `python -m bench.agui` on {meta['date']}. Machine: {m['cpu']}, "
        f"{m['cores']} cores, {m['memory']}; agentledger at commit {m['commit']}; load average "
        f"{meta['load'][0]:.2f} at start, {meta['load'][1]:.2f} at end. Versions: {versions}.\n"
    )
    return "".join(parts)


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.agui",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    choices.add_options(p, quick="400 and 4,000 messages, fewer runs", systems=list(SYSTEMS))
    p.add_argument("--child", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    args = _parse(argv)
    if args.child:
        return _child(json.loads(args.child))
    from bench import facts
    from bench.shifts import replace_section

    mode = QUICK if args.quick else FULL
    sizes = choices.sizes(args.sizes, mode["sizes"], minimum=8)
    systems = choices.systems(args.systems, list(SYSTEMS))
    OUT.mkdir(parents=True, exist_ok=True)
    root = tempfile.mkdtemp(prefix="agentledger-agui-", dir=str(OUT))
    load_start = os.getloadavg()[0]
    try:
        machine = facts.machine(root, ROOT)
        results = run(sizes, systems, mode, args.seed, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    meta = {
        "machine": machine,
        "runs": mode["runs"],
        "load": (load_start, os.getloadavg()[0]),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }
    out = Path(args.out)
    replace_section(out, section(results, sizes, meta), heading="## AG-UI runs")
    sys.stderr.write(f"wrote {out}\n")
    return 0 if all(r.get("ok") for by in results.values() for r in by.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
