"""Strict history validation and explicit repair.

Strict providers reject a request whose history breaks tool-call pairing (seed 003: a user
interrupt left a tool call that never ran, and every later request failed). ``validate`` finds
every such problem without changing anything; ``check`` raises ``HistoryError`` carrying them;
``repair`` returns a new, valid list and says exactly what it changed. Nothing here repairs
silently: a caller decides to repair and gets a report (also logged at WARNING).

Rules, by ``target``:

- every target: each tool call is answered exactly once (``unanswered_call``,
  ``duplicate_result``), a result answers a call made before it (``orphan_result``,
  ``result_before_call``), tool-call ids are unique (``duplicate_call_id``), an assistant message
  says something (``empty_assistant``: no text, media, thinking or tool call), a tool message
  holds results and only results, tool calls and thinking sit in assistant messages
  (``empty_tool_message``, ``misplaced_block``);
- ``strict``, ``openai``, ``anthropic``: the results for an assistant turn's calls follow that
  turn directly, before any other user, assistant or system message (``late_result``);
- ``anthropic``: the first non-system message that sends anything (blank user text is not
  sent) is a user message, and system messages come before the conversation (the API has one
  system prompt) (``bad_role_order``); ``repair`` fixes both with ``target="anthropic"``.

``agui`` is the lenient target (a frontend tool's result may arrive after other messages).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from agentledger.errors import HistoryError, UserError
from agentledger.messages.blocks import Block, TextBlock, ToolResultBlock, ToolUseBlock
from agentledger.messages.msg import Msg
from agentledger.wire.private import SOURCE_ROLE_KEY, block_fits, block_type

__all__ = [
    "NOT_EXECUTED",
    "Finding",
    "FindingKind",
    "RepairChange",
    "RepairKind",
    "RepairReport",
    "Target",
    "check",
    "is_empty_assistant",
    "repair",
    "validate",
]

logger = logging.getLogger("agentledger.wire")

Target = Literal["strict", "openai", "anthropic", "agui"]
_TARGETS = ("strict", "openai", "anthropic", "agui")


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


def is_empty_assistant(msg: Msg) -> bool:
    """An assistant message with nothing in it: no text (blank text counts as none), no media,
    no thinking, no tool call. Strict providers reject it."""
    return all(isinstance(b, TextBlock) and not b.text.strip() for b in msg.content)


def _starts(msg: Msg) -> bool:
    """Whether ``msg`` starts the conversation for Anthropic: a non-system message that sends
    something (a user message of blank text is not sent at all)."""
    if msg.role == "system":
        return False
    return msg.role != "user" or not all(
        isinstance(b, TextBlock) and not b.text.strip() for b in msg.content
    )


def validate(msgs: Sequence[Msg], *, target: Target = "strict") -> list[Finding]:
    """Every problem ``target`` would reject in ``msgs``, in message order. Reads only."""
    if target not in _TARGETS:
        raise UserError(f"target must be one of {_TARGETS}, got {target!r}")
    return _Validator(list(msgs), target).run()


class _Validator:
    """One pass over a history, tracking which calls are open, answered and seen."""

    def __init__(self, msgs: list[Msg], target: Target) -> None:
        self.msgs = msgs
        self.target = target
        self.findings: list[Finding] = []
        self.first_call: dict[str, int] = {}  # call id -> index of the first message calling it
        for i, msg in enumerate(msgs):
            if msg.role == "assistant":
                for call in msg.tool_calls:
                    self.first_call.setdefault(call.id, i)
        self.window: set[str] = set()  # calls of the current assistant turn awaiting results
        self.answered: set[str] = set()

    def add(self, kind: FindingKind, i: int, call_id: str | None, text: str) -> None:
        self.findings.append(Finding(kind, i, self.msgs[i].id, call_id, text))

    def run(self) -> list[Finding]:
        seen_calls: set[str] = set()
        started = False  # a non-system message has been seen
        for i, msg in enumerate(self.msgs):
            for block in msg.content:
                if not block_fits(msg.role, block):
                    what = f"a {block_type(block)} block cannot sit in a {msg.role} message"
                    self.add(FindingKind.MISPLACED_BLOCK, i, getattr(block, "id", None), what)
            if self.target == "anthropic":
                self._anthropic_order(i, msg, started)
            started = started or _starts(msg)
            if msg.role == "assistant":
                if is_empty_assistant(msg):
                    self.add(FindingKind.EMPTY_ASSISTANT, i, None, "assistant message is empty")
                self.window = set()
                for call in msg.tool_calls:
                    if call.id in seen_calls:
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
        self.findings.sort(key=lambda f: f.index)
        return self.findings

    def _anthropic_order(self, i: int, msg: Msg, started: bool) -> None:
        if msg.role == "system" and started:
            what = "system message after the conversation started (Anthropic has one system prompt)"
            self.add(FindingKind.BAD_ROLE_ORDER, i, None, what)
        elif _starts(msg) and not started and msg.role != "user":
            what = f"first message after the system prompt is {msg.role}, not user"
            self.add(FindingKind.BAD_ROLE_ORDER, i, None, what)

    def _result(self, i: int, result: ToolResultBlock) -> None:
        call_id = result.id
        if call_id not in self.first_call:
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
        more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
        raise HistoryError(f"history is not valid for {target}: {findings[0]}{more}", findings)


# -- repair -------------------------------------------------------------------------------------
class RepairKind(enum.StrEnum):
    """What ``repair`` did."""

    DROPPED_ORPHAN_RESULT = "dropped_orphan_result"
    DROPPED_DUPLICATE_RESULT = "dropped_duplicate_result"
    DROPPED_EARLY_RESULT = "dropped_early_result"
    MOVED_LATE_RESULT = "moved_late_result"
    DROPPED_DUPLICATE_CALL = "dropped_duplicate_call"
    DROPPED_UNANSWERED_CALL = "dropped_unanswered_call"
    ADDED_ERROR_RESULT = "added_error_result"
    DROPPED_EMPTY_MESSAGE = "dropped_empty_message"
    SYSTEM_AS_USER = "system_as_user"
    ADDED_USER_MESSAGE = "added_user_message"


@dataclass(frozen=True, slots=True)
class RepairChange:
    """One change ``repair`` made; ``index`` is the position in the input list."""

    kind: RepairKind
    index: int
    message_id: str
    tool_call_id: str | None
    text: str

    def __str__(self) -> str:
        return f"{self.kind.value} at message {self.index} ({self.message_id!r}): {self.text}"


@dataclass(frozen=True, slots=True)
class RepairReport:
    """The repaired history (``messages``, a new list) and every change made to get it."""

    messages: list[Msg]
    changes: list[RepairChange]

    @property
    def changed(self) -> bool:
        return bool(self.changes)


NOT_EXECUTED = "tool call was not executed"
CONVERSATION_START = "(conversation start)"
"""Text of the user message ``repair(target="anthropic")`` puts before a history that starts with
the assistant."""


def repair(
    msgs: Sequence[Msg],
    *,
    unanswered: Literal["drop", "error_result"] = "drop",
    target: Target = "strict",
) -> RepairReport:
    """A copy of ``msgs`` that passes ``validate(target="strict")`` for pairing and emptiness.

    Drops results without a call, second results, results before their call, second uses of a
    call id and empty messages; moves a result that arrived after the conversation moved on to
    right after its call. Calls left without a result are dropped (``unanswered="drop"``, the
    seed-003 rule; an assistant message left empty goes too) or answered with an error result
    saying ``NOT_EXECUTED`` (``"error_result"``). Results placed after a call go in a new tool
    message ``f"{call_msg.id}:results"`` right after the calling message. Changed messages are
    new ``Msg`` objects with their ids kept; the input list and its messages are not touched.
    Misplaced blocks (``misplaced_block``) are not repaired.

    ``target="anthropic"`` also fixes the role order Anthropic requires (``bad_role_order``): a
    system (or ``developer``) message after the conversation started becomes a user message
    with the same id and content, in the same place (hoisting it would move the instruction),
    and a history whose first message after the system prompt is the assistant's gets a user
    message saying ``CONVERSATION_START`` before it (id ``f"{first.id}:start"``).
    """
    if unanswered not in ("drop", "error_result"):
        raise UserError(f'unanswered must be "drop" or "error_result", got {unanswered!r}')
    if target not in _TARGETS:
        raise UserError(f"target must be one of {_TARGETS}, got {target!r}")
    report = _Repair(list(msgs), unanswered).run()
    if target != "anthropic":
        return report
    return _anthropic_order(list(msgs), report)


def _anthropic_order(original: list[Msg], report: RepairReport) -> RepairReport:
    where = {}
    for i, msg in enumerate(original):
        where.setdefault(msg.id, i)
    out: list[Msg] = []
    changes = list(report.changes)
    started = False
    for msg in report.messages:
        i = where.get(msg.id.removesuffix(":results"), 0)
        if msg.role == "system" and started:
            role = msg.metadata.get(SOURCE_ROLE_KEY, "system")
            metadata = {**msg.metadata, SOURCE_ROLE_KEY: role}
            msg = msg.replace(role="user", metadata=metadata)
            what = f"made a {role} message after the conversation started a user message"
            changes.append(RepairChange(RepairKind.SYSTEM_AS_USER, i, msg.id, None, what))
        elif _starts(msg) and not started and msg.role != "user":
            start = Msg.user(CONVERSATION_START, id=f"{msg.id}:start", created_at=msg.created_at)
            out.append(start)
            what = f"added a user message before the first {msg.role} message"
            changes.append(RepairChange(RepairKind.ADDED_USER_MESSAGE, i, msg.id, None, what))
        started = started or _starts(msg)
        out.append(msg)
    for change in changes[len(report.changes) :]:
        logger.warning("history repair: %s", change)
    changes.sort(key=lambda c: c.index)
    return RepairReport(out, changes)


class _Repair:
    def __init__(self, msgs: list[Msg], unanswered: str) -> None:
        self.msgs = msgs
        self.mode = unanswered
        self.changes: list[RepairChange] = []
        self.first_call: dict[str, int] = {}
        self.dup_calls: set[tuple[int, int]] = set()  # (message, block) of reused call ids
        for i, msg in enumerate(msgs):
            if msg.role != "assistant":
                continue
            for j, block in enumerate(msg.content):
                if isinstance(block, ToolUseBlock):
                    if block.id in self.first_call:
                        self.dup_calls.add((i, j))
                        what = f"dropped a second tool call with id {block.id!r}"
                        self.note(RepairKind.DROPPED_DUPLICATE_CALL, i, block.id, what)
                    else:
                        self.first_call[block.id] = i
        self.kept: dict[int, list[Block]] = {}  # tool message -> blocks kept in place
        self.moved: dict[int, list[ToolResultBlock]] = {}  # calling message -> results after it
        self.answered: set[str] = set()

    def note(self, kind: RepairKind, i: int, call_id: str | None, text: str) -> None:
        self.changes.append(RepairChange(kind, i, self.msgs[i].id, call_id, text))

    def run(self) -> RepairReport:
        self._place_results()
        out: list[Msg] = []
        for i, msg in enumerate(self.msgs):
            if msg.role == "assistant":
                out.extend(self._assistant(i, msg))
            elif msg.role == "tool":
                content = self.kept[i]
                if not any(isinstance(b, ToolResultBlock) for b in content):
                    what = "dropped a tool message left without results"
                    self.note(RepairKind.DROPPED_EMPTY_MESSAGE, i, None, what)
                elif len(content) == len(msg.content):
                    out.append(msg)
                else:
                    out.append(msg.replace(content=content))
            else:
                out.append(msg)
        self.changes.sort(key=lambda c: c.index)
        for change in self.changes:
            logger.warning("history repair: %s", change)
        return RepairReport(out, self.changes)

    def _place_results(self) -> None:
        window: set[str] = set()
        for i, msg in enumerate(self.msgs):
            if msg.role == "assistant":
                window = {
                    b.id
                    for j, b in enumerate(msg.content)
                    if isinstance(b, ToolUseBlock) and (i, j) not in self.dup_calls
                }
            elif msg.role == "tool":
                self.kept[i] = []
                for block in msg.content:
                    if not isinstance(block, ToolResultBlock) or self._place(i, block, window):
                        self.kept[i].append(block)
            else:
                window = set()

    def _place(self, i: int, result: ToolResultBlock, window: set[str]) -> bool:
        """Whether ``result`` stays where it is (else it is dropped or moved)."""
        call_id = result.id
        if call_id not in self.first_call:
            what = f"dropped a result for unknown call {call_id!r}"
            self.note(RepairKind.DROPPED_ORPHAN_RESULT, i, call_id, what)
            return False
        if call_id in self.answered:
            what = f"dropped a second result for call {call_id!r}"
            self.note(RepairKind.DROPPED_DUPLICATE_RESULT, i, call_id, what)
            return False
        at = self.first_call[call_id]
        if at > i:
            what = f"dropped a result that comes before its call {call_id!r} (message {at})"
            self.note(RepairKind.DROPPED_EARLY_RESULT, i, call_id, what)
            return False
        self.answered.add(call_id)
        if call_id in window:
            window.discard(call_id)
            return True
        self.moved.setdefault(at, []).append(result)
        what = f"moved the result for call {call_id!r} to right after its call (message {at})"
        self.note(RepairKind.MOVED_LATE_RESULT, i, call_id, what)
        return False

    def _assistant(self, i: int, msg: Msg) -> list[Msg]:
        content: list[Block] = []
        results = list(self.moved.get(i, ()))
        for j, block in enumerate(msg.content):
            if (i, j) in self.dup_calls:
                continue
            if isinstance(block, ToolUseBlock) and block.id not in self.answered:
                if self.mode == "drop":
                    what = f"dropped tool call {block.id!r} ({block.name}): it has no result"
                    self.note(RepairKind.DROPPED_UNANSWERED_CALL, i, block.id, what)
                    continue
                output = (TextBlock(text=NOT_EXECUTED),)
                results.append(
                    ToolResultBlock(id=block.id, name=block.name, output=output, is_error=True)
                )
                what = f"answered tool call {block.id!r} ({block.name}) with an error result"
                self.note(RepairKind.ADDED_ERROR_RESULT, i, block.id, what)
            content.append(block)
        new = msg if len(content) == len(msg.content) else msg.replace(content=content)
        if is_empty_assistant(new):
            what = "dropped an assistant message left empty"
            self.note(RepairKind.DROPPED_EMPTY_MESSAGE, i, None, what)
            return []
        if not results:
            return [new]
        extra = Msg("tool", results, id=f"{msg.id}:results", created_at=msg.created_at)
        return [new, extra]
