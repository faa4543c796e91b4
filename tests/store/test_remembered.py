"""A load served from what the ledger remembers is the load the store gives.

``Ledger.load`` of the latest version answers from the ledger's remembered head when the
stored session is still the same life at the same version (``Ledger._remembered``). Whatever
happens in between (this ledger's saves, another writer's, a delete and a new session at the
same version, values set and deleted, lists emptied, the session forgotten), each load equals
a fresh ledger's load of the same store, and hands out lists and values of its own.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentledger import Ledger, Msg
from tests.store.backends import LedgerOn, backend, ledger_on  # noqa: F401  (fixtures)

_OPS = st.lists(
    st.sampled_from(
        ["append", "edit", "value", "unset", "other_list", "drop_unnamed", "other_writer",
         "recreate", "forget", "load", "reopen"]
    ),
    max_size=14,
)  # fmt: skip


def _same(a: Any, b: Any) -> None:
    assert a.version == b.version and a.values == b.values
    assert a.lists == b.lists
    for name in a.lists:
        assert [m.digest for m in a.lists[name]] == [m.digest for m in b.lists[name]]


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(ops=_OPS)
def test_every_load_equals_a_fresh_ledgers_load(
    backend: str,  # noqa: F811
    ledger_on: LedgerOn,  # noqa: F811
    ops: list[str],
) -> None:
    first = ledger_on(backend)
    session = f"s{id(ops)}"
    store = first.store
    ledger = Ledger(store, cached_sessions=1)
    other = Ledger(store)
    context = [Msg.user("hello", id="m0")]
    ledger.save(session, context)
    for n, op in enumerate(ops, 1):
        if op == "append":
            context = [*ledger.messages(session), Msg.assistant(f"a{n}", id=f"a{n}")]
            ledger.save(session, context)
        elif op == "edit":
            context = ledger.messages(session)
            if context:
                context[-1] = context[-1].replace(content=f"edited {n}")
                ledger.save(session, context)
        elif op == "value":
            ledger.save_state(session, values={"note": {"n": n, "raw": b"\x00"}})
        elif op == "unset":
            ledger.save_state(session, values={"note": None})
        elif op == "other_list":
            ledger.save_state(session, lists={"scratch": [Msg.user(f"x{n}", id=f"x{n}")]})
        elif op == "drop_unnamed":
            ledger.save_state(session, lists={"context": [Msg.user("only")]}, drop_unnamed=True)
        elif op == "other_writer":
            other.save_state(
                session,
                lists={"context": [*other.messages(session), Msg.user(f"o{n}", id=f"o{n}")]},
                values={"other": n},
            )
        elif op == "recreate":  # a new life of the session at the version this ledger knows
            version = ledger.version(session)
            other.delete(session)
            for i in range(max(version, 1)):
                other.save(
                    session, [Msg.user(f"life {n}.{j}", id=f"l{n}_{j}") for j in range(i + 1)]
                )
        elif op == "forget":  # cached_sessions=1: using another session forgets this one
            ledger.save(f"{session}-else", [Msg.user("elsewhere")])
        elif op == "reopen":
            ledger = Ledger(store, cached_sessions=1)
        loaded = ledger.load(session)
        _same(loaded, Ledger(store).load(session))
        for msgs in loaded.lists.values():  # the caller's to change: the next load is unmoved
            msgs.clear()
        loaded.values.clear()
        _same(ledger.load(session), Ledger(store).load(session))


def test_a_load_after_a_save_reads_no_message_from_the_store(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ledger = Ledger("memory://")
    msgs = [Msg.user(f"m{i}") for i in range(100)]
    ledger.save_state("s", lists={"context": msgs}, values={"summary": {"text": "so far"}})
    loads: list[Any] = []
    real = ledger.store.load
    monkeypatch.setattr(ledger.store, "load", lambda *a: loads.append(a) or real(*a))
    state = ledger.load("s")
    assert loads == [] and state.context == msgs and state.values == {"summary": {"text": "so far"}}
    assert all(a is b for a, b in zip(state.context, msgs, strict=True))  # the committed objects
    Ledger(ledger.store).save("s", [*msgs, Msg.user("another writer")])
    assert len(ledger.load("s").context) == 101 and len(loads) == 1  # a new version: read it
    assert len(ledger.load("s").context) == 101 and len(loads) == 1  # then remembered again
