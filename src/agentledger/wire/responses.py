"""OpenAI Responses-API items ↔ ``Msg``.

The Responses API (and the OpenAI Agents SDK, whose sessions store its items) keeps a
conversation as a flat list of items: ``message``, ``function_call``, ``function_call_output``,
``reasoning`` and some thirty tool-specific kinds. ``from_responses`` reads them, ``to_responses``
writes them, and a list read and written back is the list it was, key for key, string for
string (``encrypted_content``, argument strings, annotations, ids).

Mapping:

- One ``Msg`` per item, so position ``i`` of the items is message ``i``: a ``message`` keeps its
  role (``developer`` reads as ``system``, as in ``from_openai``); a ``function_call`` is an
  assistant message holding one ``ToolUseBlock`` (``call_id`` is the block id); a
  ``function_call_output`` is a tool message holding one ``ToolResultBlock`` (its name comes from
  the matching call); a ``reasoning`` item is an assistant message of ``ThinkingBlock`` s, one
  per summary part, then one per content part (a part whose type is not its field's, say a
  kind newer than this code, is written back in the field it was read from, as it was). A
  call's argument text is kept byte for byte (``ToolUseBlock.arguments``), so every
  string-arguments format sends it back as is.
- The item ``id`` is the ``Msg.id``; an item without one gets a fresh id (``ids="given"``) or one
  derived from its content and occurrence (``ids="derived"``, as in a ``sync()`` list: the
  same wherever other items were dropped or inserted), and is written back without one.
- What has no field here (``type``, ``id``, ``status``, ``phase``, ``encrypted_content``,
  ``namespace``, any unknown key) is kept
  verbatim in the private metadata key ``_responses`` of the message (for the item) or block
  (for a content part; see ``responses_parts``) and written back by ``to_responses`` only:
  being private, no other converter sends it, so OpenAI's encrypted reasoning never reaches
  another provider.
- Every other item kind (``web_search_call``, ``computer_call``, ``mcp_call``, ``compaction``,
  ``item_reference``, kinds newer than this code ...) is kept whole, verbatim, as a message with
  no content and the item under the private key ``_responses_item``; it is written back as it
  was and never sent to another provider.
- Messages from other formats are written in the plainest valid form: text as an input message,
  each tool call as a ``function_call``, each result as a ``function_call_output``; their
  thinking is not written (a reasoning item must be OpenAI's own), audio, video and media
  OpenAI refuses (a bmp image, a csv file, another provider's file handle) become the media
  note of ``wire.media``, as in ``to_openai``, and ``is_error`` and ``name`` have no place.

``from_live_items`` converts a ``sync()`` list that mixes ``Msg``, chat-completions dicts and
Responses items: a dict with a top-level ``type`` (or with Responses content parts) is an item.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any

from agentledger.errors import UserError
from agentledger.messages.blocks import (
    Block,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from agentledger.messages.ids import new_id
from agentledger.messages.msg import Msg
from agentledger.messages.values import thaw
from agentledger.wire.media import media_note
from agentledger.wire.openai import IdMode
from agentledger.wire.private import (
    RESPONSES_FIELD_KEY,
    RESPONSES_ITEM_KEY,
    SOURCE_ROLE_KEY,
    Occurrences,
    arguments_text,
    is_private,
    keep_unknown,
    private_keys,
    require_fits,
)
from agentledger.wire.responses_parts import (
    RESPONSES_EXTRA_KEY,
    block_part,
    extras_of,
    part_block,
)

__all__ = [
    "RESPONSES_EXTRA_KEY",
    "RESPONSES_ID_PREFIX",
    "RESPONSES_ITEM_KEY",
    "answered_tools",
    "from_item",
    "from_live_items",
    "from_responses",
    "is_responses_item",
    "to_responses",
]

#: How the ids an item without one is given begin (``ids="derived"``, ``from_live_items``).
RESPONSES_ID_PREFIX = "rsp-"

_MESSAGE, _CALL, _OUTPUT, _REASONING = (
    "message",
    "function_call",
    "function_call_output",
    "reasoning",
)
_KINDS = frozenset((_MESSAGE, _CALL, _OUTPUT, _REASONING))  # mapped to blocks; the rest kept whole
_REFERENCE = "item_reference"  # an item pointing to another by id (what a typeless item reads as)
_ROLES = frozenset(("user", "system", "developer", "assistant"))
_PART_TYPES = frozenset(("input_text", "input_image", "input_file", "output_text"))
#: The type of the parts of each field of a reasoning item.
_PART_TYPES_OF = {"summary": "summary_text", "content": "reasoning_text"}
#: Private key of a thinking block read from a reasoning part whose type is not its field's
#: (none, another, a newer kind): the field it was read from, where it is written back.
_USER_SIDE = frozenset(("mcp_approval_response", "item_reference", "compaction_trigger"))


# -- Responses -> Msg ---------------------------------------------------------------------------
def from_responses(
    items: Iterable[Mapping[str, Any]],
    *,
    ids: IdMode = "given",
    start: int = 0,
    known: Callable[[int, Mapping[str, Any]], Msg | None] | None = None,
    names: Mapping[str, str] | None = None,
) -> list[Msg]:
    """One ``Msg`` per Responses input or output item, in order; the items are only read.

    An item without an id gets a fresh one (``ids="given"``) or, with ``ids="derived"``, one
    derived from its content and how many items of the same content without an id come before
    it (``private.Occurrences``, as ``from_openai`` and ``Ledger.sync`` derive them), so
    converting the same items twice gives equal messages, and so does converting them after
    other items were dropped, inserted or moved around them: a window or a summary saved from
    them writes only what it added. The occurrences are counted over ``items`` alone (convert a
    list whole, or keep it with ``Ledger.sync``, which counts over the whole list); ``start``
    numbers the items in errors (where they go in a longer list).
    ``known(position, item)`` may return the message an equal item was already converted to,
    which is then used as is (re-converting a long, mostly unchanged history costs only the
    changed items), unless the item is a call's output and the message names another tool than
    the call this list gives it (the call was renamed since). ``names`` gives the tools of
    calls made before these items, by call id, to name outputs whose call is not among them.
    """
    if ids not in ("given", "derived"):
        raise UserError(f'ids must be "given" or "derived", got {ids!r}')
    names = dict(names or {})
    occurrences = Occurrences()
    out = []
    for index, item in enumerate(items, start):
        if not isinstance(item, Mapping):
            raise UserError(f"item {index} is a {type(item).__name__}, not a mapping")
        msg = known(index, item) if known is not None else None
        if msg is not None and item.get("type") == _OUTPUT and _renamed(msg, item, names):
            msg = None
        derive = partial(_occurrence_id, occurrences, item, index)
        if msg is None:
            msg = from_item(item, index, names, derive if ids == "derived" else new_id)
        else:  # what converting it would have done besides: count it, name its call
            if ids == "derived" and _own_id(item) is None:
                derive()  # later repeats of its content keep their ids
            if item.get("type") == _CALL and isinstance(item.get("call_id"), str):
                names[item["call_id"]] = str(item.get("name") or "")  # to name its result
        out.append(msg)
    return out


def _occurrence_id(occurrences: Occurrences, item: Mapping[str, Any], index: int) -> str:
    return occurrences.derive(RESPONSES_ID_PREFIX, item, f"item {index}")[0]


def _own_id(item: Mapping[str, Any]) -> str | None:
    """The id of its own that ``item``'s message keeps (None: it is given one): a non-empty
    string ``"id"``, except an item reference's, which names the item it points to."""
    given = item.get("id")
    if not isinstance(given, str) or not given:
        return None
    kind = item.get("type", _MESSAGE if "role" in item else _REFERENCE)
    return None if kind == _REFERENCE else given


