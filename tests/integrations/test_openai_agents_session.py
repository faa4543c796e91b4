"""``LedgerSession`` run through the Agents SDK's own session tests, beside ``SQLiteSession``.

The SDK's ``tests/memory/test_session.py`` and ``test_session_limit.py`` hard-code
``SQLiteSession`` and import helpers that its wheel does not ship, so they cannot be imported;
the tests below are those tests, adapted to run every session the same way (``session_kind``):
the SDK's own ``SQLiteSession`` and ``LedgerSession`` on the SQLite, JSONL and memory backends.
A test that fails for one kind and not the other is a difference from the SDK's reference.
Runs use the SDK's ``agents.testing.ScriptedModel`` (no network, no tracing).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import (
    Agent,
    RunConfig,
    Runner,
    Session,
    SessionSettings,
    SQLiteSession,
    set_tracing_disabled,
)
from agents.testing import ScriptedModel, assistant_message

from agentledger import AsyncLedger, Ledger, Msg
from agentledger.errors import ClosedError, MissingDependencyError, UserError
from agentledger.integrations.openai_agents import LedgerSession, _Conversions
from agentledger.messages import ToolUseBlock

MakeSession = Callable[..., Any]
KINDS = ["sdk-sqlite", "ledger-sqlite", "ledger-jsonl", "ledger-memory"]


@pytest.fixture(autouse=True)
def _no_tracing() -> Iterator[None]:
    set_tracing_disabled(True)
    yield


@pytest.fixture
def converted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of messages of each call that converts messages to items."""
    import agentledger.integrations.openai_agents as module

    calls: list[int] = []
    real = module.to_responses

    def counting(msgs: Any) -> Any:
        msgs = list(msgs)
        calls.append(len(msgs))
        return real(msgs)

    monkeypatch.setattr(module, "to_responses", counting)
    return calls


@pytest.fixture(params=KINDS)
def make_session(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakeSession]:
    """A factory of sessions of one kind, all sharing one store."""
    kind = request.param
    made: list[Any] = []
    ledger = None
    if kind == "ledger-sqlite":
        ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    elif kind == "ledger-jsonl":
        ledger = Ledger(f"jsonl:///{tmp_path / 'jsonl'}")
    elif kind == "ledger-memory":
        ledger = Ledger("memory://")

    def make(session_id: str, **kw: Any) -> Any:
        if ledger is None:
            session = SQLiteSession(session_id, tmp_path / "sdk.db", **kw)
        else:
            session = LedgerSession(session_id, ledger, **kw)
        made.append(session)
        return session

    yield make
    for session in made:
        session.close()
    if ledger is not None:
        ledger.close()


async def _run(runner_method: str, agent: Agent[Any], input_data: Any, **kwargs: Any) -> Any:
    if runner_method == "run":
        return await Runner.run(agent, input_data, **kwargs)
    if runner_method == "run_sync":

        def in_thread() -> Any:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            try:
                return Runner.run_sync(agent, input_data, **kwargs)
            finally:
                loop.close()

        return await asyncio.to_thread(in_thread)
    result = Runner.run_streamed(agent, input_data, **kwargs)
    async for _ in result.stream_events():
        pass
    return result


def _chat(*texts: str) -> list[Any]:
    roles = ["user", "assistant"]
    return [{"role": roles[i % 2], "content": t} for i, t in enumerate(texts)]


def test_ledger_session_is_an_sdk_session(make_session: MakeSession) -> None:
    assert isinstance(make_session("s"), Session)


@pytest.mark.parametrize("runner_method", ["run", "run_sync", "run_streamed"])
async def test_session_memory_basic_functionality(
    make_session: MakeSession, runner_method: str
) -> None:
    session = make_session("test_session_123")
    model = ScriptedModel()
    agent = Agent(name="test", model=model)
    model.enqueue([assistant_message("San Francisco")])
    result = await _run(runner_method, agent, "Where is the Golden Gate?", session=session)
    assert result.final_output == "San Francisco"
    model.enqueue([assistant_message("California")])
    result = await _run(runner_method, agent, "What state is it in?", session=session)
    assert result.final_output == "California"
    last_input = model.calls[-1].input
    assert len(last_input) == 3  # the first turn, its answer and the new question
    assert last_input[0]["content"] == "Where is the Golden Gate?"


