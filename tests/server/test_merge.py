"""Merging a client's messages with the stored thread (seed 001), through the app: every
client behaviour of issue 13, asserted on what the model received and what the store holds."""

from __future__ import annotations

from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger import ImageBlock, Msg
from agentledger.errors import UserError
from agentledger.server import merge as merge_module
from agentledger.server.merge import Merger
from agentledger.store.aio import AsyncLedger
from agentledger.testing.samples import every_block_message, sample_conversation
from agentledger.wire.agui import _Reader, from_agui, to_agui
from agentledger.wire.validate import _Validator
from tests.server.conftest import run, snapshot, user
from tests.server.model_server import ModelServer
from tests.wire.agui_strategies import json_values


async def stored_ids(ledger: AsyncLedger, thread: str = "t") -> list[str]:
    return [m.id for m in await ledger.messages(thread)]


async def test_three_turns_resending_everything_never_duplicate(
    client: Any, model: ModelServer, ledger: AsyncLedger
) -> None:
    history: list[dict[str, Any]] = []
    for n in range(3):
        history.append(user(f"u{n}", f"turn {n}"))
        events = await run(client, "t", history)
        history = snapshot(events)  # what a client holds after the run: the server's copy
    assert model.user_texts() == [
        ["turn 0"],
        ["turn 0", "turn 1"],
        ["turn 0", "turn 1", "turn 2"],
    ]  # each user message reaches the model exactly once per request
    ids = await stored_ids(ledger)
    assert len(ids) == len(set(ids)) == 6
    assert [d["id"] for d in history] == ids  # ids on the wire are the stored ids


async def test_the_stream_uses_the_ids_it_stores(client: Any, ledger: AsyncLedger) -> None:
    events = await run(client, "t", [user("u0", "hi")])
    (start,) = [e for e in events if e["type"] == "TEXT_MESSAGE_START"]
    assert (await stored_ids(ledger))[-1] == start["messageId"]


async def test_a_client_sending_only_new_messages(client: Any, model: ModelServer) -> None:
    await run(client, "t", [user("u0", "first")])
    events = await run(client, "t", [user("u1", "second")])
    assert model.user_texts()[-1] == ["first", "second"]
    assert [d["id"] for d in snapshot(events)][::2] == ["u0", "u1"]


async def test_a_client_lagging_behind_the_store(
    client: Any, model: ModelServer, ledger: AsyncLedger
) -> None:
    await run(client, "t", [user("u0", "first")])
    await run(client, "t", [user("u0", "first"), user("u1", "second")])
    # this client never saw the server's answers, nor u1 (another tab sent it)
    await run(client, "t", [user("u0", "first"), user("u2", "third")])
    assert model.user_texts()[-1] == ["first", "second", "third"]
    ids = await stored_ids(ledger)
    assert len(ids) == len(set(ids)) == 6


async def test_a_fresh_client_on_an_existing_thread_hydrates(
    client: Any, model: ModelServer, ledger: AsyncLedger
) -> None:
    await run(client, "t", [user("u0", "first")], state={"cart": ["apple"]})
    version = await ledger.version("t")
    events = await run(client, "t", [], state={})  # a new tab: nothing in hand
    assert [e["type"] for e in events] == [
        "RUN_STARTED",
        "STATE_SNAPSHOT",
        "MESSAGES_SNAPSHOT",
        "RUN_FINISHED",
    ]
    assert events[1]["snapshot"] == {"cart": ["apple"]}  # {} from a fresh client changes nothing
    assert [d["id"] for d in snapshot(events)] == await stored_ids(ledger)
    assert len(model.requests) == 1 and await ledger.version("t") == version


async def test_a_resend_with_nothing_new_hydrates_without_a_model_call(
    client: Any, model: ModelServer, ledger: AsyncLedger
) -> None:
    history = snapshot(await run(client, "t", [user("u0", "first")]))
    events = await run(client, "t", history)
    assert "TEXT_MESSAGE_START" not in [e["type"] for e in events]
    assert events[-1]["metadata"]["agentledger"]["stopReason"] == "no_new_input"
    assert len(model.requests) == 1 and len(await stored_ids(ledger)) == 2


