"""``python -m bench.shifts``: the cost of saving a shifted list, against the peers' ways to say it.

python -m bench.shifts            # 400, 4,000 and 12,000 messages; writes the "## Shifts" section
python -m bench.shifts --quick    # 400 and 4,000 messages, 3 saves per scenario
python -m bench.shifts --sizes 40 --systems agentledger-sqlite,json-file --out /tmp/b.md

Four shifts, each on a fresh store seeded (untimed, in one bulk write) with the first ``n``
messages of the benchmark workload (``bench.workload``: turns of user, tool call, ~4,000-character
tool result, answer):

- ``slide``: a sliding window; the oldest message is dropped and the next workload message
  appended, so the session keeps its length (repeated: median of up to 7 saves);
- ``front``: a new user message inserted before the first (repeated);
- ``delete``: the middle message deleted (repeated);
- ``summary``: every message but the last 8 replaced by one summary message (a ~500-character
  assistant message of the workload stands in for it). Once per size, on its fresh session.

Each system persists the shifted list the way its users would (``API``): agentledger saves the
list, and its ``LedgerSession`` (an Agents SDK session) takes it through ``set_items``; the JSON
file is rewritten; the Agents SDK's ``SQLiteSession`` has no call but
``clear_session`` + ``add_items``; hermes has ``replace_messages``; LangGraph gets the edit as
``RemoveMessage`` updates through ``graph.update_state``; the Agents SDK's ``SQLAlchemySession``
and LangGraph's ``PostgresSaver`` do the same on the Postgres server agentledger's Postgres store
uses, so that store is also judged against peers with its durability. After the last save, a
fresh object reloads the session and its ids are checked against the shifted list.

Bytes, per save: agentledger's ``SaveReport.bytes_written`` (message bodies it wrote); the bytes
the process handed to ``write()`` (``/proc/self/io`` ``wchar``: where a whole-file rewrite shows);
PostgreSQL's server WAL growth (``pg_current_wal_insert_lsn``); and the growth of the system's
files, measured on one more shift after the timed ones (SQLite: database + WAL, the WAL first
checkpointed and truncated by another connection, untimed, so the growth is the WAL frames the
save appended; a summary gets a second fresh session for it). Timed saves run without that
checkpoint: it makes SQLite drop the writer's page cache, which would slow the next save.

Each system runs in its own process per size (the peers under ``bench/.venv-peers``, like
``python -m bench``). Standard library only at import: the same module is the child.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shlex
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import choices
from bench.measure import measure
from bench.runner import PEERS_PYTHON, run_child
from bench.systems import get
from bench.systems.base import emit
from bench.workload import TURN

__all__ = ["SCENARIOS", "SYSTEMS", "main", "render", "targets"]

SCENARIOS = ("slide", "front", "delete", "summary")
TITLES = {
    "slide": "Sliding window (drop the oldest message, append one)",
    "front": "Insert at the front",
    "delete": "Delete in the middle",
    "summary": "Prefix → summary (all but the last 8 messages replaced by one)",
}
KEEP = 8  # messages a summary keeps
EXTRA_TURNS = 8  # workload turns past the session: the appended, inserted and summary messages
SESSION = "bench"
LANGGRAPH_THREAD = {"configurable": {"thread_id": "bench"}}

#: The systems run, in report order: every persistent agentledger store, then each peer that can
#: express a shift (memory stores and append-only APIs with no way to drop a message are left out).
SYSTEMS = (
    "agentledger-sqlite",
    "agentledger-sqlite-full",
    "agentledger-jsonl",
    "agentledger-postgres",
    "openai-agents-ledger",
    "json-file",
    "openai-agents",
    "hermes",
    "langgraph",
    "langgraph-delta",
    "openai-agents-postgres",
    "langgraph-postgres",
)
API = {
    "agentledger": "`ledger.save(session, shifted)` (the planner aligns the lists by digest)",
    "openai-agents-ledger": "`await session.set_items(shifted)` (an item equal to one the "
    "session holds keeps its row, ids or not)",
    "json-file": "`json.dumps` of the shifted list to a temp file + `os.replace`",
    "openai-agents": "`await session.clear_session()`; `await session.add_items(shifted)`",
    "hermes": "`SessionDB.replace_messages(session, shifted)` (deletes every row, inserts all)",
    "langgraph": "`graph.update_state(config, {'messages': ops})`: slide "
    "`[RemoveMessage(oldest.id), new]`, delete `[RemoveMessage(id)]`, front and summary "
    "`[RemoveMessage(REMOVE_ALL_MESSAGES), *shifted]` (`add_messages` only appends, so a new "
    "first message needs the list rebuilt)",
}
TARGET_X = 100.0
TARGET_BYTES = 64 * 1024
QUICK = {"sizes": [400, 4000], "reps": 3, "budget": 2.0, "timeout": 120.0}
FULL = {"sizes": [400, 4000, 12000], "reps": 7, "budget": 5.0, "timeout": 900.0}

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"


# -- the child: one system, one size -----------------------------------------------------------
def _api_key(name: str) -> str:
    """The API a system persists a shift with: the same on SQLite and on Postgres."""
    if name.startswith("agentledger"):
        return "agentledger"
    return name.removesuffix("-delta").removesuffix("-postgres")


def _ours(name: str) -> bool:
    """Whether a system is agentledger's: a store, or ``LedgerSession`` on one."""
    return name.startswith("agentledger") or name == "openai-agents-ledger"