@pytest.mark.parametrize("runner_method", ["run", "run_streamed"])
async def test_different_sessions_do_not_share_history(
    make_session: MakeSession, runner_method: str
) -> None:
    model = ScriptedModel()
    agent = Agent(name="test", model=model)
    one, two = make_session("session_1"), make_session("session_2")
    model.enqueue([assistant_message("I like cats")])
    await _run(runner_method, agent, "I like cats", session=one)
    model.enqueue([assistant_message("I like dogs")])
    await _run(runner_method, agent, "I like dogs", session=two)
    model.enqueue([assistant_message("You said cats")])
    await _run(runner_method, agent, "What did I say?", session=one)
    texts = [str(item.get("content")) for item in model.calls[-1].input]
    assert any("cats" in t for t in texts) and not any("dogs" in t for t in texts)


async def test_session_direct(make_session: MakeSession) -> None:
    session = make_session("direct_test")
    await session.add_items(_chat("Hello", "Hi there!"))
    assert await session.get_items() == _chat("Hello", "Hi there!")
    await session.clear_session()
    assert await session.get_items() == []


async def test_every_call_after_close_is_refused(make_session: MakeSession) -> None:
    """A closed session kept reading and writing (a store it had opened, the one it was given):
    now, as the SDK's SQLiteSession, every call raises RuntimeError (ours: ClosedError), the
    empty append too, and nothing reaches the store; closing again is fine."""
    session = make_session("closed")
    await session.add_items(_chat("kept"))
    session.close()
    calls = [
        lambda: session.get_items(),
        lambda: session.get_items(1),
        lambda: session.add_items(_chat("late")),
        lambda: session.add_items([]),
        session.pop_item,
        session.clear_session,
    ]
    if isinstance(session, LedgerSession):
        calls.append(lambda: session.set_items([]))
    for call in calls:
        with pytest.raises(RuntimeError, match="is closed"):
            await call()
    session.close()
    assert await make_session("closed").get_items() == _chat("kept")


