"""Runs queued on one busy thread: each waits for the lease and then runs, however many wait;
a request that goes while its run waits leaves no run behind.

Regression: waiting for the lease used to happen inside a worker thread of the default
executor (a few threads on a small machine). A dozen runs waiting on one thread filled it, the
run holding the lease could not load or save, and every waiter ran into its deadline (HTTP
409) while the run it waited for stood still; any other thread served by that worker stalled
too.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import pytest

from agentledger.agent.react import ReActAgent
from agentledger.server import runner
from agentledger.server.parse import RunRequest, parse_run_input
from agentledger.server.runner import start_run
from agentledger.store.aio import AsyncLedger
from agentledger.testing.scripted import ScriptedModel
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


# -- a request cancelled before its run started leaves no run behind ---------------------------
def _request(run_id: str) -> RunRequest:
    body = {"threadId": "t", "runId": run_id, "messages": [user(f"u-{run_id}", "hi")]}
    return parse_run_input(json.dumps(body).encode())


async def test_a_request_cancelled_while_its_run_waits_for_the_thread_leaves_no_run() -> None:
    """Cancelled while another run held the thread, the request used to leave its run
    waiting: it took the thread once free and ran with no one to answer."""
    ledger = AsyncLedger("memory://")
    model = ScriptedModel(["never asked"])
    agent = ReActAgent(model, [], store=ledger, lease_wait=30.0)
    async with ledger.lease("t"):
        starting = asyncio.create_task(start_run(agent, _request("r1"), "default"))
        for _ in range(10):
            await asyncio.sleep(0)  # its run waits for the lease
        starting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await starting
        assert not runner._tasks  # its run has ended
    async with ledger.lease("t", wait=0):
        pass
    assert model.requests == [] and await ledger.messages("t") == []


async def test_a_request_cancelled_at_any_step_before_its_run_started_leaves_the_thread_free() -> (
    None
):
    """Cancelled while its run takes the lease, loads or merges: when the request has ended,
    no run of it is left and the thread's lease is free for the next request at once."""
    ledger = AsyncLedger("memory://")
    agent = ReActAgent(ScriptedModel(["ok"] * 100), [], store=ledger)
    for turns in range(40):
        starting = asyncio.create_task(start_run(agent, _request(f"r{turns}"), "default"))
        for _ in range(turns):
            await asyncio.sleep(0)
        starting.cancel()
        try:
            started = await starting
        except asyncio.CancelledError:
            assert not runner._tasks
        else:  # it started before the cancellation came: read it to its end
            [_ async for _ in started.events()]
        async with ledger.lease("t", wait=0):  # SessionBusyError: a run outlived its request
            pass
