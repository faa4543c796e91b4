"""AG-UI 1.0 messages ↔ ``Msg``, as plain dicts in the protocol's camelCase JSON shape.

``to_agui`` gives what a ``MESSAGES_SNAPSHOT`` carries and what a client sends back in
``RunAgentInput.messages``; ``from_agui`` reads that input (validated through ``ag_ui.core``:
``pip install "agentledger[server]"``). ``to_agui_models`` gives the ``ag_ui.core`` models.

Every message a client can send comes back from ``to_agui(from_agui(...))`` exactly as it was
sent, ids included: what AG-UI carries beyond a conversation's meaning (a client's reasoning id,
a tool's exact ``error`` text, ``encryptedValue`` on any message or tool call, a content list of
one text part, part ids, ``subagentRunId``, unknown fields, metadata ``Msg`` cannot hold) is kept
as a fix under the private metadata key ``_agui`` (see ``_agui_fixes``). The server compares a
resent message with the stored one in AG-UI form, so this exactness is what lets it skip them.

AG-UI ids are how the server merges a client's resent thread with the store, so every id is kept,
and the places where one ``Msg`` becomes several AG-UI messages use derived ids that
``from_agui`` folds back into the one message:

- An assistant ``Msg`` with thinking becomes one ``reasoning`` message per thinking block, id
  ``reasoning_message_id(msg.id, n)`` = ``f"{msg.id}:reasoning:{n}"``, followed by the
  ``assistant`` message with ``msg.id`` (left out when the ``Msg`` holds only thinking). The
  signature (Anthropic's: ``ThinkingBlock.signature`` holds no other) travels as
  ``encryptedValue`` with ``metadata.agentledger.signedBy = "anthropic"``; redacted thinking as
  ``encryptedValue`` with ``metadata.agentledger.redacted``. ``from_agui`` reads an
  ``encryptedValue`` as a signature only with that mark: any other (a value a client got from
  another provider, OpenAI's encrypted reasoning, say) is kept as a fix, written back to the
  client and never sent to a model, since Anthropic refuses a request holding a signature it
  did not make, and every later one over the same history.
- A ``tool`` ``Msg`` becomes one ``tool`` message per result: the first keeps ``msg.id``, the
  ``n``-th gets ``tool_message_id(msg.id, n)`` = ``f"{msg.id}:{n}"``. ``is_error`` travels as
  ``error`` (the result text, or a fixed note when there is none); result metadata as the tool
  message's metadata.
- Reasoning or tool messages with other ids (written by a client) become messages of their own.

Media travel as ``image``/``audio``/``video``/``document`` parts with a ``data``, ``url`` or
provider ``file`` source; a file name as ``metadata.agentledger.filename``. Public metadata is
carried (bytes in the codec's ``{"$bytes": ...}`` form), private keys never. Assistant and system
content is a string in AG-UI, so their text blocks are joined and an assistant's media become a
text note (the stored message keeps the media; the server never reads the note back over it).
``developer`` messages read as ``system`` and are written back as ``developer``. ``activity``
messages are the client's UI records, not conversation: ``from_agui`` skips them, and the server
keeps them beside the thread (``agentledger.server.activity``). Usage and timestamps are not
carried.
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from agentledger._optional import require
from agentledger.errors import CodecError, UserError
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
from agentledger.messages.values import freeze_map
from agentledger.wire._agui_fixes import FIX_KEY, apply_fix, make_fix
from agentledger.wire.private import (
    PROVIDER_FILE_KEY,
    SOURCE_ROLE_KEY,
    arguments_text,
    block_type,
    metadata_from_json,
    public_metadata,
    require_fits,
    strip_private,
)

__all__ = [
    "from_agui",
    "normalize_agui",
    "reasoning_message_id",
    "to_agui",
    "to_agui_models",
    "tool_message_id",
]

_json_text = msgspec.json.Encoder().encode

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
#: ``metadata.agentledger`` key of a reasoning message whose ``encryptedValue`` is a signature,
#: naming who signed it (only Anthropic's signatures are ever written, or read as one).
_SIGNED_BY, _ANTHROPIC = "signedBy", "anthropic"


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
            out.extend(
                apply_fix(_tool(msg, n, r), r.metadata) for n, r in enumerate(msg.tool_results)
            )
        elif msg.role == "assistant":
            thinking = [b for b in msg.content if isinstance(b, ThinkingBlock)]
            out.extend(apply_fix(_reasoning(msg, n, b), b.metadata) for n, b in enumerate(thinking))
            if _has_body(msg, thinking):
                out.append(apply_fix(_assistant(msg), msg.metadata))
        else:
            out.append(apply_fix(_plain_message(msg), msg.metadata))
    return out


def to_agui_models(msgs: Iterable[Msg]) -> list[Any]:
    """``to_agui`` validated into ``ag_ui.core`` message models (needs the ``server`` extra)."""
    return _message_list_adapter().validate_python(to_agui(msgs))  # type: ignore[no-any-return]


@functools.cache
def _message_list_adapter() -> Any:
    core = require("ag_ui.core", "server")
    from pydantic import TypeAdapter

    return TypeAdapter(list[core.Message])


@functools.cache
def _message_adapter() -> Any:
    core = require("ag_ui.core", "server")
    from pydantic import TypeAdapter

    return TypeAdapter(core.Message)


def _has_body(msg: Msg, thinking: list[ThinkingBlock]) -> bool:
    """Whether an assistant ``Msg`` writes an ``assistant`` message besides its reasoning."""
    return (
        not thinking
        or len(thinking) != len(msg.content)
        or (msg.metadata is not None and FIX_KEY in msg.metadata)
    )


def _plain_message(msg: Msg) -> dict[str, Any]:
    role = "developer" if msg.metadata.get(SOURCE_ROLE_KEY) == "developer" else msg.role
    content: Any = _joined_text(msg.content) if msg.role == "system" else _content(msg.content)
    return _base(msg, role, content=content)


def _base(msg: Msg, role: str, **fields: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"id": msg.id, "role": role, **fields}
    if msg.name:
        d["name"] = msg.name
    meta = public_metadata(msg.metadata)
    if meta:
        d["metadata"] = meta
    return d


def _reasoning(msg: Msg, n: int, block: ThinkingBlock) -> dict[str, Any]:
    d: dict[str, Any] = {"id": reasoning_message_id(msg.id, n), "role": "reasoning"}
    meta = public_metadata(block.metadata) or {}
    if block.redacted:
        d.update(content="", encryptedValue=block.thinking)
        meta[NS] = {"redacted": True}
    else:
        d["content"] = block.thinking
        if block.signature:
            d["encryptedValue"] = block.signature
            meta[NS] = {_SIGNED_BY: _ANTHROPIC}
    if meta:
        d["metadata"] = meta
    return d


def _assistant(msg: Msg) -> dict[str, Any]:
    rest = [b for b in msg.content if not isinstance(b, (ThinkingBlock, ToolUseBlock))]
    fields: dict[str, Any] = {}
    if rest:
        fields["content"] = _joined_text(rest)
    calls = msg.tool_calls
    if calls:
        fields["toolCalls"] = [_tool_call(c) for c in calls]
    return _base(msg, "assistant", **fields)


def _tool_call(call: ToolUseBlock) -> dict[str, Any]:
    d: dict[str, Any] = {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": arguments_text(call)},
    }
    meta = public_metadata(call.metadata)
    if meta:
        d["metadata"] = meta
    return apply_fix(d, call.metadata)


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
            provider = block.metadata[PROVIDER_FILE_KEY]
            if provider and isinstance(provider, str):  # AG-UI names a provider by a string
                source["provider"] = provider
        else:
            source = {"type": "url", "value": block.url, "mimeType": block.media_type}
        d = {"type": _PART_TYPES[type(block)], "source": source}
        if isinstance(block, FileBlock) and block.filename:
            meta[NS] = {"filename": block.filename}
    if meta:
        d["metadata"] = meta
    return d


# -- AG-UI -> Msg -------------------------------------------------------------------------------
def normalize_agui(message: Mapping[str, Any] | Any, index: int = 0) -> dict[str, Any]:
    """One AG-UI message (a dict or an ``ag_ui.core`` model) validated and in its canonical
    JSON form: camelCase keys, no ``null`` for an absent field, unknown fields kept. Legacy
    ``binary`` parts are upgraded to 1.0 media parts first, as the reference client does.
    Raises ``UserError`` naming the message and the field."""
    if hasattr(message, "model_dump"):
        d = _dumped(message, index)
        _check_text(d, index)
        return d
    if not isinstance(message, Mapping):
        raise UserError(f"message {index} is a {type(message).__name__}, not a JSON object")
    _check_text(message, index)
    from pydantic import ValidationError

    try:
        model = _message_adapter().validate_python(_upgrade_legacy(message))
    except ValidationError as exc:
        raise UserError(f"message {index} is not a valid AG-UI message: {brief(exc)}") from None
    return _dumped(model, index)


def _dumped(model: Any, index: int) -> dict[str, Any]:
    from pydantic_core import PydanticSerializationError

    try:
        return model.model_dump(by_alias=True, mode="json")  # type: ignore[no-any-return]
    except PydanticSerializationError as exc:  # a key with a lone surrogate, say
        raise UserError(f"message {index} cannot be written as JSON: {exc}") from None


def brief(exc: Any) -> str:
    """A pydantic ``ValidationError`` in one line: ``where: what`` for each problem."""
    problems: list[str] = []
    for error in exc.errors():
        # union branches ("tagged-union[...]", "str", "list[...]") say nothing to a reader
        loc = [str(p) for p in error["loc"] if not _is_branch(p)]
        line = f"{'.'.join(loc) or 'body'}: {error['msg']}"
        if line not in problems:
            problems.append(line)
    shown = problems[:5]
    more = len(problems) - len(shown)
    return "; ".join(shown) + (f" (and {more} more)" if more > 0 else "")


def _is_branch(part: object) -> bool:
    return isinstance(part, str) and ("[" in part or part in ("str", "list", "function-after"))


def from_agui(
    messages: Iterable[Mapping[str, Any] | Any],
    *,
    normalized: bool = False,
    positions: Iterable[int] | None = None,
) -> list[Msg]:
    """Messages for AG-UI messages (dicts or ``ag_ui.core`` models), folding the derived ids of
    ``to_agui`` back into one message each; ``to_agui`` of the result gives the input back
    exactly (see the module docstring). The input is only read; ``created_at`` is ``None``.
    Raises ``UserError`` for a message that is not valid AG-UI, naming it by its position.

    ``normalized``: the messages are dicts ``normalize_agui`` made (a server's parsed request,
    validated once as it was read), so they are not validated again. ``positions``: where each
    message sits in the list the client sent, when ``messages`` is a part of it (the names
    errors give; by default 0, 1, 2 ...)."""
    reader = _Reader()
    indexed = enumerate(messages) if positions is None else zip(positions, messages, strict=True)
    for index, item in indexed:
        d = item if normalized else normalize_agui(item, index)
        try:
            reader.read(d, index)
        except CodecError as exc:
            raise UserError(f"message {index} cannot be stored: {exc}") from None
    reader.flush()
    return reader.with_fixes()


def _check_text(d: Mapping[str, Any], index: int) -> None:
    """Refuse a message holding text UTF-8 cannot encode (a lone surrogate) by where it is in
    the message: found later, it would be named by where the message keeps it."""
    try:
        _json_text(d)
    except UnicodeEncodeError:
        try:
            freeze_map(d, f"message {index}")
        except CodecError as exc:
            raise UserError(f"message {index} cannot be stored: {exc}") from None
    except (TypeError, ValueError):
        pass  # not JSON: refused where the conversion meets it


def _upgrade_legacy(message: Mapping[str, Any]) -> Mapping[str, Any]:
    content = message.get("content")
    if not isinstance(content, list) or not any(
        isinstance(p, Mapping) and p.get("type") == "binary" for p in content
    ):
        return message
    parts = [_upgraded_part(p) if isinstance(p, Mapping) else p for p in content]
    return {**message, "content": parts}


def _upgraded_part(part: Mapping[str, Any]) -> Any:
    if part.get("type") != "binary":
        return part
    mime = part.get("mimeType") or part.get("mime_type") or "application/octet-stream"
    if not isinstance(mime, str):
        return part  # not a binary part the protocol had: refused as it is
    major = mime.partition("/")[0]
    kind = major if major in ("image", "audio", "video") else "document"
    if part.get("data"):
        source = {"type": "data", "value": part["data"], "mimeType": mime}
    else:
        source = {"type": "url", "value": part.get("url") or "", "mimeType": mime}
    out: dict[str, Any] = {"type": kind, "source": source}
    if part.get("filename") and kind == "document":
        out["metadata"] = {NS: {"filename": part["filename"]}}
    return out


class _Reader:
    """Folds a stream of AG-UI messages into ``Msg``s (reasoning waits for its assistant), and
    remembers which element each message became so that ``with_fixes`` can make it exact."""

    def __init__(self) -> None:
        self.out: list[Msg] = []
        self.pending: list[tuple[str, ThinkingBlock, dict[str, Any]]] = []
        self.names: dict[str, str] = {}  # tool call id -> tool name
        # (the client's message, index in out, index in that message's content or None)
        self.sources: list[tuple[dict[str, Any], int, int | None]] = []
        self.calls: list[tuple[dict[str, Any], int, int]] = []  # tool calls, same idea

    def flush(self) -> None:
        """Reasoning not followed by its assistant message: a thinking-only ``Msg`` per run of
        consecutive reasoning messages with one parent id."""
        first = len(self.out)
        for parent, block, d in self.pending:
            last = self.out[-1] if len(self.out) > first else None
            if last is not None and last.id == parent:
                self.sources.append((d, len(self.out) - 1, len(last.content)))
                self.out[-1] = last.replace(content=(*last.content, block))
            else:
                self.sources.append((d, len(self.out), 0))
                self.out.append(Msg("assistant", block, id=parent, created_at=None))
        self.pending = []

    def read(self, d: dict[str, Any], index: int) -> None:
        role, msg_id = d["role"], d["id"]
        if role == "activity":
            return
        if not msg_id:
            raise UserError(f"message {index}: AG-UI messages need a non-empty id")
        meta, extra = _metadata(d.get("metadata"))
        if role == "reasoning":
            parent, sep, n = msg_id.rpartition(_REASONING)
            if not (sep and n.isdigit()):
                parent = msg_id
            if self.pending and self.pending[-1][0] != parent:
                self.flush()
            self.pending.append((parent, _thinking(d, meta, extra), d))
            return
        own = [p for p in self.pending if p[0] == msg_id] if role == "assistant" else []
        if len(own) != len(self.pending):
            self.flush()
            own = []
        self.pending = []
        if role == "tool":
            self._tool(d, msg_id, meta, index)
            return
        at = len(self.out)
        for n, (_, _, source) in enumerate(own):
            self.sources.append((source, at, n))
        content: list[Block] = [b for _, b, _ in own]
        content.extend(_parse_content(d.get("content"), index))
        # toolCalls are an assistant's: on another message an unknown field, kept by its fix
        for call in (d.get("toolCalls") if role == "assistant" else None) or ():
            self.calls.append((call, at, len(content)))
            content.append(self._call(call, index))
        metadata = dict(meta or {})
        if role == "developer":
            role, metadata[SOURCE_ROLE_KEY] = "system", "developer"
        self.sources.append((d, at, None))
        name = d.get("name") or None
        self.out.append(
            Msg(role, content, id=msg_id, name=name, metadata=metadata, created_at=None)  # type: ignore[arg-type]
        )

    def _call(self, call: Mapping[str, Any], index: int) -> ToolUseBlock:
        function = call["function"]
        if not call["id"]:
            raise UserError(f"message {index}: a tool call needs a non-empty id")
        self.names[call["id"]] = function["name"]
        meta, _ = _metadata(call.get("metadata"))
        return ToolUseBlock(
            id=call["id"],
            name=function["name"],
            arguments=function["arguments"],
            metadata=meta,
        )

    def _tool(self, d: Mapping[str, Any], msg_id: str, meta: Any, index: int) -> None:
        call_id = d["toolCallId"]
        if not call_id:
            raise UserError(f"message {index}: a tool message needs a non-empty toolCallId")
        output = _parse_content(d.get("content"), index)
        error = d.get("error")
        if error and error != _ERROR_NOTE and error != "\n".join(_texts(output)):
            output.append(TextBlock(text=error))  # the model must read why the tool failed
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
            self.sources.append((dict(d), len(self.out) - 1, len(last.content)))
            self.out[-1] = last.replace(content=(*last.content, result))
        else:
            self.sources.append((dict(d), len(self.out), 0))
            self.out.append(Msg("tool", result, id=msg_id, created_at=None))

    def with_fixes(self) -> list[Msg]:
        """The messages, each element carrying the fix that writes its AG-UI message exactly."""
        msg_fix: dict[int, dict] = {}
        block_fix: dict[tuple[int, int], dict] = {}
        for call, at, pos in self.calls:
            block = self.out[at].content[pos]
            fix = make_fix(_tool_call(block), call, force=False)  # type: ignore[arg-type]
            if fix is not None:
                block_fix[(at, pos)] = fix
        out = self._patched(block_fix, {})
        for sent, at, pos in self.sources:
            msg = out[at]
            if pos is None:
                thinking = [b for b in msg.content if isinstance(b, ThinkingBlock)]
                written = _assistant(msg) if msg.role == "assistant" else _plain_message(msg)
                fix = make_fix(written, sent, force=not _has_body(msg, thinking))
                if fix is not None:
                    msg_fix[at] = fix
                continue
            block = msg.content[pos]
            if isinstance(block, ThinkingBlock):
                n = sum(isinstance(b, ThinkingBlock) for b in msg.content[:pos])
                fix = make_fix(_reasoning(msg, n, block), sent, force=False)
            else:
                fix = make_fix(_tool(msg, pos, block), sent, force=False)  # type: ignore[arg-type]
            if fix is not None:
                block_fix[(at, pos)] = fix
        return self._patched(block_fix, msg_fix, out)

    def _patched(
        self, block_fix: dict[tuple[int, int], dict], msg_fix: dict[int, dict], base=None
    ) -> list[Msg]:
        out = list(self.out if base is None else base)
        touched = {at for at, _ in block_fix} | set(msg_fix)
        for at in touched:
            msg = out[at]
            try:  # a fix holds what the client sent beyond the message: it must be storable
                content = tuple(
                    _with_fix(b, block_fix[(at, pos)]) if (at, pos) in block_fix else b
                    for pos, b in enumerate(msg.content)
                )
                metadata = msg.metadata
                if at in msg_fix:
                    metadata = {**metadata, FIX_KEY: msg_fix[at]}
                out[at] = msg.replace(content=content, metadata=metadata)
            except CodecError as exc:
                raise UserError(f"message {msg.id!r} cannot be stored: {exc}") from None
        return out


def _with_fix(block: Block, fix: dict) -> Block:
    if FIX_KEY in block.metadata:
        return block
    return block.replace(metadata={**block.metadata, FIX_KEY: fix})  # type: ignore[no-any-return]


def _texts(blocks: Iterable[Block]) -> list[str]:
    return [b.text for b in blocks if isinstance(b, TextBlock)]


def _metadata(value: Any) -> tuple[Any, dict[str, Any]]:
    """A client's metadata as block/message metadata, and our own extras
    (``metadata.agentledger``) apart. What does not fit (not an object, private keys, bytes
    tags that do not decode) is left out here; the fix brings it back on the way out."""
    if not isinstance(value, Mapping):
        return None, {}
    try:
        meta = metadata_from_json(strip_private(value))
    except (CodecError, AttributeError, TypeError, ValueError):  # a malformed "$map"/"$bytes"
        return None, {}
    if not meta or NS not in meta:
        return meta, {}
    extra = meta[NS]
    rest = {k: v for k, v in meta.items() if k != NS}
    return rest, dict(extra) if isinstance(extra, Mapping) else {}


def _thinking(d: Mapping[str, Any], meta: Any, extra: dict[str, Any]) -> ThinkingBlock:
    """The thinking of a reasoning message. Its ``encryptedValue`` is Anthropic's signature
    (or redacted thinking) only when marked so by ``to_agui``; any other is the client's, kept
    by the fix (see the module docstring)."""
    encrypted = d.get("encryptedValue")
    if extra.get("redacted") is True and encrypted:
        return ThinkingBlock(thinking=encrypted, redacted=True, metadata=meta)
    signature = encrypted if extra.get(_SIGNED_BY) == _ANTHROPIC else None
    return ThinkingBlock(thinking=d.get("content") or "", signature=signature, metadata=meta)


def _parse_content(content: Any, index: int) -> list[Block]:
    if content is None or content == "":
        return []
    if isinstance(content, str):
        return [TextBlock(text=content)]
    return [_parse_part(p, index) for p in content]


def _parse_part(part: Mapping[str, Any], index: int) -> Block:
    kind = part["type"]
    meta, extra = _metadata(part.get("metadata"))
    if kind == "text":
        return TextBlock(text=part["text"], metadata=meta)
    cls = _PART_BLOCKS[kind]
    source = part["source"]
    stype, value = source["type"], source["value"]
    media_type = source.get("mimeType") or (
        "application/octet-stream" if kind == "document" else f"{kind}/*"
    )
    kw: dict[str, Any] = {"media_type": media_type, "metadata": meta}
    if cls is FileBlock and isinstance(extra.get("filename"), str) and extra["filename"]:
        kw["filename"] = extra["filename"]
    if stype == "data":
        return cls(data=_b64(value, index), **kw)
    if stype == "file":
        kw["metadata"] = {**(meta or {}), PROVIDER_FILE_KEY: source.get("provider") or ""}
    return cls(url=value, **kw)


def _b64(value: Any, index: int) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (ValueError, TypeError) as exc:
        raise UserError(f"message {index}: invalid base64 data: {exc}") from None