def _on_postgres(name: str) -> bool:
    return name.endswith("-postgres")


def _shifted(kind: str, live: list[Any], extra: list[Any], i: int) -> list[Any]:
    """``live`` after the ``i``-th shift of ``kind`` (``extra``: workload messages past it)."""
    if kind == "slide":
        return [*live[1:], extra[i]]
    if kind == "front":
        return [extra[TURN * i], *live]  # a user message
    if kind == "delete":
        middle = len(live) // 2
        return live[:middle] + live[middle + 1 :]
    return [extra[TURN - 1], *live[-KEEP:]]  # the first extra turn's answer stands in


def _langgraph_ops(kind: str, old: list[Any], new: list[Any]) -> list[Any]:
    from langchain_core.messages import RemoveMessage
    from langgraph.graph.message import REMOVE_ALL_MESSAGES

    if kind == "slide":
        return [RemoveMessage(id=old[0].id), new[-1]]
    if kind == "delete":
        kept = {m.id for m in new}
        return [RemoveMessage(id=m.id) for m in old if m.id not in kept]
    return [RemoveMessage(id=REMOVE_ALL_MESSAGES), *new]


def _persist(system: Any, handle: Any, kind: str, old: list[Any], new: list[Any]) -> int | None:
    """Persist ``new`` (``old`` shifted by ``kind``) with the system's own API; logical bytes if
    the system reports them."""
    key = _api_key(system.name)
    if key == "agentledger":
        return handle.save(SESSION, new).bytes_written
    if key == "openai-agents-ledger":
        system._run(handle.set_items(new))
    elif key == "json-file":
        system._write(handle, new)
    elif key == "openai-agents":

        async def clear_and_add() -> None:
            await handle.clear_session()
            await handle.add_items(new)

        system._run(clear_and_add())
    elif key == "hermes":
        handle.replace_messages(SESSION, new)
    elif key == "langgraph":
        handle[0].update_state(LANGGRAPH_THREAD, {"messages": _langgraph_ops(kind, old, new)})
    else:
        raise ValueError(f"no shift for {system.name}")
    return None


def _checkpoint(workdir: str) -> None:
    """Checkpoint and truncate every SQLite WAL under ``workdir`` (untimed, before each save),
    so the WAL's size after a save is what that save wrote to it."""
    for wal in glob.glob(os.path.join(workdir, "**", "*-wal"), recursive=True):
        conn = sqlite3.connect(wal.removesuffix("-wal"))
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            conn.close()


