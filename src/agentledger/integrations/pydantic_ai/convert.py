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

Every message is checked when it is first converted: its ``Msg`` objects must read back as the
JSON pydantic-ai itself reads the message back as, or it is refused with ``CodecError`` before
anything is stored. The check also lets the kept fields leave out what equals pydantic-ai's
defaults (``null`` fields, zero counts) whenever the message still reads back exactly, which
keeps a stored turn smaller than pydantic-ai's own JSON of it.

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
from agentledger.integrations.pydantic_ai._cache import Conversions
from agentledger.integrations.pydantic_ai._foreign import foreign_skeleton
from agentledger.integrations.pydantic_ai._parts import fill_part, part_role, split_part
from agentledger.messages import Block, Msg, Usage, checks
from agentledger.wire.private import PYDANTIC_AI_KEY as METADATA_KEY

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage

__all__ = ["METADATA_KEY", "from_msgs", "json_of", "to_msgs"]


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


def to_msgs(
    messages: Sequence[ModelMessage], *, conversions: Conversions | None = None
) -> list[Msg]:
    """The ``Msg`` list that stores ``messages`` (see the module docstring).

    ``conversions`` remembers messages converted before, by content, so that saving a long
    history again after each step only converts what is new.
    """
    types = _message_types()
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise UserError("messages must be a list of pydantic-ai ModelMessage objects")
    adapter = _adapter()
    out: list[Msg] = []
    seen: dict[str, int] = {}
    for index, message in enumerate(messages):
        if not isinstance(message, types):
            raise UserError(
                f"messages[{index}] must be a pydantic-ai ModelRequest or ModelResponse, "
                f"got {type(message).__name__}"
            )
        raw = json_of(adapter, [message], f"messages[{index}]")
        key = hashlib.blake2b(raw, digest_size=16).digest()
        msgs = conversions.get(key) if conversions is not None else None
        if msgs is None:
            msgs = _converted(raw, "pai-" + key.hex(), f"messages[{index}]")
            if conversions is not None:
                conversions.put(key, msgs)
        for msg in msgs:
            repeats = seen.get(msg.id, 0)
            seen[msg.id] = repeats + 1
            out.append(msg.replace(id=f"{msg.id}~{repeats}") if repeats else msg)
    return out


def json_of(adapter: Any, value: Any, what: str, **options: Any) -> bytes:
    """pydantic-ai's JSON of ``value``, or ``CodecError`` naming ``what`` when there is none (text
    holding a lone surrogate, which UTF-8 cannot encode, is the way a message gets here)."""
    try:
        return adapter.dump_json(value, **options)  # type: ignore[no-any-return]
    except ValueError as exc:  # pydantic_core.PydanticSerializationError
        raise CodecError(f"{what} cannot be written as JSON: {exc}") from None


def message_key(message: ModelMessage) -> bytes:
    """The digest ``to_msgs`` files a message's conversion under."""
    return hashlib.blake2b(_adapter().dump_json([message]), digest_size=16).digest()


def _message_types() -> tuple[type, ...]:
    module = require("pydantic_ai.messages", "pydantic-ai")
    return (module.ModelRequest, module.ModelResponse)


def _converted(raw: bytes, base_id: str, what: str) -> tuple[Msg, ...]:
    """The Msgs for one message (``raw``: the adapter's JSON of ``[message]``), checked to read
    back as pydantic-ai itself reads the message back; compact if that form passes the check.
    ``CodecError`` naming ``what`` for a message pydantic-ai cannot read back itself (its
    dataclasses take any value: a part's ``part_kind`` or a tool return's ``retry`` set to
    something else is written, then refused)."""
    adapter = _adapter()
    try:
        expected = adapter.dump_json(adapter.validate_json(raw))
    except ValueError as exc:  # pydantic_core.ValidationError
        raise CodecError(f"{what} is not a message pydantic-ai reads back: {_first(exc)}") from None
    message = json.loads(raw)[0]
    for compact in (True, False):
        msgs = _message_msgs(message, base_id, compact=compact)
        try:
            if adapter.dump_json(from_msgs(msgs)) == expected:
                return msgs
        except CodecError:
            pass  # a left-out null was a required field: try the full form
    raise CodecError(
        f"a pydantic-ai {message.get('kind')} message does not read back exactly: {raw[:200]!r}"
    )


