"""``ToolResultPreview``: seed 002's cases and the rule as a property."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger import Msg, TextBlock, ToolResultBlock, UserError
from agentledger.context import ToolResultPreview
from agentledger.context.marks import MARKER_KEY, PREVIEW_KEY, is_marker
from agentledger.context.preview import map_results, marker_text
from agentledger.messages import decode, encode
from tests.context.samples import every_media, media_of, mixed_result, results, tool_message


def own_text(result: ToolResultBlock) -> list[str]:
    return [b.text for b in result.output if isinstance(b, TextBlock) and not is_marker(b)]


def markers(result: ToolResultBlock) -> list[TextBlock]:
    return [b for b in result.output if is_marker(b)]


# -- seed 002 ---------------------------------------------------------------------------------
def test_mixed_result_keeps_its_media_in_order_between_head_and_tail() -> None:
    result = mixed_result()
    cut = ToolResultPreview(100).result(result)
    assert media_of(cut.output) == media_of(result.output)
    kinds = [type(b).__name__ for b in cut.output]
    assert kinds == ["TextBlock", "TextBlock", "ImageBlock", "AudioBlock", "TextBlock"]
    head, marker, *_, tail = cut.output
    assert head == TextBlock(text="H" * 50, metadata={"part": "head"})
    assert tail == TextBlock(text="T" * 50, metadata={"part": "tail"})
    assert marker.text == marker_text(5900) and marker.metadata[MARKER_KEY] == 5900


def test_every_media_kind_survives_even_a_zero_allowance() -> None:
    output = (TextBlock(text="a" * 10), *every_media(), TextBlock(text="b" * 10))
    result = ToolResultBlock(id="c", name="n", output=output)
    cut = ToolResultPreview(0).result(result)
    assert media_of(cut.output) == list(every_media())
    assert own_text(cut) == []
    assert [b.text for b in markers(cut)] == [marker_text(20)]
    assert cut.output[0] == markers(cut)[0]  # the marker stands where the text was


def test_one_allowance_is_shared_by_all_text_blocks() -> None:
    output = tuple(TextBlock(text=c * 30) for c in "abcd")
    cut = ToolResultPreview(80).result(ToolResultBlock(id="c", output=output))
    assert own_text(cut) == ["a" * 30, "b" * 10, "c" * 10, "d" * 30]  # 40 head, 40 tail
    assert len(markers(cut)) == 1 and markers(cut)[0].metadata[MARKER_KEY] == 40
    assert cut.output[2] == markers(cut)[0]  # between the head of b and the tail of c


def test_result_and_message_fields_survive() -> None:
    result = mixed_result()
    msg = tool_message(result, id="m-9")
    shortened = map_results(msg, ToolResultPreview(10).result)
    (cut,) = shortened.tool_results
    assert (cut.id, cut.name, cut.is_error) == (result.id, result.name, result.is_error)
    assert {k: v for k, v in cut.metadata.items() if k != PREVIEW_KEY} == result.metadata
    assert cut.metadata[PREVIEW_KEY] == {"chars": 6000, "omitted": 5990}
    for field in ("id", "role", "name", "metadata", "usage", "created_at"):
        assert getattr(shortened, field) == getattr(msg, field)
    assert decode(encode(shortened)) == shortened


def test_a_message_with_nothing_to_cut_is_the_same_object() -> None:
    msg = tool_message(mixed_result(head="short", tail="also"))
    assert map_results(msg, ToolResultPreview(600).result) is msg
    user = Msg.user("hi")
    assert map_results(user, ToolResultPreview(0).result) is user


# -- zero, full, whitespace ----------------------------------------------------------------------
def test_a_full_preview_is_the_result_itself_with_no_marker() -> None:
    result = mixed_result(head="x" * 300, tail="y" * 300)
    for allowance in (600, 601, 10_000):
        assert ToolResultPreview(allowance).result(result) is result


def test_a_zero_preview_keeps_fields_and_media_only() -> None:
    result = mixed_result()
    cut = ToolResultPreview(0).result(result)
    assert own_text(cut) == []
    assert media_of(cut.output) == media_of(result.output)
    assert cut.metadata[PREVIEW_KEY]["omitted"] == 6000


def test_whitespace_only_text_counts_like_any_text() -> None:
    blank = ToolResultBlock(id="c", output=(TextBlock(text=" \n\t " * 5),))
    assert ToolResultPreview(20).result(blank) is blank  # fits: untouched, not stripped
    cut = ToolResultPreview(4).result(blank)
    assert own_text(cut) == [" \n", "\t "]
    assert markers(cut)[0].metadata[MARKER_KEY] == 16


def test_empty_text_and_no_output_are_left_alone() -> None:
    empty = ToolResultBlock(id="c", output=(TextBlock(text=""),))
    assert ToolResultPreview(0).result(empty) is empty
    nothing = ToolResultBlock(id="c", output=())
    assert ToolResultPreview(0).result(nothing) is nothing


@pytest.mark.parametrize(("size", "cut"), [(599, False), (600, False), (601, True)])
def test_string_preview_boundary_at_600(size: int, cut: bool) -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(size))
    preview = ToolResultPreview().text(text)
    if not cut:
        assert preview == text
        return
    head, marker, tail = preview.split("\n")
    assert (head, tail) == (text[:300], text[-300:])
    assert marker == marker_text(1)


def test_previews_compose_instead_of_stacking_markers() -> None:
    result = ToolResultBlock(id="c", output=(TextBlock(text="".join(map(str, range(500)))),))
    once = ToolResultPreview(100).result(result)
    twice = ToolResultPreview(40).result(once)
    direct = ToolResultPreview(40).result(result)
    assert twice.output == direct.output
    assert twice.metadata[PREVIEW_KEY] == direct.metadata[PREVIEW_KEY]
    assert ToolResultPreview(100).result(once) is once


@pytest.mark.parametrize("allowance", [-1, 1.5, "600", True])
def test_a_bad_allowance_is_refused(allowance: object) -> None:
    with pytest.raises(UserError):
        ToolResultPreview(allowance)  # type: ignore[arg-type]


# -- the rule, for any result --------------------------------------------------------------------
@settings(max_examples=300, deadline=None)
@given(result=results, allowance=st.integers(0, 150))
def test_preview_property(result: ToolResultBlock, allowance: int) -> None:
    cut = ToolResultPreview(allowance).result(result)
    original = "".join(b.text for b in result.output if isinstance(b, TextBlock))
    kept = "".join(own_text(cut))
    removed = len(original) - len(kept)
    assert media_of(cut.output) == media_of(result.output)  # media kept, in order
    assert (cut.id, cut.name, cut.is_error) == (result.id, result.name, result.is_error)
    assert {k: v for k, v in cut.metadata.items() if k != PREVIEW_KEY} == result.metadata
    assert len(kept) == min(allowance, len(original))  # text within the allowance
    head = (allowance + 1) // 2
    if removed:  # head and tail kept where cut, one marker saying how much
        assert kept == original[:head] + original[len(original) - (allowance - head) :]
        assert [m.metadata[MARKER_KEY] for m in markers(cut)] == [removed]
        assert cut.metadata[PREVIEW_KEY] == {"chars": len(original), "omitted": removed}
    else:  # marker iff text removed: otherwise the very same result
        assert cut is result


# -- the marks are the preview's own ------------------------------------------------------------
#: Metadata a tool's own text block may carry under the keys a preview marks its blocks with.
LOOKALIKES = [
    {MARKER_KEY: True},
    {MARKER_KEY: 5},
    {MARKER_KEY: 7},  # the very count of "KEEP-ME", stated by no marker text
    {MARKER_KEY: "5"},
    {"_offloaded": "anything"},
    {"_offloaded": "default/s/t-c.00000000000000000000000000000000.txt"},
]


@pytest.mark.parametrize("metadata", LOOKALIKES)
@pytest.mark.parametrize("allowance", [0, 10, 56, 60, 106, 107])
def test_a_tools_own_block_carrying_a_marks_key_is_its_own_text(
    metadata: dict[str, object], allowance: int
) -> None:
    """Only a block a preview placed is a marker or a note: a tool's own block with one of their
    keys counts in the allowance, and is cut like any text (it vanished with no marker of its
    own, its key's value counted as omitted, or made eviction offload the result at every
    step)."""
    output = (
        TextBlock(text="A" * 50),
        TextBlock(text="KEEP-ME", metadata=metadata),
        TextBlock(text="B" * 50),
    )
    result = ToolResultBlock(id="c", name="t", output=output)
    cut = ToolResultPreview(allowance).result(result)
    if allowance >= 107:
        assert cut is result
        return
    kept = "".join(own_text(cut))
    assert len(kept) == allowance
    assert cut.metadata[PREVIEW_KEY]["omitted"] == 107 - allowance
    assert [m.metadata[MARKER_KEY] for m in markers(cut)] == [107 - allowance]
    assert (
        kept
        == ("A" * 50 + "KEEP-ME" + "B" * 50)[: (allowance + 1) // 2]
        + ("A" * 50 + "KEEP-ME" + "B" * 50)[107 - allowance // 2 :]
    )