def _save(system: Any, handle: Any, kind: str, old: list[Any], new: list[Any], probe: bool) -> Any:
    """One measured save. ``probe``: checkpoint and truncate the WALs first (untimed) and record
    the files' growth; a checkpoint by another connection makes SQLite drop its page cache, so
    timed saves run without one."""
    if probe:
        _checkpoint(system.workdir)
    size_before = system.storage_bytes() if probe else None
    counters_before = system.counters()
    op = measure(lambda: _persist(system, handle, kind, old, new))
    counters_after = system.counters()
    row = {"seconds": op.seconds, "wchar": op.io.wchar, "logical": op.value}
    row.update({k: counters_after[k] - v for k, v in counters_before.items()})
    if size_before is not None:
        row["growth"] = system.storage_bytes() - size_before
    return row


def _session(
    system: Any,
    kind: str,
    base: list[Any],
    extra: list[Any],
    saves: int,
    budget: float,
    probe: bool,
) -> tuple[list[dict[str, Any]], dict[str, Any] | None, bool]:
    """On a fresh store seeded with ``base``: up to ``saves`` timed shifts (no more once they took
    ``budget`` seconds), then, if ``probe``, one more measuring the files' growth; the timed rows,
    the probe's row and whether a fresh object reloads exactly the shifted list."""
    system.fresh_storage()
    handle = system.open()
    system.bulk_seed(handle, list(base))
    live = list(base)
    rows: list[dict[str, Any]] = []
    for i in range(saves):
        if rows and sum(r["seconds"] for r in rows) > budget:
            break
        new = _shifted(kind, live, extra, i)
        rows.append(_save(system, handle, kind, live, new, probe=False))
        live = new
    probe_row = None
    if probe:
        new = _shifted(kind, live, extra, len(rows))
        probe_row = _save(system, handle, kind, live, new, probe=True)
        live = new
    system.close(handle)
    handle = system.open()
    loaded = system.load(handle)
    system.close(handle)
    return rows, probe_row, system.ids_of(loaded) == system.ids_of(live)


def _scenario(
    system: Any, kind: str, base: list[Any], extra: list[Any], reps: int, budget: float
) -> dict[str, Any]:
    if kind == "summary":
        rows, _, ok = _session(system, kind, base, extra, 1, budget, probe=False)
        _, probe, probe_ok = _session(system, kind, base, extra, 0, budget, probe=True)
        ok = ok and probe_ok
    else:
        rows, probe, ok = _session(system, kind, base, extra, reps, budget, probe=True)
    seconds = [r["seconds"] for r in rows]
    out: dict[str, Any] = {
        "scenario": kind,
        "samples": len(rows),
        "seconds": statistics.median(seconds),
        "seconds_mean": statistics.fmean(seconds),
        "seconds_max": max(seconds),
        "ok": ok,
    }
    for key in rows[0]:
        if key != "seconds":
            out[key] = (
                statistics.median(r[key] for r in rows if r[key] is not None)
                if any(r[key] is not None for r in rows)
                else None
            )
    out["growth"] = probe["growth"] if probe else None
    out["probe_wchar"] = probe["wchar"] if probe else None
    return out