def answered_tools(
    items: Iterable[Any], names: Mapping[str, str] | None = None
) -> list[str | None]:
    """For each item, the tool ``from_responses`` names a function_call_output after (its own
    ``name``, else its call's before it in ``items`` or in ``names``, else ``""``); None for
    every other item. Two equal outputs in two lists convert to the same message only when
    they answer the same tool."""
    names = dict(names or {})
    out: list[str | None] = []
    for item in items:
        kind = item.get("type") if isinstance(item, Mapping) else None
        if kind == _CALL and isinstance(item.get("call_id"), str):
            names[item["call_id"]] = str(item.get("name") or "")
        out.append(_answered_name(item, names) if kind == _OUTPUT else None)
    return out


def is_responses_item(d: Mapping[str, Any]) -> bool:
    """Whether a dict is a Responses item rather than a chat-completions message: it has a
    top-level ``type``, is a bare ``{"id": ...}`` item reference, or has content parts only
    Responses uses."""
    if "type" in d or d.keys() == {"id"}:
        return True
    content = d.get("content")
    return isinstance(content, (list, tuple)) and any(
        isinstance(p, Mapping) and isinstance(p.get("type"), str) and p["type"] in _PART_TYPES
        for p in content
    )


def from_live_items(items: Iterable[Msg | Mapping[str, Any]]) -> list[Msg]:
    """A ``sync()`` list of ``Msg``, chat dicts and Responses items, converted as one list.

    Items without an id get one derived from their content and occurrence in the whole list
    (``private.Occurrences``); a tool result is named after its call whichever format each is
    in. See ``live.LiveConverter``, which converts a list again at the cost of what changed.
    """
    from agentledger.wire.live import LiveConverter

    return LiveConverter().convert(items)


