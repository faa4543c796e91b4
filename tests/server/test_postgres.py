"""Two server instances on one PostgreSQL database (as two workers or two hosts): one run per
thread across both, and a thread one of them wrote is merged by the other without duplicates."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from agentledger.store.aio import AsyncLedger
from tests.server.conftest import client_for, make_app, parse_frames, run, snapshot, user
from tests.server.model_server import ModelServer
from tests.store import pg

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg_ledgers() -> Iterator[tuple[AsyncLedger, AsyncLedger]]:
    url = pg.require_server()
    with pg.fresh_schema(url) as schema:
        a = AsyncLedger(f"{url}?schema={schema}")
        b = AsyncLedger(f"{url}?schema={schema}")
        yield a, b
        a.sync.close()
        b.sync.close()


async def test_one_run_per_thread_across_instances(
    model: ModelServer, pg_ledgers: tuple[AsyncLedger, AsyncLedger]
) -> None:
    first, second = pg_ledgers
    async with client_for(make_app(model, first)) as a, client_for(make_app(model, second)) as b:
        body = {"threadId": "t", "runId": "r1", "messages": [user("u0", "slow 20")]}
        running = asyncio.create_task(a.post("/", json=body))
        while not model.requests:
            await asyncio.sleep(0.01)
        busy = await b.post("/", json={**body, "runId": "r2", "messages": [user("u1", "hi")]})
        assert busy.status_code == 409 and busy.json()["error"]["code"] == "thread_busy"
        history = snapshot(parse_frames((await running).text))
        events = await run(b, "t", [*history, user("u1", "hi")])  # the other instance merges
    assert model.user_texts()[-1] == ["slow 20", "hi"]
    ids = [d["id"] for d in snapshot(events)]
    assert len(ids) == len(set(ids)) == 4