def _child(spec: dict[str, Any]) -> int:
    """Run every scenario of one system at one size, printing a JSON line for each."""
    import importlib

    system_spec = get(spec["system"])
    turns = spec["messages"] // TURN
    try:
        module = importlib.import_module(f"bench.systems.{system_spec.module}")
        system = getattr(module, system_spec.cls)(
            workdir=spec["workdir"],
            turns=turns + EXTRA_TURNS,
            seed=spec["seed"],
            workload=spec["workload"],
            workload_msgs=spec["workload_msgs"],
            **system_spec.kwargs,
        )
    except Exception as exc:
        why = f"{type(exc).__name__}: {exc}".strip().splitlines()[0][:300]
        emit({"scenario": "unavailable", "why": why})
        return 0
    try:
        items, _ids = system.prepare()
        base, extra = items[: TURN * turns], items[TURN * turns :]
        emit({"scenario": "setup", "versions": system.versions(), "durability": system.durability})
        for kind in SCENARIOS:
            try:
                emit(_scenario(system, kind, base, extra, spec["reps"], spec["budget"]))
            except Exception as exc:
                traceback.print_exc()
                why = f"{type(exc).__name__}: {exc}".strip().splitlines()[0][:300]
                emit({"scenario": kind, "error": why})
    finally:
        system.cleanup()
    return 0


# -- the parent: every system and size, then the report ------------------------------------------
def _run_one(name: str, n: int, opts: dict[str, Any], log: Any) -> dict[str, Any]:
    """Results of one system at ``n`` messages: scenario records by name, or why there are none."""
    spec = get(name)
    peers = spec.interpreter == "peers"
    if peers and not PEERS_PYTHON.exists():
        return {"status": "not installed", "why": "bench/.venv-peers missing: --install-peers"}
    workdir = tempfile.mkdtemp(prefix=f"{name}-{n}-", dir=opts["workdir"])
    child = {**opts["child"], "system": name, "messages": n, "workdir": workdir}
    stdout, stderr, returncode, timed_out = run_child(
        spec, ["bench.shifts", "--child", json.dumps(child)], opts["timeout"]
    )
    status = "timeout" if timed_out else "ok"
    out: dict[str, Any] = {"status": status, "scenarios": {}}
    for line in stdout.splitlines():
        if line.startswith("{"):
            rec = json.loads(line)
            kind = rec.pop("scenario")
            if kind == "unavailable":
                out.update(status="unavailable", why=rec["why"])
            elif kind == "setup":
                out.update(rec)
            else:
                out["scenarios"][kind] = rec
    if status == "timeout":
        out["why"] = f"killed after {opts['timeout']:.0f} s"
    if returncode not in (0, None) and status == "ok" and stderr:
        log.write(f"\n--- {name} @ {n}: stderr ---\n{stderr[-3000:]}\n")
    for kind, rec in out["scenarios"].items():
        if "error" in rec:
            log.write(f"\n  {kind}: {rec['error']}\n")
    return out


def run(sizes: list[int], systems: list[str], opts: dict[str, Any], log: Any = sys.stderr) -> Any:
    """Results by system, then by size (messages)."""
    results: dict[str, dict[int, dict[str, Any]]] = {}
    for name in systems:
        blocked = None
        for n in sizes:
            if blocked:
                results.setdefault(name, {})[n] = {"status": "skipped", "why": blocked}
                continue
            log.write(f"{name} @ {n:,} messages ... ")
            log.flush()
            started = time.perf_counter()
            res = results.setdefault(name, {})[n] = _run_one(name, n, opts, log)
            done = ", ".join(res.get("scenarios", {})) or res.get("why", "nothing")
            log.write(f"{res['status']} in {time.perf_counter() - started:.1f} s ({done})\n")
            if res["status"] in ("unavailable", "not installed"):
                blocked = res["why"]
            elif res["status"] == "timeout":
                blocked = f"timed out at {n:,} messages"
    return results


def _scen(results: Any, name: str, n: int, kind: str) -> dict[str, Any] | None:
    rec = results.get(name, {}).get(n, {}).get("scenarios", {}).get(kind)
    return rec if rec and "error" not in rec else None


def _written(rec: dict[str, Any]) -> int:
    """The bytes a save is judged by: the largest of what it reported, what its files grew by,
    what the server's WAL grew by and what it handed to ``write()``."""
    keys = ("logical", "growth", "server_wal_bytes", "wchar")
    return max(int(rec.get(k) or 0) for k in keys)


