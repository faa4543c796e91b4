"""AsyncLedger: the same contract, awaited, without blocking the event loop."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger.errors import ConflictError
from agentledger.messages import Msg
from agentledger.store import Ledger, MemoryStore
from agentledger.store.aio import AsyncLedger


async def test_async_round_trip_and_conflict() -> None:
    async with AsyncLedger("memory://") as ledger:
        msgs = [Msg.user("a", id="a")]
        report = await ledger.save("s", msgs)
        assert report.version == 1
        assert await ledger.messages("s") == msgs
        assert (await ledger.save("s", msgs)).noop
        with pytest.raises(ConflictError):
            await ledger.save("s", [*msgs, Msg.user("b")], expected_version=0)
        assert [i.session_id for i in await ledger.list_sessions()] == ["s"]
        sync_report = await ledger.sync_messages("s", [{"role": "user", "content": "x"}])
        assert sync_report.replaced == 1


async def test_concurrent_saves_of_different_sessions() -> None:
    ledger = AsyncLedger("memory://")
    reports = await asyncio.gather(*(ledger.save(f"s{i}", [Msg.user(str(i))]) for i in range(20)))
    assert {r.version for r in reports} == {1}
    assert len(await ledger.list_sessions()) == 20


async def test_a_tracked_list_keeps_its_record_through_the_async_ledger(
    compared: list[int],
) -> None:
    ledger = AsyncLedger("memory://")
    await ledger.save("s", [Msg.user(f"m{i}", id=f"m{i}") for i in range(50)])
    live = await ledger.tracked("s")
    compared.clear()
    live.append(Msg.assistant("reply", id="r"))
    assert (await ledger.save("s", live)).appended == 1
    assert compared == [1]  # the list was passed as it is, its record intact
    assert await ledger.messages("s") == list(live)
    live.append(Msg.assistant("another", id="r2"))
    await ledger.save_state("s", lists={"context": live}, values={"k": 1})
    assert compared == [1, 1]  # save_state passes it as it is too
    assert await ledger.messages("s") == list(live)


# -- decoding: in the worker thread, and a remembered list once known decoded is not walked --------
def _deferred(msgs: list[Msg]) -> list[bool]:
    return [m._stored is not None for m in msgs]


def _walks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The length of every list the ledger walks to decode."""
    from agentledger.store import ledger as ledger_module

    walked: list[int] = []
    real = ledger_module.decode_deferred

    def counting(msgs):  # type: ignore[no-untyped-def]
        walked.append(len(msgs))
        real(msgs)

    monkeypatch.setattr(ledger_module, "decode_deferred", counting)
    return walked


async def test_a_remembered_list_is_walked_for_decoding_until_it_is_known_decoded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = MemoryStore()
    Ledger(store).save("s", [Msg.user(f"q{i}") for i in range(50)])
    Ledger(store).save("other", [Msg.user("from elsewhere")])
    walked = _walks(monkeypatch)
    ledger = AsyncLedger(store)
    first = await ledger.messages("s")  # from the store: deferred, decoded here
    again = await ledger.load("s")  # remembered and known decoded: nothing walked
    _, tracked = await ledger.load_tracked("s")
    assert walked == [50] and not any(_deferred(first) + _deferred(tracked._items))
    assert again.lists["context"] == first
    await ledger.save("s", [*first, Msg.assistant("fresh")])  # what it saves it decoded
    assert not any(_deferred(await ledger.messages("s"))) and walked == [50]
    Ledger(store).save("s", [*first, Msg.user("from another writer")])
    latest = await ledger.messages("s")  # read from the store again, and walked
    assert walked == [50, 51] and not any(_deferred(latest))


_STEPS = ("fresh", "foreign", "reloaded", "external", "edit", "sync read", "read")


