"""``SummaryCompaction``: when the context grows past a threshold, the model summarizes its older
part, and one summary message replaces that part.

When the context holds more than ``max_tokens`` tokens (``tokens.context_tokens``: the provider's
usage where it is still true, else an estimate) or more than ``max_messages`` messages, the
messages before the most recent ``keep_recent`` are summarized by ``model`` and replaced by one
user message carrying the summary (marked ``_summary``). Leading system messages stay first. An
earlier summary is part of what is summarized, so facts carry forward from one compaction to the
next. Tool results enter the summary input as ``ToolResultPreview`` previews (600 characters by
default), so one huge result cannot crowd out the rest.

Where to cut is decided before the model is called: never between a tool call and its results
(the kept part starts at a user or assistant message), and never where the result would be a
history OpenAI or Anthropic rejects (``wire.validate`` for both finds nothing the input did not
already have); if no cut qualifies, nothing happens. A failed summary call raises ``ModelError``
and changes nothing: the agent keeps the context as it was, its version does not move, and the
run reports a ``ContextEditFailed`` event.

Compaction cannot shrink what it keeps: if the last ``keep_recent`` messages alone pass
``max_tokens`` it runs, and calls the model, at every step. Put ``ToolResultEviction`` and
``ToolResultPruning`` before it, so that one huge tool result is not what fills the context.

The originals are not lost: the agent saves the compacted list through the normal save, and the
replaced messages stay readable at the version before (``ledger.messages(session,
version=...)``). Today a save compares by position, so compaction rewrites every message after
the summary; it is measured in ``bench/context_edits.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentledger.agent.context import RuntimeContext
from agentledger.agent.middleware import Middleware
from agentledger.agent.model import Model, ModelSettings, complete
from agentledger.context.marks import SUMMARY_KEY, summary_mark
from agentledger.context.preview import ToolResultPreview, as_preview
from agentledger.context.tokens import context_tokens, usage_basis
from agentledger.errors import ModelError, UserError
from agentledger.messages import (
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    message_list,
)
from agentledger.wire import validate
from agentledger.wire.private import arguments_text

__all__ = ["SUMMARY_PROMPT", "SUMMARY_SYSTEM", "SummaryCompaction", "summary_input"]

SUMMARY_SYSTEM = (
    "You summarize a conversation between a user and an AI assistant so that the assistant can "
    "carry on the work without the full history."
)
SUMMARY_PROMPT = (
    "Summarize the conversation below. Keep the user's goals and instructions, decisions made, "
    "facts and results learned from tools (with exact names, numbers, paths and ids), open "
    "questions and next steps. If it starts with an earlier summary, carry its facts forward. "
    "Do not invent anything.\n\n<conversation>\n{transcript}\n</conversation>"
)
_HEADER = "Summary of the earlier conversation ({count} messages):\n\n"


def _positive(name: str, value: object, *, optional: bool = False) -> None:
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UserError(f"{name} must be a positive int{' or None' if optional else ''}")


class SummaryCompaction(Middleware):
    """Summarize the older part of a long context (see the module docstring).

    ``model`` is a ``Model`` or a spec string; it may be the agent's own model. At least one of
    ``max_tokens`` and ``max_messages`` must be set. ``keep_recent`` messages at the end are
    kept as they are (more when needed to keep tool calls with their results).
    """

    def __init__(
        self,
        model: Model | str,
        *,
        max_tokens: int | None = 100_000,
        max_messages: int | None = None,
        keep_recent: int = 8,
        preview: ToolResultPreview | int = 600,
        settings: ModelSettings | None = None,
        prompt: str = SUMMARY_PROMPT,
        system: str = SUMMARY_SYSTEM,
    ) -> None:
        if isinstance(model, str):
            from agentledger.agent.spec import model_from_spec

            model = model_from_spec(model)
        if not callable(getattr(model, "stream", None)):
            raise UserError(f"model must be a Model or a spec string, got {type(model).__name__}")
        for name, text in (("prompt", prompt), ("system", system)):
            if not isinstance(text, str):
                raise UserError(f"{name} must be a str, got {type(text).__name__}")
        _positive("max_tokens", max_tokens, optional=True)
        _positive("max_messages", max_messages, optional=True)
        _positive("keep_recent", keep_recent)
        if max_tokens is None and max_messages is None:
            raise UserError("set max_tokens, max_messages or both")
        if "{transcript}" not in prompt:
            raise UserError("the summary prompt must contain {transcript}")
        self.model = model
        self.max_tokens = max_tokens
        self.max_messages = max_messages
        self.keep_recent = keep_recent
        self.preview = as_preview(preview)
        self.settings = settings
        self.prompt = prompt
        self.system = system

    def needed(self, messages: Sequence[Msg]) -> bool:
        """Whether ``messages`` passed a threshold."""
        messages = message_list(messages, "needed")
        if self.max_messages is not None and len(messages) > self.max_messages:
            return True
        return self.max_tokens is not None and context_tokens(messages) > self.max_tokens

    async def compact(self, messages: Sequence[Msg], *, force: bool = False) -> list[Msg]:
        """``messages`` with their older part summarized, or an unchanged copy when no threshold
        is passed (unless ``force``) or no cut qualifies. Raises ``ModelError`` if the summary
        call fails, having changed nothing."""
        messages = message_list(messages, "compact")
        if not force and not self.needed(messages):
            return messages
        compacted = await self._compact(messages)
        return messages if compacted is None else compacted

    async def before_reasoning(self, ctx: RuntimeContext, context: list[Msg]) -> list[Msg] | None:
        return await self._compact(context) if self.needed(context) else None

    async def _compact(self, messages: list[Msg]) -> list[Msg] | None:
        start = 0
        while start < len(messages) and messages[start].role == "system":
            start += 1
        cut = _cut(messages, start, len(messages) - self.keep_recent)
        if cut is None:
            return None
        older = messages[start:cut]
        transcript = summary_input(older, self.preview)
        response = await complete(
            self.model,
            [Msg.user(self.prompt.replace("{transcript}", transcript))],
            system=self.system,
            settings=self.settings,
        )
        summary = response.message.text.strip()
        if not summary:
            raise ModelError(f"model {self.model.name!r} answered the summary request with no text")
        count = sum(_summarized(m) for m in older)
        mark: dict[str, Any] = {"summarized": count, "basis": usage_basis(messages)}
        usage = response.message.usage
        if usage is not None:
            mark["usage"] = {"input": usage.input_tokens, "output": usage.output_tokens}
        message = Msg.user(_HEADER.format(count=count) + summary, metadata={SUMMARY_KEY: mark})
        return [*messages[:start], message, *messages[cut:]]


def _summarized(msg: Msg) -> int:
    """How many original messages ``msg`` stands for (an earlier summary counts its own)."""
    mark = summary_mark(msg)
    if mark is not None and isinstance(mark.get("summarized"), int):
        return int(mark["summarized"])
    return 1


def _findings(msgs: Sequence[Msg]) -> set[tuple[str, str, str | None]]:
    return {
        (target, f.kind.value, f.tool_call_id)
        for target in ("openai", "anthropic")
        for f in validate(msgs, target=target)  # type: ignore[arg-type]
    }


def _cut(messages: list[Msg], start: int, latest: int) -> int | None:
    """The first kept position: the latest one at or before ``latest`` that starts a user or
    assistant message and leaves a history with no new provider findings, or ``None``."""
    first = start + 1 if start < len(messages) and summary_mark(messages[start]) else start
    candidates = [
        cut
        for cut in range(min(latest, len(messages) - 1), first, -1)
        if messages[cut].role in ("user", "assistant")
    ]
    if not candidates:
        return None
    placeholder = Msg.user("summary", created_at=None)
    before = _findings(messages)
    for cut in candidates:
        if _findings([*messages[:start], placeholder, *messages[cut:]]) <= before:
            return cut
    return None


def summary_input(messages: Sequence[Msg], preview: ToolResultPreview | None = None) -> str:
    """The transcript a summary is made from: one entry per message, tool results as their
    previews (``ToolResultPreview``, 600 characters by default), media named, thinking left out."""
    messages = message_list(messages, "summary_input")
    preview = preview or ToolResultPreview()
    lines: list[str] = []
    for msg in messages:
        if summary_mark(msg) is not None:
            lines.append(f"[earlier summary]\n{msg.text}")
            continue
        for block in msg.content:
            line = _line(msg, block, preview)
            if line is not None:
                lines.append(line)
    return "\n\n".join(lines)


def _line(msg: Msg, block: object, preview: ToolResultPreview) -> str | None:
    if isinstance(block, TextBlock):
        return f"[{msg.role}] {block.text}"
    if isinstance(block, ThinkingBlock):
        return None
    if isinstance(block, ToolUseBlock):
        arguments = arguments_text(block)  # the model's own text, as a provider is sent it
        return f"[{msg.role} calls {block.name}] {preview.text(arguments)}"
    if isinstance(block, ToolResultBlock):
        shortened = preview.result(block)
        parts = [b.text if isinstance(b, TextBlock) else _media(b) for b in shortened.output]
        error = " (error)" if block.is_error else ""
        return f"[{block.name or 'tool'} result{error}] " + "\n".join(parts)
    return f"[{msg.role}] {_media(block)}"


def _media(block: Any) -> str:
    kind = type(block).__name__.removesuffix("Block").lower()
    return f"[{kind} {block.media_type}]"
