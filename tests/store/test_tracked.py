"""``TrackedList``: whatever its methods do between saves, each save commits exactly its content,
and the positions it records as unchanged are never compared."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger import Ledger, Msg, TrackedList, UserError
from agentledger.store.planner import _merged, diff_list
from agentledger.store.tracked import MAX_CHANGES

_OPS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "append", "extend", "insert", "set", "set_slice", "del", "del_slice", "pop",
                "remove", "clear", "reverse", "sort", "iadd", "save", "other_writer", "reopen",
            ]
        ),
        st.integers(-30, 30),
        st.integers(0, 4),
    ),
    max_size=40,
)  # fmt: skip


def _apply(live: TrackedList, op: str, at: int, count: int, made: list[int]) -> None:
    def fresh(k: int) -> list[Msg]:
        made[0] += k
        return [Msg.user(f"n{made[0] - i}", id=f"n{made[0] - i}") for i in range(k)]

    n = len(live)
    if op == "append":
        live.append(fresh(1)[0])
    elif op in ("extend", "iadd"):
        if op == "extend":
            live.extend(fresh(count))
        else:
            live += fresh(count)
    elif op == "insert":
        live.insert(at, fresh(1)[0])
    elif op == "set" and n:
        live[at % n] = fresh(1)[0]
    elif op == "set_slice":
        live[at : at + count] = fresh(count // 2)
    elif op == "del" and n:
        del live[at % n]
    elif op == "del_slice":
        del live[at : at + count : 1 + count % 2]
    elif op == "pop" and n:
        live.pop(at % n)
    elif op == "remove" and n:
        live.remove(live[at % n])
    elif op == "clear":
        live.clear()
    elif op == "reverse":
        live.reverse()
    elif op == "sort":
        live.sort(key=lambda m: m.id)


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
@settings(max_examples=60, deadline=None)
@given(ops=_OPS)
def test_every_save_commits_exactly_the_tracked_content(
    backend: str, ops: list[tuple[str, int, int]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    url = "memory://" if backend == "memory" else f"sqlite:///{tmp_path_factory.mktemp('t')}/s.db"
    ledger = Ledger(url)
    other = Ledger(ledger.store)
    ledger.save("s", [Msg.user(f"m{i}", id=f"m{i}") for i in range(20)])
    live = ledger.tracked("s")
    saved = list(live)
    made = [0]
    for op, at, count in ops:
        kept = live.changed_from  # what it says is as last saved, is
        assert live[:kept] == saved[:kept] and kept <= len(live)
        if op == "save":
            ledger.save("s", live)
            assert Ledger(ledger.store).messages("s") == list(live)
            saved = list(live)
            assert live.changed_from == len(live)
        elif op == "other_writer":  # another writer's commit: the record no longer applies
            other.save("s", [*other.messages("s"), Msg.user(f"o{made[0]}", id=f"o{made[0]}")])
            made[0] += 1
        elif op == "reopen":  # a new ledger: nothing is remembered, everything is compared
            ledger = Ledger(ledger.store)
        else:
            _apply(live, op, at, count, made)
    ledger.save("s", live)
    assert Ledger(ledger.store).messages("s") == list(live)


@settings(max_examples=300, deadline=None)
@given(ops=_OPS)
def test_the_runs_a_tracked_list_keeps_are_exactly_the_saved_messages_it_still_holds(
    ops: list[tuple[str, int, int]],
) -> None:
    """Whatever its methods did since it was saved, the runs a ``TrackedList`` reports as kept
    hold the saved messages at the positions it says, and, while its record of changes is
    whole, they are every saved message it still holds in order (found by identity: each
    message made here is a new object)."""
    live = TrackedList(Msg.user(f"m{i}", id=f"m{i}") for i in range(20))
    saved, made, token = list(live), [0], ("saved",)
    live._mark_saved(token, live._edits)
    for op, at, count in ops:
        if op in ("save", "other_writer", "reopen"):
            saved = list(live)
            live._mark_saved(token, live._edits)
        else:
            _apply(live, op, at, count, made)
        kept = live._kept(token, len(saved))
        assert kept is not None
        for old, new, n in kept:
            assert all(live[new + k] is saved[old + k] for k in range(n))
        assert [(o, n) for o, n, _ in kept] == sorted((o, n) for o, n, _ in kept)
        if live._changes is not None:
            where = {id(m): i for i, m in enumerate(saved)}
            tags = [where.get(id(m)) for m in live]
            expected: list[tuple[int, int, int]] = []
            for position, tag in enumerate(tags):
                if tag is not None:
                    expected.append((tag, position, 1))
            assert _merged(kept) == _merged(expected)
    assert live._kept(("another save",), len(saved)) is None


def test_a_tracked_shift_compares_only_the_messages_it_added(compared: list[int]) -> None:
    """A window, an insert at the front and a delete in the middle of a ``TrackedList`` compare
    only what they added; past ``MAX_CHANGES`` changes between two saves the list is compared
    from the first position changed, and every save commits exactly the list."""
    ledger = Ledger("memory://")
    ledger.save("s", [Msg.user(f"m{i}", id=f"m{i}") for i in range(2000)])
    live = ledger.tracked("s")
    compared.clear()
    del live[0]
    live.append(Msg.assistant("a window", id="w"))
    ledger.save("s", live)
    live.insert(0, Msg.user("at the front", id="f"))
    ledger.save("s", live)
    del live[1000]
    assert ledger.save("s", live).bytes_written == 0
    live[500:502] = [Msg.user("two became one", id="t")]
    ledger.save("s", live)
    assert compared == [1, 1, 0, 1]
    for i in range(MAX_CHANGES + 1):
        live.insert(100, Msg.user(f"many {i}", id=f"many{i}"))
    ledger.save("s", live)
    assert compared[-1] == len(live) - 100
    assert Ledger(ledger.store).messages("s") == list(live)


def test_a_change_that_fails_midway_is_still_saved() -> None:
    """``list.sort`` whose comparison fails leaves the list partly sorted, and ``list.extend``
    from an iterator that fails keeps what it gave: the next save commits the list as it is."""
    ledger = Ledger("memory://")
    ids = ["m5", "m1", "m4", "m2", "m9", "m3", "m8"]
    ledger.save("s", [Msg.user(i, id=i) for i in ids])
    live = ledger.tracked("s")

    def key(m: Msg) -> Any:
        return None if m.id == "m3" else m.id  # None and a str do not compare

    with pytest.raises(TypeError):
        live.sort(key=key)
    assert [m.id for m in live] == ["m1", "m2", "m4", "m5", "m9", "m3", "m8"]  # partly sorted

    def failing() -> Any:
        yield Msg.user("given", id="given")
        raise RuntimeError("the source failed")

    with pytest.raises(RuntimeError):
        live.extend(failing())
    assert live[-1].id == "given"
    ledger.save("s", live)
    assert Ledger(ledger.store).messages("s") == list(live)


def test_a_tracked_append_compares_no_committed_message(compared: list[int]) -> None:
    ledger = Ledger("memory://")
    ledger.save("s", [Msg.user(f"m{i}", id=f"m{i}") for i in range(1000)])
    live = ledger.tracked("s")
    compared.clear()
    live.append(Msg.assistant("reply", id="r"))
    assert ledger.save("s", live).appended == 1
    assert ledger.save("s", live).noop
    live[-1] = live[-1].replace(content="edited")
    assert ledger.save("s", live).replaced == 1
    assert compared == [1, 0, 1]  # only what changed since the last save
    plain = list(live)
    plain.append(Msg.user("via a plain list", id="p"))
    ledger.save("s", plain)  # a save of another list: the record no longer applies
    live.append(Msg.user("tracked again", id="t"))
    ledger.save("s", live)
    assert compared[-1] == len(live)
    assert Ledger(ledger.store).messages("s") == list(live)


def test_load_tracked_hands_out_the_state_and_a_tracked_copy_of_one_list(
    compared: list[int],
) -> None:
    """One load: the state (values, version) and the list as a ``TrackedList`` that knows it
    is as stored, so its first save compares only what changed; changing the state's own list
    changes neither the tracked list nor what is saved."""
    ledger = Ledger("memory://")
    msgs = [Msg.user(f"m{i}", id=f"m{i}") for i in range(50)]
    ledger.save_state("s", lists={"context": msgs}, values={"k": 1})
    for reader in (ledger, Ledger(ledger.store)):  # remembered, then read from the store
        state, live = reader.load_tracked("s")
        assert (state.version, state.values, list(live)) == (
            reader.version("s"), {"k": 1}, state.context
        )  # fmt: skip
        stored = len(live)
        state.context[:] = state.context[:3]  # the state's list is the caller's own
        assert len(live) == stored
        live.append(Msg.assistant("reply", id=f"r{len(compared)}"))
        compared.clear()
        assert reader.save("s", live).appended == 1
        assert compared == [1]  # the first save compares only what was added
        assert Ledger(ledger.store).messages("s") == list(live)
    other = Ledger(ledger.store)
    state, live = ledger.load_tracked("s")
    other.save("s", [*other.messages("s"), Msg.user("another writer", id="o")])
    live.append(Msg.assistant("late", id="late"))
    compared.clear()
    ledger.save("s", live)  # planned again on the other commit, compared whole
    assert compared[-1] == len(live)
    assert Ledger(ledger.store).messages("s") == list(live)


def test_unchanged_positions_are_not_compared() -> None:
    committed = [Msg.user(f"m{i}", id=f"m{i}") for i in range(10)]
    forged = [m.replace(content="changed behind the record") for m in committed[:5]]
    new = [*forged, *committed[5:]]
    digests = [m.digest for m in committed]
    assert diff_list(digests, new, committed).changed == [0, 1, 2, 3, 4]
    assert diff_list(digests, new, committed, kept=[(0, 0, 5)]).empty
    assert diff_list(digests, new, committed, kept=[(0, 0, 2), (2, 2, 3)]).empty
    shifted = [forged[1], *committed[2:]]  # the first left; the second was changed too
    assert diff_list(digests, shifted, committed).changed == [0]
    assert diff_list(digests, shifted, committed, kept=[(1, 0, 1)]).runs == [(1, 0, 9)]


def test_a_tracked_list_behaves_as_a_list(tmp_path: Path) -> None:
    msgs = [Msg.user(f"m{i}", id=f"m{i}") for i in range(5)]
    live = TrackedList(msgs)
    assert live == msgs and len(live) == 5 and live[1:3] == msgs[1:3] and msgs[2] in live
    assert live.copy() == msgs and live.copy() is not live._items
    assert repr(live).startswith("TrackedList([")
    with Ledger(f"sqlite:///{tmp_path / 's.db'}") as ledger:
        assert ledger.save("s", live).appended == 5  # a list never saved: compared in full
        assert ledger.tracked("s") == msgs
        assert ledger.tracked("nothing-here") == []
        with pytest.raises(UserError, match="list name"):
            ledger.tracked("s", name="x/../y")
