"""Explicit repair of histories that ``validate`` rejects.

``repair`` returns a new list that passes ``validate`` for its target and a report of every
change (each also logged at WARNING): nothing is repaired silently, and the input list and its
messages are never touched. Pairing and emptiness are fixed for every target; the role order
Anthropic requires is fixed for ``target="anthropic"`` (see ``repair``).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from agentledger.errors import UserError
from agentledger.messages.blocks import Block, TextBlock, ToolResultBlock, ToolUseBlock
from agentledger.messages.msg import Msg
from agentledger.wire.private import SOURCE_ROLE_KEY
from agentledger.wire.validate import (
    TARGETS,
    Target,
    is_empty_assistant,
    logger,
    starts_conversation,
    starts_turn,
)

__all__ = [
    "CONVERSATION_START",
    "NOT_EXECUTED",
    "RepairChange",
    "RepairKind",
    "RepairReport",
    "repair",
]


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
    if target not in TARGETS:
        raise UserError(f"target must be one of {TARGETS}, got {target!r}")
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
        elif starts_conversation(msg) and not started and msg.role != "user":
            start = Msg.user(CONVERSATION_START, id=f"{msg.id}:start", created_at=msg.created_at)
            out.append(start)
            what = f"added a user message before the first {msg.role} message"
            changes.append(RepairChange(RepairKind.ADDED_USER_MESSAGE, i, msg.id, None, what))
        started = started or starts_conversation(msg)
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
        waiting: list[Msg] = []  # results placed after a run of assistant messages (one turn)
        for i, msg in enumerate(self.msgs):
            if msg.role == "assistant":
                kept, results = self._assistant(i, msg)
                out.extend(kept)
                waiting.extend(results)
                continue
            out.extend(waiting)
            waiting = []
            if msg.role == "tool":
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
        out.extend(waiting)
        self.changes.sort(key=lambda c: c.index)
        for change in self.changes:
            logger.warning("history repair: %s", change)
        return RepairReport(out, self.changes)

    def _place_results(self) -> None:
        window: set[str] = set()
        for i, msg in enumerate(self.msgs):
            if msg.role == "assistant":
                if starts_turn(self.msgs, i):
                    window = set()
                window |= {
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

    def _assistant(self, i: int, msg: Msg) -> tuple[list[Msg], list[Msg]]:
        """The message as kept (none if left empty), and a tool message with the results that
        go after its turn (moved late results, error results for unanswered calls)."""
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
            return [], []
        if not results:
            return [new], []
        return [new], [Msg("tool", results, id=f"{msg.id}:results", created_at=msg.created_at)]
