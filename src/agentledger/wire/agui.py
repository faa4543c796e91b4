"""AG-UI 1.0 messages ↔ ``Msg``, as plain dicts in the protocol's camelCase JSON shape.

``to_agui`` gives what a ``MESSAGES_SNAPSHOT`` carries and what a client sends back in
``RunAgentInput.messages``; ``from_agui`` reads that input. Neither needs the ``ag_ui`` package;
``to_agui_models`` validates through it (``pip install "agentledger[server]"``).

AG-UI ids are how the server merges a client's resent thread with the store, so every id is kept,
and the places where one ``Msg`` becomes several AG-UI messages use derived ids that
``from_agui`` folds back into the one message:

- An assistant ``Msg`` with thinking becomes one ``reasoning`` message per thinking block, id
  ``reasoning_message_id(msg.id, n)`` = ``f"{msg.id}:reasoning:{n}"``, followed by the
  ``assistant`` message with ``msg.id`` (left out when the ``Msg`` holds only thinking). The
  signature travels as ``encryptedValue``; redacted thinking as ``encryptedValue`` with
  ``metadata.agentledger.redacted``.
- A ``tool`` ``Msg`` becomes one ``tool`` message per result: the first keeps ``msg.id``, the
  ``n``-th gets ``tool_message_id(msg.id, n)`` = ``f"{msg.id}:{n}"``. ``is_error`` travels as
  ``error`` (the result text, or a fixed note when there is none); result metadata as the tool
  message's metadata.
- Reasoning or tool messages with other ids (written by a client) become messages of their own.

Media travel as ``image``/``audio``/``video``/``document`` parts with a ``data``, ``url`` or
provider ``file`` source; a file name as ``metadata.agentledger.filename``. Public metadata is
carried (bytes in the codec's ``{"$bytes": ...}`` form), private keys never. Assistant and system
content is a string in AG-UI, so their text blocks are joined and media become a text note.
``developer`` messages read as ``system`` and are written back as ``developer``; ``activity``
messages are UI state, not conversation, and are skipped. Usage is not carried.
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Iterable, Mapping
from typing import Any

from agentledger._optional import require
from agentledger.errors import UserError
from agentledger.messages.blocks import (
    AudioBlock,
    Block,
    FileBlock,
    ImageBlock,
    MediaBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    VideoBlock,
)
from agentledger.messages.msg import Msg
from agentledger.wire.private import (
    PROVIDER_FILE_KEY,
    SOURCE_ROLE_KEY,
    block_type,
    dump_arguments,
    is_private,
    metadata_from_json,
    parse_arguments,
    public_metadata,
    require_fits,
)

__all__ = [
    "from_agui",
    "reasoning_message_id",
    "to_agui",
    "to_agui_models",
    "tool_message_id",
]

NS = "agentledger"  # metadata key for what AG-UI has no field for
_REASONING = ":reasoning:"
_PART_TYPES = {ImageBlock: "image", AudioBlock: "audio", VideoBlock: "video", FileBlock: "document"}
_PART_BLOCKS = {
    "image": ImageBlock,
    "audio": AudioBlock,
    "video": VideoBlock,
    "document": FileBlock,
}
_ERROR_NOTE = "tool call failed"


def reasoning_message_id(msg_id: str, n: int) -> str:
    """Id of the AG-UI reasoning message for the ``n``-th thinking block of message ``msg_id``."""
    return f"{msg_id}{_REASONING}{n}"


def tool_message_id(msg_id: str, n: int) -> str:
    """Id of the AG-UI tool message for the ``n``-th result of tool message ``msg_id``."""
    return msg_id if n == 0 else f"{msg_id}:{n}"


# -- Msg -> AG-UI -------------------------------------------------------------------------------
def to_agui(msgs: Iterable[Msg]) -> list[dict[str, Any]]:
    """AG-UI message dicts for ``msgs`` (camelCase keys, no ``null`` values, nothing private)."""
    out: list[dict[str, Any]] = []
    for msg in msgs:
        for block in msg.content:
            require_fits(msg, block)
        if msg.role == "tool":
            out.extend(_tool(msg, n, r) for n, r in enumerate(msg.tool_results))
        elif msg.role == "assistant":
            out.extend(_assistant(msg))
        else:
            role = "developer" if msg.metadata.get(SOURCE_ROLE_KEY) == "developer" else msg.role
            if msg.role == "system":
                content: Any = _joined_text(msg.content)
            else:
                content = _content(msg.content)
            out.append(_base(msg, role, content=content))
    return out


def to_agui_models(msgs: Iterable[Msg]) -> list[Any]:
    """``to_agui`` validated into ``ag_ui.core`` message models (needs the ``server`` extra)."""
    return _message_list_adapter().validate_python(to_agui(msgs))  # type: ignore[no-any-return]


@functools.cache
def _message_list_adapter() -> Any:
    core = require("ag_ui.core", "server")
    from pydantic import TypeAdapter

    return TypeAdapter(list[core.Message])


def _base(msg: Msg, role: str, **fields: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"id": msg.id, "role": role, **fields}
    if msg.name:
        d["name"] = msg.name
    meta = public_metadata(msg.metadata)
    if meta:
        d["metadata"] = meta
    return d


def _assistant(msg: Msg) -> list[dict[str, Any]]:
    out = []
    thinking = [b for b in msg.content if isinstance(b, ThinkingBlock)]
    for n, block in enumerate(thinking):
        d: dict[str, Any] = {"id": reasoning_message_id(msg.id, n), "role": "reasoning"}
        meta = public_metadata(block.metadata) or {}
        if block.redacted:
            d.update(content="", encryptedValue=block.thinking)
            meta[NS] = {"redacted": True}
        else:
            d["content"] = block.thinking
            if block.signature:
                d["encryptedValue"] = block.signature
        if meta:
            d["metadata"] = meta
        out.append(d)
    rest = [b for b in msg.content if not isinstance(b, (ThinkingBlock, ToolUseBlock))]
    calls = msg.tool_calls
    if thinking and not rest and not calls:
        return out
    fields: dict[str, Any] = {}
    if rest:
        fields["content"] = _joined_text(rest)
    if calls:
        fields["toolCalls"] = [_tool_call(c) for c in calls]
    out.append(_base(msg, "assistant", **fields))
    return out


def _tool_call(call: ToolUseBlock) -> dict[str, Any]:
    d: dict[str, Any] = {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": dump_arguments(call.input)},
    }
    meta = public_metadata(call.metadata)
    if meta:
        d["metadata"] = meta
    return d


def _tool(msg: Msg, n: int, result: ToolResultBlock) -> dict[str, Any]:
    d: dict[str, Any] = {
        "id": tool_message_id(msg.id, n),
        "role": "tool",
        "toolCallId": result.id,
        "content": _content(result.output),
    }
    if result.is_error:
        d["error"] = result.text or _ERROR_NOTE
    meta = public_metadata(result.metadata)
    if meta:
        d["metadata"] = meta
    return d


def _joined_text(blocks: Iterable[Block]) -> str:
    texts = []
    for b in blocks:
        if isinstance(b, TextBlock):
            texts.append(b.text)
        else:
            media_type = getattr(b, "media_type", "")
            texts.append(f"[{block_type(b)} ({media_type}) omitted: AG-UI carries text here]")
    return "\n".join(texts)


def _content(blocks: tuple[Block, ...]) -> str | list[dict[str, Any]]:
    if not blocks:
        return ""
    only = blocks[0]
    if len(blocks) == 1 and isinstance(only, TextBlock) and not public_metadata(only.metadata):
        return only.text
    return [_part(b) for b in blocks]  # type: ignore[arg-type]


def _part(block: TextBlock | MediaBlock) -> dict[str, Any]:
    meta = public_metadata(block.metadata) or {}
    if isinstance(block, TextBlock):
        d: dict[str, Any] = {"type": "text", "text": block.text}
    else:
        if block.data is not None:
            value = base64.b64encode(block.data).decode("ascii")
            source = {"type": "data", "value": value, "mimeType": block.media_type}
        elif PROVIDER_FILE_KEY in block.metadata:
            source = {"type": "file", "value": block.url, "mimeType": block.media_type}
            if block.metadata[PROVIDER_FILE_KEY]:
                source["provider"] = block.metadata[PROVIDER_FILE_KEY]
        else:
            source = {"type": "url", "value": block.url, "mimeType": block.media_type}
        d = {"type": _PART_TYPES[type(block)], "source": source}
        if isinstance(block, FileBlock) and block.filename:
            meta[NS] = {"filename": block.filename}
    if meta:
        d["metadata"] = meta
    return d


# -- AG-UI -> Msg -------------------------------------------------------------------------------
def from_agui(messages: Iterable[Mapping[str, Any] | Any]) -> list[Msg]:
    """Messages for AG-UI message dicts (or ``ag_ui.core`` models), folding the derived ids of
    ``to_agui`` back into one message each. The input is only read; ``created_at`` is ``None``."""
    reader = _Reader()
    for index, item in enumerate(messages):
        d = item.model_dump(by_alias=True, mode="json") if hasattr(item, "model_dump") else item
        if not isinstance(d, Mapping):
            raise UserError(f"message {index} is a {type(item).__name__}, not a mapping")
        try:
            reader.read(d, index)
        except (KeyError, TypeError, AttributeError) as exc:
            raise UserError(f"message {index} is malformed: {exc!r}") from None
    reader.flush()
    return reader.out


class _Reader:
    """Folds a stream of AG-UI messages into ``Msg``s (reasoning waits for its assistant)."""

    def __init__(self) -> None:
        self.out: list[Msg] = []
        self.pending: list[tuple[str, ThinkingBlock]] = []  # (parent id, thinking)
        self.names: dict[str, str] = {}  # tool call id -> tool name

    def flush(self) -> None:
        for parent, block in self.pending:
            last = self.out[-1] if self.out else None
            if last is not None and last.id == parent and last.role == "assistant":
                self.out[-1] = last.replace(content=(*last.content, block))
            else:
                self.out.append(Msg("assistant", block, id=parent, created_at=None))
        self.pending = []

    def read(self, d: Mapping[str, Any], index: int) -> None:
        role, msg_id = d.get("role"), d.get("id")
        if not isinstance(msg_id, str) or not msg_id:
            raise UserError(f"message {index}: AG-UI messages need a non-empty string id")
        meta, extra = _metadata(d)
        if role == "reasoning":
            parent, sep, n = msg_id.rpartition(_REASONING)
            if not (sep and n.isdigit()):
                parent = msg_id
            if self.pending and self.pending[-1][0] != parent:
                self.flush()
            self.pending.append((parent, _thinking(d, meta, extra)))
            return
        if role == "activity":
            return
        own = [b for p, b in self.pending if p == msg_id] if role == "assistant" else []
        if len(own) != len(self.pending):
            self.flush()
            own = []
        self.pending = []
        top = {k: v for k, v in d.items() if is_private(k)}
        if role == "tool":
            self._tool(d, msg_id, meta, top, index)
            return
        if role not in ("system", "developer", "user", "assistant"):
            raise UserError(f"message {index}: unsupported AG-UI role {role!r}")
        content: list[Block] = [*own, *_parse_content(d.get("content"), index)]
        if role == "assistant":
            content.extend(self._call(c, index) for c in _get(d, "toolCalls", "tool_calls") or ())
        metadata = {**(meta or {}), **top}
        if role == "developer":
            role, metadata[SOURCE_ROLE_KEY] = "system", "developer"
        name = d.get("name") or None
        self.out.append(
            Msg(role, content, id=msg_id, name=name, metadata=metadata, created_at=None)  # type: ignore[arg-type]
        )

    def _call(self, call: Mapping[str, Any], index: int) -> ToolUseBlock:
        function = call.get("function") or {}
        if not call.get("id") or not isinstance(function, Mapping):
            raise UserError(f"message {index}: a tool call needs an id and a function")
        self.names[call["id"]] = function.get("name", "")
        meta, _ = _metadata(call)
        return ToolUseBlock(
            id=call["id"],
            name=function.get("name", ""),
            input=parse_arguments(function.get("arguments")),
            metadata=meta,
        )

    def _tool(self, d: Mapping[str, Any], msg_id: str, meta: Any, top: dict, index: int) -> None:
        call_id = _get(d, "toolCallId", "tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise UserError(f"message {index}: a tool message needs a toolCallId")
        output = _parse_content(d.get("content"), index)
        error = d.get("error")
        if error is not None and not output and error != _ERROR_NOTE:
            output = [TextBlock(text=error)]  # the only account of what went wrong
        result = ToolResultBlock(
            id=call_id,
            name=self.names.get(call_id, ""),
            output=tuple(output),  # type: ignore[arg-type]
            is_error=error is not None,
            metadata=meta,
        )
        parent, _, n = msg_id.rpartition(":")
        last = self.out[-1] if self.out else None
        if (
            last is not None
            and last.role == "tool"
            and last.id == parent
            and n.isdigit()
            and int(n) == len(last.content)
        ):
            self.out[-1] = last.replace(content=(*last.content, result))
        else:
            self.out.append(Msg("tool", result, id=msg_id, metadata=top, created_at=None))


def _get(d: Mapping[str, Any], camel: str, snake: str) -> Any:
    return d[camel] if camel in d else d.get(snake)


def _metadata(d: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The metadata of an AG-UI object, and our own extras (``metadata.agentledger``) apart."""
    meta = metadata_from_json(d.get("metadata"))
    if not meta or NS not in meta:
        return meta, {}
    extra = meta[NS]
    rest = {k: v for k, v in meta.items() if k != NS}
    return rest, dict(extra) if isinstance(extra, Mapping) else {}