def targets(results: Any, n: int) -> list[dict[str, Any]]:
    """Per scenario and agentledger store at ``n`` messages: the ratio to the cheapest peer and
    the bytes written, each judged against its target (None where a figure is missing). A store
    on Postgres is judged twice: against every peer (an un-fsynced local file included) and,
    like for like, against the peers writing to the same server."""
    out = []
    for kind in SCENARIOS:
        peers = [
            (rec["seconds"], name)
            for name in results
            if not _ours(name) and (rec := _scen(results, name, n, kind)) and rec["ok"]
        ]
        same_server = [p for p in peers if _on_postgres(p[1])]
        for name in (s for s in results if _ours(s)):
            rec = _scen(results, name, n, kind)
            out.append(_target(kind, name, rec, min(peers) if peers else None, "every peer"))
            if _on_postgres(name) and same_server:
                out.append(_target(kind, name, rec, min(same_server), "on the same server"))
    return out


def _target(
    kind: str, name: str, rec: dict[str, Any] | None, cheapest: Any, among: str
) -> dict[str, Any]:
    x = cheapest[0] / rec["seconds"] if rec and cheapest else None
    written = _written(rec) if rec else None
    return {
        "scenario": kind,
        "system": name,
        "among": among,
        "seconds": rec["seconds"] if rec else None,
        "ok": rec["ok"] if rec else None,
        "peer": cheapest[1] if cheapest else None,
        "peer_seconds": cheapest[0] if cheapest else None,
        "x": x,
        "x_met": None if x is None else x >= TARGET_X and rec["ok"],
        "written": written,
        "bytes_met": None if written is None else written <= TARGET_BYTES and rec["ok"],
    }


# -- the markdown ------------------------------------------------------------------------------
def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    ms = seconds * 1e3
    return f"{ms:,.0f}" if ms >= 100 else f"{ms:.2f}" if ms < 10 else f"{ms:.1f}"


def _bytes(n: float | None) -> str:
    return "—" if n is None else f"{int(n):,}"


def _verdict(flag: bool | None) -> str:
    return "—" if flag is None else "**met**" if flag else "**missed**"


def _label(name: str) -> str:
    return get(name).label


def _cell(results: Any, name: str, n: int, kind: str) -> str:
    res = results.get(name, {}).get(n)
    if res is None:
        return "—"
    rec = res.get("scenarios", {}).get(kind)
    if rec is None:
        return res["status"] if res["status"] != "ok" else "—"
    if "error" in rec:
        return "error¹"
    return _ms(rec["seconds"]) + ("" if rec["ok"] else " (ids wrong)")


def scenario_table(results: Any, sizes: list[int], kind: str) -> str:
    n = max(sizes)
    head = " | ".join(f"{s:,} msgs (ms)" for s in sizes)
    lines = [
        f"| system | {head} | samples | SaveReport bytes | file growth | `write()` bytes |",
        "|---|" + "---:|" * (len(sizes) + 4),
    ]
    for name in results:
        rec = _scen(results, name, n, kind) or {}
        growth = rec.get("server_wal_bytes", rec.get("growth"))
        cells = " | ".join(_cell(results, name, s, kind) for s in sizes)
        lines.append(
            f"| {_label(name)} | {cells} | {rec.get('samples', '—')} | "
            f"{_bytes(rec.get('logical'))} | {_bytes(growth)} | {_bytes(rec.get('wchar'))} |"
        )
    return "\n".join(lines)


