"""``ToolResultPreview``: the one way agentledger shortens a tool result.

Pruning, offloading and the summary input all shorten tool results, and shortening is where
another framework lost data (seed 002): a result made of text, an image and more text was
flattened into one text block, so the image was gone, and fields such as execution details were
dropped. Here a single implementation decides for every caller:

- one text allowance (in characters, i.e. ``str`` code points) is shared by all the text blocks of
  a result: the head of the text keeps the first half of the allowance, the tail the rest, and
  what lies between is removed, even when that spans several blocks;
- every non-text block (image, audio, video, file) stays where it was, in order;
- every other field of the result (id, name, error flag, metadata) and of its message stays;
- one marker block stands where text was removed and says how much; when nothing is removed the
  very same result comes back, with no marker and nothing else changed.

A shortened result carries a ``_preview`` mark (``marks.PREVIEW_KEY``). Shortening it again
counts only its own text (markers and offload notes are not text of the result) and merges the
markers, so previews compose instead of stacking.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentledger.context.marks import (
    MARKER_KEY,
    PREVIEW_KEY,
    is_marker,
    is_note,
    marker_text,
    preview_mark,
)
from agentledger.errors import UserError
from agentledger.messages import Block, Msg, TextBlock, ToolResultBlock

__all__ = ["DEFAULT_ALLOWANCE", "ToolResultPreview", "as_preview", "map_results", "marker_text"]

DEFAULT_ALLOWANCE = 600


def _is_own_text(block: object, result: ToolResultBlock) -> bool:
    return isinstance(block, TextBlock) and not is_marker(block) and not is_note(block, result)


@dataclass(frozen=True, slots=True)
class ToolResultPreview:
    """Shortens tool results to ``allowance`` characters of text (see the module docstring)."""

    allowance: int = DEFAULT_ALLOWANCE

    def __post_init__(self) -> None:
        if isinstance(self.allowance, bool) or not isinstance(self.allowance, int):
            raise UserError(f"allowance must be an int, got {self.allowance!r}")
        if self.allowance < 0:
            raise UserError(f"allowance must not be negative, got {self.allowance}")

    def result(
        self, result: ToolResultBlock, *, mark: dict[str, Any] | None = None
    ) -> ToolResultBlock:
        """``result`` with at most ``allowance`` characters of its own text.

        Returns ``result`` itself when its text fits. ``mark`` adds entries to the ``_preview``
        mark of a shortened result (who shortened it, and why).
        """
        total = sum(len(b.text) for b in result.output if _is_own_text(b, result))
        if total <= self.allowance:
            return result
        head = (self.allowance + 1) // 2
        cut_from, cut_to = head, total - (self.allowance - head)
        previous = preview_mark(result) or {}
        omitted = (total - self.allowance) + sum(
            b.metadata[MARKER_KEY] for b in result.output if is_marker(b)
        )
        marker = TextBlock(text=marker_text(omitted), metadata={MARKER_KEY: omitted})
        output: list[Any] = []
        placed = False
        position = 0
        for block in result.output:
            if not _is_own_text(block, result):
                if not is_marker(block):  # an earlier marker is merged into the new one
                    output.append(block)
                continue
            start = position
            end = position + len(block.text)
            position = end
            if start == end or end <= cut_from or start >= cut_to:
                output.append(block)  # no character of it is removed
                continue
            kept_head = block.text[: max(0, cut_from - start)]
            tail_length = max(0, end - max(start, cut_to))
            kept_tail = block.text[len(block.text) - tail_length :] if tail_length else ""
            if kept_head:
                output.append(block.replace(text=kept_head))
            if not placed:
                output.append(marker)
                placed = True
            if kept_tail:
                output.append(block.replace(text=kept_tail))
        chars = previous.get("chars", total)
        details = {**previous, **(mark or {}), "chars": chars, "omitted": omitted}
        metadata = {**result.metadata, PREVIEW_KEY: details}
        return result.replace(output=tuple(output), metadata=metadata)

    def text(self, text: str) -> str:
        """The preview of a plain string, for summary input: ``text`` itself when it fits in the
        allowance, else its head, a marker line and its tail (the same cut as ``result``)."""
        cut = self.result(ToolResultBlock(id="preview", output=(TextBlock(text=text),)))
        return "\n".join(b.text for b in cut.output if isinstance(b, TextBlock))


def as_preview(value: ToolResultPreview | int) -> ToolResultPreview:
    """A preview from an allowance, or the preview given."""
    return value if isinstance(value, ToolResultPreview) else ToolResultPreview(value)


def map_results(msg: Msg, edit: Callable[[ToolResultBlock], ToolResultBlock]) -> Msg:
    """``msg`` with ``edit`` applied to each of its tool results; ``msg`` itself when ``edit``
    returned every result unchanged (so an untouched message is never rewritten)."""
    if msg.role != "tool":
        return msg
    content: list[Block] = []
    changed = False
    for block in msg.content:
        if isinstance(block, ToolResultBlock):
            edited = edit(block)
            changed = changed or edited is not block
            content.append(edited)
        else:
            content.append(block)
    return msg.replace(content=content) if changed else msg
