"""pydantic-ai ``ModelMessage`` lists ↔ agentledger ``Msg`` lists, losslessly.

Each message is taken in pydantic-ai's own JSON form (``ModelMessagesTypeAdapter``), so
whatever that form holds comes back: loading gives messages whose JSON equals the originals'.
A ``ModelResponse`` becomes one assistant ``Msg``; a ``ModelRequest`` becomes one ``Msg`` per
run of parts that need the same role (system prompt → ``system``, user prompt → ``user``, tool
returns → ``tool``), because a ``Msg`` of one role cannot hold the others' blocks. The blocks
are native (``_parts``), so search, titles and the wire converters read a pydantic-ai session
like any other; what the blocks cannot carry is kept as JSON text under the private metadata key
``_pydantic_ai`` (never sent to a provider). The first ``Msg`` of a message holds the message's
own fields there (``"message"``), which is how loading knows where the next message starts.

Ids and every other ``Msg`` field are derived from the message's content alone, never from
object identity or the clock: converting the same history twice gives equal lists, so saving
an unchanged history writes nothing and a grown one appends only the new messages. A message
that repeats an earlier one exactly gets its id suffixed with the repeat count.

Messages this adapter did not write (a session of agentledger's own agent) load too: their
blocks are read as the obvious parts.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agentledger._optional import require
from agentledger.errors import CodecError, UserError
from agentledger.integrations.pydantic_ai._foreign import foreign_skeleton
from agentledger.integrations.pydantic_ai._parts import fill_part, part_role, split_part
from agentledger.messages import Block, Msg, Usage, checks

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage

__all__ = ["METADATA_KEY", "from_msgs", "to_msgs"]

METADATA_KEY = "_pydantic_ai"
"""Private ``Msg.metadata`` key holding, as JSON text, what the blocks do not carry."""

#: ``RequestUsage`` fields that ``Usage`` holds natively, by their ``Usage`` name.
_USAGE_FIELDS = {
    "input_tokens": "input_tokens",
    "output_tokens": "output_tokens",
    "cache_read_tokens": "cache_read_tokens",
    "cache_write_tokens": "cache_write_tokens",
    "reasoning_tokens": "output_reasoning_tokens",
}


def _adapter() -> Any:
    return require("pydantic_ai.messages", "pydantic-ai").ModelMessagesTypeAdapter


def to_msgs(messages: Sequence[ModelMessage]) -> list[Msg]:
    """The ``Msg`` list that stores ``messages`` (see the module docstring)."""
    try:
        dumped = _adapter().dump_python(list(messages), mode="json")
    except Exception as exc:  # pydantic raises several kinds for a non-message item
        raise UserError(f"messages must be pydantic-ai ModelMessage objects: {exc}") from None
    out: list[Msg] = []
    seen: dict[str, int] = {}
    for message in dumped:
        for msg in _message_msgs(message):
            repeats = seen.get(msg.id, 0)
            seen[msg.id] = repeats + 1
            out.append(msg.replace(id=f"{msg.id}~{repeats}") if repeats else msg)
    return out


def _message_msgs(message: dict[str, Any]) -> list[Msg]:
    text = json.dumps(message, ensure_ascii=False, sort_keys=True)
    base_id = "pai-" + hashlib.blake2b(text.encode(), digest_size=16).hexdigest()
    fields = dict(message)
    parts = fields.pop("parts")
    usage = _usage(fields) if fields.get("kind") == "response" else None
    created_at = _timestamp(fields.get("timestamp"), parts)
    groups: list[tuple[str, list[Block], list[Any]]] = []
    for part in parts:
        blocks, skeleton = split_part(part)
        role = "assistant" if fields.get("kind") == "response" else part_role(part)
        if not groups or (role is not None and role != groups[-1][0]):
            if groups and not groups[-1][1] and role is not None and groups[-1][0] == "user":
                groups[-1] = (role, groups[-1][1], groups[-1][2])  # a blockless start takes it
            else:
                groups.append((role or "user", [], []))
        groups[-1][1].extend(blocks)
        groups[-1][2].append(skeleton)
    if not groups:
        groups.append(("assistant" if fields.get("kind") == "response" else "user", [], []))
    msgs = []
    for index, (role, blocks, skeletons) in enumerate(groups):
        kept: dict[str, Any] = {"parts": skeletons}
        if index == 0:
            kept["message"] = fields
        msgs.append(
            Msg(
                role,  # type: ignore[arg-type]
                blocks,
                id=base_id if index == 0 else f"{base_id}-{index}",
                metadata={
                    METADATA_KEY: json.dumps(kept, ensure_ascii=False, separators=(",", ":"))
                },
                usage=usage if index == 0 else None,
                created_at=created_at,
            )
        )
    return msgs


def _usage(fields: dict[str, Any]) -> Usage | None:
    """The message's token counts as a ``Usage``; the counts it holds are left ``null`` in place
    in the kept fields (other usage fields and any count it cannot hold stay as they are)."""
    usage = fields.get("usage")
    if not isinstance(usage, dict):
        return None
    usage = fields["usage"] = dict(usage)
    counts = {}
    for ours, theirs in _USAGE_FIELDS.items():
        value = usage.get(theirs)
        if type(value) is int and 0 <= value <= checks.MAX_COUNT:
            counts[ours] = value
            usage[theirs] = None
    usage["__native__"] = sorted(counts)
    return Usage(**counts)


def _timestamp(value: Any, parts: list[Any]) -> datetime | None:
    """The message's time (its own, else its first part's), if it is a timezone-aware one."""
    if value is None:
        value = next((p.get("timestamp") for p in parts if isinstance(p, dict)), None)
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    try:
        return checks.timestamp("Msg", "created_at", parsed)
    except UserError:  # naive, or out of range in UTC: the message keeps its own text anyway
        return None


def from_msgs(msgs: Iterable[Msg]) -> list[ModelMessage]:
    """The pydantic-ai messages stored as ``msgs`` (the inverse of ``to_msgs``)."""
    dumped: list[dict[str, Any]] = []
    for msg in msgs:
        kept = _kept(msg)
        blocks: Iterator[Block] = iter(msg.content)
        if "message" in kept or not dumped:
            message = dict(kept.get("message") or {"kind": _kind(msg)})
            message["parts"] = []
            _restore_usage(message, msg.usage)
            dumped.append(message)
        parts = dumped[-1]["parts"]
        parts.extend(fill_part(skeleton, blocks) for skeleton in kept["parts"])
        if next(blocks, None) is not None:
            raise CodecError(f"message {msg.id!r} holds blocks no pydantic-ai part accounts for")
    try:
        return list(_adapter().validate_json(json.dumps(dumped, ensure_ascii=False)))
    except ValueError as exc:
        raise CodecError(f"stored pydantic-ai messages do not validate: {exc}") from None


def _kept(msg: Msg) -> dict[str, Any]:
    text = msg.metadata.get(METADATA_KEY)
    if text is None:
        return foreign_skeleton(msg)
    try:
        kept = json.loads(text)
    except (TypeError, ValueError):
        kept = None
    if not isinstance(kept, dict) or not isinstance(kept.get("parts"), list):
        raise CodecError(f"message {msg.id!r} has a damaged {METADATA_KEY!r} metadata value")
    return kept


def _kind(msg: Msg) -> str:
    return "response" if msg.role == "assistant" else "request"


def _restore_usage(message: dict[str, Any], usage: Usage | None) -> None:
    kept = message.get("usage")
    if not isinstance(kept, dict) or "__native__" not in kept:
        return
    kept = message["usage"] = dict(kept)
    for ours in kept.pop("__native__"):
        kept[_USAGE_FIELDS[ours]] = getattr(usage, ours) if usage is not None else 0
