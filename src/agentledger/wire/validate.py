"""Strict history validation and explicit repair.

Strict providers reject a request whose history breaks tool-call pairing (seed 003: a user
interrupt left a tool call that never ran, and every later request failed). ``validate`` finds
every such problem without changing anything; ``check`` raises ``HistoryError`` carrying them;
``repair`` (in ``wire.repair``) returns a new, valid list and says exactly what it changed.
Nothing repairs silently: a caller decides to repair and gets a report (also logged at WARNING).

Rules, by ``target``:

- every target: each tool call is answered exactly once (``unanswered_call``,
  ``duplicate_result``), a result answers a call made before it (``orphan_result``,
  ``result_before_call``), tool-call ids are unique (``duplicate_call_id``), an assistant message
  holds something (``empty_assistant``: no text, media, thinking or tool call), a tool message
  holds results and only results, tool calls and thinking sit in assistant messages
  (``empty_tool_message``, ``misplaced_block``);
- ``strict``, ``openai``, ``anthropic``: the results for an assistant turn's calls follow that
  turn directly, before any other user, assistant or system message (``late_result``);
  consecutive assistant messages count as one turn (a Responses-API history holds one call per
  item), which ``to_openai`` and ``to_anthropic`` send as one message;
- ``anthropic``: the first non-system message that sends anything (blank text and thinking
  Anthropic did not sign are not sent) is a user message, and system messages come before the
  conversation (the API has one system prompt) (``bad_role_order``); ``repair`` fixes both with
  ``target="anthropic"``.

``agui`` is the lenient target (a frontend tool's result may arrive after other messages).

What a request for each target carries of a block is ``sends``, which the writers follow too:
an assistant message that holds only what its target is not sent (thinking, for OpenAI chat; a
thinking Anthropic did not sign) is valid, and ``to_openai`` and ``to_anthropic`` fold it into
the next assistant message or leave it out, so no request ever holds an assistant message with
nothing in it, and the history keeps the thinking.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Literal

from agentledger.errors import HistoryError, UserError
from agentledger.messages.blocks import Block, TextBlock, ThinkingBlock, ToolResultBlock
from agentledger.messages.msg import Msg
from agentledger.wire.private import block_fits, block_type

__all__ = [
    "TARGETS",
    "Finding",
    "FindingKind",
    "HistoryChecker",
    "Target",
    "check",
    "is_empty_assistant",
    "sends",
    "starts_conversation",
    "starts_turn",
    "validate",
]

logger = logging.getLogger("agentledger.wire")

Target = Literal["strict", "openai", "anthropic", "agui"]
TARGETS = ("strict", "openai", "anthropic", "agui")


class FindingKind(enum.StrEnum):
    """What is wrong with a history."""

    UNANSWERED_CALL = "unanswered_call"
    ORPHAN_RESULT = "orphan_result"
    DUPLICATE_RESULT = "duplicate_result"
    RESULT_BEFORE_CALL = "result_before_call"
    LATE_RESULT = "late_result"
    DUPLICATE_CALL_ID = "duplicate_call_id"
    EMPTY_ASSISTANT = "empty_assistant"
    EMPTY_TOOL_MESSAGE = "empty_tool_message"
    MISPLACED_BLOCK = "misplaced_block"
    BAD_ROLE_ORDER = "bad_role_order"


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem: what, at which position (``index``) and message, for which tool call."""

    kind: FindingKind
    index: int
    message_id: str
    tool_call_id: str | None
    text: str

    def __str__(self) -> str:
        return f"{self.kind.value} at message {self.index} ({self.message_id!r}): {self.text}"


def sends(block: Block, target: Target = "strict") -> bool:
    """Whether a request for ``target`` carries ``block`` as something said: not blank text;
    thinking only where the target's writer sends it (``openai``: none, as ``to_openai`` sends
    none by default; ``anthropic``: signed or redacted thinking, the only kind its API takes;
    ``strict`` and ``agui``: all of it, which the history keeps); anything else always."""
    if isinstance(block, TextBlock):
        return bool(block.text.strip())
    if isinstance(block, ThinkingBlock):
        if target == "openai":
            return False
        if target == "anthropic":
            return block.redacted or bool(block.signature)
    return True


def is_empty_assistant(msg: Msg, target: Target = "strict") -> bool:
    """An assistant message with nothing ``target`` is sent in it (``sends``); for ``strict``:
    no text (blank text counts as none), no media, no thinking, no tool call. Strict providers
    reject it."""
    return not any(sends(b, target) for b in msg.content)


