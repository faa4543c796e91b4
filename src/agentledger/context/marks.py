"""The metadata that context edits leave behind, and how to read it back.

Every edit this package makes is marked on what it changed, under private keys (``_``: stored and
reloaded, never sent to a provider). The marks are what make an edit happen once: a shortened
result is never shortened or offloaded again, an offloaded one says where its full text went, and
a summary says how many messages it replaced. Each mark also records its ``basis``: the id of the
latest assistant message carrying provider usage when the edit was made. That usage counted the
context *before* the edit, so ``tokens.context_tokens`` stops trusting it once an edit names it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from agentledger.messages import Msg, TextBlock, ToolResultBlock

__all__ = [
    "MARKER_KEY",
    "NOTE_KEY",
    "PREVIEW_KEY",
    "SUMMARY_KEY",
    "edit_bases",
    "is_marker",
    "is_note",
    "marker_text",
    "preview_mark",
    "summary_mark",
]

PREVIEW_KEY = "_preview"
"""``ToolResultBlock.metadata``: the result was shortened. ``{"chars": original text length,
"omitted": characters removed}``, plus ``by`` (``pruning`` or ``eviction``), ``basis`` and, for
an offloaded result, ``path``."""

SUMMARY_KEY = "_summary"
"""``Msg.metadata`` of a summary message: ``{"summarized": messages replaced, "basis": ...}``."""

MARKER_KEY = "_omitted"
"""``TextBlock.metadata`` of the marker that stands where text was removed (its character count)."""

NOTE_KEY = "_offloaded"
"""``TextBlock.metadata`` of the note that names where an offloaded result's full text is."""


def preview_mark(result: ToolResultBlock) -> Mapping[str, Any] | None:
    """The ``_preview`` mark of a result, or ``None`` if it was never shortened."""
    mark = result.metadata.get(PREVIEW_KEY)
    return mark if isinstance(mark, Mapping) else None


def summary_mark(msg: Msg) -> Mapping[str, Any] | None:
    """The ``_summary`` mark of a message, or ``None`` if it is not a summary."""
    mark = msg.metadata.get(SUMMARY_KEY)
    return mark if isinstance(mark, Mapping) else None


def marker_text(omitted: int) -> str:
    """The text of the marker standing for ``omitted`` removed characters."""
    return f"[… {omitted:,} character{'' if omitted == 1 else 's'} omitted …]"


def is_marker(block: object) -> bool:
    """Whether ``block`` is an omission marker (not part of a result's own text): a text block
    whose text states the count its ``_omitted`` key holds. A tool's own block that happens to
    carry that key, with other text or another kind of count, is the tool's text."""
    if not isinstance(block, TextBlock):
        return False
    count = block.metadata.get(MARKER_KEY)
    return type(count) is int and block.text == marker_text(count)


def is_note(block: object, result: ToolResultBlock) -> bool:
    """Whether ``block`` is the note naming where ``result``'s full text was offloaded (not part
    of its own text): it names the path the result's mark records. A result never offloaded
    holds no note, whatever keys its blocks carry."""
    mark = preview_mark(result)
    path = mark.get("path") if mark is not None else None
    if not isinstance(block, TextBlock) or path is None:
        return False
    return block.metadata.get(NOTE_KEY) == path


def edit_bases(msgs: Sequence[Msg]) -> Iterator[str]:
    """The ``basis`` of every edit mark in ``msgs``."""
    for msg in msgs:
        mark = summary_mark(msg)
        if mark is not None and isinstance(mark.get("basis"), str):
            yield mark["basis"]
        if msg.role != "tool":
            continue
        for result in msg.tool_results:
            mark = preview_mark(result)
            if mark is not None and isinstance(mark.get("basis"), str):
                yield mark["basis"]
