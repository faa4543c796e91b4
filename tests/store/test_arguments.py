"""The Ledger's counts and search query: every backend reads them alike, or ``UserError``.

Found by trying odd arguments on each backend: a float search limit reached SQLite as a number
the store then read back as damage (``CorruptStoreError`` on a healthy file), a limit past
64 bits raised ``OverflowError`` from SQLite alone, a lease wait of ``math.inf`` raised it
from every backend, a search query holding a lone surrogate
raised ``UnicodeEncodeError`` from Postgres alone, a limit of 0 gave one hit on the memory and
JSONL stores and none on the others, ``purge_history`` took ``keep_last=2.5`` and ``load`` took
``version=True``.
"""

from __future__ import annotations

import asyncio
import math
import resource
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentledger import AsyncLedger, Ledger, Msg
from agentledger.errors import AgentLedgerError, InvalidIdError, UserError
from agentledger.messages.checks import MAX_COUNT
from tests.store.backends import LedgerOn, backend, ledger_on  # noqa: F401  (fixtures)

_counts = st.one_of(
    st.integers(-3, 8),
    st.sampled_from([MAX_COUNT, MAX_COUNT + 1, 2**70, -(2**63)]),
    st.floats(allow_nan=False, max_value=10),
    st.booleans(),
    st.none(),
    st.sampled_from(["3", b"1", 2.0, 1j]),
)
_queries = st.one_of(
    st.sampled_from(["hello", "hello world", "", "   ", '"', "NEAR(", "x\ud800", "\x00"]),
    st.text(max_size=6),
    st.none(),
    st.integers(),
    st.just(b"hello"),
)


def _count(value: Any, minimum: int = 0) -> bool:
    return type(value) is int and minimum <= value <= MAX_COUNT


def _text(value: Any) -> bool:
    if type(value) is not str:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _call(valid: bool, call: Any) -> Any:
    """``call()``'s result; ``UserError`` exactly when its arguments are not ``valid`` (other
    errors of this library, such as a version that does not exist, may follow valid ones)."""
    try:
        result = call()
    except UserError:
        assert not valid, "refused a valid argument"
        return None
    except AgentLedgerError:
        assert valid, "an invalid argument was not refused as the caller's error"
        return None
    assert valid, "an invalid argument was taken"
    return result


def test_counts_and_queries_are_read_alike_by_every_backend_or_refused(
    backend: str,  # noqa: F811
    ledger_on: LedgerOn,  # noqa: F811
) -> None:
    with ledger_on(backend) as ledger:  # one store for every example
        ledger.save("s", [Msg.user(f"hello world {i}", id=f"m{i}") for i in range(3)])
        ledger.save("s", [Msg.user(f"hello world {i}", id=f"m{i}") for i in range(4)])

        @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(
            limit=_counts,
            offset=_counts,
            version=_counts,
            keep=_counts,
            expected=_counts,
            query=_queries,
        )
        def check(limit: Any, offset: Any, version: Any, keep: Any, expected: Any, query: Any):
            hits = _call(_count(limit) and _text(query), lambda: ledger.search(query, limit=limit))
            if hits is not None and query == "hello":
                assert len(hits) == min(limit, 4)
            if limit is None:
                limit = 10  # a listing's limit may be None: every row
            listed = _call(
                _count(limit) and _count(offset),
                lambda: ledger.list_sessions(limit=limit, offset=offset),
            )
            if listed is not None:
                assert len(listed) == (1 if offset == 0 and limit else 0)
            # any integer is a version (one no store has is not found), anything else refused
            _call(
                type(version) is int or version is None, lambda: ledger.load("s", version=version)
            )
            _call(
                _count(expected) or expected is None,
                lambda: ledger.save("s", ledger.messages("s"), expected_version=expected),
            )
            _call(_count(keep, 1), lambda: _purge_a_copy(ledger, keep))

        check()


def _purge_a_copy(ledger: Ledger, keep: Any) -> int:
    """Purge a fork of ``s`` (``purge_history`` forgets versions: ``s`` is left whole)."""
    ledger.fork("s", "fork")
    try:
        ledger.save("fork", [Msg.user("forked", id="f")])
        return ledger.purge_history("fork", keep_last=keep)
    finally:
        ledger.delete("fork")


@settings(max_examples=30, deadline=None)
@given(
    wait=st.one_of(
        st.floats(max_value=0.05),
        st.integers(-2, 0),
        st.sampled_from([math.inf, -math.inf, math.nan, 1e300, True, "1", None]),
    )
)
def test_a_lease_wait_is_a_number_of_seconds_up_to_infinity_or_refused(wait: Any) -> None:
    """``math.inf`` waits as long as it takes (it used to raise ``OverflowError`` from
    ``lock.acquire``); a NaN, a negative wait or a non-number is the caller's error."""
    valid = (
        type(wait) in (int, float) and not math.isnan(wait) and wait >= 0
    )  # fmt: skip
    with Ledger("memory://") as ledger:
        _call(valid, lambda: _take(ledger.lease("s", wait=wait)))

        async def take_async() -> None:
            async with AsyncLedger(ledger).lease("s", wait=wait):
                pass

        _call(valid, lambda: asyncio.run(take_async()))


def _take(lease: Any) -> None:
    with lease:
        pass


def test_an_infinite_wait_takes_the_lease_when_it_is_given_back(
    backend: str,  # noqa: F811
    ledger_on: LedgerOn,  # noqa: F811
) -> None:
    with ledger_on(backend) as ledger:
        taken = threading.Event()
        with ledger.lease("s"):

            def waiter() -> None:
                with ledger.lease("s", wait=math.inf):
                    taken.set()

            thread = threading.Thread(target=waiter)
            thread.start()
            assert not taken.wait(0.3)  # still held: the waiter waits
        assert taken.wait(10)
        thread.join(10)


