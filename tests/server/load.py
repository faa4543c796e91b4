"""``python -m tests.server.load``: runs per second and latency of ``agentledger serve`` under
concurrent AG-UI clients, on ``memory://`` (no persistence), SQLite (1 worker) and PostgreSQL
(4 workers), against the scripted OpenAI-compatible model (which answers at once), so the
difference is what persistence adds. Prints the table of docs/benchmarks.md ("AG-UI server").

Each client holds a conversation of three turns on a thread of its own, resending the whole
thread every turn as AG-UI clients do, then starts another. Bounded: ``--runs`` per client.
``tests/server/test_load.py`` drives the same clients (plus clients that share one thread and
send only their new message) and then checks every stored thread; ``Tally`` is what they count.
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
from collections import Counter
from dataclasses import dataclass, field
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
    with log.open("w") as out:  # the server keeps its own descriptor
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
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


@dataclass
class Tally:
    """What a load run saw: every request's latency and how it ended, for each thread the user
    messages whose run finished (acknowledged), in the order they were sent, and the ids of
    those refused because the thread stayed busy past the server's lease wait."""

    latencies: list[float] = field(default_factory=list)
    hydrate_latencies: list[float] = field(default_factory=list)
    queued_latencies: list[float] = field(default_factory=list)  # runs on a shared thread
    outcomes: Counter[str] = field(default_factory=Counter)
    acknowledged: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    refused: set[str] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)

    async def post(
        self, http: httpx.AsyncClient, url: str, body: dict[str, Any], *, busy_ok: bool = False
    ) -> Any:
        """POST one run; the checked events, or ``None`` (counted) if it did not finish. With
        ``busy_ok`` a 409 (thread busy) is an expected refusal, not an error."""
        began = time.perf_counter()
        try:
            response = await http.post(url, json=body)
        except httpx.HTTPError as exc:
            self._failed(f"connection: {type(exc).__name__}", f"{body['threadId']}: {exc!r}")
            return None
        elapsed = time.perf_counter() - began
        if busy_ok and response.status_code == 409:
            self.outcomes["409 thread_busy"] += 1
            self.refused.update(m["id"] for m in body["messages"])
            return None
        if response.status_code != 200:
            self._failed(f"HTTP {response.status_code}", response.text[:300])
            return None
        events = parse_frames(response.text)
        end = events[-1]
        if end["type"] != "RUN_FINISHED":
            self._failed(f"{end['type']} {end.get('code')}", str(end)[:300])
            return None
        hydrate = not body["messages"]
        kind = self.hydrate_latencies if hydrate else self.latencies
        (self.queued_latencies if busy_ok else kind).append(elapsed)
        self.outcomes["hydrated" if hydrate else "RUN_FINISHED"] += 1
        if not hydrate:
            sent = body["messages"][-1]
            self.acknowledged.setdefault(body["threadId"], []).append((sent["id"], sent["content"]))
        return events

    def _failed(self, outcome: str, detail: str) -> None:
        self.outcomes[outcome] += 1
        self.errors.append(detail)


async def client(
    url: str, name: str, runs: int, latencies: list[float] | Tally, *, hydrate: bool = False
) -> None:
    """Conversations of three turns, each on a new thread, resending the whole thread every
    turn; with ``hydrate``, each finished thread is then read back by a run with no messages,
    whose snapshot must equal the client's copy."""
    tally = latencies if isinstance(latencies, Tally) else Tally(latencies=latencies)
    async with httpx.AsyncClient(timeout=60) as http:
        history: list[dict[str, Any]] = []
        for n in range(runs):
            if n % 3 == 0:
                history, thread = [], f"{name}-{n // 3}"
            history.append({"id": f"{thread}-u{n}", "role": "user", "content": f"turn {n}"})
            body = {"threadId": thread, "runId": f"r{n}", "messages": history}
            events = await tally.post(http, url, body)
            if events is None:
                if not isinstance(latencies, Tally):
                    raise AssertionError(tally.errors[-1])
                continue
            history = snapshot(events)
            if hydrate and (n % 3 == 2 or n == runs - 1):
                read = {"threadId": thread, "runId": f"h{n}", "messages": []}
                events = await tally.post(http, url, read)
                if events is not None and snapshot(events) != history:
                    tally._failed("hydrate differs", f"{thread}: {snapshot(events)}")


async def shared_client(url: str, thread: str, name: str, runs: int, tally: Tally) -> None:
    """Runs on one thread that many clients share, each sending only its new message (the
    delta): every run waits for the thread's lease, on whichever worker it lands, and is
    refused (409) if it waited longer than the server's lease wait."""
    async with httpx.AsyncClient(timeout=60) as http:
        for n in range(runs):
            message = {"id": f"{name}-s{n}", "role": "user", "content": f"{name} says {n}"}
            body = {"threadId": thread, "runId": f"{name}-{n}", "messages": [message]}
            await tally.post(http, url, body, busy_ok=True)


async def load(url: str, clients: int, runs: int) -> tuple[float, list[float]]:
    latencies: list[float] = []
    began = time.perf_counter()
    await asyncio.gather(*(client(url, f"c{i}", runs, latencies) for i in range(clients)))
    return len(latencies) / (time.perf_counter() - began), latencies


def percentiles_ms(latencies: list[float]) -> dict[str, float]:
    """p50 and p99 of ``latencies`` (seconds) in milliseconds."""
    cuts = statistics.quantiles(latencies, n=100, method="inclusive")
    return {"p50 ms": cuts[49] * 1000, "p99 ms": cuts[98] * 1000}


def measure(store: str, workers: int, clients: int, runs: int) -> dict[str, float]:
    with ModelServer() as model, tempfile.TemporaryDirectory() as tmp:
        process, url = start(store, workers, model, Path(tmp) / "serve.log")
        try:
            asyncio.run(load(url, 2, 3))  # warm up every worker's imports and connections
            rate, latencies = asyncio.run(load(url, clients, runs))
        finally:
            process.terminate()
            process.wait(timeout=30)
    return {"runs/s": rate, **percentiles_ms(latencies)}


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