def _thinking(d: Mapping[str, Any], meta: Any, extra: dict[str, Any]) -> ThinkingBlock:
    encrypted = _get(d, "encryptedValue", "encrypted_value")
    if extra.get("redacted"):
        return ThinkingBlock(thinking=encrypted or "", redacted=True, metadata=meta)
    return ThinkingBlock(thinking=d.get("content") or "", signature=encrypted, metadata=meta)


def _parse_content(content: Any, index: int) -> list[Block]:
    if content is None or content == "":
        return []
    if isinstance(content, str):
        return [TextBlock(text=content)]
    if not isinstance(content, (list, tuple)):
        raise UserError(f"message {index}: content must be a string or a list of parts")
    return [_parse_part(p, index) for p in content]


def _parse_part(part: Any, index: int) -> Block:
    kind = part.get("type") if isinstance(part, Mapping) else None
    meta, extra = _metadata(part) if isinstance(part, Mapping) else (None, {})
    if kind == "text":
        return TextBlock(text=part.get("text", ""), metadata=meta)
    if kind == "binary":  # the pre-1.0 part, still sent by older clients
        return _legacy_binary(part, index)
    cls = _PART_BLOCKS.get(kind)  # type: ignore[arg-type]
    if cls is None:
        raise UserError(f"message {index}: unsupported content part {kind!r}")
    source = part.get("source") or {}
    stype, value = source.get("type"), source.get("value")
    media_type = _get(source, "mimeType", "mime_type") or (
        "application/octet-stream" if kind == "document" else f"{kind}/*"
    )
    kw: dict[str, Any] = {"media_type": media_type, "metadata": meta}
    if cls is FileBlock and extra.get("filename"):
        kw["filename"] = extra["filename"]
    if stype == "data":
        return cls(data=_b64(value, index), **kw)
    if stype == "url":
        return cls(url=value, **kw)
    if stype == "file":
        kw["metadata"] = {**(meta or {}), PROVIDER_FILE_KEY: source.get("provider") or ""}
        return cls(url=value, **kw)
    raise UserError(f"message {index}: unsupported {kind} source {stype!r}")


def _legacy_binary(part: Mapping[str, Any], index: int) -> Block:
    media_type = _get(part, "mimeType", "mime_type") or "application/octet-stream"
    major = media_type.partition("/")[0]
    cls = {"image": ImageBlock, "audio": AudioBlock, "video": VideoBlock}.get(major, FileBlock)
    kw: dict[str, Any] = {"media_type": media_type}
    if cls is FileBlock and part.get("filename"):
        kw["filename"] = part["filename"]
    if part.get("data"):
        return cls(data=_b64(part["data"], index), **kw)
    if part.get("url"):
        return cls(url=part["url"], **kw)
    raise UserError(f"message {index}: a binary part needs data or url")


def _b64(value: Any, index: int) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (ValueError, TypeError) as exc:
        raise UserError(f"message {index}: invalid base64 data: {exc}") from None