@pytest.mark.parametrize("given", ["url", "ledger", "async-ledger"])
async def test_close_closes_only_a_ledger_the_session_opened(given: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    ledger = {"url": None, "ledger": Ledger(url), "async-ledger": AsyncLedger(url)}[given]
    session = LedgerSession("s", url if ledger is None else ledger)
    await session.add_items(_chat("hi"))
    closes: list[int] = []
    real_close = session.ledger.close
    session.ledger.close = lambda: closes.append(1) or real_close()  # type: ignore[method-assign]
    session.close()
    session.close()
    with pytest.raises(ClosedError):
        await session.get_items()
    assert closes == ([1] if given == "url" else [])
    if ledger is not None:  # still open for its other users
        assert await LedgerSession("s", ledger).get_items() == _chat("hi")
        await ledger.close() if isinstance(ledger, AsyncLedger) else ledger.close()


async def test_pop_item(make_session: MakeSession) -> None:
    session = make_session("pop_test")
    assert await session.pop_item() is None
    await session.add_items(_chat("Hello", "Hi there!", "How are you?"))
    assert await session.pop_item() == {"role": "user", "content": "How are you?"}
    assert await session.get_items() == _chat("Hello", "Hi there!")
    assert await session.pop_item() == {"role": "assistant", "content": "Hi there!"}
    assert await session.pop_item() == {"role": "user", "content": "Hello"}
    assert await session.pop_item() is None
    assert await session.get_items() == []


async def test_pop_affects_only_its_session(make_session: MakeSession) -> None:
    one, two = make_session("pop_1"), make_session("pop_2")
    await one.add_items(_chat("one"))
    await two.add_items(_chat("two a", "two b"))
    assert await one.pop_item() == {"role": "user", "content": "one"}
    assert await one.get_items() == []
    assert await two.get_items() == _chat("two a", "two b")


async def test_get_items_with_limit(make_session: MakeSession) -> None:
    session = make_session("count_test")
    items = _chat("Message 1", "Response 1", "Message 2", "Response 2", "Message 3", "Response 3")
    await session.add_items(items)
    assert await session.get_items() == items
    assert await session.get_items(limit=2) == items[-2:]
    assert await session.get_items(limit=4) == items[-4:]
    assert await session.get_items(limit=10) == items
    assert await session.get_items(limit=0) == []


async def test_session_settings_limit(make_session: MakeSession) -> None:
    session = make_session("settings", session_settings=SessionSettings(limit=3))
    items = _chat("a", "b", "c", "d", "e")
    await session.add_items(items)
    assert await session.get_items() == items[-3:]
    assert await session.get_items(limit=1) == items[-1:]  # an explicit limit wins


@pytest.mark.parametrize("runner_method", ["run", "run_streamed"])
async def test_run_config_session_limit(make_session: MakeSession, runner_method: str) -> None:
    session = make_session("limit_run")
    await session.add_items(_chat("m1", "r1", "m2", "r2"))
    model = ScriptedModel()
    model.enqueue([assistant_message("done")])
    config = RunConfig(session_settings=SessionSettings(limit=2))
    await _run(
        runner_method, Agent(name="t", model=model), "new", session=session, run_config=config
    )
    assert [i["content"] for i in model.calls[-1].input] == ["m2", "r2", "new"]


@pytest.mark.parametrize("runner_method", ["run", "run_streamed"])
async def test_list_input_is_appended(make_session: MakeSession, runner_method: str) -> None:
    session = make_session("list_input")
    model = ScriptedModel()
    model.enqueue([assistant_message("first")])
    await _run(runner_method, Agent(name="t", model=model), "Hi", session=session)
    model.enqueue([assistant_message("second")])
    await _run(runner_method, Agent(name="t", model=model), _chat("Again"), session=session)
    contents = [i.get("content") for i in await session.get_items()]
    assert contents[0] == "Hi" and contents[2] == "Again" and len(contents) == 4


async def test_unicode_and_sql_looking_content(make_session: MakeSession) -> None:
    session = make_session("unicode'; DROP TABLE agent_messages; --")
    items = _chat("こんにちは 😀 \u00fc", "'; DROP TABLE agent_sessions; --", 'quote " \\ \n\t')
    await session.add_items(items)
    assert await session.get_items() == items


async def test_concurrent_writers_on_one_session(make_session: MakeSession) -> None:
    a, b = make_session("shared"), make_session("shared")
    await asyncio.gather(*(s.add_items(_chat(f"{n}")) for n in range(10) for s in (a, b)))
    items = await a.get_items()
    assert sorted(int(i["content"]) for i in items) == sorted(list(range(10)) * 2)
    assert await b.get_items() == items


# -- what only the ledger does ------------------------------------------------------------------
async def test_pop_and_clear_are_new_versions(tmp_path: Path) -> None:
    with Ledger(f"sqlite:///{tmp_path / 'v.db'}") as ledger:
        session = LedgerSession("v", ledger)
        await session.add_items(_chat("a", "b"))
        await session.pop_item()
        await session.clear_session()
        assert session.version == 3
        assert [m.text for m in ledger.messages("v", version=1)] == ["a", "b"]
        assert [m.text for m in ledger.messages("v", version=2)] == ["a"]
        assert ledger.messages("v") == []


async def test_a_change_asks_the_store_only_after_another_writer_moved_the_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A change commits at the version the session last saw, without reading the store first;
    when another process committed since, the commit is refused and the change applied again
    to what was committed: nothing of either writer is lost, and ``pop_item`` pops the item
    that was committed last, not the last one this session had seen."""
    url = f"sqlite:///{tmp_path / 'w.db'}"
    with Ledger(url) as mine_ledger, Ledger(url) as other_ledger:
        mine, other = LedgerSession("s", mine_ledger), LedgerSession("s", other_ledger)
        await mine.add_items(_chat("a"))
        asked: list[str] = []
        for name in ("version", "load_tracked"):
            real = getattr(mine_ledger, name)
            monkeypatch.setattr(
                mine_ledger,
                name,
                lambda *a, real=real, name=name, **k: asked.append(name) or real(*a, **k),
            )
        await mine.add_items(_chat("b"))
        assert asked == []

        await other.add_items(_chat("c"))
        await mine.add_items(_chat("d"))
        assert asked == ["version", "load_tracked"]
        assert [i["content"] for i in await other.get_items()] == ["a", "b", "c", "d"]

        await other.add_items(_chat("e"))
        popped = await mine.pop_item()
        assert popped is not None and popped["content"] == "e"
        assert [i["content"] for i in await other.get_items()] == ["a", "b", "c", "d"]
        assert mine.version == other.version == 6


async def test_set_items_replaces_a_stored_message_no_item_can_hold() -> None:
    """A message saved by other code that no Responses item can carry (a user message holding
    a tool call) is replaced by ``set_items`` like any other, not refused."""
    with Ledger("memory://") as ledger:
        odd = Msg("user", [ToolUseBlock(id="c", name="n", input={})], id="odd")
        ledger.save("s", [odd, Msg.user("kept", id="k")])
        await LedgerSession("s", ledger).set_items(_chat("hi"))
        assert [m.text for m in ledger.messages("s")] == ["hi"]


async def test_appends_write_only_the_new_rows() -> None:
    with Ledger("memory://") as ledger:
        session = LedgerSession("grow", ledger)
        for n in range(20):
            await session.add_items(_chat(f"turn {n}", f"answer {n}"))
        before = ledger.history("grow")[-1]
        await session.add_items(_chat("last"))
        after = ledger.history("grow")[-1]
        assert after.version == before.version + 1
        assert (after.appended, after.replaced, after.truncated) == (1, 0, 0)


async def test_an_append_compares_only_the_items_it_adds(
    tmp_path: Path, compared: list[int]
) -> None:
    """The session keeps its list as a ``TrackedList``: however long the session, a save after
    ``add_items`` compares only the new messages with the store, after a reload too; pop and
    clear compare nothing they did not change."""
    url = f"sqlite:///{tmp_path / 'long.db'}"
    with Ledger(url) as ledger:
        await LedgerSession("s", ledger).add_items(_chat(*(f"m{i}" for i in range(500))))
    with Ledger(url) as ledger:  # reopened: nothing remembered but the store
        session = LedgerSession("s", ledger)
        assert len(await session.get_items()) == 500
        compared.clear()
        await session.add_items(_chat("a", "b"))
        await session.add_items(_chat("c"))
        assert (await session.pop_item() or {})["content"] == "c"
        assert compared == [2, 1, 0]
        await session.clear_session()
        assert await LedgerSession("s", Ledger(url)).get_items() == []


async def test_a_message_is_converted_to_items_once(tmp_path: Path, converted: list[int]) -> None:
    """The Runner reads the whole session every turn: ``get_items`` converts a message the
    first time and decodes the JSON it kept after that (it converted all 500 every time), and
    every call gets new dicts, so changing one result changes nothing else."""
    url = f"sqlite:///{tmp_path / 'long.db'}"
    with Ledger(url) as ledger:
        await LedgerSession("s", ledger).add_items(_chat(*(f"m{i}" for i in range(500))))
    with Ledger(url) as ledger:
        session = LedgerSession("s", ledger)
        first = await session.get_items()
        assert sum(converted) == 500
        first[0]["content"] = "changed by the caller"
        converted.clear()
        again = await session.get_items()
        assert again[0]["content"] == "m0"
        assert again == await LedgerSession("s", Ledger(url)).get_items()
        converted.clear()
        await session.add_items(_chat("new"))
        assert await session.get_items(limit=2) == [again[-1], _chat("new")[0]]
        assert converted == [1]  # only the new message


async def test_sessions_on_one_ledger_share_what_they_converted(
    tmp_path: Path, converted: list[int]
) -> None:
    """A server makes a session for each request, on the ledger it keeps open: the second
    request's session converted every message the first had converted (500 conversions for a
    500-item session, 0.13-0.28 s at 12,000 items). Another ledger shares nothing. The shared
    entries keep to their budget, and a session whose conversation is larger still converts
    each of its messages once."""
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    with Ledger(url) as ledger:
        await LedgerSession("s", ledger).add_items(_chat(*(f"m{i}" for i in range(500))))
    with Ledger(url) as ledger:
        first = await LedgerSession("s", ledger).get_items()
        assert sum(converted) == 500
        converted.clear()
        second = LedgerSession("s", ledger, tenant="t")  # another tenant: same messages, same items
        assert await LedgerSession("s", ledger).get_items() == first
        assert await second.get_items() == []
        await second.set_items(first)  # recognises every item without converting any
        assert sum(converted) == 0
        assert await LedgerSession("s", Ledger(url)).get_items() == first
        assert sum(converted) == 500  # a ledger of its own converts again

    with Ledger(url) as ledger:
        shared = _Conversions.of(ledger)
        shared.budget = 20 * (shared.ENTRY_BYTES + 40)  # about 20 of these small items
        converted.clear()
        session = LedgerSession("s", ledger)
        assert await session.get_items() == first
        assert await session.get_items() == first
        assert sum(converted) == 500  # once each, by this session
        assert 0 < shared.size <= shared.budget
        assert await LedgerSession("s", ledger).get_items() == first
        assert sum(converted) == 1000  # read oldest first, each dropped before it was needed


async def test_items_json_cannot_give_back_exactly_are_converted_every_time() -> None:
    """A message stored by other code whose items hold bytes: JSON would give them back as
    base64 text, so the second ``get_items`` returned something else than the first."""
    with Ledger("memory://") as ledger:
        extras = {"_responses": {"blob": b"\x00\x01"}}
        ledger.save("s", [Msg.user("hi", id="u", metadata=extras)])
        session = LedgerSession("s", ledger)
        first = await session.get_items()
        assert first[0]["blob"] == b"\x00\x01"
        assert await session.get_items() == first


async def test_a_reader_never_gets_items_another_writer_replaced(tmp_path: Path) -> None:
    """What is kept of a message is keyed by its content: after another writer pops and
    re-adds, a reading session shows exactly what was committed, and what it keeps stays
    about as large as its list."""
    url = f"sqlite:///{tmp_path / 'w.db'}"
    with Ledger(url) as writer_ledger, Ledger(url) as reader_ledger:
        writer, reader = LedgerSession("s", writer_ledger), LedgerSession("s", reader_ledger)
        for round_ in range(100):
            await writer.add_items(_chat(f"q{round_}", f"a{round_}"))
            await writer.pop_item()
            await writer.add_items([{"role": "assistant", "content": f"b{round_}"}])
            assert await reader.get_items() == await writer.get_items()
            await writer.clear_session()
        assert len(reader._items) <= 4 * 2 + 128  # a memory bound: 200 without the trim


async def test_a_commit_that_fails_leaves_none_of_its_change_in_the_session(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The session changes its list in place before it commits: when the commit fails (a full
    disk, here), the next call reads the store again rather than trust a list holding what
    was never committed. A change refused before it starts (a bad item) costs no read."""
    with Ledger("memory://") as ledger:
        session = LedgerSession("s", ledger)
        await session.add_items(_chat("a"))
        real_save = ledger.save

        def full_disk(*args: Any, **kwargs: Any) -> Any:
            raise OSError("no space left on device")

        monkeypatch.setattr(ledger, "save", full_disk)
        with pytest.raises(OSError):
            await session.add_items(_chat("lost"))
        monkeypatch.setattr(ledger, "save", real_save)
        assert [i["content"] for i in await session.get_items()] == ["a"]
        await session.add_items(_chat("b"))
        assert [i["content"] for i in await session.get_items()] == ["a", "b"]

        loads: list[int] = []
        real_load = ledger.load_tracked
        monkeypatch.setattr(
            ledger, "load_tracked", lambda *a, **k: loads.append(1) or real_load(*a, **k)
        )
        with pytest.raises(UserError):
            await session.add_items([42])
        await session.add_items(_chat("c"))
        assert loads == []
        assert [m.text for m in ledger.messages("s")] == ["a", "b", "c"]