def targets_table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| shift | agentledger store | ms per save | reload exact | peers | cheapest peer | its ms "
        "| x cheaper | ≥ 100x | bytes written | ≤ 64 KiB |",
        "|---|---|---:|---|---|---|---:|---:|---|---:|---|",
    ]
    for r in rows:
        peer = _label(r["peer"]) if r["peer"] else "—"
        x = "—" if r["x"] is None else f"{r['x']:,.0f}x"
        lines.append(
            f"| {r['scenario']} | {_label(r['system'])} | {_ms(r['seconds'])} | "
            f"{'—' if r['ok'] is None else 'yes' if r['ok'] else 'no'} | {r['among']} | {peer} | "
            f"{_ms(r['peer_seconds'])} | {x} | {_verdict(r['x_met'])} | {_bytes(r['written'])} "
            f"| {_verdict(r['bytes_met'])} |"
        )
    return "\n".join(lines)


def _errors(results: Any) -> list[str]:
    out = []
    for name, by_size in results.items():
        for n, res in by_size.items():
            for kind, rec in res.get("scenarios", {}).items():
                if "error" in rec:
                    out.append(f"{_label(name)}, {kind} at {n:,}: `{rec['error']}`")
            if res["status"] not in ("ok",) and res.get("why"):
                out.append(f"{_label(name)} at {n:,}: {res['status']} ({res['why']})")
    return out