def from_item(
    item: Mapping[str, Any], index: int, names: dict[str, str], fallback_id: Callable[[], str]
) -> Msg:
    """The message of Responses ``item``, item ``index`` of its list (for errors); an item
    without a usable id gets ``fallback_id()``. ``names`` maps the call ids of the list so far
    to their tools' names: a function_call_output is named from it, and a function_call added
    to it."""
    where = f"item {index}"
    given = item.get("id")
    kind = item.get("type", _MESSAGE if "role" in item else None)
    if not isinstance(kind, str) or kind not in _KINDS:  # kept whole, whatever its type is
        return _opaque(item, fallback_id)
    if given is not None and (not isinstance(given, str) or not given):
        raise UserError(f"{where}: id must be a non-empty string, got {given!r}")
    msg_id = _own_id(item) or fallback_id()
    metadata = private_keys(item, where)
    try:
        if kind == _MESSAGE:
            role, content, known = _message(item, where, metadata)
        elif kind == _CALL:
            role, content, known = "assistant", [_call(item, where, names)], _CALL_KEYS
        elif kind == _OUTPUT:
            role, content, known = "tool", [_output(item, where, names)], _OUTPUT_KEYS
        else:
            role, content, known = "assistant", _reasoning(item, where), frozenset(("summary",))
            if item.get("content"):
                known |= {"content"}
    except (KeyError, TypeError, AttributeError) as exc:
        raise UserError(f"{where} is malformed: {exc!r}") from None
    extra = {k: v for k, v in item.items() if k not in known and not is_private(k)}
    metadata[RESPONSES_EXTRA_KEY] = extra
    return Msg(role, content, id=msg_id, metadata=metadata, created_at=None)


_CALL_KEYS = frozenset(("call_id", "name", "arguments"))
_OUTPUT_KEYS = frozenset(("call_id", "output"))


def _message(
    item: Mapping[str, Any], where: str, metadata: dict[str, Any]
) -> tuple[str, list[Block], frozenset[str]]:
    role = item.get("role")
    if role not in _ROLES:
        raise UserError(f"{where}: unsupported message role {role!r}")
    if role == "developer":
        role = "system"
        metadata[SOURCE_ROLE_KEY] = "developer"
    return role, _blocks(item.get("content"), where), frozenset(("role", "content"))


def _blocks(content: Any, where: str) -> list[Block]:
    if isinstance(content, str):
        return [TextBlock(text=content)]
    if not isinstance(content, (list, tuple)):
        raise UserError(f"{where}: content must be a string or a list of parts")
    return [part_block(part, where) for part in content]


def _call(item: Mapping[str, Any], where: str, names: dict[str, str]) -> ToolUseBlock:
    call_id, name, raw = item["call_id"], item["name"], item["arguments"]
    if not all(isinstance(v, str) for v in (call_id, name, raw)) or not call_id:
        raise UserError(f"{where}: a function_call needs string call_id, name and arguments")
    names[call_id] = name
    return ToolUseBlock(id=call_id, name=name, arguments=raw)  # the model's text, kept


def _output(item: Mapping[str, Any], where: str, names: dict[str, str]) -> ToolResultBlock:
    call_id = item["call_id"]
    if not isinstance(call_id, str) or not call_id:
        raise UserError(f"{where}: a function_call_output needs a call_id")
    output = _blocks(item["output"], where)
    name = _answered_name(item, names)
    return ToolResultBlock(id=call_id, name=name, output=output)  # type: ignore[arg-type]