async def test_async_ledger_and_url_are_accepted(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    async with AsyncLedger(url) as ledger:
        await LedgerSession("s", ledger).add_items(_chat("hi"))
    owned = LedgerSession("s", url)
    assert await owned.get_items() == _chat("hi")
    owned.close()


def test_missing_sdk_gives_an_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "agents.memory.session_settings", None)
    with pytest.raises(MissingDependencyError, match=r"agentledger\[openai-agents\]"):
        LedgerSession("s", "memory://")


async def test_set_items_writes_only_the_changed_item() -> None:
    with Ledger("memory://") as ledger:
        session = LedgerSession("edit", ledger)
        items = _chat(*(f"message {n}" for n in range(40)))
        items[11] = {"type": "function_call_output", "call_id": "c", "output": "long " * 100}
        await session.add_items(items[:20])
        await session.add_items(items[20:])
        ids = [m.id for m in ledger.messages("edit")]
        edited = [*items[:11], {**items[11], "output": "short"}, *items[12:]]
        await session.set_items(edited)
        last = ledger.history("edit")[-1]
        assert (last.appended, last.replaced, last.truncated) == (0, 1, 0)
        assert await session.get_items() == edited
        assert [m.id for m in ledger.messages("edit")] == ids  # ids kept, the edited one too
        assert (
            ledger.messages("edit", version=last.version - 1)[11]
            .tool_results[0]
            .text.startswith("long")
        )