_NAMES = [["context"], {"a": 1}, 1, None, b"context", "", "a/b", "x" * 65, "\x00"]


@pytest.mark.parametrize("name", _NAMES, ids=repr)
def test_every_call_that_takes_a_list_name_refuses_one_that_is_not(name: Any) -> None:
    """A list name that is not one (a list, an object, a number, bytes, a path) is an
    ``InvalidIdError`` from every call that takes one, before anything is written (``save`` and
    ``sync`` raised ``TypeError: unhashable type`` for a list or an object)."""
    with Ledger("memory://") as ledger:
        ledger.save("s", [Msg.user("hi", id="m1")])
        aio = AsyncLedger(ledger)
        calls: list[Callable[[], Any]] = [
            lambda: ledger.save("s", [], name=name),
            lambda: ledger.sync("s", [{"role": "user", "content": "hi"}], name=name),
            lambda: ledger.messages("s", name=name),
            lambda: ledger.tracked("s", name=name),
            lambda: ledger.load_tracked("s", name=name),
            lambda: asyncio.run(aio.save("s", [], name=name)),
            lambda: asyncio.run(aio.messages("s", name=name)),
        ]
        if not isinstance(name, (list, dict)):  # a key of the caller's own dict
            calls.append(lambda: ledger.save_state("s", lists={name: []}))
            calls.append(lambda: ledger.save_state("s", values={name: 1}))
        for call in calls:
            with pytest.raises(InvalidIdError):
                call()
        assert ledger.version("s") == 1


_BAD = [None, 5, 1.0, True, "1", b"x", [("k", 1)], {"context": None}, {"context": 5}, object()]


def _calls(ledger: Any, value: Any, fork: str) -> dict[str, Callable[[], Any]]:
    """Every argument of ``ledger``'s calls that ``value`` may be wrong for, by name; for a
    ``Ledger`` or an ``AsyncLedger`` (a coroutine then, which ``_outcome`` runs)."""
    return {
        "load version": lambda: ledger.load("s", version=value),
        "messages version": lambda: ledger.messages("s", version=value),
        "fork at_version": lambda: ledger.fork("s", fork, at_version=value),
        "save messages": lambda: ledger.save("s", value),
        "save_state lists": lambda: ledger.save_state("s", lists=value),
        "save_state a list": lambda: ledger.save_state("s", lists={"context": value}),
        "save_state values": lambda: ledger.save_state("s", values=value),
        "save_state create": lambda: ledger.save_state("new", create=value),
        "save_state drop_unnamed": lambda: ledger.save_state("d", drop_unnamed=value),
    }


def _outcome(call: Callable[[], Any]) -> str:
    try:
        result = call()
        if asyncio.iscoroutine(result):
            asyncio.run(result)
    except AgentLedgerError as exc:
        return type(exc).__name__
    return "ok"


@pytest.mark.parametrize("value", _BAD, ids=repr)
def test_the_async_ledger_refuses_what_the_ledger_refuses_alike(value: Any) -> None:
    """``AsyncLedger`` checks its arguments as ``Ledger`` does, before its worker thread: it
    took ``load(version=True)`` and ``version=1.0`` (the state then said version ``True``), and
    ``save("s", None)`` and ``save_state(lists=5)`` raised ``TypeError`` or ``AttributeError``
    (from ``Ledger.save_state`` too), where ``UserError`` is the caller's error."""
    with Ledger("memory://") as ledger:
        held = [Msg.user("hi", id="m1")]
        ledger.save("s", held)
        aio = AsyncLedger(ledger)
        sync_calls, async_calls = _calls(ledger, value, "f1"), _calls(aio, value, "f2")
        for name, call in sync_calls.items():
            expected = _outcome(call)
            assert expected in ("ok", "UserError", "InvalidIdError", "VersionNotFoundError"), name
            assert _outcome(async_calls[name]) == expected, name
        assert ledger.messages("s") == held


_EXTEND_ITSELF = """
from agentledger import Ledger, Msg
with Ledger("memory://") as ledger:
    ledger.save("s", [Msg.user("a", id="a"), Msg.user("b", id="b")])
    tracked = ledger.tracked("s")
    tracked.extend(tracked)
    tracked += tracked
    ledger.save("s", tracked)
    print(",".join(m.id for m in ledger.messages("s")))
"""


def test_a_tracked_list_extended_by_itself_doubles_as_a_list_does() -> None:
    """``tracked.extend(tracked)`` (and ``+=``) read the list while appending to it, and grew
    it until memory ran out; ``list.extend`` reads itself whole first. Run in a process with
    1 GiB of address space, so that a regression fails at once instead of filling memory."""

    def capped() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    done = subprocess.run(
        [sys.executable, "-c", _EXTEND_ITSELF],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=capped,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [",".join(["a", "b"] * 4)]


@pytest.mark.parametrize("value", [None, 1, "no", 0.0])
def test_save_state_flags_are_bools_or_refused(value: Any) -> None:
    """``create="no"`` made a session (any truthy value did), ``drop_unnamed=1`` emptied one."""
    with Ledger("memory://") as ledger:
        ledger.save("s", [Msg.user("hi", id="m1")])
        for flag in ("create", "drop_unnamed"):
            with pytest.raises(UserError, match=flag):
                ledger.save_state("s", **{flag: value})
            with pytest.raises(UserError, match=flag):
                asyncio.run(AsyncLedger(ledger).save_state("t", **{flag: value}))
        assert [m.id for m in ledger.messages("s")] == ["m1"] and not ledger.exists("t")