def render(meta: dict[str, Any], results: Any) -> str:
    """The "## Shifts" section of docs/benchmarks.md."""
    sizes, m = meta["sizes"], meta["machine"]
    n = max(sizes)
    parts = [
        "## Shifts (issue 17)\n\n",
        f"Generated by `{meta['command']}` on {meta['date']} ({meta['mode']} mode, "
        f"{meta['wall_seconds']:.0f} s; not regenerated by `python -m bench`). Each system and "
        "size ran in its own process, on a fresh store per shift seeded untimed with the "
        "workload's first messages (the workload of the sections above: turns of user, tool "
        "call, ~4,000-character tool result, answer). *slide* drops the oldest message and "
        "appends the next one; *front* inserts a new user message before the first; *delete* "
        "removes the middle message; each is repeated and the median of up to "
        f"{meta['reps']} saves is shown (fewer once a shift's saves passed {meta['budget']:.0f} "
        f"s). *summary* replaces all but the last {KEEP} messages by one ~500-character message, "
        "once per size on its fresh session. After the last save a fresh object reloads the "
        "session and checks every id against the shifted list.\n\n"
        "Bytes are per save at the largest size: *SaveReport bytes* is agentledger's "
        "`bytes_written` (the message bodies it wrote, median of the timed saves); *`write()` "
        "bytes* is what the process handed to `write()` (`/proc/self/io` `wchar`, median of the "
        "timed saves), where a whole-file rewrite "
        "shows up; *file growth* is measured on one more shift after the timed ones (a second "
        "fresh session for the summary): SQLite's database + WAL after the WAL was checkpointed "
        "and truncated by another connection (untimed), so the growth is the WAL frames that "
        "save appended; PostgreSQL's server WAL (`pg_current_wal_insert_lsn`, median of the "
        "timed saves); JSONL's log; a rewritten JSON file by its change in size. Timed saves run "
        "without that checkpoint, which makes SQLite drop the writer's page cache. "
        "The first save after the seed is one of the timed saves (for the summary, the only one). "
        "Durability as shipped: agentledger's SQLite at `synchronous=NORMAL` and at "
        "`FULL` (both rows), its JSONL fsyncs every commit, PostgreSQL at server defaults; the "
        "SQLiteSession, hermes and LangGraph keep SQLite's default `FULL`; the JSON file is "
        "not fsynced.\n\n",
        "Not run: `memory://` and pydantic-ai's `InMemoryConversationStore` (nothing on disk), "
        "and Google ADK's `DatabaseSessionService`, whose sessions only append events: a shift "
        "would be `delete_session`, `create_session` and every event appended again, which is "
        "its *edit* above: tens of seconds per save at 12,000 messages.\n\n",
        "| system | how it persists a shift |\n|---|---|\n",
    ]
    parts += [f"| {_label(s)} | {API[_api_key(s)]} |\n" for s in results]
    for kind in SCENARIOS:
        parts += [f"\n### {TITLES[kind]}\n\n", scenario_table(results, sizes, kind), "\n"]
    errors = _errors(results)
    if errors:
        parts.append("\n¹ Not measured:\n\n" + "".join(f"- {e}\n" for e in errors))
    if any(
        rec.get("ok") is False
        for by_size in results.values()
        for res in by_size.values()
        for rec in res.get("scenarios", {}).values()
    ):
        parts.append(
            "\n*(ids wrong)*: the saves went through, but a fresh object's reload did not "
            "return the shifted list's ids in order: that store saved something else.\n"
        )
    parts.append(
        "\nA summary leaves 9 messages, so every peer's way to express it writes only those "
        "9 (the JSON file, the SQLiteSession and hermes rewrite a 9-message list; LangGraph "
        "checkpoints it) after reading or deleting the old ones; agentledger keeps the 8 rows "
        "and writes the summary. PostgreSQL's WAL is the server's, shared with whatever else "
        "ran on it during the save.\n"
    )
    rows = targets(results, n)
    every = [r for r in rows if r["among"] == "every peer"]
    same = [r for r in rows if r["among"] != "every peer"]
    met = sum(1 for r in every if r["x_met"] and r["bytes_met"])
    same_met = sum(1 for r in same if r["x_met"] and r["bytes_met"])
    parts += [
        f"\n### Targets (issue 17), at {n:,} messages\n\n"
        f"Each shift at least {TARGET_X:.0f}x cheaper than the cheapest peer's way to express "
        "it (peers: every non-agentledger system above whose reload kept every id) and writing "
        f"at most 64 KiB (judged on the largest of the three byte figures). Against every peer, "
        f"{met} of {len(every)} rows meet both. The cheapest peer is the JSON file, which "
        "neither fsyncs nor shares a session between hosts; a store on Postgres is therefore "
        "also judged like for like, against the peers on the same server with the same "
        f"durability: {same_met} of {len(same)} rows meet both.\n\n",
        targets_table(rows),
        "\n",
    ]
    if meta.get("plot"):
        parts.append(
            f"\n![log-log plot of ms per save against session length, one panel per shift]"
            f"({meta['plot']})\n\nThe plot leaves out saves that failed or whose reload came "
            "back wrong.\n"
        )
    elif meta.get("plot_note"):
        parts.append(f"\n({meta['plot_note']})\n")
    fsync = f"{m['fsync_ms']:.2f} ms" if m.get("fsync_ms") is not None else "not measured"
    versions = "; ".join(
        f"{_label(s)}: " + ", ".join(f"{k} {v}" for k, v in res.get("versions", {}).items())
        for s, by_size in results.items()
        if (res := by_size.get(n, {})).get("versions")
    )
    la = meta["load"]
    parts.append(
        f"\nMachine: {m['cpu']}, {m['cores']} cores, {m['memory']}, kernel {m['kernel']}, "
        f"stores on {m['filesystem']}, a 4 KiB write + fsync {fsync}; agentledger at commit "
        f"{m['commit']}; load average {la[0]:.2f} at start, {la[1]:.2f} at end (shared machine: "
        f"absolute times carry that noise). Versions: {versions}.\n"
    )
    return "".join(parts)


def replace_section(doc: Path, section: str, heading: str = "## Shifts") -> None:
    """Put ``section`` in ``doc`` in place of its section under ``heading``, or at its end."""
    text = doc.read_text() if doc.exists() else "# Benchmarks\n"
    start = text.find("\n" + heading)
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        end = text.find("\n## ", start + 1)
        text = text[: start + 1] + section + ("\n" + text[end + 1 :] if end > 0 else "")
    doc.write_text(text)