@pytest.mark.parametrize("warm", [True, False])
async def test_set_items_across_a_tool_call(warm: bool) -> None:
    call = {"type": "function_call", "call_id": "c1", "name": "grep", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "c1", "output": "many lines"}
    items = [*_chat("find it"), call, output, *_chat("found")]
    with Ledger("memory://") as ledger:
        writer = LedgerSession("t", ledger)
        await writer.add_items(items)
        # the session that added the items knows them; a fresh one converts everything
        fresh = writer if warm else LedgerSession("t", ledger)
        edited = [*items[:2], {**output, "output": "1 line"}, items[3]]
        await fresh.set_items(edited)
        last = ledger.history("t")[-1]
        assert (last.appended, last.replaced, last.truncated) == (0, 1, 0)
        result = ledger.messages("t")[2].tool_results[0]
        assert (result.name, result.text) == ("grep", "1 line")  # named after its call
        await fresh.set_items(edited)  # unchanged: nothing written
        assert ledger.history("t")[-1].version == last.version
        await fresh.set_items(edited[:2])  # shorter: a truncation, items still exact
        assert await LedgerSession("t", ledger).get_items() == edited[:2]


@pytest.mark.parametrize(("limit", "said"), [(1.5, "float"), (2.0, "float"), ("2", "str")])
async def test_a_limit_that_is_not_an_int_is_a_user_error(limit: Any, said: str) -> None:
    session = LedgerSession("s", Ledger("memory://"))
    with pytest.raises(UserError, match=f"limit must be an int or None, got {said}"):
        await session.get_items(limit)


