"""``python -m tests.server.load``: runs per second and latency of ``agentledger serve`` under
concurrent AG-UI clients, on ``memory://`` (no persistence), SQLite (1 worker) and PostgreSQL
(4 workers), against the scripted OpenAI-compatible model (which answers at once), so the
difference is what persistence adds. Prints the table of docs/benchmarks.md ("AG-UI server").

Each client holds a conversation of three turns on a thread of its own, resending the whole
thread every turn as AG-UI clients do, then starts another. Bounded: ``--runs`` per client.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from tests.server.conftest import parse_frames, snapshot
from tests.server.model_server import ModelServer
from tests.store import pg


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(store: str, workers: int, model: ModelServer, log: Path) -> tuple[Any, str]:
    port = _port()
    env = {**os.environ, "OPENAI_BASE_URL": model.url, "OPENAI_API_KEY": "test"}
    command = [
        sys.executable, "-c", "from agentledger.cli import main; main()", "serve",
        "--model", "openai:load", "--store", store, "--port", str(port),
        "--workers", str(workers), "--lease-wait", "10",
    ]  # fmt: skip
    process = subprocess.Popen(command, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return process, url + "/"
        except httpx.HTTPError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"the server did not start; see {log}")


async def client(url: str, name: str, runs: int, latencies: list[float]) -> None:
    async with httpx.AsyncClient(timeout=60) as http:
        history: list[dict[str, Any]] = []
        for n in range(runs):
            if n % 3 == 0:
                history, thread = [], f"{name}-{n // 3}"
            history.append({"id": f"{thread}-u{n}", "role": "user", "content": f"turn {n}"})
            body = {"threadId": thread, "runId": f"r{n}", "messages": history}
            began = time.perf_counter()
            response = await http.post(url, json=body)
            latencies.append(time.perf_counter() - began)
            events = parse_frames(response.text)
            assert events[-1]["type"] == "RUN_FINISHED", events[-1]
            history = snapshot(events)


async def load(url: str, clients: int, runs: int) -> tuple[float, list[float]]:
    latencies: list[float] = []
    began = time.perf_counter()
    await asyncio.gather(*(client(url, f"c{i}", runs, latencies) for i in range(clients)))
    return len(latencies) / (time.perf_counter() - began), latencies


def measure(store: str, workers: int, clients: int, runs: int) -> dict[str, float]:
    with ModelServer() as model, tempfile.TemporaryDirectory() as tmp:
        process, url = start(store, workers, model, Path(tmp) / "serve.log")
        try:
            asyncio.run(load(url, 2, 3))  # warm up every worker's imports and connections
            rate, latencies = asyncio.run(load(url, clients, runs))
        finally:
            process.terminate()
            process.wait(timeout=30)
    cuts = statistics.quantiles(latencies, n=100)
    return {"runs/s": rate, "p50 ms": cuts[49] * 1000, "p99 ms": cuts[98] * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--runs", type=int, default=30, help="runs per client (3 per thread)")
    args = parser.parse_args()
    pg_url = pg.server_url()
    rows = []
    with tempfile.TemporaryDirectory() as tmp, pg.fresh_schema(pg_url) as schema:
        setups = [
            ("memory:// (no persistence)", "memory://", 1),
            ("SQLite", f"sqlite:///{tmp}/threads.db", 1),
            ("PostgreSQL", f"{pg_url}?schema={schema}", 4),
        ]
        for label, store, workers in setups:
            rows.append((label, workers, measure(store, workers, args.clients, args.runs)))
    base = rows[0][2]
    print(f"{args.clients} concurrent clients, {args.runs} runs each (threads of 3 turns)\n")
    print("| store | workers | runs/s | p50 | p99 | p50 added by persistence |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, workers, m in rows:
        added = m["p50 ms"] - base["p50 ms"]
        print(
            f"| {label} | {workers} | {m['runs/s']:.0f} | {m['p50 ms']:.1f} ms "
            f"| {m['p99 ms']:.1f} ms | {added:+.1f} ms |"
        )


if __name__ == "__main__":
    main()
