"""Anthropic Messages API ↔ ``Msg``.

``to_anthropic`` returns the ``system`` parameter and the ``messages`` list of a Messages API
request; ``from_anthropic`` reads them back. The API differs from our model in three ways that
shape the mapping:

- System text is a request parameter, not a message: every system message (wherever it sits) is
  hoisted into ``system`` — a string for one text block, else a list of text blocks.
- Tool results travel inside ``user`` turns, and turns must alternate. Our ``tool`` messages and
  the user messages around them merge into one ``user`` turn (tool results first, as the API
  requires), consecutive assistant messages into one ``assistant`` turn. ``from_anthropic`` splits
  a user turn back into a ``tool`` message (its results) and a ``user`` message (the rest).
- Messages carry no ids (``from_anthropic`` reads a non-standard ``"id"`` if a caller stored one,
  else makes one, or derives one from content and occurrence with ``ids="derived"``: the same
  wherever other turns were dropped or inserted).

Tool-call input is a JSON object here: a call whose arguments came as text is sent the object
that text holds, exactly (``arguments_object``: an integer past 64 bits stays one), and text
that holds no object is sent as ``{}``; the paired error result tells the model what went
wrong. A tool-call id outside Anthropic's pattern (``functions.get_weather:0``) is mapped
(``wire.tool_ids``); the stored id never changes. Thinking keeps its signature byte for byte;
redacted thinking travels as ``redacted_thinking``. Thinking without a signature (another
provider's reasoning) is not sent: the API accepts only thinking it signed. In an assistant
turn merged from several messages, thinking comes first, as the API requires. Media go as
``wire.media`` says (images jpeg/png/gif/webp, PDF and plain-text documents, URLs, Files-API
handles; ``image/jpg`` sent as ``image/jpeg``); anything else becomes the media note. Text
that is empty or only whitespace is not sent, nor a message left empty (the API rejects
both). Tool-result names come back from the matching call. Metadata is never sent.

Nothing read is dropped: a key with no field here (``cache_control``, ``citations``, a document's
``context``, an unknown key of a turn, a source or a system block) is kept verbatim in the
private metadata key ``_anthropic`` of the block or message it came with (never sent, being
private); a block type that has no counterpart here is refused by name, and so is a text block
(in a turn or in ``system``) whose ``text`` is not a string. Prompt-cache marks are a request option
(``AnthropicModel(cache=...)``), so they never enter a stored message.
"""

from __future__ import annotations

