"""The diff planner: the known-objects shortcut finds exactly what a full digest scan finds."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentledger import Ledger, Msg, UserError
from agentledger.store.planner import diff_list, splice


def _msgs(n: int, tag: str = "") -> list[Msg]:
    return [Msg.user(f"message {i}{tag}", id=f"m{i}") for i in range(n)]


def _digests(msgs: list[Msg]) -> list[bytes]:
    return [m.digest for m in msgs]


@given(
    n=st.integers(0, 700),
    edits=st.lists(st.tuples(st.integers(0, 699), st.sampled_from(["edit", "rebuild"]))),
    new_length=st.integers(0, 720),
)
def test_the_shortcut_agrees_with_a_digest_scan(
    n: int, edits: list[tuple[int, str]], new_length: int
) -> None:
    committed = _msgs(n)
    new = (committed + _msgs(720, " more"))[:new_length]
    for position, kind in edits:
        if position < len(new):
            old = new[position]
            new[position] = (
                Msg.user(old.text, id=old.id) if kind == "rebuild" else old.replace(content="x")
            )
    full = diff_list(_digests(committed), new)
    fast = diff_list(_digests(committed), new, committed)
    assert fast == full


def test_an_edit_far_from_the_tail_is_found() -> None:
    committed = _msgs(1000)
    new = list(committed)
    new[3] = new[3].replace(content="edited")
    new[998] = new[998].replace(content="edited too")
    diff = diff_list(_digests(committed), tuple(new), committed)
    assert diff.changed == [3, 998] and diff.replaced == 2 and not diff.appended


def test_an_equal_rebuilt_message_is_not_a_change() -> None:
    committed = _msgs(300)
    new = [Msg.user(m.text, id=m.id, created_at=m.created_at) for m in committed]
    assert diff_list(_digests(committed), new, committed).empty


def test_a_ledger_skips_the_objects_it_saved_and_loaded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    compared: list[str] = []
    original = Msg.__eq__

    def counting(self: Msg, other: object) -> bool:
        compared.append(self.id)
        return original(self, other)

    ledger = Ledger("memory://")
    live = _msgs(600)
    ledger.save("s", live)
    live.append(Msg.assistant("reply"))
    monkeypatch.setattr(Msg, "__eq__", counting)
    assert ledger.save("s", live).appended == 1
    assert ledger.save("s", live).noop
    assert compared == []

    fresh = Ledger(ledger.store)
    loaded = fresh.messages("s")
    assert fresh.save("s", loaded).noop
    loaded[300] = loaded[300].replace(content="edited")
    report = fresh.save("s", loaded)
    assert report.replaced == 1 and not report.appended
    assert set(compared) == {"m300"}  # only the position that holds another object
    assert Ledger(ledger.store).messages("s")[300].text == "edited"


def test_a_ledger_remembers_a_bounded_number_of_sessions() -> None:
    ledger = Ledger("memory://", cached_sessions=2)
    lists = {name: _msgs(50, name) for name in ("a", "b", "c")}
    for name, msgs in lists.items():
        ledger.save(name, msgs)
    assert len(ledger._heads) == 2  # "a", the least recently used, is forgotten
    lists["a"].append(Msg.user("more", id="more"))
    report = ledger.save("a", lists["a"])  # planned against digests read back from the store
    assert (report.appended, report.replaced, report.truncated) == (1, 0, 0)
    assert Ledger(ledger.store).messages("a") == lists["a"]
    assert [k.session for k in ledger._heads] == ["c", "a"]
    with pytest.raises(UserError, match="cached_sessions"):
        Ledger("memory://", cached_sessions=0)


_EDITS = st.lists(
    st.tuples(
        st.sampled_from(["insert", "delete", "replace", "move", "drop_prefix", "summary"]),
        st.integers(0, 10_000),
        st.integers(1, 40),
    ),
    max_size=6,
)


def _edited(committed: list[Msg], edits: list[tuple[str, int, int]]) -> list[Msg]:
    new = list(committed)
    for number, (kind, at, count) in enumerate(edits):
        at = at % (len(new) + 1)
        fresh = [Msg.user(f"new {number}.{k}", id=f"n{number}.{k}") for k in range(count)]
        if kind == "insert":
            new[at:at] = fresh
        elif kind == "delete":
            del new[at : at + count]
        elif kind == "replace":
            new[at : at + count] = fresh[: len(new[at : at + count])]
        elif kind == "move":
            moved = new[at : at + count]
            del new[at : at + count]
            to = (at * 7 + count) % (len(new) + 1)
            new[to:to] = moved
        elif kind == "drop_prefix":
            del new[:count]
        else:
            new[:count] = fresh[:1]
    return new


@given(n=st.integers(0, 300), edits=_EDITS, known=st.booleans())
def test_the_alignment_rebuilds_the_new_list_exactly(
    n: int, edits: list[tuple[str, int, int]], known: bool
) -> None:
    committed = _msgs(n)
    new = _edited(committed, edits)
    diff = diff_list(_digests(committed), new, committed if known else ())
    rebuilt = splice(committed, diff.runs, [(p, new[p]) for p in diff.changed], len(new))
    assert rebuilt == new
    old_at = new_at = 0
    for old_start, new_start, count in diff.runs:
        assert count > 0 and old_start >= old_at and new_start >= new_at
        old_at, new_at = old_start + count, new_start + count
    assert diff.changed == sorted(set(diff.changed))


@pytest.mark.parametrize(
    ("kind", "at", "count"),
    [
        ("insert", 0, 1),
        ("insert", 500, 3),
        ("delete", 500, 1),
        ("delete", 0, 7),
        ("drop_prefix", 0, 990),
        ("summary", 0, 992),
        ("move", 100, 5),
    ],
)
def test_a_shift_writes_only_the_messages_it_adds(kind: str, at: int, count: int) -> None:
    committed = _msgs(1000)
    new = _edited(committed, [(kind, at, count)])
    new.append(Msg.assistant("reply", id="tail"))
    added = {m.id for m in new} - {m.id for m in committed}
    for known in (committed, ()):
        diff = diff_list(_digests(committed), new, known)
        written = {new[p].id for p in diff.changed}
        if kind == "move":  # the moved messages are written again at their new place
            assert added <= written and len(written) <= len(added) + count
        else:
            assert written == added
        assert diff.kept == len(new) - len(diff.changed)


def test_a_message_whose_copy_follows_does_not_hold_a_dropped_prefix_in_place() -> None:
    """Old ``[A, B, C, D, A, E]``, new ``[X, D, A, E2]``: the planner kept the first ``A`` (it
    comes back two rows on in the new list) and wrote ``D`` again after it, where the copy of
    ``A`` after ``D`` gives it back: three rows written for two added (found by the Agents SDK
    session's edit property, a window over repeated function calls)."""
    a, b, c, d, e = (Msg.user(t, id=t) for t in "abcde")
    x, e2 = Msg.user("x", id="x"), Msg.user("e2", id="e")
    committed, new = [a, b, c, d, a, e], [x, d, a, e2]
    for known in (committed, ()):
        diff = diff_list(_digests(committed), new, known)
        assert [new[p] for p in diff.changed] == [x, e2]
        assert diff.runs == [(3, 1, 2)]
