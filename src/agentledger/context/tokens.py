"""How many tokens a context holds: the provider's own count where it is still true, else an
estimate.

Every answer a provider gives carries ``Msg.usage``: ``input_tokens`` is what the request that
produced it held (system prompt and tool specs included, cached tokens included), so the latest
answer's ``input_tokens + output_tokens`` is the context's real size up to that answer, and only
the messages after it need estimating. That count stops being true once the context before the
answer is edited (a summary, a pruned or offloaded result): every edit records its ``basis``, the
answer whose usage it made stale (see ``marks``), and then the whole context is estimated until
the next answer brings a fresh count.

The estimate is deliberately simple and provider-neutral: about four characters of text per
token, a small overhead per message, and a flat guess per media block. It is meant for
thresholds, not billing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from agentledger.context.marks import edit_bases
from agentledger.messages import (
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    message_list,
)
from agentledger.wire.private import arguments_text

__all__ = ["CHARS_PER_TOKEN", "MEDIA_TOKENS", "context_tokens", "estimate_tokens", "usage_basis"]

CHARS_PER_TOKEN = 4
MEDIA_TOKENS = 1_000
"""Flat estimate for one image, audio, video or file block."""
_MESSAGE_OVERHEAD = 4


def _block_chars(block: object) -> tuple[int, int]:
    """(characters, media blocks) of one block."""
    if isinstance(block, TextBlock):
        return len(block.text), 0
    if isinstance(block, ThinkingBlock):
        return len(block.thinking), 0
    if isinstance(block, ToolUseBlock):
        arguments = arguments_text(block)  # the model's own text, as a provider is sent it
        return len(block.name) + len(arguments), 0
    if isinstance(block, ToolResultBlock):
        chars = media = 0
        for part in block.output:
            c, m = _block_chars(part)
            chars, media = chars + c, media + m
        return chars, media
    return 0, 1


def estimate_tokens(msgs: Iterable[Msg]) -> int:
    """A rough token count for ``msgs`` (see the module docstring)."""
    return _estimate(message_list(msgs, "estimate_tokens"))


def _estimate(msgs: Iterable[Msg]) -> int:
    total = 0
    for msg in msgs:
        chars = media = 0
        for block in msg.content:
            c, m = _block_chars(block)
            chars, media = chars + c, media + m
        total += _MESSAGE_OVERHEAD + -(-chars // CHARS_PER_TOKEN) + media * MEDIA_TOKENS
    return total


def _latest_usage(msgs: Sequence[Msg]) -> int | None:
    for index in range(len(msgs) - 1, -1, -1):
        msg = msgs[index]
        if msg.role == "assistant" and msg.usage is not None and msg.usage.input_tokens > 0:
            return index
    return None


def usage_basis(msgs: Sequence[Msg]) -> str | None:
    """The id of the latest answer whose usage counts the context (the ``basis`` an edit made
    now records), or ``None``."""
    index = _latest_usage(msgs)
    return None if index is None else msgs[index].id


def context_tokens(msgs: Sequence[Msg]) -> int:
    """Tokens in ``msgs``: the latest answer's usage plus an estimate of what follows it, or an
    estimate of everything when there is no usage or an edit has made it stale."""
    msgs = message_list(msgs, "context_tokens")
    index = _latest_usage(msgs)
    if index is not None:
        answer = msgs[index]
        if answer.id not in set(edit_bases(msgs)):
            assert answer.usage is not None
            counted = answer.usage.input_tokens + answer.usage.output_tokens
            return counted + _estimate(msgs[index + 1 :])
    return _estimate(msgs)
