"""A client that resends its thread unchanged while a frontend tool call waits for its result
(a page reload, a reconnect) gets the thread back with the call still pending, as a run with no
messages does: nothing new means no model call and no error.

Regression: the merge left nothing new, and the agent then refused the run because a client
call had no result, a ``RUN_ERROR`` (user_error) for a request that asked for nothing.
"""

from __future__ import annotations

from typing import Any

from agentledger.store.aio import AsyncLedger
from tests.server.conftest import run, snapshot, user
from tests.server.model_server import ModelServer

CONFIRM = [{"name": "confirm", "description": "ask the user", "parameters": {}}]


async def test_resending_a_thread_with_a_pending_client_call_hydrates(
    client: Any, model: ModelServer, ledger: AsyncLedger
) -> None:
    events = await run(client, "t", [user("u0", "call confirm x")], tools=CONFIRM)
    assert events[-1]["outcome"]["pendingToolCallIds"] == ["call_x"]
    history, stored, asked = snapshot(events), await ledger.load("t"), len(model.requests)
    for messages in (history, [user("u0", "call confirm x")], []):
        again = await run(client, "t", messages, tools=CONFIRM)
        assert again[-1]["type"] == "RUN_FINISHED", again[-1]
        assert again[-1]["outcome"]["pendingToolCallIds"] == ["call_x"]
        assert snapshot(again) == history
    assert len(model.requests) == asked
    after = await ledger.load("t")
    assert after.version == stored.version and after.context == stored.context