def starts_turn(msgs: Sequence[Msg], i: int) -> bool:
    """Whether the assistant message ``msgs[i]`` starts a turn: consecutive assistant messages
    are one turn, whose tool results follow the last of them (a Responses-API history holds
    one call per item)."""
    return i == 0 or msgs[i - 1].role != "assistant"


def starts_conversation(msg: Msg) -> bool:
    """Whether ``msg`` starts the conversation for Anthropic: a non-system message that sends
    something (``sends``: a message of blank text, or of thinking Anthropic did not sign, is
    not sent at all)."""
    return msg.role != "system" and any(sends(b, "anthropic") for b in msg.content)


def validate(msgs: Sequence[Msg], *, target: Target = "strict") -> list[Finding]:
    """Every problem ``target`` would reject in ``msgs``, in message order. Reads only."""
    if target not in TARGETS:
        raise UserError(f"target must be one of {TARGETS}, got {target!r}")
    return _Validator(list(msgs), target).run()


class _Validator:
    """One pass over a history, tracking which calls are open, answered and seen."""

    def __init__(
        self,
        msgs: Sequence[Msg],
        target: Target,
        start: int = 0,
        before: _Valid | None = None,
    ) -> None:
        """Check ``msgs`` from ``start``; ``before`` is what the valid ``msgs[:start]`` left
        (see ``HistoryChecker``)."""
        self.msgs = msgs
        self.target = target
        self.start = start
        self.findings: list[Finding] = []
        # the calls of ``msgs[:start]``, all answered: read, never copied (a long history's
        # calls would cost a copy per check)
        self.earlier: AbstractSet[str] = before.calls.keys() if before is not None else set()
        self.started = before.started if before is not None else False  # a non-system message
        self.first_call: dict[str, int] = {}  # call id -> index of the first message calling it
        for i in range(start, len(msgs)):
            msg = msgs[i]
            if msg.role == "assistant":
                for call in msg.tool_calls:
                    if call.id not in self.earlier:
                        self.first_call.setdefault(call.id, i)
        self.window: set[str] = set()  # calls of the current assistant turn awaiting results
        self.answered: set[str] = set()

    def add(self, kind: FindingKind, i: int, call_id: str | None, text: str) -> None:
        self.findings.append(Finding(kind, i, self.msgs[i].id, call_id, text))

    def run(self) -> list[Finding]:
        earlier, seen_calls = self.earlier, set()  # seen: the calls from ``start`` on
        started = self.started
        for i in range(self.start, len(self.msgs)):
            msg = self.msgs[i]
            for block in msg.content:
                if not block_fits(msg.role, block):
                    what = f"a {block_type(block)} block cannot sit in a {msg.role} message"
                    self.add(FindingKind.MISPLACED_BLOCK, i, getattr(block, "id", None), what)
            if self.target == "anthropic":
                self._anthropic_order(i, msg, started)
            started = started or starts_conversation(msg)
            if msg.role == "assistant":
                if is_empty_assistant(msg):
                    self.add(FindingKind.EMPTY_ASSISTANT, i, None, "assistant message is empty")
                if starts_turn(self.msgs, i):
                    self.window = set()
                for call in msg.tool_calls:
                    if call.id in earlier or call.id in seen_calls:
                        what = f"tool call id {call.id!r} was already used"
                        self.add(FindingKind.DUPLICATE_CALL_ID, i, call.id, what)
                    else:
                        self.window.add(call.id)
                    seen_calls.add(call.id)
            elif msg.role == "tool":
                if not msg.tool_results:
                    self.add(FindingKind.EMPTY_TOOL_MESSAGE, i, None, "tool message has no results")
                for result in msg.tool_results:
                    self._result(i, result)
            else:
                self.window = set()
        for call_id, i in self.first_call.items():
            if call_id not in self.answered:
                what = f"tool call {call_id!r} has no result"
                self.add(FindingKind.UNANSWERED_CALL, i, call_id, what)
        self.started = started
        self.findings.sort(key=lambda f: f.index)
        return self.findings

    def _anthropic_order(self, i: int, msg: Msg, started: bool) -> None:
        if msg.role == "system" and started:
            what = "system message after the conversation started (Anthropic has one system prompt)"
            self.add(FindingKind.BAD_ROLE_ORDER, i, None, what)
        elif starts_conversation(msg) and not started and msg.role != "user":
            what = f"first message after the system prompt is {msg.role}, not user"
            self.add(FindingKind.BAD_ROLE_ORDER, i, None, what)

    def _result(self, i: int, result: ToolResultBlock) -> None:
        call_id = result.id
        if call_id in self.earlier:  # answered before ``start``
            what = f"second result for call {call_id!r}"
            self.add(FindingKind.DUPLICATE_RESULT, i, call_id, what)
        elif call_id not in self.first_call:
            self.add(FindingKind.ORPHAN_RESULT, i, call_id, f"result for unknown call {call_id!r}")
        elif call_id in self.answered:
            what = f"second result for call {call_id!r}"
            self.add(FindingKind.DUPLICATE_RESULT, i, call_id, what)
        elif self.first_call[call_id] > i:
            what = f"result for call {call_id!r} comes before the call"
            self.add(FindingKind.RESULT_BEFORE_CALL, i, call_id, what)
        else:
            self.answered.add(call_id)
            if self.target != "agui" and call_id not in self.window:
                what = f"result for call {call_id!r} does not directly follow its assistant turn"
                self.add(FindingKind.LATE_RESULT, i, call_id, what)
            self.window.discard(call_id)


