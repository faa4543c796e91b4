"""Runs queued on one busy thread: each waits for the lease and then runs, however many wait.

Regression: waiting for the lease used to happen inside a worker thread of the default
executor (a few threads on a small machine). A dozen runs waiting on one thread filled it, the
run holding the lease could not load or save, and every waiter ran into its deadline (HTTP
409) while the run it waited for stood still; any other thread served by that worker stalled
too.
"""

from __future__ import annotations

import asyncio
from collections import Counter

from agentledger.store.aio import AsyncLedger
from tests.server.conftest import client_for, make_app, parse_frames, user
from tests.server.model_server import ModelServer

WAITERS = 16


async def test_many_runs_waiting_on_one_thread_all_run_in_turn(
    model: ModelServer, ledger: AsyncLedger
) -> None:
    async with client_for(make_app(model, ledger, lease_wait=30.0)) as client:

        async def one(i: int) -> str:
            body = {"threadId": "hot", "runId": f"r{i}", "messages": [user(f"u{i}", f"hi {i}")]}
            response = await client.post("/", json=body)
            if response.status_code != 200:
                return str(response.status_code)
            return str(parse_frames(response.text)[-1]["type"])

        ended = Counter(await asyncio.gather(*(one(i) for i in range(WAITERS))))
    assert ended == {"RUN_FINISHED": WAITERS}
    stored = await ledger.messages("hot")
    assert sorted(m.id for m in stored if m.role == "user") == sorted(
        f"u{i}" for i in range(WAITERS)
    )
    pairs = zip(stored[::2], stored[1::2])
    assert all(a.text == f"echo: {q.text}" for q, a in pairs)