def _answered_name(item: Mapping[str, Any], names: dict[str, str]) -> str:
    """The tool a function_call_output answers: its own ``name`` if it has one, else its
    call's in this list (``""`` when the list has no such call)."""
    name, call_id = item.get("name"), item.get("call_id")
    if isinstance(name, str) and name:
        return name
    return names.get(call_id, "") if isinstance(call_id, str) else ""


def _renamed(msg: Msg, item: Mapping[str, Any], names: dict[str, str]) -> bool:
    """Whether ``msg``, made from output ``item`` in another list, names another tool than
    ``item`` answers in this one."""
    results = msg.tool_results
    return len(results) != 1 or results[0].name != _answered_name(item, names)


def _reasoning(item: Mapping[str, Any], where: str) -> list[Block]:
    blocks: list[Block] = []
    for field in ("summary", "content"):
        parts = item.get(field) if field == "content" else item["summary"]
        if field == "content" and not parts:
            continue  # none, or an empty value kept verbatim with the item's other keys
        if not isinstance(parts, (list, tuple)):
            raise UserError(f"{where}: a reasoning item's {field} must be a list")
        for part in parts:
            if not isinstance(part, Mapping) or not isinstance(part.get("text"), str):
                raise UserError(f"{where}: a reasoning {field} part needs a string text")
            meta = keep_unknown(part, frozenset(("text",)), RESPONSES_EXTRA_KEY)
            if part.get("type") != _PART_TYPES_OF[field]:  # its type does not say where it goes
                meta[RESPONSES_FIELD_KEY] = field
            blocks.append(ThinkingBlock(thinking=part["text"], metadata=meta))
    return blocks


def _opaque(item: Mapping[str, Any], fallback_id: Callable[[], str]) -> Msg:
    kind = str(item.get("type", _REFERENCE))
    public = {k: v for k, v in item.items() if not is_private(k)}
    msg_id = _own_id(item) or fallback_id()
    metadata = private_keys(item, f"an item of type {kind!r}")
    metadata[RESPONSES_ITEM_KEY] = public
    role = "user" if kind.endswith("_output") or kind in _USER_SIDE else "assistant"
    return Msg(role, (), id=msg_id, metadata=metadata, created_at=None)  # type: ignore[arg-type]


# -- Msg -> Responses ---------------------------------------------------------------------------
def to_responses(msgs: Iterable[Msg]) -> list[dict[str, Any]]:
    """Responses input items for ``msgs`` (new dicts). A message read by ``from_responses``
    gives its item back; any other gives the items that say the same (see the module
    docstring)."""
    out: list[dict[str, Any]] = []
    for msg in msgs:
        for block in msg.content:
            require_fits(msg, block)
        kept = msg.metadata.get(RESPONSES_ITEM_KEY)
        if kept is not None:
            out.append(thaw(kept))
            continue
        extra = extras_of(msg.metadata)
        kind = None if extra is None else extra.get("type", _MESSAGE)
        if extra is not None and _fits(kind, msg):
            out.append(_own_item(kind, msg, extra))
        else:
            out.extend(_items(msg))
    return out


def _fits(kind: Any, msg: Msg) -> bool:
    """Whether ``msg`` still holds exactly what one item of ``kind`` holds."""
    content = msg.content
    if kind == _MESSAGE:
        return msg.role != "tool" and not any(
            isinstance(b, (ToolUseBlock, ThinkingBlock)) for b in content
        )
    if kind == _CALL:
        return len(content) == 1 and isinstance(content[0], ToolUseBlock)
    if kind == _OUTPUT:
        return len(content) == 1 and isinstance(content[0], ToolResultBlock)
    if kind == _REASONING:
        return msg.role == "assistant" and all(isinstance(b, ThinkingBlock) for b in content)
    return False