@settings(max_examples=60, deadline=None)
@given(steps=st.lists(st.sampled_from(_STEPS), min_size=1, max_size=12))
def test_every_message_an_async_load_returns_is_decoded(steps: list[str]) -> None:
    """Whatever was saved (messages decoded or still deferred, loaded from another store or
    reloaded from this one, saves by another writer, no-op saves) and however the ledger
    loaded the session before (its synchronous loads leave messages deferred), every load of
    the async ledger returns the session's messages decoded: ``Head.decoded`` is never wrong."""
    store, elsewhere = MemoryStore(), MemoryStore()
    Ledger(elsewhere).save("x", [Msg.user(f"foreign {i}") for i in range(len(steps))])

    async def run() -> None:
        ledger = AsyncLedger(store)
        expected: list[Msg] = []
        reads = [
            lambda: ledger.messages("s"),
            lambda: _context(ledger.load("s")),
            lambda: _tracked_items(ledger.load_tracked("s")),
            lambda: _items(ledger.tracked("s")),
        ]
        for i, step in enumerate(steps):
            foreign = Ledger(elsewhere).messages("x")[i]  # deferred until something reads it
            if step == "fresh":
                expected = [*expected, Msg.user(f"fresh {i}")]
            elif step == "foreign":
                expected = [*expected, foreign]
            elif step == "reloaded":  # equal to what is stored: a no-op, every message deferred
                expected = Ledger(store).messages("s")
            elif step == "external":  # another writer: the ledger's memory is stale
                expected = [*expected, Msg.assistant(f"external {i}")]
                Ledger(store).save("s", expected)
                continue
            elif step == "edit" and expected:
                expected = [foreign, *expected[1:]]
            elif step == "sync read":  # the ledger remembers what it loaded, not decoded
                ledger.sync.messages("s")
            if step not in ("read", "sync read"):
                await ledger.save("s", expected)
            got = await reads[i % len(reads)]()
            assert [m.id for m in got] == [m.id for m in expected]
            assert not any(_deferred(got)), step

    asyncio.run(run())


async def _context(state):  # type: ignore[no-untyped-def]
    return (await state).lists.get("context", [])


async def _tracked_items(loaded):  # type: ignore[no-untyped-def]
    return (await loaded)[1]._items


async def _items(tracked):  # type: ignore[no-untyped-def]
    return (await tracked)._items


def test_a_list_is_no_longer_known_decoded_once_a_deferred_message_is_put_or_remembered() -> None:
    """``Head.decoded`` is dropped for a list whose commit put a message still deferred, or
    which is remembered from the caller's snapshot; kept when every message put is decoded.
    (Through ``Ledger.save`` every message put is decoded first, for its search text: these
    are the rules that keep the flag exact should that ever change.)"""
    from agentledger.store.base import Head, ListWrite, StoredMsg
    from agentledger.store.ledger import _advance_list, _Planned

    store = MemoryStore()
    Ledger(store).save("x", [Msg.user("deferred")])
    deferred = Ledger(store).messages("x")[0]
    decoded = Msg.user("decoded")

    def advanced(put: Msg, *, snapshot: bool) -> set[str]:
        first = Msg.user("first")
        head = Head(1, {"context": [first.digest]}, {}, messages={"context": [first]})
        head.decoded.add("context")
        row = StoredMsg(put.id, put.digest, b"{}")
        write = ListWrite("context", [(1, row)], 2, runs=[(0, 0, 1)])
        planned = _Planned(None, written={"context": [put]})
        if snapshot:
            planned.snapshots["context"] = [first, put]
        _advance_list(head, write, planned)
        return head.decoded

    assert advanced(decoded, snapshot=False) == {"context"}
    assert advanced(deferred, snapshot=False) == set()
    assert advanced(decoded, snapshot=True) == set()


def test_an_async_ledger_takes_the_ledgers_settings_or_shares_one() -> None:
    from agentledger.errors import UserError

    made = AsyncLedger("memory://", tenant="acme", cached_sessions=3, cached_bytes=1_000)
    assert made.sync.tenant == "acme"
    assert (made.sync._heads.max_sessions, made.sync._heads.max_bytes) == (3, 1_000)
    shared = Ledger("memory://", cached_sessions=2)
    assert AsyncLedger(shared).sync is shared
    with pytest.raises(UserError, match="Ledger's settings"):
        AsyncLedger(shared, cached_bytes=1)
    with pytest.raises(UserError, match="cached_bytes"):
        AsyncLedger("memory://", cached_bytes=-1)
