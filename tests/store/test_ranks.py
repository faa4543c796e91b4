"""Rank keys: every sequence of edits keeps a list's ranks ascending and above its floor, and
ranks made at the ends of a list stay 8 bytes long."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentledger import Msg
from agentledger.store.planner import diff_list, splice
from agentledger.store.ranks import START, after, before, between, plan_ranks, position_rank

_OPS = st.lists(
    st.tuples(
        st.sampled_from(["insert", "delete", "front", "append", "drop", "summary", "move"]),
        st.integers(0, 1000),
        st.integers(1, 5),
    ),
    min_size=1,
    max_size=60,
)


@given(ops=_OPS)
def test_ranks_stay_ascending_and_above_the_floor(ops: list[tuple[str, int, int]]) -> None:
    msgs: list[Msg] = []
    ranks: list[bytes] = []
    floor: bytes | None = None
    for step, (kind, at, count) in enumerate(ops):
        new = list(msgs)
        fresh = [Msg.user(f"{step}.{k}", id=f"{step}.{k}") for k in range(count)]
        at = at % (len(new) + 1)
        if kind == "insert":
            new[at:at] = fresh
        elif kind == "delete":
            del new[at : at + count]
        elif kind == "front":
            new[:0] = fresh
        elif kind == "append":
            new += fresh
        elif kind == "drop":
            del new[:count]
        elif kind == "summary":
            new[:count] = fresh[:1]
        else:
            moved = new[at : at + count]
            del new[at : at + count]
            new[len(new) // 2 : len(new) // 2] = moved
        diff = diff_list([m.digest for m in msgs], new)
        planned = plan_ranks(ranks, floor, diff.runs, diff.changed, len(new))
        new_ranks = splice(ranks, diff.runs, zip(diff.changed, planned.put_ranks), len(new))
        assert all(a < b for a, b in pairwise(new_ranks))
        if planned.floor is not None:
            assert floor is None or planned.floor > floor
            floor = planned.floor
        assert floor is None or all(r > floor for r in new_ranks)
        left = set(planned.closed_ranks) | set(ranks[: planned.dropped])
        kept = set(new_ranks) - set(planned.put_ranks)
        assert left | kept == set(ranks) and not left & kept
        assert len(planned.closed) + planned.dropped == len(msgs) - diff.kept
        msgs, ranks = new, new_ranks


def test_a_list_grown_at_both_ends_keeps_short_ranks() -> None:
    ranks = [START]
    for _ in range(1000):
        ranks = [*before(ranks[0]), *ranks, *after(ranks[-1])]
    assert all(len(r) == 8 for r in ranks)
    assert ranks == sorted(ranks) and len(set(ranks)) == len(ranks)


@pytest.mark.parametrize("count", [1, 2, 7, 255, 256, 1000])
def test_between_makes_evenly_spaced_ranks_without_trailing_zeros(count: int) -> None:
    low, high = position_rank(5), position_rank(6)
    made = between(low, high, count)
    assert [low, *made, high] == sorted({low, *made, high})
    assert not any(r.endswith(b"\0") for r in made)
    with pytest.raises(ValueError):
        between(high, low)


def test_positions_map_to_ascending_ranks() -> None:
    assert [position_rank(p) for p in range(300)] == sorted(position_rank(p) for p in range(300))
