"""Load: ``agentledger serve`` with several uvicorn workers on one PostgreSQL database, driven
on loopback by concurrent AG-UI clients, then every stored thread checked.

Two kinds of client run at once. Conversation clients hold three-turn conversations, each on a
thread of their own, resending the whole thread every turn and reading it back (a run with no
messages, which hydrates) when it is done. Shared clients all write to one thread, each sending
only its new message, so their runs queue on the thread's lease across workers; a run that
waits longer than the server's lease wait (10 s) is refused with 409, the one error allowed, and
only there. Afterwards each thread in the database must hold exactly the acknowledged user
messages, once each, in the order they were sent, each answered by its echo, none of the
refused ones, and pass strict validation.

Latency is measured by the client, POST to last byte: what the server, its PostgreSQL
persistence and a loopback call to a scripted model that answers at once add up to (the server
exposes no timing of its own). Run latency is over the conversation threads (no contention);
shared-thread latency includes the wait for the thread's lease. Hydrate latency is the
persistence read path alone: the thread's lease, a load from PostgreSQL and the snapshot
events, no model call.

CI size: 2 workers, 6 conversation clients of 6 runs, 3 shared clients of 4 runs. Scale with
``AGENTLEDGER_LOAD_WORKERS``, ``AGENTLEDGER_LOAD_CLIENTS`` and ``AGENTLEDGER_LOAD_RUNS`` (runs
per conversation client).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from reliability import record
from reliability.record import knob

from agentledger.store import Ledger
from agentledger.store.postgres import PostgresStore
from agentledger.wire import validate
from tests.server.load import Tally, client, percentiles_ms, shared_client, start
from tests.server.model_server import ModelServer
from tests.store import pg

pytestmark = pytest.mark.postgres

SHARED = "shared"


@pytest.fixture
def schema_url() -> Iterator[tuple[str, str]]:
    url = pg.require_server()
    with pg.fresh_schema(url) as schema:
        yield url, schema


async def _drive(url: str, clients: int, runs: int, shared: int, shared_runs: int) -> Tally:
    tally = Tally()
    await asyncio.gather(
        *(client(url, f"c{i}", runs, tally, hydrate=True) for i in range(clients)),
        *(shared_client(url, SHARED, f"s{i}", shared_runs, tally) for i in range(shared)),
    )
    return tally


def _problems(ledger: Ledger, tally: Tally) -> list[str]:
    """Every way a stored thread differs from what its clients were told was committed."""
    problems = []
    stored = {info.session_id for info in ledger.list_sessions(limit=100_000)}
    if stored != set(tally.acknowledged):
        problems.append(f"threads stored {sorted(stored ^ set(tally.acknowledged))} differ")
    for thread, sent in tally.acknowledged.items():
        msgs = ledger.messages(thread)
        ids = [m.id for m in msgs]
        if len(ids) != len(set(ids)):
            problems.append(f"{thread}: duplicate ids {ids}")
        if tally.refused & set(ids):
            problems.append(f"{thread}: refused runs stored {sorted(tally.refused & set(ids))}")
        users = [(m.id, m.text) for m in msgs if m.role == "user"]
        if thread == SHARED:  # runs of different clients interleave; each client's keep order
            if sorted(users) != sorted(sent):
                problems.append(f"{thread}: stored users {users} != acknowledged {sent}")
        elif users != sent:
            problems.append(f"{thread}: stored users {users} != acknowledged {sent}")
        roles = [m.role for m in msgs]
        if roles != ["user", "assistant"] * len(sent):
            problems.append(f"{thread}: roles {roles}")
        for question, answer in zip(msgs[::2], msgs[1::2]):
            if answer.text != f"echo: {question.text}":
                problems.append(f"{thread}: {question.id} answered {answer.text!r}")
        findings = validate(msgs, target="strict")
        if findings:
            problems.append(f"{thread}: not strictly valid: {findings[0]}")
    return problems


def test_workers_on_one_postgres_lose_nothing_under_load(
    schema_url: tuple[str, str], tmp_path: Path
) -> None:
    url, schema = schema_url
    workers = knob("AGENTLEDGER_LOAD_WORKERS", 2)
    clients = knob("AGENTLEDGER_LOAD_CLIENTS", 6)
    runs = knob("AGENTLEDGER_LOAD_RUNS", 6)
    shared, shared_runs = max(2, clients // 2), max(2, min(runs * 2 // 3, 20))
    log = tmp_path / "serve.log"
    with ModelServer() as model:
        process, server = start(f"{url}?schema={schema}", workers, model, log)
        try:
            warm = asyncio.run(_drive(server, workers, 3, 0, 0))  # every worker's imports
            began = time.perf_counter()
            tally = asyncio.run(_drive(server, clients, runs, shared, shared_runs))
            seconds = time.perf_counter() - began
        finally:
            process.terminate()
            process.wait(timeout=30)
    assert not warm.errors and not tally.errors, (tally.errors[:5], log.read_text()[-3000:])
    for thread, sent in warm.acknowledged.items():
        tally.acknowledged.setdefault(thread, sent)
    with Ledger(PostgresStore(url, schema=schema, pool_min=1, pool_max=2)) as ledger:
        problems = _problems(ledger, tally)
    runs_done = len(tally.latencies) + len(tally.queued_latencies)
    run_ms = percentiles_ms(tally.latencies)
    read_ms = percentiles_ms(tally.hydrate_latencies)
    queued_ms = percentiles_ms(tally.queued_latencies)
    print(
        f"\nload: {workers} workers, {clients}+{shared} clients: {runs_done} runs in "
        f"{seconds:.1f} s ({runs_done / seconds:.0f}/s), run p50 {run_ms['p50 ms']:.0f} ms "
        f"p99 {run_ms['p99 ms']:.0f} ms, hydrate p50 {read_ms['p50 ms']:.0f} ms; "
        f"{len(tally.acknowledged)} threads checked, problems: {len(problems)}"
    )
    record(
        "load",
        "AG-UI server: workers on one PostgreSQL",
        workers=workers,
        clients=clients + shared,
        runs=runs_done,
        runs_per_s=round(runs_done / seconds, 1),
        run_p50_ms=round(run_ms["p50 ms"], 1),
        run_p99_ms=round(run_ms["p99 ms"], 1),
        hydrate_p50_ms=round(read_ms["p50 ms"], 1),
        hydrate_p99_ms=round(read_ms["p99 ms"], 1),
        shared_thread_p50_ms=round(queued_ms["p50 ms"], 1),
        shared_thread_p99_ms=round(queued_ms["p99 ms"], 1),
        errors=len(tally.errors),
        threads_checked=len(tally.acknowledged),
        shared_thread_runs=len(tally.acknowledged.get(SHARED, [])),
        shared_thread_busy_409=len(tally.refused),
        problems=len(problems),
    )
    assert not problems, problems[:5]
