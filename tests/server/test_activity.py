"""AG-UI ``activity`` messages: kept beside the thread, back in their places in every snapshot,
never shown to the model, never stored as conversation (``server.activity``)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agentledger.server.activity import interleave, merged, split
from agentledger.store.aio import AsyncLedger
from tests.server.conftest import run, snapshot, user
from tests.server.model_server import ModelServer


def activity(id: str, pct: int) -> dict[str, Any]:
    return {"id": id, "role": "activity", "activityType": "progress", "content": {"pct": pct}}


async def test_activity_comes_back_in_place_and_never_reaches_the_model(
    client: Any, model: ModelServer, ledger: AsyncLedger
) -> None:
    first = [activity("a0", 0), user("u0", "first"), activity("a1", 50)]
    history = snapshot(await run(client, "t", first))
    assert [d["id"] for d in history][:3] == ["a0", "u0", "a1"]
    assert history[0] == first[0] and history[2] == first[2]  # unchanged, ids included

    history = snapshot(await run(client, "t", [*history, user("u1", "second")]))
    assert [d["role"] for d in history] == [
        "activity",
        "user",
        "activity",
        "assistant",
        "user",
        "assistant",
    ]
    assert model.user_texts()[-1] == ["first", "second"]
    assert all("activity" not in str(r) for r in model.requests)
    assert [m.role for m in await ledger.messages("t")] == ["user", "assistant"] * 2
    response = await client.get("/threads/t/messages")
    assert response.json()["messages"] == history


async def test_a_client_sending_only_new_messages_keeps_the_stored_activity(
    client: Any,
) -> None:
    await run(client, "t", [user("u0", "first"), activity("a0", 10)])
    history = snapshot(await run(client, "t", [user("u1", "second")]))
    assert [d["id"] for d in history][:2] == ["u0", "a0"]


async def test_the_clients_copy_replaces_the_stored_one(
    client: Any, model: ModelServer, ledger: AsyncLedger
) -> None:
    history = snapshot(await run(client, "t", [user("u0", "first"), activity("a0", 10)]))
    version = await ledger.version("t")
    assert [d["id"] for d in history][:2] == ["u0", "a0"]
    moved = [history[0], history[2], activity("a0", 100)]  # changed, and after the answer now
    events = await run(client, "t", moved)  # nothing new to answer: hydrates, no model call
    assert len(model.requests) == 1
    assert snapshot(events) == moved
    assert await ledger.version("t") == version + 1  # the activity value, one small save


async def test_activity_whose_anchor_left_the_thread_goes_to_the_end(client: Any) -> None:
    history = snapshot(await run(client, "t", [user("u0", "first")]))
    answer = history[1]["id"]
    await run(client, "t", [*history, activity("a0", 1)])  # a0 follows the answer
    edited = [user("u0", "first, edited")]  # forks the thread: that answer leaves it
    history = snapshot(await run(client, "t", edited))
    ids = [d["id"] for d in history]
    assert answer not in ids and ids[0] == "u0" and ids[-1] == "a0" and len(ids) == 3


_ids = st.lists(st.text("abcdef", min_size=1, max_size=4), unique=True, max_size=12)


@given(_ids, st.data())
def test_split_then_interleave_gives_the_clients_list_back(ids: list[str], data: Any) -> None:
    roles = data.draw(st.lists(st.booleans(), min_size=len(ids), max_size=len(ids)))
    messages = [activity(i, n) if a else user(i, i) for n, (i, a) in enumerate(zip(ids, roles))]
    conversation, entries, positions = split(messages)
    assert [messages[k] for k in positions] == conversation
    assert interleave(conversation, merged(None, entries) or []) == messages
    assert merged(entries, entries) is None  # the same list again changes nothing


async def test_client_values_a_session_cannot_hold_are_refused_before_anything_is_stored(
    client: Any, ledger: AsyncLedger
) -> None:
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(150):  # deeper than a stored value may nest
        node["x"] = {}
        node = node["x"]
    cases = [
        ({"messages": [user("u0", "hi"), {**activity("a0", 0), "content": deep}]}, "activity"),
        ({"messages": [user("u0", "hi")], "state": {"n": 10**30}}, "RunAgentInput.state"),
    ]
    for fields, named in cases:
        body = {"threadId": "t", "runId": "r", **fields}
        response = await client.post("/", json=body)
        assert response.status_code == 422, response.text
        assert named in response.json()["error"]["message"]
    assert not await ledger.exists("t")