import base64
import mimetypes
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from agentledger.errors import UserError
from agentledger.messages.blocks import (
    Block,
    FileBlock,
    ImageBlock,
    MediaBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from agentledger.messages.ids import new_id
from agentledger.messages.msg import Msg
from agentledger.wire.media import (
    ANTHROPIC_IMAGE_TYPES,
    handle_issuer,
    media_note,
    normal_media_type,
    refused_handle,
)
from agentledger.wire.openai import IdMode
from agentledger.wire.private import (
    ANTHROPIC_EXTRA_KEY,
    PROVIDER_FILE_KEY,
    Occurrences,
    arguments_object,
    content_id,
    keep_unknown,
    private_keys,
    require_fits,
    tool_use_from_object,
)
from agentledger.wire.tool_ids import ToolIds, restore_ids
from agentledger.wire.validate import sends

__all__ = ["from_anthropic", "to_anthropic"]

System = str | list[dict[str, Any]] | None

# The keys of each content block that have a field here; any other is kept (``keep_unknown``).
_BLOCK_KEYS = {
    "text": frozenset(("type", "text")),
    "thinking": frozenset(("type", "thinking", "signature")),
    "redacted_thinking": frozenset(("type", "data")),
    "tool_use": frozenset(("type", "id", "name", "input")),
    "tool_result": frozenset(("type", "tool_use_id", "content", "is_error")),
    "image": frozenset(("type", "source")),
    "document": frozenset(("type", "source", "title")),
}
_SOURCE_KEYS = frozenset(("type", "media_type", "data", "url", "file_id"))
_TURN_KEYS = frozenset(("role", "content", "id"))
_THINKING = ("thinking", "redacted_thinking")


# -- Msg -> Anthropic ---------------------------------------------------------------------------
def to_anthropic(
    msgs: Iterable[Msg], *, tool_ids: ToolIds | None = None
) -> tuple[System, list[dict[str, Any]]]:
    """``(system, messages)`` for a Messages API request; turns strictly alternate.

    Tool-call ids outside Anthropic's pattern are mapped (``tool_ids``, see ``wire.tool_ids``;
    pass one to map the reply's ids back).
    """
    ids = ToolIds("anthropic") if tool_ids is None else tool_ids
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for msg in msgs:
        if msg.role == "system":
            system.extend(
                b.text if isinstance(b, TextBlock) else media_note(b, "a system prompt is text")
                for b in msg.content
            )
            continue
        role = "assistant" if msg.role == "assistant" else "user"
        blocks = [out for b in msg.content if (out := _block(b, msg, ids)) is not None]
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    for turn in turns:  # tool results open a user turn, thinking an assistant turn
        first = "tool_result" if turn["role"] == "user" else _THINKING
        content = turn["content"]
        turn["content"] = [b for b in content if b["type"] in first] + [
            b for b in content if b["type"] not in first
        ]
    system = [s for s in system if s.strip()]
    if not system:
        return None, turns
    if len(system) == 1:
        return system[0], turns
    return [{"type": "text", "text": s} for s in system], turns


def _block(block: Block, msg: Msg, ids: ToolIds) -> dict[str, Any] | None:
    require_fits(msg, block)
    if not sends(block, "anthropic"):  # blank text, thinking Anthropic did not sign
        return None
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ThinkingBlock):
        if block.redacted:
            return {"type": "redacted_thinking", "data": block.thinking}
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    if isinstance(block, ToolUseBlock):
        return {
            "type": "tool_use",
            "id": ids.wire(block.id),
            "name": block.name,
            "input": arguments_object(block),
        }
    if isinstance(block, ToolResultBlock):
        return _tool_result(block, ids.wire(block.id))
    if msg.role == "assistant":  # the API takes media from users and tools only
        return _note(block, "Anthropic takes media from users and tools only")
    return _media(block)


def _tool_result(block: ToolResultBlock, wire_id: str) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "tool_result", "tool_use_id": wire_id}
    if len(block.output) == 1 and isinstance(block.output[0], TextBlock):
        out["content"] = block.output[0].text
    elif block.output:
        parts = []
        for b in block.output:
            if isinstance(b, TextBlock):
                if b.text.strip():
                    parts.append({"type": "text", "text": b.text})
            else:
                parts.append(_media(b))
        out["content"] = parts
    if block.is_error:
        out["is_error"] = True
    return out


def _media(block: MediaBlock) -> dict[str, Any]:
    media_type = normal_media_type(block.media_type)
    why = refused_handle(block, "anthropic")
    if why is not None:
        return _note(block, why)
    if isinstance(block, ImageBlock):
        kind = "image"
        if block.data is not None and media_type not in ANTHROPIC_IMAGE_TYPES:
            return _note(block, "Anthropic takes jpeg, png, gif and webp images")
    elif isinstance(block, FileBlock):
        kind = "document"
        if block.data is not None and media_type not in ("application/pdf", "text/plain"):
            return _note(block, "Anthropic takes PDF and plain-text documents")
        by_url = block.url is not None and handle_issuer(block) is None
        if by_url and media_type != "application/pdf":
            return _note(block, "Anthropic fetches only PDF documents by URL")
    else:
        return _note(block, "Anthropic takes no audio or video")
    source: dict[str, Any]
    if block.data is not None:
        text = _utf8(block.data) if media_type == "text/plain" else None
        if text is not None:
            source = {"type": "text", "media_type": "text/plain", "data": text}
        elif media_type == "text/plain":
            return _note(block, "a plain-text document must be UTF-8")
        else:
            data = base64.b64encode(block.data).decode("ascii")
            source = {"type": "base64", "media_type": media_type, "data": data}
    elif handle_issuer(block) is not None:  # Anthropic's own: refused_handle let it through
        source = {"type": "file", "file_id": block.url}
    else:
        source = {"type": "url", "url": block.url}
    out: dict[str, Any] = {"type": kind, "source": source}
    if isinstance(block, FileBlock) and block.filename:
        out["title"] = block.filename
    return out


