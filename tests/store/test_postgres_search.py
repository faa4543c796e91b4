"""PostgresStore.search: the capped search and the search of the latest sessions answer exactly
what the full search would, and a word in many messages is answered without the full search.

The stores here are small, so the cap and the rows read of the latest sessions are made small
too (``SEARCH_CAP`` and ``recent_rows`` patched), which sends queries down every path: the cap
seeing every match, the latest sessions filling ``limit`` (or holding every row of the tenant),
and the full search when neither does. Every answer is compared with the generic scan of
``Store.search``, which reads every live message.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentledger.errors import StoreError
from agentledger.messages import Msg
from agentledger.store import Ledger, Store
from agentledger.store import postgres as pg_store
from tests.store.test_postgres import OpenStore, open_store, pg_url, schema

__all__ = ["open_store", "pg_url", "schema"]  # fixtures, shared with test_postgres.py

pytestmark = pytest.mark.postgres

WORDS = ["alpha", "beta", "gamma", "delta", "omega"]  # alpha in most messages, omega in few
WEIGHTS = [40, 10, 5, 3, 1]
TENANTS = ["default", "other"]


def _text(rng: random.Random) -> str:
    return " ".join(rng.choices(WORDS, weights=WEIGHTS, k=rng.randint(1, 4)))


def _fill(store: pg_store.PostgresStore, seed: int) -> None:
    """Sessions of 0-12 messages in two tenants, saved in a shuffled order (so that recency is
    not name order); some with a second list, some shifted past a floor (a summary, a
    window), some emptied, some saved again later."""
    rng = random.Random(seed)
    ledger = Ledger(store)
    live: dict[tuple[str, str], list[Msg]] = {}
    names = [(rng.choice(TENANTS), f"s{i:02d}") for i in range(40)]
    for step in range(70):
        tenant, session = rng.choice(names) if step >= len(names) else names[step]
        msgs = live.get((tenant, session), [])
        kind = rng.random()
        if not msgs or kind < 0.4:
            msgs = msgs + [Msg.user(_text(rng)) for _ in range(rng.randint(0, 6))]
        elif kind < 0.55:
            msgs = [Msg.system(f"summary {_text(rng)}"), *msgs[-2:]]  # a floor below the rest
        elif kind < 0.7:
            msgs = [*msgs[1:], Msg.assistant(_text(rng))]  # a sliding window
        elif kind < 0.75:
            msgs = []
        else:
            msgs = [m if rng.random() < 0.7 else Msg.user(_text(rng)) for m in msgs]
        live[(tenant, session)] = msgs
        if rng.random() < 0.2:
            notes = [Msg.user(_text(rng)) for _ in range(rng.randint(1, 3))]
            ledger.save_state(session, lists={"context": msgs, "notes": notes}, tenant=tenant)
        else:
            ledger.save(session, msgs, tenant=tenant)


@contextmanager
def _paths(cap: int, rows: int) -> Iterator[None]:
    with (
        mock.patch.object(pg_store, "SEARCH_CAP", cap),
        mock.patch.object(pg_store, "recent_rows", lambda limit: rows),
    ):
        yield


@pytest.fixture(params=[1, 2, 3], ids=lambda seed: f"seed{seed}")
def filled(open_store: OpenStore, request: pytest.FixtureRequest) -> pg_store.PostgresStore:
    store = open_store()
    _fill(store, request.param)
    return store


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_every_path_answers_what_the_full_search_would(
    filled: pg_store.PostgresStore, data: st.DataObject
) -> None:
    query = data.draw(st.sampled_from([*WORDS, "alpha beta", "gam", "summary", "absent"]))
    limit = data.draw(st.integers(1, 30))
    cap = data.draw(st.integers(1, 80))
    rows = data.draw(st.integers(1, 120))
    tenant = data.draw(st.sampled_from(TENANTS))
    with _paths(cap, rows):
        got = filled.search(tenant, query, limit=limit)
    assert got == Store.search(filled, tenant, query, limit=limit)


def _failing(store: pg_store.PostgresStore, *names: str) -> Any:
    """``store``'s statements with ``names`` replaced by one that fails when run (the store
    raises ``StoreError``)."""
    queries = mock.Mock(wraps=store._q)
    for name in ("search", "search_capped", "search_recent"):
        sql = "SELECT 1 / 0" if name in names else getattr(store._q, name)
        setattr(queries, name, sql)
    return mock.patch.object(store, "_q", queries)


def test_a_word_in_many_messages_is_found_among_the_latest_sessions(open_store: OpenStore) -> None:
    """Past the cap, ``limit`` hits among the latest sessions' rows are the answer: the full
    search, which reads every match, is never run."""
    store = open_store()
    ledger = Ledger(store)
    for i in range(60):
        ledger.save(f"s{i:02d}", [Msg.user(f"common word {i}"), Msg.user("other text")])
    with _paths(cap=10, rows=30), _failing(store, "search"):
        hits = store.search("default", "common", limit=5)
    assert [h.session_id for h in hits] == ["s59", "s58", "s57", "s56", "s55"]
    assert hits == Store.search(store, "default", "common", limit=5)


def test_a_session_read_in_part_gives_no_hits(open_store: OpenStore) -> None:
    """When the rows run out inside a session, its hits are left out (the rows read of it are
    in no promised order): "new" alone gives too few hits, so the full search answers."""
    store = open_store()
    ledger = Ledger(store)
    ledger.save("old", [Msg.user("common early"), Msg.user("common late")])
    ledger.save("new", [Msg.user("nothing"), Msg.user("common here")])
    with _paths(cap=1, rows=3):  # all of "new", then one row of "old"
        hits = store.search("default", "common", limit=2)
    assert [(h.session_id, h.position) for h in hits] == [("new", 1), ("old", 0)]
    with _paths(cap=1, rows=3), _failing(store, "search"):
        assert [h.session_id for h in store.search("default", "common", limit=1)] == ["new"]
    with _paths(cap=1, rows=3), _failing(store, "search"), pytest.raises(StoreError):
        store.search("default", "common", limit=2)  # "old" was read in part: the full search


def test_a_word_in_few_messages_is_answered_by_the_capped_search(open_store: OpenStore) -> None:
    store = open_store()
    ledger = Ledger(store)
    for i in range(30):
        ledger.save(f"s{i:02d}", [Msg.user("rare" if i in (3, 17) else "plain")])
    with _paths(cap=5, rows=1), _failing(store, "search", "search_recent"):
        hits = store.search("default", "rare")
    assert [h.session_id for h in hits] == ["s17", "s03"]


def test_the_latest_sessions_answer_alone_when_they_are_every_session(
    open_store: OpenStore,
) -> None:
    """Fewer than ``limit`` hits among rows that were all the tenant's is the whole answer."""
    store = open_store()
    ledger = Ledger(store)
    for i in range(5):
        ledger.save(f"s{i}", [Msg.user("word"), Msg.user("word again")])
    ledger.save("empty", [])
    with _paths(cap=2, rows=50), _failing(store, "search"):
        hits = store.search("default", "word", limit=20)
    assert len(hits) == 10
    assert hits == Store.search(store, "default", "word", limit=20)


def test_a_large_limit_skips_the_latest_sessions(open_store: OpenStore) -> None:
    """Past a limit of 128 the rows to read of the latest sessions could cost more than every
    match: the capped search is followed by the full one."""
    store = open_store()
    ledger = Ledger(store)
    for i in range(150):
        ledger.save(f"s{i:03d}", [Msg.user("word")])
    with mock.patch.object(pg_store, "SEARCH_CAP", 10), _failing(store, "search_recent"):
        hits = store.search("default", "word", limit=129)
    assert len(hits) == 129
    assert hits == Store.search(store, "default", "word", limit=129)
    assert pg_store.recent_rows(128) == 128 * 128 and pg_store.recent_rows(129) is None