def plot(results: Any, sizes: list[int], out_png: Path) -> str:
    """Draw one log-log panel per shift with the peers' matplotlib; say what went wrong, if so."""
    panels = []
    for kind in SCENARIOS:
        series = {}
        for name in results:
            points = [  # a save whose reload came back wrong is not drawn
                [n, rec["seconds"]]
                for n in sizes
                if (rec := _scen(results, name, n, kind)) and rec["ok"]
            ]
            series[_label(name)] = points  # empty too: a system keeps its colour in every panel
        panels.append({"title": TITLES[kind], "series": series})
    if not PEERS_PYTHON.exists():
        return "no plot: bench/.venv-peers (with matplotlib) is missing"
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(
            {
                "panels": panels,
                "out": str(out_png),
                "title": "Persisting one shift vs session length",
                "ylabel": "ms per save",
            },
            fh,
        )
    proc = subprocess.run(
        [str(PEERS_PYTHON), "-m", "bench.plot", fh.name], cwd=ROOT, capture_output=True, text=True
    )
    Path(fh.name).unlink(missing_ok=True)
    if proc.returncode != 0:
        return f"no plot: {(proc.stderr.strip().splitlines() or ['?'])[-1]}"
    return ""


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.shifts",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    choices.add_options(p, quick="400 and 4,000 messages, 3 saves each", systems=list(SYSTEMS))
    p.add_argument(
        "--report-only",
        action="store_true",
        help="rewrite the section and plot from bench/out/shifts.json (the last run)",
    )
    p.add_argument(
        "--results", default=str(OUT / "shifts.json"), help="where the raw results are kept"
    )
    p.add_argument("--child", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    args = _parse(argv)
    if args.child:
        return _child(json.loads(args.child))
    if args.report_only:
        return _report(Path(args.out), **json.loads(Path(args.results).read_text()))
    from bench import facts, workload

    started = time.perf_counter()
    mode = QUICK if args.quick else FULL
    sizes = choices.sizes(args.sizes, mode["sizes"], minimum=16)
    systems = choices.systems(args.systems, list(SYSTEMS))
    out_dir = OUT
    jsonl, dicts = workload.ensure(str(out_dir), max(sizes) // TURN + EXTRA_TURNS, args.seed)
    workdir = tempfile.mkdtemp(prefix="agentledger-shifts-", dir=str(out_dir))
    load_start = os.getloadavg()[0]
    machine = facts.machine(workdir, ROOT)
    opts = {
        "workdir": workdir,
        "timeout": mode["timeout"],
        "child": {
            "seed": args.seed,
            "workload": dicts,
            "workload_msgs": jsonl,
            "reps": mode["reps"],
            "budget": mode["budget"],
        },
    }
    try:
        results = run(sizes, systems, opts)
    finally:
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)
    meta = {
        "command": "python -m bench.shifts" + (" " + shlex.join(argv) if argv else ""),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "mode": "quick" if args.quick else "full",
        "sizes": sizes,
        "reps": mode["reps"],
        "budget": mode["budget"],
        "machine": machine,
        "load": [load_start, os.getloadavg()[0]],
        "wall_seconds": time.perf_counter() - started,
    }
    Path(args.results).write_text(
        json.dumps({"meta": meta, "results": results}, indent=1, default=str)
    )
    return _report(Path(args.out), meta, results)


def _report(out: Path, meta: dict[str, Any], results: Any) -> int:
    """Draw the plot next to ``out``, put the section in ``out``, print the targets."""
    results = {name: {int(n): r for n, r in by.items()} for name, by in results.items()}
    png = out.with_name(out.stem + "-shifts.png")
    out.parent.mkdir(parents=True, exist_ok=True)
    meta["plot_note"] = plot(results, meta["sizes"], png)
    meta["plot"] = None if meta["plot_note"] else png.name
    replace_section(out, render(meta, results))
    print(targets_table(targets(results, max(meta["sizes"]))))
    sys.stderr.write(f"wrote {out} ({meta['plot'] or meta['plot_note']})\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
