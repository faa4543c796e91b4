"""Faults: a model failure, a stream that breaks mid-answer, a client that disconnects. Every
START is closed, the user's message is stored, the thread stays usable."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
from reliability import record

from agentledger.store.aio import AsyncLedger
from agentledger.wire import check
from tests.server.conftest import make_app, parse_frames, run, serving, snapshot, user
from tests.server.model_server import ModelServer


async def test_a_model_failure_is_a_run_error_with_the_users_message_stored(
    client: Any, ledger: AsyncLedger
) -> None:
    events = await run(client, "t", [user("u0", "fail")])
    assert events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == "model_error"
    assert [d["id"] for d in snapshot(events)] == ["u0"]
    assert [m.id for m in await ledger.messages("t")] == ["u0"]
    first = events[-1]["type"]
    events = await run(client, "t", [*snapshot(events), user("u1", "again")])
    assert events[-1]["type"] == "RUN_FINISHED"
    record("faults", "server: model failure", run_ended=first, next_run=events[-1]["type"])


async def test_a_stream_broken_mid_answer_closes_what_it_started(
    client: Any, ledger: AsyncLedger
) -> None:
    events = await run(client, "t", [user("u0", "break")])  # parse_frames checks START/END
    types = [e["type"] for e in events]
    assert "TEXT_MESSAGE_START" in types and types[-1] == "RUN_ERROR"
    assert types.index("TEXT_MESSAGE_END") < types.index("RUN_ERROR")
    check(await ledger.messages("t"), target="strict")
    record(
        "faults",
        "server: model stream broken mid-answer",
        run_ended=types[-1],
        stored_messages_strictly_valid=True,
    )


async def test_a_tool_call_cut_off_mid_arguments_is_closed(client: Any, model: ModelServer) -> None:
    from tests.agent.fake_servers import chunk, tool_delta
    from tests.server.model_server import _sse

    model.rules = lambda body: _sse(
        [chunk({"role": "assistant"}), tool_delta(0, '{"va', id="c1", name="f")], done=False
    )
    events = await run(client, "t", [user("u0", "go")])
    types = [e["type"] for e in events]
    assert types.index("TOOL_CALL_START") < types.index("TOOL_CALL_END") < len(types) - 1
    assert events[-1]["type"] == "RUN_ERROR"


def _read_until(url: str, body: dict[str, Any], words: int) -> list[str]:
    """Read a run's stream until ``words`` text deltas arrived, then hang up."""
    seen: list[str] = []
    with httpx.Client(timeout=10) as http, http.stream("POST", url, json=body) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if '"TEXT_MESSAGE_CONTENT"' in line:
                seen.append(line)
                if len(seen) >= words:
                    break
    return seen


async def test_a_client_disconnect_leaves_the_thread_persisted_and_usable(
    model: ModelServer, ledger: AsyncLedger
) -> None:
    app = make_app(model, ledger, lease_wait=5.0)
    with serving(app) as url:
        body = {"threadId": "t", "runId": "r1", "messages": [user("u0", "slow 60")]}
        await asyncio.to_thread(_read_until, url + "/", body, 3)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            stored = await ledger.messages("t")
            if len(stored) == 2:
                break
            await asyncio.sleep(0.05)
        assert [m.role for m in stored] == ["user", "assistant"]  # the streamed part is kept
        assert stored[1].text.startswith("w0 w1 w2") and "w59" not in stored[1].text
        again = {"threadId": "t", "runId": "r2", "messages": [user("u1", "next")]}
        response = await asyncio.to_thread(httpx.post, url + "/", json=again, timeout=10)
    events = parse_frames(response.text)
    assert events[-1]["type"] == "RUN_FINISHED"
    assert [d["id"] for d in snapshot(events)][:3] == ["u0", stored[1].id, "u1"]
    record(
        "faults",
        "server: client disconnect mid-stream",
        words_streamed_and_kept=3,
        next_run=events[-1]["type"],
    )
    check(await ledger.messages("t"), target="strict")
