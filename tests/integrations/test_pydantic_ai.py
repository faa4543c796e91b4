"""pydantic-ai histories stored in the ledger: exact round trips on every backend, incremental
saves, and a real ``Agent`` (offline ``FunctionModel``) persisting through ``PersistHistory``."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from pydantic_ai import messages as m

from agentledger import Ledger
from agentledger.integrations.pydantic_ai import LedgerHistory, from_msgs, to_msgs
from tests.integrations import pai_strategies as pst
from tests.store.backends import LedgerOn, backend, ledger_on  # noqa: F401 (fixtures)

Adapter = m.ModelMessagesTypeAdapter
_sessions = itertools.count()


def as_json(messages: Sequence[m.ModelMessage]) -> bytes:
    return Adapter.dump_json(list(messages))


@pytest.fixture
def ledger(backend: str, ledger_on: LedgerOn) -> Ledger:  # noqa: F811
    """A ledger on a fresh store of each kind, shared by one test's Hypothesis examples."""
    return ledger_on(backend)


@settings(max_examples=100, deadline=None)
@given(pst.histories)
def test_conversion_is_exact_and_deterministic(history: list[m.ModelMessage]) -> None:
    msgs = to_msgs(history)
    assert as_json(from_msgs(msgs)) == as_json(history)
    assert to_msgs(history) == msgs  # same content, same ids: a re-save writes nothing
    assert len({msg.id for msg in msgs}) == len(msgs)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(history=pst.histories, more=pst.histories)
def test_store_and_reload_exactly_on_every_backend(
    ledger: Ledger,
    history: list[m.ModelMessage],
    more: list[m.ModelMessage],
) -> None:
    session = f"s{next(_sessions)}"
    LedgerHistory(ledger, session).save(history)
    fresh = LedgerHistory(Ledger(ledger.store), session)  # nothing cached: read from the store
    loaded = fresh.load()
    assert as_json(loaded) == as_json(history)
    assert fresh.save(loaded).noop
    report = fresh.save([*loaded, *more])
    assert report.replaced == report.truncated == 0
    assert report.appended == len(to_msgs([*history, *more])) - len(to_msgs(history))
    assert as_json(LedgerHistory(Ledger(ledger.store), session).load()) == as_json(
        [*history, *more]
    )