def _utf8(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _note(block: Block, why: str) -> dict[str, Any]:
    return {"type": "text", "text": media_note(block, why)}


# -- Anthropic -> Msg ---------------------------------------------------------------------------
def from_anthropic(
    messages: Sequence[Mapping[str, Any]],
    system: System = None,
    *,
    ids: IdMode = "given",
    tool_ids: ToolIds | None = None,
) -> list[Msg]:
    """Messages for a Messages API ``system`` + ``messages`` pair (both only read).

    A user turn becomes a ``tool`` message holding its tool results and a ``user`` message
    holding the rest, in their order; ``created_at`` is ``None`` so conversion is deterministic.
    A turn without an ``"id"`` gets a fresh id (``ids="given"``) or, with ``ids="derived"``, one
    derived from its content and how many turns of the same content without an id come before
    it (``private.Occurrences``, as ``from_openai`` derives them; the second and later messages
    of a split turn add ``":1"``, ``":2"`` ...), so converting the same turns twice gives equal
    messages, and so does converting them after other turns were dropped, inserted or moved
    around them: a window or a summary saved from them writes only what it added.
    ``tool_ids``: the mapping ``to_anthropic`` used, to read mapped tool-call ids back.
    """
    if ids not in ("given", "derived"):
        raise UserError(f'ids must be "given" or "derived", got {ids!r}')
    out: list[Msg] = []
    if system:
        sid = content_id("ant-", "system", {"system": system}) if ids == "derived" else new_id()
        out.append(Msg("system", _system_blocks(system), id=sid, created_at=None))
    names: dict[str, str] = {}
    occurrences = Occurrences()
    for index, d in enumerate(messages):
        if not isinstance(d, Mapping) or d.get("role") not in ("user", "assistant"):
            raise UserError(f"message {index} is not a user or assistant turn")
        metadata = private_keys(d, f"message {index}")
        keep_unknown(d, _TURN_KEYS, ANTHROPIC_EXTRA_KEY, metadata)
        content = d.get("content")
        raw = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        try:
            blocks = [_parse(b, index, names) for b in raw]
        except (KeyError, TypeError, AttributeError) as exc:
            raise UserError(f"message {index} is malformed: {exc!r}") from None
        runs: list[tuple[str, list[Block]]] = []
        for block in blocks:
            role = "tool" if isinstance(block, ToolResultBlock) else d["role"]
            if runs and runs[-1][0] == role:
                runs[-1][1].append(block)
            else:
                runs.append((role, [block]))
        base = _turn_id(d, index, ids, occurrences)
        for n, (role, run) in enumerate(runs or [(d["role"], [])]):
            msg_id = base if n == 0 else f"{base}:{n}"
            out.append(Msg(role, run, id=msg_id, metadata=metadata, created_at=None))  # type: ignore[arg-type]
    return restore_ids(out, tool_ids)


def _turn_id(d: Mapping[str, Any], index: int, ids: IdMode, occurrences: Occurrences) -> str:
    """The id of turn ``d``'s first message: its own, else derived (counted) or fresh."""
    given = d.get("id")
    if isinstance(given, str) and given:
        return given
    if ids == "derived":
        return occurrences.derive("ant-", d, f"message {index}")[0]
    return new_id()


def _system_blocks(system: Any) -> list[Block]:
    """The blocks of the ``system`` parameter: a string, or text blocks read as the text blocks
    of a turn are (their other keys kept under ``_anthropic``)."""
    if isinstance(system, str):
        return [TextBlock(text=system)]
    if not isinstance(system, (list, tuple)):
        raise UserError(f"system must be a string or a list of text blocks, got {system!r}")
    blocks = []
    for n, b in enumerate(system):
        if not isinstance(b, Mapping) or b.get("type") != "text":
            raise UserError(f"system block {n}: system blocks must be text blocks")
        blocks.append(_with_extras(_text_block(b, f"system block {n}"), b))
    return blocks


def _text_block(b: Mapping[str, Any], where: str) -> TextBlock:
    text = b.get("text")
    if not isinstance(text, str):
        raise UserError(f"{where}: a text block needs a string 'text', got {text!r}")
    return TextBlock(text=text)


def _parse(b: Any, index: int, names: dict[str, str]) -> Block:
    kind = b.get("type") if isinstance(b, Mapping) else None
    return _with_extras(_parse_known(kind, b, index, names), b)


def _with_extras(block: Block, b: Mapping[str, Any]) -> Block:
    """``block`` read from ``b``, with the keys of ``b`` (and of its ``source``) that have no
    field here kept verbatim under ``_anthropic``, and ``b``'s private keys kept as they are."""
    extra = keep_unknown(b, _BLOCK_KEYS[b["type"]], ANTHROPIC_EXTRA_KEY)
    source = b.get("source")
    if isinstance(source, Mapping):
        unknown = keep_unknown(source, _SOURCE_KEYS, "source")
        if unknown:
            extra[ANTHROPIC_EXTRA_KEY] = {**extra.get(ANTHROPIC_EXTRA_KEY, {}), **unknown}
    return block.replace(metadata={**block.metadata, **extra}) if extra else block


def _parse_known(kind: Any, b: Any, index: int, names: dict[str, str]) -> Block:
    if kind == "text":
        return _text_block(b, f"message {index}")
    if kind == "thinking":
        return ThinkingBlock(thinking=b.get("thinking", ""), signature=b.get("signature") or None)
    if kind == "redacted_thinking":
        return ThinkingBlock(thinking=b.get("data", ""), redacted=True)
    if kind == "tool_use":
        names[b["id"]] = b.get("name", "")
        return _tool_use(b, index)
    if kind == "tool_result":
        content = b.get("content")
        if isinstance(content, str):
            output: list[Block] = [TextBlock(text=content)]
        else:
            output = [_parse(part, index, names) for part in content or ()]
            if any(isinstance(o, (ThinkingBlock, ToolUseBlock, ToolResultBlock)) for o in output):
                raise UserError(f"message {index}: a tool result holds only text and media")
        call_id = b["tool_use_id"]
        return ToolResultBlock(
            id=call_id,
            name=names.get(call_id, ""),
            output=tuple(output),  # type: ignore[arg-type]
            is_error=bool(b.get("is_error")),
        )
    if kind in ("image", "document"):
        return _parse_media(kind, b, index)
    raise UserError(f"message {index}: unsupported content block {kind!r}")


def _tool_use(b: Mapping[str, Any], index: int) -> ToolUseBlock:
    """A tool call; its input object is kept exactly (``tool_use_from_object``)."""
    value = b.get("input") or {}
    if not isinstance(value, Mapping):
        raise UserError(f"message {index}: a tool_use input must be an object")
    return tool_use_from_object(b["id"], b.get("name", ""), value)


def _parse_media(kind: str, b: Mapping[str, Any], index: int) -> Block:
    cls = ImageBlock if kind == "image" else FileBlock
    title = b.get("title") if kind == "document" else None
    extra: dict[str, Any] = {"filename": title} if title else {}
    source = b.get("source") or {}
    stype = source.get("type")
    media_type = source.get("media_type") or ("image/*" if kind == "image" else "application/pdf")
    if stype == "base64":
        try:
            data = base64.b64decode(source["data"], validate=True)
        except ValueError as exc:
            raise UserError(f"message {index}: invalid base64 {kind}: {exc}") from None
        return cls(media_type=media_type, data=data, **extra)
    if stype == "text":
        return cls(media_type="text/plain", data=source["data"].encode("utf-8"), **extra)
    if stype == "url":  # the API sends no media type with a URL: guess from its name
        guessed = mimetypes.guess_type(source["url"])[0]
        return cls(media_type=guessed or media_type, url=source["url"], **extra)
    if stype == "file":
        meta = {PROVIDER_FILE_KEY: "anthropic"}
        return cls(media_type=media_type, url=source["file_id"], metadata=meta, **extra)
    raise UserError(f"message {index}: unsupported {kind} source {stype!r}")