async def test_an_edited_user_message_forks_the_thread(
    client: Any, model: ModelServer, ledger: AsyncLedger
) -> None:
    await run(client, "t", [user("u0", "first")])
    history = snapshot(await run(client, "t", [user("u0", "first"), user("u1", "second")]))
    before = await ledger.version("t")
    edited = [*history[:2], user("u1", "second, edited")]  # the UI edits u1 and resends
    events = await run(client, "t", edited)
    fork = [e for e in events if e["type"] == "CUSTOM"]
    assert fork[0]["name"] == "agentledger.fork"
    assert fork[0]["value"] == {"messageId": "u1", "previousVersion": before}
    assert model.user_texts()[-1] == ["first", "second, edited"]
    live = await ledger.messages("t")
    assert [m.text for m in live][:3] == ["first", "echo: first", "second, edited"]
    old = await ledger.messages("t", version=before)  # the old branch stays readable
    assert [m.text for m in old][2:] == ["second", "echo: second"]


async def test_server_messages_are_authoritative(
    client: Any, model: ModelServer, ledger: AsyncLedger
) -> None:
    history = snapshot(await run(client, "t", [user("u0", "first")]))
    truncated = {**history[1], "content": "echo: fi"}  # what a client kept of an aborted stream
    await run(client, "t", [history[0], truncated, user("u1", "second")])
    assert [m.text for m in await ledger.messages("t")][:2] == ["first", "echo: first"]
    assert len(model.requests) == 2


async def test_the_stored_copy_keeps_media_the_client_only_sees_as_a_note(
    client: Any, model: ModelServer, ledger: AsyncLedger
) -> None:
    picture = Msg.assistant([ImageBlock(media_type="image/png", data=b"\x89PNG")], id="pic")
    await ledger.save("t", [Msg.user("draw", id="u0"), picture])
    events = await run(client, "t", [])
    note = snapshot(events)[1]
    assert "omitted" in note["content"]
    await run(client, "t", [*snapshot(events), user("u1", "thanks")])
    stored = await ledger.messages("t")
    assert stored[1] == picture  # the note never replaced the image


async def test_a_message_the_server_removed_does_not_come_back(
    client: Any, model: ModelServer, ledger: AsyncLedger
) -> None:
    history = snapshot(await run(client, "t", [user("u0", "first")]))
    history = snapshot(await run(client, "t", [*history, user("u1", "second")]))
    summary = Msg.system("Summary: the user said first and second.", id="sum")
    await ledger.save("t", [summary, *(await ledger.messages("t"))[2:]])  # compaction
    await run(client, "t", [*history, user("u2", "third")])  # the client still has u0
    texts = [m.text for m in await ledger.messages("t")]
    assert texts[0].startswith("Summary") and "first" not in texts
    assert model.user_texts()[-1] == ["second", "third"]


def test_the_anchor_path_and_the_general_path_agree() -> None:
    stored = from_agui([user("u0", "a"), {"id": "a0", "role": "assistant", "content": "b"}])
    views = to_agui(stored)
    for incoming in (
        [*views, user("u1", "c")],  # full resend: anchor
        [views[0], user("u1", "c")],  # lagging: general
        [user("u1", "c")],  # only new
    ):
        merge = Merger(stored, incoming).result()
        assert [m.id for m in merge.input] == ["u1"] and merge.keep == 2


def _metadata_past_64_bits(d: dict[str, Any]) -> dict[str, Any]:
    return {**d, "metadata": {"n": 2**64}}


def _call_without_id(d: dict[str, Any]) -> dict[str, Any]:
    calls = [{**c, "id": ""} for c in d["toolCalls"]]
    return {**d, "toolCalls": calls}


def _content_a_number(d: dict[str, Any]) -> dict[str, Any]:
    return {**d, "content": 7}  # not AG-UI: only the protocol's models say so


