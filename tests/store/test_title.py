"""The derived title: found at the cost of a change, equal to a full scan after every save."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agentledger.messages import ImageBlock, Msg, encode
from agentledger.messages.msg import deferred_messages
from agentledger.store.title import UNKNOWN, find_title, title_after_change, title_text

_IMAGE = ImageBlock(media_type="image/png", data=b"\x89PNG")
_kinds = st.sampled_from(["user", "user-image", "user-blank", "assistant", "system"])


def _msg(kind: str, n: int) -> Msg:
    if kind == "user":
        return Msg.user(f"question {n}", created_at=None)
    if kind == "user-image":
        return Msg.user(_IMAGE, created_at=None)
    if kind == "user-blank":
        return Msg.user("   \n ", created_at=None)
    return Msg(kind, f"{kind} {n}", created_at=None)  # type: ignore[arg-type]


@st.composite
def _edits(draw: st.DrawFn) -> tuple[list[Msg], list[Msg]]:
    """A committed list and the list a later save is given (positions kept, as saves compare)."""
    old = [_msg(k, i) for i, k in enumerate(draw(st.lists(_kinds, max_size=12)))]
    new = list(old)
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from(["edit", "append", "truncate"]))
        if op == "edit" and new:
            new[draw(st.integers(0, len(new) - 1))] = _msg(draw(_kinds), 100 + len(new))
        elif op == "append":
            new.append(_msg(draw(_kinds), 200 + len(new)))
        elif op == "truncate":
            del new[draw(st.integers(0, len(new))) :]
    return old, new


def _changed(old: list[Msg], new: list[Msg]) -> list[int]:
    return [i for i, m in enumerate(new) if i >= len(old) or old[i] != m]


@given(_edits())
def test_after_a_change_the_title_equals_a_full_scan(case: tuple[list[Msg], list[Msg]]) -> None:
    old, new = case
    title_at, title = find_title(old)
    new_at, new_title = title_after_change(new, title_at, _changed(old, new))
    expected_at, expected = find_title(new)
    assert new_at == expected_at
    assert (new_title if new_title is not None else title) == expected


def test_an_unknown_source_is_found_by_one_scan() -> None:
    msgs = [_msg("assistant", 0), _msg("user-image", 1), _msg("user", 2)]
    assert title_after_change(msgs, UNKNOWN, []) == (2, "question 2")


def test_titles_are_one_line_and_cut_to_80_characters() -> None:
    assert title_text(Msg.user("a\n\tb   c")) == "a b c"
    long = title_text(Msg.user("x" * 200))
    assert long is not None and len(long) == 80 and long.endswith("…")
    assert title_text(Msg.assistant("not a user")) is None


def test_encoded_messages_without_a_user_role_are_never_decoded() -> None:
    msgs = [*(_msg("assistant", i) for i in range(50)), _msg("user", 50)]
    loaded = deferred_messages(
        [m.id for m in msgs], [m.digest for m in msgs], list(map(encode, msgs))
    )
    assert find_title(loaded) == (50, "question 50")
    assert all(m._stored is not None for m in loaded[:50])  # still deferred: never decoded


def test_finding_the_title_decodes_its_source_and_not_the_messages_loaded_with_it() -> None:
    msgs = [_msg("user", 0), *(_msg("assistant", i) for i in range(1, 100))]
    loaded = deferred_messages(
        [m.id for m in msgs], [m.digest for m in msgs], list(map(encode, msgs))
    )
    assert find_title(loaded) == (0, "question 0")
    assert loaded[0]._stored is None
    assert all(m._stored is not None for m in loaded[1:])  # its batch is left for a reader
    assert loaded[1:] == msgs[1:] and [m.content for m in loaded] == [m.content for m in msgs]
