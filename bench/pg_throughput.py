"""Appends per second with 8 processes on one PostgreSQL server, and what a lease costs.

``run(...)`` is called by ``python -m bench`` for the Postgres systems (agentledger's and the
peers'); ``python -m bench.pg_throughput`` runs it alone and prints the figures.

For each system and each layout (8 processes on 8 sessions, one each; 8 processes on 1 session)
it starts 8 processes under the system's interpreter, all on one schema. Each builds the system,
connects, appends one turn (untimed: imports and first queries are paid before the clock),
reports ready and waits; the parent then lets them all go at once. Each appends ``turns`` turns
(4 messages a turn, its own ids), persisting after each one the way the system's users do
(``System.concurrent_append``); the figure is all the turns appended divided by the time from
the go to the last process done. A last process counts the messages each session holds, so a
run that lost turns (concurrent writers overwriting each other) says so.

On a shared session agentledger takes the session's run lease, reads the list, appends and
saves (the agent runtime's way: one run per session at a time); LangGraph has no lock for a
thread, and the Agents SDK's ``add_items`` locks the session row for its insert.

The lease figures (agentledger only) come from one process, uncontended: taking and giving
back a session's lease (``Ledger.lease``: an advisory lock on the store's lease connection)
and the connection pool a store opens by default.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any

from bench.systems import SystemSpec, get

__all__ = ["LAYOUTS", "POSTGRES_SYSTEMS", "PROCESSES", "run"]

PROCESSES = 8
#: layout -> (sessions, how a process appends: see ``System.concurrent_append``)
LAYOUTS = {"8 sessions": (PROCESSES, "own"), "1 session": (1, "shared")}
#: a further layout for systems that have a run lease (agentledger)
LEASE_LAYOUT = {"1 session, run lease": (1, "lease")}
LEASES = 200  # uncontended lease take/give-back pairs measured
POSTGRES_SYSTEMS = ("agentledger-postgres", "openai-agents-postgres", "langgraph-postgres")


def _system(spec: dict[str, Any]) -> Any:
    import importlib

    system_spec = get(spec["system"])
    module = importlib.import_module(f"bench.systems.{system_spec.module}")
    return getattr(module, system_spec.cls)(
        workdir=spec["workdir"],
        turns=spec["turns"],
        seed=0,
        workload=spec["workload"],
        workload_msgs=spec["workload_msgs"],
        **system_spec.kwargs,
    )


def _child(spec: dict[str, Any]) -> None:
    """One appender (or the counter, or the lease probe), driven by the parent on stdin."""
    system = _system(spec)
    if spec["action"] == "count":
        counts = {}
        for session in spec["sessions"]:
            counts[session] = system.concurrent_count(system.concurrent_handle(session), session)
        print(json.dumps({"counts": counts}), flush=True)
        return
    if spec["action"] == "setup":  # schema and tables, once, before the appenders race
        system.concurrent_count(system.concurrent_handle("setup"), "setup")
        print(json.dumps({"ready": True}), flush=True)
        return
    if spec["action"] == "lease":
        print(json.dumps(_lease_costs(system)), flush=True)
        return
    items, _ = system.prepare()
    session, index, each = spec["session"], spec["index"], spec["each"]
    mode = spec["mode"]
    handle = system.concurrent_handle(session)
    mine = items[4 * each * index : 4 * each * (index + 1)]
    turns = [mine[k : k + 4] for k in range(0, len(mine), 4)]
    system.concurrent_append(handle, session, turns[0], mode)  # connect, untimed
    print(json.dumps({"ready": True}), flush=True)
    sys.stdin.readline()  # the go
    started = time.perf_counter()
    for turn in turns[1:]:
        system.concurrent_append(handle, session, turn, mode)
    print(json.dumps({"seconds": time.perf_counter() - started, "appends": len(turns) - 1}))


def _lease_costs(system: Any) -> dict[str, Any]:
    """Uncontended lease take and give-back on agentledger's store, and its pool's size."""
    ledger = system.concurrent_handle("lease")
    ledger.messages("lease")  # the pool connects
    first = time.perf_counter()
    with ledger.lease("lease-0"):  # opens the lease connection
        pass
    first = time.perf_counter() - first
    take, give = [], []
    for i in range(LEASES):
        cm = ledger.lease(f"lease-{i % 8}")
        a = time.perf_counter()
        cm.__enter__()
        b = time.perf_counter()
        cm.__exit__(None, None, None)
        c = time.perf_counter()
        take.append(b - a)
        give.append(c - b)
    pool = getattr(ledger.store, "_pool", None)
    return {
        "first_lease_seconds": first,
        "take_seconds": statistics.median(take),
        "give_back_seconds": statistics.median(give),
        "samples": LEASES,
        "pool_min": getattr(pool, "min_size", None),
        "pool_max": getattr(pool, "max_size", None),
        "lease_connections": 1,
    }


def _spawn(spec: SystemSpec, python: str, child: dict[str, Any], env: dict[str, str]) -> Any:
    return subprocess.Popen(
        [python, "-m", "bench.pg_throughput", "--child", json.dumps(child)],
        cwd=env["BENCH_ROOT"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _line(proc: Any, timeout: float) -> dict[str, Any]:
    """The next JSON line of ``proc`` (its stderr in the error if it ended instead)."""
    import select

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 1.0)
        if ready:
            line = proc.stdout.readline()
            if line.startswith("{"):
                return json.loads(line)
            if not line:
                break
    proc.kill()
    raise RuntimeError(f"a worker failed: {proc.stderr.read()[-1500:]}")


def _layout(
    spec: SystemSpec,
    python: str,
    base: dict[str, Any],
    env: dict[str, str],
    sessions: int,
    mode: str,
) -> dict[str, Any]:
    names = [f"tp-{mode}-{k}" for k in range(sessions)]
    procs = [
        _spawn(
            spec,
            python,
            {
                **base,
                "action": "append",
                "session": names[p % sessions],
                "index": p,
                "mode": mode,
            },
            env,
        )
        for p in range(PROCESSES)
    ]
    try:
        for proc in procs:
            _line(proc, 180)
        for proc in procs:  # all ready: go
            proc.stdin.write("go\n")
            proc.stdin.flush()
        reports = [_line(proc, 600) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    counter = _spawn(spec, python, {**base, "action": "count", "sessions": names}, env)
    counts = _line(counter, 180)["counts"]
    counter.wait()
    appends = sum(r["appends"] for r in reports)
    wall = max(r["seconds"] for r in reports)
    expected = 4 * base["each"] * PROCESSES
    return {
        "appends": appends,
        "seconds": wall,
        "appends_per_second": appends / wall,
        "messages_expected": expected,
        "messages_kept": sum(counts.values()),
    }


def run(
    names: list[str],
    workload: tuple[str, str],
    python_for: dict[str, str],
    *,
    each: int,
    root: str,
    log: Any = sys.stderr,
) -> dict[str, Any]:
    """Figures by system: each layout's appends/s (and, for agentledger, the lease costs).

    ``each`` is the turns one process appends (the first untimed); ``python_for`` maps a system
    name to its interpreter.
    """
    out: dict[str, Any] = {}
    for name in names:
        spec = get(name)
        schema = f"bench_tp_{uuid.uuid4().hex[:10]}"
        workdir = tempfile.mkdtemp(prefix=f"tp-{name}-")
        path = [root, os.path.join(root, "src")] if spec.interpreter == "main" else [root]
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(path),
            "AGENTLEDGER_BENCH_PG_SCHEMA": schema,
            "BENCH_ROOT": root,
        }
        base = {
            "system": name,
            "workdir": workdir,
            "turns": each * PROCESSES,
            "each": each,
            "workload": workload[1],
            "workload_msgs": workload[0],
        }
        python = python_for[name]
        res: dict[str, Any] = {}
        try:
            setup = _spawn(spec, python, {**base, "action": "setup"}, env)
            _line(setup, 180)
            setup.wait()
            layouts = dict(LAYOUTS)
            if spec.module == "agentledger_":
                layouts.update(LEASE_LAYOUT)
            for layout, (sessions, mode) in layouts.items():
                log.write(f"throughput {name}, {PROCESSES} processes on {layout} ... ")
                log.flush()
                try:
                    res[layout] = _layout(spec, python, base, env, sessions, mode)
                    log.write(f"{res[layout]['appends_per_second']:.0f} appends/s\n")
                except RuntimeError as exc:
                    res[layout] = {"error": str(exc)[-500:]}
                    log.write("failed\n")
            if spec.module == "agentledger_":
                probe = _spawn(spec, python, {**base, "action": "lease"}, env)
                try:
                    res["lease"] = _line(probe, 120)
                except RuntimeError as exc:
                    res["lease"] = {"error": str(exc)[-500:]}
                probe.wait()
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
            _drop(schema)
        out[name] = res
    return out


def _drop(prefix: str) -> None:
    import psycopg

    from bench.systems.pg import base_url

    with psycopg.connect(base_url(), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (prefix + "%",)
        ).fetchall()
        for (name,) in rows:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def main(argv: list[str]) -> int:
    if argv[:1] == ["--child"]:
        _child(json.loads(argv[1]))
        return 0
    import argparse

    from bench import runner, workload

    p = argparse.ArgumentParser(prog="python -m bench.pg_throughput", description=__doc__)
    p.add_argument("systems", nargs="*", default=list(POSTGRES_SYSTEMS))
    p.add_argument("--each", type=int, default=50, help="turns each process appends")
    args = p.parse_args(argv)
    jsonl, dicts = workload.ensure(str(runner.BENCH / "out"), args.each * PROCESSES, 0)
    pythons = {
        n: str(runner.PEERS_PYTHON) if get(n).interpreter == "peers" else sys.executable
        for n in args.systems
    }
    figures = run(args.systems, (jsonl, dicts), pythons, each=args.each, root=str(runner.ROOT))
    print(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
