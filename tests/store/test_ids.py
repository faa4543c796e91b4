"""Ids that reach the filesystem cannot escape the root or collide."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agentledger.store.ids import path_component

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
