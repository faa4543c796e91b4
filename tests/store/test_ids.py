"""Ids that reach the filesystem cannot escape the root or collide; a name in an error message
is shown shortened, whatever its length."""

from __future__ import annotations

from collections.abc import Iterator

from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger.errors import AgentLedgerError
from agentledger.store import Ledger, open_store
from agentledger.store.cursor import decode_cursor
from agentledger.store.ids import SHOWN_CHARS, check_id, check_list_name, path_component, shown

ids = st.text(min_size=1, max_size=300)


@given(ids, ids)
def test_path_component_is_injective(a: str, b: str) -> None:
    if a != b:
        assert path_component(a) != path_component(b)


@given(ids)
def test_path_component_is_one_safe_name(value: str) -> None:
    name = path_component(value)
    assert name not in ("", ".", "..")
    assert "/" not in name and "\\\\" not in name and "\x00" not in name
    assert name == name.lower() or "%" in name  # no case-only collisions on any disk
    assert len(name.encode()) <= 255


@given(st.text(max_size=2000))
def test_shown_is_the_repr_of_a_short_name_and_the_start_of_a_long_one(name: str) -> None:
    text = shown(name)
    if len(name) <= SHOWN_CHARS:
        assert text == repr(name)
    else:
        assert text == f"{name[:SHOWN_CHARS]!r}… ({len(name):,} characters)"
    assert len(text) <= len(repr(name[:SHOWN_CHARS])) + 30


def _refusals(name: str) -> Iterator[str]:
    """The messages of what refuses ``name`` as a session id, tenant id, list name, store URL
    or cursor."""
    ledger = Ledger("memory://")
    attempts = [
        lambda: check_id(name),
        lambda: check_list_name(name),
        lambda: open_store(name),
        lambda: decode_cursor(name, "t"),
        lambda: Ledger("memory://", tenant=name),
        lambda: ledger.load(name, version=-1),
        lambda: ledger.save("s", [], name=name),
    ]
    for attempt in attempts:
        try:
            attempt()
        except AgentLedgerError as exc:
            yield str(exc)


@settings(max_examples=50)
@given(st.text(min_size=1, max_size=50), st.integers(min_value=1, max_value=200_000))
def test_a_refused_name_is_never_echoed_whole(part: str, repeat: int) -> None:
    """A megabyte session id, list name or store URL came back whole in the error message."""
    name = "x" + part * repeat  # no scheme: the URL is refused too
    for message in _refusals(name):
        # at most SHOWN_CHARS characters of the name, each at most 10 as an escape (\U0001f600)
        assert len(message) < 10 * SHOWN_CHARS + 200, message[:2000]
