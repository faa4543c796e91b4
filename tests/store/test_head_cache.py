"""The sessions a ledger remembers stay within a count and a byte budget, and forgetting one
loses nothing but the shortcut (``store.head_cache``)."""

from __future__ import annotations

import gc
import tracemalloc
from collections import OrderedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger import Ledger, Msg, UserError
from agentledger.messages import encode
from agentledger.store.base import Head, SessionKey
from agentledger.store.head_cache import DEFAULT_BODY, PER_DIGEST, PER_MESSAGE, HeadCache


def _msgs(count: int, tag: str, size: int = 100) -> list[Msg]:
    return [Msg.user(f"{tag}{i:05d}" + "x" * size, id=f"{tag}{i}") for i in range(count)]


def _head(remembered: int, digests: int) -> Head:
    msgs = _msgs(remembered, "h", 0)
    return Head(1, {"context": [b"d" * 32] * digests}, {}, messages={"context": msgs})


_OPS = st.lists(
    st.tuples(
        st.sampled_from(["kept", "committed", "forget"]),
        st.integers(0, 5),  # which session
        st.integers(0, 40),  # messages remembered
        st.integers(0, 40),  # digests without a message
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(ops=_OPS, max_sessions=st.integers(1, 4), max_bytes=st.integers(0, 60_000))
def test_the_cache_keeps_the_most_recent_sessions_within_both_bounds(
    ops: list[tuple[str, int, int, int]], max_sessions: int, max_bytes: int
) -> None:
    cache = HeadCache(max_sessions, max_bytes)
    model: OrderedDict[SessionKey, Head] = OrderedDict()  # most recently kept last
    for op, n, remembered, extra in ops:
        key = SessionKey("t", f"s{n}")
        if op == "forget":
            cache.forget(key)
            model.pop(key, None)
            continue
        head = _head(remembered, remembered + extra)
        weights = {k: cache.weight_of(k) for k in cache}
        if op == "kept":
            cache.kept(key, head)
        else:
            cache.committed(key, head, written=min(remembered, 3), body=300)
        model.pop(key, None)
        model[key] = head
        # the session kept last stays, whatever it weighs
        assert cache.get(key) is head
        kept = list(cache)
        assert kept[-1] == key
        # what stays is the most recent suffix of what was kept, within both bounds
        assert kept == list(model)[-len(kept) :]
        assert len(kept) <= max_sessions
        assert cache.weight == sum(cache.weight_of(k) for k in kept)
        assert cache.weight <= max_bytes or len(kept) == 1
        # and no more was forgotten than the bounds needed: the last one forgotten by this
        # keep would not have fitted beside what stays
        evicted = [k for k in weights if k not in kept and k != key]
        if evicted:
            last = evicted[-1]
            assert len(kept) + 1 > max_sessions or cache.weight + weights[last] > max_bytes
        for gone in list(model)[: -len(kept)]:
            assert cache.get(gone) is None
        model = OrderedDict((k, model[k]) for k in kept)


def test_a_head_weighs_its_bodies_and_a_constant_per_message() -> None:
    cache = HeadCache(4, 10**9)
    key = SessionKey("t", "s")
    cache.kept(key, _head(0, 10))  # read back from the store: digests only
    assert cache.weight == 10 * PER_DIGEST
    cache.kept(key, _head(10, 10))  # a no-op save remembered 10 messages of unknown size
    assert cache.weight == 10 * (DEFAULT_BODY + PER_MESSAGE)


def test_a_load_is_weighed_by_its_bodies_and_a_save_adds_what_it_wrote() -> None:
    ledger = Ledger("memory://")
    msgs = _msgs(200, "m", 300)
    ledger.save("s", msgs)
    fresh = Ledger(ledger.store)
    loaded = fresh.messages("s")
    key = fresh.key("s")
    bodies = sum(len(encode(m)) for m in msgs)
    assert fresh._heads.weight_of(key) == bodies + 200 * PER_MESSAGE
    new = Msg.assistant("y" * 5_000, id="new")
    fresh.save("s", [*loaded, new])
    assert fresh._heads.weight_of(key) == pytest.approx(
        bodies + len(encode(new)) + 201 * PER_MESSAGE, abs=1
    )
    fresh.save("s", loaded[:100])  # half dropped: the rest weighs half
    assert fresh._heads.weight_of(key) == pytest.approx(
        100 * ((bodies + len(encode(new))) / 201 + PER_MESSAGE), abs=1
    )


def test_the_estimate_is_not_below_what_a_loaded_session_holds() -> None:
    ledger = Ledger("memory://")
    ledger.save("s", _msgs(2_000, "m", 1_000))
    gc.collect()
    tracemalloc.start()
    try:
        fresh = Ledger(ledger.store)
        for msg in fresh.messages("s"):
            assert msg.text  # decoded, as an application reads them
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    estimate = fresh._heads.weight_of(fresh.key("s"))
    assert 0.8 * held <= estimate <= 1.5 * held


def test_long_sessions_are_forgotten_sooner_and_read_back_exactly() -> None:
    one_session = 100 * (len(encode(_msgs(1, "a", 1_000)[0])) + PER_MESSAGE)
    ledger = Ledger("memory://", cached_sessions=64, cached_bytes=int(2.5 * one_session))
    lists = {name: _msgs(100, name, 1_000) for name in "abcd"}
    for name, msgs in lists.items():
        ledger.save(name, msgs)
    assert [k.session for k in ledger._heads] == ["c", "d"]  # two fit the budget
    ledger.save("short", _msgs(3, "s"))  # a short session fits beside them
    assert [k.session for k in ledger._heads] == ["c", "d", "short"]
    lists["a"].append(Msg.user("more", id="more"))
    report = ledger.save("a", lists["a"])  # planned on digests read back from the store
    assert (report.appended, report.replaced, report.truncated) == (1, 0, 0)
    for name, msgs in lists.items():
        assert ledger.messages(name) == msgs
        assert Ledger(ledger.store).messages(name) == msgs
    assert ledger._heads.weight <= 2.5 * one_session


def test_a_session_larger_than_the_budget_still_saves_at_the_cost_of_its_change() -> None:
    ledger = Ledger("memory://", cached_bytes=0)
    msgs = _msgs(300, "m")
    ledger.save("s", msgs)
    assert [k.session for k in ledger._heads] == ["s"]
    msgs.append(Msg.assistant("next", id="next"))
    report = ledger.save("s", msgs)
    assert (report.appended, report.bytes_written) == (1, len(encode(msgs[-1])))
    assert ledger.save("s", msgs).noop
    ledger.save("other", _msgs(2, "o"))
    assert [k.session for k in ledger._heads] == ["other"]
    assert ledger.messages("s") == msgs


def test_bounds_that_cannot_hold_are_refused() -> None:
    with pytest.raises(UserError, match="cached_bytes"):
        Ledger("memory://", cached_bytes=-1)
    with pytest.raises(UserError, match="cached_sessions"):
        Ledger("memory://", cached_sessions=0)
    for wrong in ("1GB", 1.5, True, None, 2**70):
        with pytest.raises(UserError, match="cached_bytes"):
            Ledger("memory://", cached_bytes=wrong)  # type: ignore[arg-type]


def test_the_lists_sync_converts_are_remembered_within_the_byte_budget_too() -> None:
    def chat(tag: str) -> list[dict[str, str]]:
        return [{"role": "user", "content": f"{tag}{i}" + "x" * 1_000} for i in range(200)]

    lists = {name: chat(name) for name in "abcd"}
    probe = Ledger("memory://")
    probe.sync("probe", chat("p"))
    one_list = next(iter(probe._converters.values())).weight
    assert one_list >= 1.5 * 200 * 1_000  # its dicts fingerprinted one by one and in chunks
    ledger = Ledger("memory://", cached_bytes=int(2.5 * one_list))
    for name, dicts in lists.items():
        ledger.sync(name, dicts)
    assert [key.session for key, _ in ledger._converters] == ["c", "d"]
    lists["a"].append({"role": "assistant", "content": "more"})
    report = ledger.sync("a", lists["a"])  # converted again from scratch, same ids
    assert (report.appended, report.replaced, report.truncated) == (1, 0, 0)
    assert [key.session for key, _ in ledger._converters] == ["d", "a"]


def test_the_lists_sync_converts_are_remembered_for_as_many_sessions_as_heads() -> None:
    ledger = Ledger("memory://", cached_sessions=2)
    for name in "abc":
        ledger.sync(name, [{"role": "user", "content": name}])
    assert [key.session for key, _ in ledger._converters] == ["b", "c"]