def check(msgs: Sequence[Msg], *, target: Target = "strict") -> None:
    """Raise ``HistoryError`` (with ``.findings``) when ``validate`` finds anything."""
    findings = validate(msgs, target=target)
    if findings:
        raise _invalid(findings, target)


def _invalid(findings: list[Finding], target: Target) -> HistoryError:
    more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
    return HistoryError(f"history is not valid for {target}: {findings[0]}{more}", findings)


@dataclass(slots=True)
class _Valid:
    """What a history that passed leaves to the messages after it."""

    msgs: tuple[Msg, ...]  # its messages: the same objects, in order, are the same history
    calls: dict[str, None]  # its tool-call ids, each answered (an unanswered call fails)
    started: bool  # it holds a message that starts the conversation (``anthropic``)


class HistoryChecker:
    """``check`` for a history checked again as it grows: the part that passed is not walked
    again, so checking a 12,000-message context before each model call costs what was added.

    The agent loop checks its context before every model call, and the context grows by a few
    messages between two calls. The checker remembers the last history that passed, by its
    messages (a ``Msg`` never changes, so the same objects, or equal ones, in the same order
    are the same history), and what a valid history leaves to the messages after it: its tool
    calls, every one of them answered, and whether the conversation has started. A history
    that begins with the one that passed is checked from where that one ended; any other is
    checked whole. Either way ``check`` raises exactly what ``check(msgs, target=...)``
    raises: no finding of a whole history can sit in a valid prefix of it, since every rule
    looks only backwards or at tool calls, and the prefix answered all of its own.
    """

    def __init__(self, target: Target = "strict") -> None:
        if target not in TARGETS:
            raise UserError(f"target must be one of {TARGETS}, got {target!r}")
        self.target: Target = target
        self._passed: _Valid | None = None

    @property
    def call_ids(self) -> AbstractSet[str]:
        """The tool-call ids of the last history that passed (its results answer only them): a
        read-only view, which the next check that passes brings up to date."""
        return self._passed.calls.keys() if self._passed is not None else frozenset()

    def check(self, msgs: Sequence[Msg]) -> tuple[Msg, ...]:
        """Raise ``HistoryError`` (with ``.findings``) when ``validate`` finds anything; else
        return the history checked, as a tuple: the agent sends the model exactly that, so
        nothing can change between the check and the request, and takes one copy, not two."""
        msgs = tuple(msgs)
        before = self._passed
        if before is not None and not _begins_with(msgs, before.msgs):
            before = None
        start = len(before.msgs) if before is not None else 0
        validator = _Validator(msgs, self.target, start, before)
        findings = validator.run()
        if findings:
            raise _invalid(findings, self.target)
        # the calls grow in place: what the prefix left is kept, not copied
        calls = before.calls if before is not None else {}
        calls.update(dict.fromkeys(validator.first_call))
        self._passed = _Valid(msgs, calls, validator.started)
        return msgs


def _begins_with(msgs: tuple[Msg, ...], prefix: tuple[Msg, ...]) -> bool:
    """Whether ``msgs`` starts with ``prefix``: one tuple comparison in C, which tries identity
    before ``Msg.__eq__`` (the agent's context holds the very objects that passed, so no
    digest is read), about 4x faster than a Python-level identity walk at 12,000 messages. A
    message equal to the one that passed, not the same object, holds the same content, so the
    prefix is the same history either way."""
    n = len(prefix)
    if len(msgs) == n:
        return msgs == prefix
    return len(msgs) > n and msgs[:n] == prefix
