"""What a store loads is what was saved, on every backend: odd-but-valid messages and values
come back equal with the same types and digests, and a loaded body is checked before use."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentledger import Ledger, Msg
from agentledger.errors import CorruptStoreError
from agentledger.messages import digest_of, encode, freeze, thaw
from agentledger.messages.codec import DIGEST_SIZE
from agentledger.store.base import StoredList
from agentledger.store.loading import loaded_messages
from tests.messages.strategies import (
    assert_same,
    assert_saved_and_loaded,
    hostile_messages,
    hostile_values,
)
from tests.store.backends import LedgerOn, backend, ledger_on  # noqa: F401  (fixtures)

_SETTINGS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@_SETTINGS
@given(msgs=st.lists(hostile_messages, max_size=4, unique_by=lambda m: m.id))
def test_hostile_messages_load_back_exactly(
    backend: str,  # noqa: F811
    ledger_on: LedgerOn,  # noqa: F811
    msgs: list[Msg],
) -> None:
    with ledger_on(backend) as ledger:
        assert_saved_and_loaded(ledger, msgs, session=uuid.uuid4().hex)


@_SETTINGS
@given(value=hostile_values)
def test_hostile_values_load_back_exactly(
    backend: str,  # noqa: F811
    ledger_on: LedgerOn,  # noqa: F811
    value: Any,
) -> None:
    session = uuid.uuid4().hex
    with ledger_on(backend) as ledger:
        ledger.save_state(session, values={"v": value})
        with Ledger(ledger.store) as fresh:
            assert_same(fresh.load(session).values["v"], thaw(freeze(value)))


def _rows(msgs: list[Msg], bodies: list[bytes] | None = None) -> StoredList:
    return StoredList(
        [m.id for m in msgs], [m.digest for m in msgs], bodies or [encode(m) for m in msgs]
    )


def _load(rows: StoredList) -> list[Msg]:
    return loaded_messages(rows, where="test", may_have_media=False, read_media=dict)


def test_a_body_is_checked_against_its_digest_on_first_read_not_at_load() -> None:
    msgs = [Msg.user(f"m{i}", id=f"m{i}") for i in range(3)]
    bodies = [encode(m) for m in msgs]
    bodies[1] = bodies[1].replace(b'"text":"m1"', b'"text":"M1"')  # damage that still parses
    loaded = _load(_rows(msgs, bodies))  # the reload itself reads nothing
    assert loaded == msgs  # ids and digests, as stored
    assert loaded[0].text == "m0" and loaded[2].text == "m2"
    for _ in range(2):  # every read, never a default value
        with pytest.raises(CorruptStoreError, match=r"'m1'.*digest"):
            loaded[1].content  # noqa: B018


def test_a_misspelled_key_is_never_an_empty_message() -> None:
    original = Msg.user("hello", id="m")
    body = encode(original).replace(b'"content"', b'"cOntent"')
    (loaded,) = loaded_messages(
        StoredList(["m"], [digest_of(body)], [body]),
        where="test",
        may_have_media=False,
        read_media=dict,
    )
    with pytest.raises(CorruptStoreError, match="unknown field `cOntent`"):
        loaded.content  # noqa: B018


def test_rows_of_the_wrong_shape_fail_at_load() -> None:
    good = Msg.user("x", id="m")
    for rows in (
        StoredList([""], [good.digest], [encode(good)]),
        StoredList(["m"], [b"short"], [encode(good)]),
        StoredList(["m"], [good.digest], [b""]),
        StoredList(["m"], [good.digest], ["{}"]),
    ):
        with pytest.raises(CorruptStoreError, match="malformed row"):
            _load(rows)
    assert len(good.digest) == DIGEST_SIZE


@pytest.mark.parametrize(
    "metadata",
    [
        b'{"$map":5}',
        b'{"a":' + b"[" * 600 + b"]" * 600 + b"}",
        b'{"a":' + b"[" * 5000 + b"]" * 5000 + b"}",
    ],
    ids=["map-not-an-object", "600-levels", "5000-levels"],
)
def test_hostile_json_in_a_stored_body_is_a_corrupt_store(metadata: bytes) -> None:
    body = b'{"id":"m","metadata":' + metadata + b',"role":"user"}'
    (loaded,) = _load(StoredList(["m"], [digest_of(body)], [body]))
    with pytest.raises(CorruptStoreError, match="'m' cannot be decoded"):
        loaded.metadata  # noqa: B018