async def test_a_negative_limit_is_no_limit_as_for_the_sdks_session(tmp_path: Path) -> None:
    from agents.memory import SQLiteSession

    items = [{"role": "user", "content": f"m{i}"} for i in range(3)]
    ours, theirs = LedgerSession("s", Ledger("memory://")), SQLiteSession("s", str(tmp_path / "a"))
    for session in (ours, theirs):
        await session.add_items(items)
    for limit in (-1, -5, 0, 1, 2, 5, None):
        assert await ours.get_items(limit) == await theirs.get_items(limit), limit


@pytest.mark.parametrize("ledger", [123, b"sqlite:///x.db", object()])
def test_a_ledger_argument_that_is_no_ledger_is_refused(ledger: Any) -> None:
    with pytest.raises(UserError, match="ledger must be a Ledger, an AsyncLedger or a store URL"):
        LedgerSession("s", ledger)


@pytest.mark.parametrize("method", ["add_items", "set_items"])
@pytest.mark.parametrize("items", [None, {"role": "user", "content": "hi"}, "hi", b"hi", 5])
async def test_items_that_are_no_list_of_items_are_a_user_error(method: str, items: Any) -> None:
    """add_items(None) did nothing, add_items(one_item) said 'item 0 is a str', add_items(5)
    and set_items(None) raised TypeError (the SDK's session skips None and stores a dict's keys
    or a string's characters as items). Now a UserError that says what it got; nothing is
    written."""
    with Ledger("memory://") as ledger:
        session = LedgerSession("s", ledger)
        await session.add_items(_chat("kept"))
        with pytest.raises(UserError, match=f"{method}: items must be a list of items, got "):
            await getattr(session, method)(items)
        assert ledger.version("s") == 1 and await session.get_items() == _chat("kept")
        await session.add_items(item for item in _chat("any iterable"))
        assert await session.get_items() == [*_chat("kept"), *_chat("any iterable")]


def test_the_default_session_settings_are_the_sdks(make_session: MakeSession) -> None:
    assert make_session("s").session_settings == SessionSettings()


@pytest.mark.parametrize("settings", [5, "limit=3", {"limit": "many"}, {"bogus": 1}])
def test_session_settings_of_the_wrong_type_are_a_user_error(settings: Any) -> None:
    with pytest.raises(UserError, match="session_settings: "):
        LedgerSession("s", "memory://", session_settings=settings)