_SPOILERS = (_metadata_past_64_bits, _call_without_id, _content_a_number)
_NAMED_ROLES = ("user", "assistant", "system", "developer")  # with an optional name field


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 3), st.sampled_from(["full", "lagging", "only new"]), st.data())
def test_a_client_message_is_checked_unless_it_is_a_form_the_server_holds(
    turns: int, resend: str, data: Any
) -> None:
    """A resent message equal to a form the server holds is taken as sent; any other one is
    validated and checked, so one that is not valid AG-UI is refused wherever it sits (a changed
    copy of a server message, an edit, a new one), one that is valid but not in canonical form
    (an explicit null) is still recognised, and only what the run appends is converted."""
    stored = [*every_block_message(), *sample_conversation(turns, result_size=40)]
    views = to_agui(stored)  # what a client resends: the server's last snapshot
    new = [user(f"n{k}", "next") for k in range(data.draw(st.integers(0, 2)))]
    kept = {"full": views, "lagging": views[: len(views) // 2], "only new": []}[resend]
    incoming = [*kept, *new]
    indices = st.integers(0, len(incoming) - 1)
    bad = data.draw(st.sets(indices, max_size=3)) if incoming else set()
    for k in bad:
        usable = [f for f in _SPOILERS if f is not _call_without_id or incoming[k].get("toolCalls")]
        incoming[k] = data.draw(st.sampled_from(usable))(incoming[k])
    loose = data.draw(st.sets(indices, max_size=3)) - bad if incoming else set()
    loose = {k for k in loose if incoming[k]["role"] in _NAMED_ROLES and "name" not in incoming[k]}
    for k in loose:
        incoming[k] = {**incoming[k], "name": None}
    read, validated = [], []
    real_read, real_normalize = _Reader.read, merge_module.normalize_agui
    with (
        patch.object(_Reader, "read", lambda self, d, i: read.append(i) or real_read(self, d, i)),
        patch.object(
            merge_module,
            "normalize_agui",
            lambda d, i: validated.append(i) or real_normalize(d, i),
        ),
    ):
        if bad:
            with pytest.raises(UserError) as refused:
                Merger(stored, incoming).result()
            # by its position, or by the message it folds into (a reasoning message's answer)
            ids = {incoming[k]["id"].partition(":")[0] for k in bad}
            named = {f"message {k}" for k in bad} | {f"message {i!r}" for i in ids}
            assert any(name in str(refused.value) for name in named), refused.value
            return
        merge = Merger(stored, incoming).result()
    assert [m.id for m in merge.input] == [d["id"] for d in new]
    assert read == list(range(len(kept), len(incoming)))  # the new messages alone were read
    assert sorted(validated) == sorted(loose | set(read))  # and validated, with the loose ones


async def test_a_run_reads_only_the_new_messages_of_a_resent_thread(client: Any) -> None:
    history: list[dict[str, Any]] = []
    read: list[int] = []
    real_read = _Reader.read
    with patch.object(_Reader, "read", lambda self, d, i: read.append(i) or real_read(self, d, i)):
        for n in range(3):
            history.append(user(f"u{n}", f"turn {n}"))
            read.clear()
            history = snapshot(await run(client, "t", history))
            assert read == [len(history) - 2]  # the user message just sent, at its position


async def test_an_invalid_copy_of_a_server_message_is_refused_by_its_position(
    client: Any, ledger: AsyncLedger
) -> None:
    history = snapshot(await run(client, "t", [user("u0", "hi")]))
    answer = _metadata_past_64_bits(history[1])  # the server's answer, changed and unstorable
    note = {"id": "act", "role": "activity", "activityType": "note", "content": {"x": 1}}
    messages = [note, history[0], answer, user("u1", "x")]
    response = await client.post("/", json={"threadId": "t", "runId": "r", "messages": messages})
    assert response.status_code == 422, response.text
    assert f"message {history[1]['id']!r} cannot be stored" in response.json()["error"]["message"]
    assert [m.id for m in await ledger.messages("t")] == [d["id"] for d in history]


async def test_a_run_checks_the_thread_from_where_the_last_check_ended(client: Any) -> None:
    """The merge's strict check of the thread it would continue shares the agent's history
    checker: after the first run, every check walks only what was added since the last one."""
    walked: list[tuple[int, int]] = []  # (messages checked, from)
    real_init = _Validator.__init__

    def spy(self: Any, msgs: Any, target: Any, start: int = 0, before: Any = None) -> None:
        if target == "strict":  # not the provider adapter's own check of what it sends
            walked.append((len(msgs), start))
        real_init(self, msgs, target, start, before)

    history: list[dict[str, Any]] = []
    with patch.object(_Validator, "__init__", spy):
        for n in range(4):
            history.append(user(f"u{n}", f"turn {n}"))
            history = snapshot(await run(client, "t", history))
    assert walked[0] == (1, 0)  # the first question, checked whole
    assert all(length - start <= 2 for length, start in walked), walked


_FIELDS = ["id", "role", "content", "toolCalls", "toolCallId", "name", "metadata", "error", "zz"]
_damage = st.tuples(
    st.integers(0, 10**6),  # which message (modulo the thread's length)
    st.sampled_from(_FIELDS),
    st.one_of(
        st.sampled_from(["x", [1], [{}], {"a": 1}, "", 0, None, 2**64, "\ud800"]), json_values
    ),
    st.booleans(),  # remove the field instead
)


@settings(max_examples=100, deadline=None)
@given(st.lists(_damage, min_size=1, max_size=3), st.booleans())
def test_a_resent_thread_with_damaged_messages_is_run_or_refused_whole(
    damages: list[tuple[int, str, Any, bool]], duplicate: bool
) -> None:
    """A client resending the thread with messages changed anyhow (junk in any field, a field
    gone, a message twice) gets a run (200) or a 422, never a server error; a refused run leaves
    the thread as it was, and a run leaves it valid for strict providers."""
    import asyncio
    import json

    from agentledger.server import create_app
    from agentledger.testing import ScriptedModel
    from agentledger.wire import check
    from tests.server.conftest import client_for

    async def scenario() -> None:
        ledger = AsyncLedger("memory://")
        await ledger.save("t", [*every_block_message(), *sample_conversation(2, result_size=40)])
        before = await ledger.messages("t")
        thread = [*to_agui(before), user("q", "next")]
        for at, key, junk, remove in damages:
            d = dict(thread[at % len(thread)])
            if remove:
                d.pop(key, None)
            else:
                d[key] = junk
            thread[at % len(thread)] = d
        if duplicate:
            thread.insert(1, thread[-2])
        body = json.dumps({"threadId": "t", "runId": "r", "messages": thread}).encode()
        app = create_app(model=ScriptedModel(["ok"]), store=ledger)
        async with client_for(app) as client:
            response = await client.post(
                "/", content=body, headers={"content-type": "application/json"}
            )
        assert response.status_code in (200, 422), response.text[-500:]
        after = await ledger.messages("t")
        if response.status_code == 422:
            assert after == before
        else:
            assert "RUN_ERROR" not in response.text, response.text[-500:]
            check(after, target="strict")

    asyncio.run(scenario())


async def test_every_damage_of_a_new_message_is_run_or_refused() -> None:
    """Each AG-UI message shape changed in every way ``every_damage`` knows, sent as the new
    message of a thread: a run (200) or a 422, never a server error, and a refused run leaves
    the thread as it was (a legacy binary part with a mimeType that is not a string was a 500)."""
    import json

    from agentledger.server import create_app
    from agentledger.testing import ScriptedModel
    from tests.messages.strategies import JSON_JUNK, every_damage
    from tests.server.conftest import client_for
    from tests.wire.shapes import AGUI_SHAPES

    ledger = AsyncLedger("memory://")
    app = create_app(model=ScriptedModel(["ok"] * 10_000), store=ledger)
    async with client_for(app) as client:
        for n, (where, d) in enumerate(
            (where, d) for shape in AGUI_SHAPES for where, d in every_damage(shape, JSON_JUNK)
        ):
            thread = f"t{n}"
            await ledger.save(thread, [Msg.user("hello", id="first")])
            body = {"threadId": thread, "runId": "r", "messages": [user("first", "hello"), d]}
            response = await client.post(
                "/", content=json.dumps(body), headers={"content-type": "application/json"}
            )
            assert response.status_code in (200, 422), (where, response.text[-300:])
            if response.status_code == 422:
                assert [m.id for m in await ledger.messages(thread)] == ["first"], where
            else:
                assert "RUN_ERROR" not in response.text, (where, response.text[-300:])