def _own_item(kind: str, msg: Msg, extra: dict[str, Any]) -> dict[str, Any]:
    item = dict(extra)
    if isinstance(item.get("id"), str):  # an item that had an id (a null id stays null)
        item["id"] = msg.id
    if kind == _MESSAGE:
        item["role"] = _role(msg)
        output = msg.role == "assistant" and "status" in extra
        item["content"] = _content(msg, "output_text" if output else "input_text", media=True)
    elif kind == _CALL:
        item.update(_call_fields(msg.content[0]))  # type: ignore[arg-type]
    elif kind == _OUTPUT:
        result = msg.content[0]
        assert isinstance(result, ToolResultBlock)
        item.update(call_id=result.id, output=_output_value(result))
        if isinstance(item.get("name"), str):  # a null name stays null
            item["name"] = result.name
    else:
        thinking = [b for b in msg.content if isinstance(b, ThinkingBlock)]
        item["summary"] = [_thinking_part(b) for b in thinking if _field(b) == "summary"]
        content = [_thinking_part(b) for b in thinking if _field(b) == "content"]
        if content:
            item["content"] = content
    return item


def _field(block: ThinkingBlock) -> str:
    """The field of a reasoning item a thinking block is written in: the one its part was read
    from where that was recorded, else the one its part's type belongs in (``summary`` for a
    block from another format)."""
    recorded = block.metadata.get(RESPONSES_FIELD_KEY)
    if recorded in _PART_TYPES_OF:
        return str(recorded)
    extras = extras_of(block.metadata) or {}
    return "content" if extras.get("type") == _PART_TYPES_OF["content"] else "summary"


def _thinking_part(block: ThinkingBlock) -> dict[str, Any]:
    extras = extras_of(block.metadata) or {}
    if block.metadata.get(RESPONSES_FIELD_KEY) in _PART_TYPES_OF:
        return {**extras, "text": block.thinking}  # as read: its own type, or none
    return {"type": _PART_TYPES_OF[_field(block)], **extras, "text": block.thinking}


def _call_fields(call: ToolUseBlock) -> dict[str, Any]:
    return {"call_id": call.id, "name": call.name, "arguments": arguments_text(call)}


def _role(msg: Msg) -> str:
    if msg.role == "system" and msg.metadata.get(SOURCE_ROLE_KEY) == "developer":
        return "developer"
    return msg.role


def _content(msg: Msg, text_type: str, *, media: bool) -> str | list[dict[str, Any]]:
    blocks = [b for b in msg.content if not isinstance(b, (ToolUseBlock, ThinkingBlock))]
    return _parts(blocks, text_type, media=media, image_detail=True)


def _output_value(result: ToolResultBlock) -> str | list[dict[str, Any]]:
    return _parts(list(result.output), "input_text", media=True, image_detail=False)


def _parts(
    blocks: list[Any], text_type: str, *, media: bool, image_detail: bool
) -> str | list[dict[str, Any]]:
    """A plain string for one text block that was not a list part, else a list of parts."""
    if (
        len(blocks) == 1
        and isinstance(blocks[0], TextBlock)
        and RESPONSES_EXTRA_KEY not in blocks[0].metadata
        and blocks[0].metadata.get("refusal") is not True
    ):
        return blocks[0].text
    parts = []
    for block in blocks:
        if isinstance(block, TextBlock) or media:
            parts.append(block_part(block, text_type, image_detail=image_detail))
        else:
            note = media_note(block, "Responses takes media in user messages only")
            parts.append(block_part(TextBlock(text=note), text_type, image_detail=False))
    return parts


def _items(msg: Msg) -> list[dict[str, Any]]:
    """The items for a message that did not come from one Responses item."""
    if msg.role == "tool":
        return [
            {"type": _OUTPUT, "call_id": r.id, "output": _output_value(r)} for r in msg.tool_results
        ]
    out: list[dict[str, Any]] = []
    said = [b for b in msg.content if not isinstance(b, (ToolUseBlock, ThinkingBlock))]
    if msg.role == "assistant" and any(b.metadata.get("refusal") is True for b in said):
        # a refusal part exists only in an output message, which needs an id and a status
        content = _parts(said, "output_text", media=False, image_detail=True)
        out.append(
            {"type": _MESSAGE, "id": msg.id, "status": "completed", "role": "assistant"}
            | {"content": content}
        )
    elif said or msg.role != "assistant":
        media = msg.role == "user"
        out.append({"role": _role(msg), "content": _content(msg, "input_text", media=media)})
    out.extend({"type": _CALL, **_call_fields(call)} for call in msg.tool_calls)
    return out