def _first(exc: ValueError) -> str:
    """The first problem a pydantic ``ValidationError`` names, where it is and what."""
    errors = getattr(exc, "errors", None)
    problems = errors() if callable(errors) else None
    if not problems:
        return str(exc)
    first = problems[0]
    where = ".".join(str(part) for part in first.get("loc", ())[1:])  # [0]: the list index
    return f"{where}: {first.get('msg')}" if where else str(first.get("msg"))


def _message_msgs(message: dict[str, Any], base_id: str, *, compact: bool) -> tuple[Msg, ...]:
    fields = dict(message)
    parts = fields.pop("parts")
    usage = _usage(fields, compact) if fields.get("kind") == "response" else None
    created_at = _timestamp(fields.get("timestamp"), parts)
    if compact:
        fields = {key: value for key, value in fields.items() if value is not None}
    response = fields.get("kind") == "response"
    # Consecutive parts that need the same role share a Msg; a part without blocks (role None)
    # joins the Msg before it, or, at the start, the one the next part with blocks decides.
    groups: list[tuple[str | None, list[Block], list[Any]]] = []
    for part in parts:
        blocks, skeleton = split_part(part, compact=compact)
        role = "assistant" if response else part_role(part)
        if not groups or (role is not None and groups[-1][0] not in (None, role)):
            groups.append((role, [], []))
        elif groups[-1][0] is None:
            groups[-1] = (role, groups[-1][1], groups[-1][2])
        groups[-1][1].extend(blocks)
        groups[-1][2].append(skeleton)
    if not groups:
        groups.append((None, [], []))
    msgs: list[Msg] = []
    for index, (role, blocks, skeletons) in enumerate(groups):
        kept: dict[str, Any] = {"parts": skeletons}
        if index == 0:
            kept["message"] = fields
        msgs.append(
            Msg(
                role or ("assistant" if response else "user"),  # type: ignore[arg-type]
                blocks,
                id=base_id if index == 0 else f"{base_id}-{index}",
                metadata={
                    METADATA_KEY: json.dumps(kept, ensure_ascii=False, separators=(",", ":"))
                },
                usage=usage if index == 0 else None,
                created_at=created_at,
            )
        )
    return tuple(msgs)


def _usage(fields: dict[str, Any], compact: bool) -> Usage | None:
    """The message's token counts as a ``Usage``. The counts it holds leave the kept usage
    fields (a count it cannot hold stays there); ``compact`` also leaves out zeros, the
    defaults. Loading fills every count missing from the kept fields from the ``Usage``."""
    usage = fields.get("usage")
    if not isinstance(usage, dict):
        return None
    usage = fields["usage"] = dict(usage)
    counts = {}
    for ours, theirs in _USAGE_FIELDS.items():
        value = usage.get(theirs)
        if type(value) is int and 0 <= value <= checks.MAX_COUNT:
            counts[ours] = usage.pop(theirs)
    if compact:
        fields["usage"] = {k: v for k, v in usage.items() if v not in (None, 0, {})}
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
    return from_msgs_grouped(msgs)[0]


def from_msgs_grouped(msgs: Iterable[Msg]) -> tuple[list[ModelMessage], list[tuple[Msg, ...]]]:
    """``from_msgs``, and for each message the ``Msg`` objects it was read from."""
    dumped: list[dict[str, Any]] = []
    groups: list[list[Msg]] = []
    for msg in msgs:
        kept = _kept(msg)
        blocks: Iterator[Block] = iter(msg.content)
        if "message" in kept or not dumped:
            message = dict(kept.get("message") or {"kind": _kind(msg)})
            message["parts"] = []
            _restore_usage(message, msg.usage)
            dumped.append(message)
            groups.append([])
        groups[-1].append(msg)
        parts = dumped[-1]["parts"]
        parts.extend(fill_part(skeleton, blocks) for skeleton in kept["parts"])
        if next(blocks, None) is not None:
            raise CodecError(f"message {msg.id!r} holds blocks no pydantic-ai part accounts for")
    try:
        messages = _adapter().validate_json(json.dumps(dumped, ensure_ascii=False))
    except ValueError as exc:
        raise CodecError(f"stored pydantic-ai messages do not validate: {exc}") from None
    return list(messages), [tuple(group) for group in groups]


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
    if not isinstance(kept, dict):
        return
    kept = message["usage"] = dict(kept)
    for ours, theirs in _USAGE_FIELDS.items():
        if theirs not in kept:
            kept[theirs] = getattr(usage, ours) if usage is not None else 0
