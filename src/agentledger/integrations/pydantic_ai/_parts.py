"""One pydantic-ai message part (in its JSON form) ↔ agentledger blocks plus a skeleton.

A part's readable content becomes native blocks: a ``TextPart`` or a prompt a ``TextBlock``, a
``ThinkingPart`` a ``ThinkingBlock`` (signed only by a signature of ``provider_name``
``"anthropic"``; another provider's stays in the skeleton), a tool call a ``ToolUseBlock``, a tool
return a ``ToolResultBlock``, an image, audio, video or document (inline bytes or URL) a media
block. Everything else about the part (timestamps, provider ids and details, ``part_kind``,
fields newer pydantic-ai versions add) stays in a *skeleton*: the part's JSON object with the
values the blocks carry left out, and a ``fill`` tag that says how to read them back off the
blocks. Inside free-form values, whose key order pydantic-ai's JSON shows, a media item keeps
its keys in place (``null``) with the list of those the block carries (``native``).

A part with no native counterpart (a native tool call, a compaction, a kind this module has
never seen) or whose content a block refuses (a URL with a control character, an integer over
64 bits in tool arguments given as text) is kept whole in the skeleton. Tool arguments given as
an object become the block that gives that very object back (``tool_use_from_object``); those
whose exact text a block cannot reproduce (keys not in sorted order, ``1.0e2``) are kept
verbatim beside it.
Nothing is ever dropped; the caller stores the skeletons as JSON text (``convert``).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from agentledger.errors import CodecError, UserError
from agentledger.messages import (
    AudioBlock,
    Block,
    FileBlock,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    VideoBlock,
    thaw,
)
from agentledger.wire.private import (
    RAW_ARGUMENTS_KEY,
    arguments_object,
    arguments_text,
    tool_use_from_object,
)

__all__ = ["MEDIA_BLOCKS", "URL_KINDS", "fill_part", "part_role", "split_part"]

Skeleton = dict[str, Any]

URL_KINDS: dict[str, type[Block]] = {
    "image-url": ImageBlock,
    "audio-url": AudioBlock,
    "video-url": VideoBlock,
    "document-url": FileBlock,
}
_MEDIA_PREFIXES: tuple[tuple[str, type[Block]], ...] = (
    ("image/", ImageBlock),
    ("audio/", AudioBlock),
    ("video/", VideoBlock),
)
MEDIA_BLOCKS = (ImageBlock, AudioBlock, VideoBlock, FileBlock)

#: How a JSON object of tool arguments may have been written (keys sorted, as the store keeps
#: them), so that the exact text comes back from the block alone.
_ARGUMENT_STYLES: dict[str, dict[str, Any]] = {
    "compact": {"separators": (",", ":"), "ensure_ascii": False, "sort_keys": True},
    "spaced": {"ensure_ascii": False, "sort_keys": True},
    "ascii": {"sort_keys": True},
}
_ROLES = {"system-prompt": "system", "user-prompt": "user", "tool-return": "tool"}
_ANTHROPIC = "anthropic"  # pydantic-ai's provider_name of Anthropic's parts


def part_role(part: dict[str, Any]) -> str | None:
    """The agentledger role a request part's blocks need (None: the part has no blocks)."""
    return _ROLES.get(part.get("part_kind"))  # type: ignore[arg-type]


def split_part(part: dict[str, Any], *, compact: bool) -> tuple[list[Block], Skeleton]:
    """The blocks and skeleton of one part's JSON object (``fill_part`` is the inverse).

    A part is a dataclass, so the order of its own keys means nothing and the keys the blocks
    carry are left out of its skeleton. ``compact`` also leaves out keys whose value is
    ``null``, the default of most fields; the caller checks that the part still reads back
    exactly and otherwise asks again without it.
    """
    blocks: list[Block] = []
    skeleton: Skeleton = {}
    fields = dict(part)
    split = _SPLITTERS.get(part.get("part_kind"))  # type: ignore[arg-type]
    if split is not None:
        try:
            blocks, skeleton = split(fields)
        except (UserError, CodecError, ValueError, TypeError, KeyError):
            blocks, skeleton, fields = [], {}, dict(part)  # kept whole
        for key in skeleton.pop("native", ()):
            del fields[key]
    if compact:
        fields = {key: value for key, value in fields.items() if value is not None}
    skeleton["fields"] = fields
    return blocks, skeleton


def fill_part(skeleton: Skeleton, blocks: Iterator[Block]) -> dict[str, Any]:
    """The part's JSON object from its skeleton, taking the blocks it used from ``blocks``."""
    part: dict[str, Any] = dict(skeleton["fields"])
    fill = skeleton.get("fill")
    if fill is not None:
        part.update(_FILLERS[fill](skeleton, blocks))
    return part


def _take(obj: dict[str, Any], key: str, native: list[str]) -> Any:
    """``obj[key]``, left as ``null`` in place (so the key keeps its position) and listed in
    ``native`` as a value the blocks carry."""
    value = obj[key]
    obj[key] = None
    native.append(key)
    return value


# -- splitting ---------------------------------------------------------------------------


def _split_text(part: dict[str, Any]) -> tuple[list[Block], Skeleton]:
    """A part whose ``content`` is one string (text, system prompt, a plain user prompt)."""
    native: list[str] = []
    text = _take(part, "content", native)
    if not isinstance(text, str):
        raise TypeError("not text")
    return [TextBlock(text=text)], {"fill": "text", "native": native}


def _split_user(part: dict[str, Any]) -> tuple[list[Block], Skeleton]:
    if isinstance(part.get("content"), str):
        return _split_text(part)
    native: list[str] = []
    blocks, items = _split_items(_take(part, "content", native))
    return blocks, {"fill": "items", "items": items, "native": native}


def _split_thinking(part: dict[str, Any]) -> tuple[list[Block], Skeleton]:
    native: list[str] = []
    text = _take(part, "content", native)
    # ``ThinkingBlock.signature`` is Anthropic's, which every converter sends to Anthropic: any
    # other (OpenAI's encrypted reasoning, Google's thought signature, one of no named
    # provider) stays in the skeleton, given back to pydantic-ai and sent to no one else
    signature = None
    if part.get("provider_name") == _ANTHROPIC:
        signature = _take(part, "signature", native)
    if not isinstance(text, str) or not (signature is None or isinstance(signature, str)):
        raise TypeError("not thinking")
    block = ThinkingBlock(thinking=text, signature=signature)
    return [block], {"fill": "thinking", "native": native}


def _split_tool_call(part: dict[str, Any]) -> tuple[list[Block], Skeleton]:
    args = part["args"]
    native: list[str] = []
    skeleton: Skeleton = {"fill": "tool_call", "native": native}
    make: Callable[[str, str], ToolUseBlock]  # (id, name) -> the block
    if args is None:
        make = ToolUseBlock
        skeleton["args"] = "none"
    elif isinstance(args, dict):
        make = partial(_from_object, arguments=args)
        if _dumps(args, "compact") == json.dumps(args, separators=(",", ":"), ensure_ascii=False):
            skeleton["args"] = "object"  # keys already in the order the store keeps
    elif isinstance(args, str):
        parsed = _parsed_object(args)
        if parsed is None:  # the text as the model wrote it (the block marks it raw)
            make = partial(ToolUseBlock, arguments=args)
            skeleton["args"] = "raw"
        else:
            make = partial(ToolUseBlock, input=parsed)
            style = next((s for s in _ARGUMENT_STYLES if _dumps(parsed, s) == args), None)
            if style is not None:
                skeleton["args"] = style
    else:
        raise TypeError("arguments of unknown shape")
    if "args" in skeleton:
        _take(part, "args", native)
    block = make(_take(part, "tool_call_id", native), _take(part, "tool_name", native))
    return [block], skeleton


def _from_object(call_id: str, name: str, *, arguments: dict[str, Any]) -> ToolUseBlock:
    return tool_use_from_object(call_id, name, arguments)


def _dumps(value: Any, style: str) -> str:
    return json.dumps(value, **_ARGUMENT_STYLES[style])


def _parsed_object(args: str) -> dict[str, Any] | None:
    """The JSON object ``args`` holds, if it holds one (raw-argument objects excluded)."""
    try:
        parsed = json.loads(args)
    except (ValueError, RecursionError):
        return None
    if isinstance(parsed, dict) and RAW_ARGUMENTS_KEY not in parsed:
        return parsed
    return None


def _split_tool_return(part: dict[str, Any]) -> tuple[list[Block], Skeleton]:
    native: list[str] = []
    skeleton: Skeleton = {"fill": "tool_return", "native": native}
    content = part["content"]
    if isinstance(content, str):
        output: list[Block] = [TextBlock(text=_take(part, "content", native))]
        skeleton["content"] = "text"
    elif isinstance(content, list):
        output, skeleton["items"] = _split_items(_take(part, "content", native))
        skeleton["content"] = "items"
    else:  # any other JSON value: shown to readers as JSON text, kept verbatim here
        output = [TextBlock(text=json.dumps(content, ensure_ascii=False))]
    block = ToolResultBlock(
        id=_take(part, "tool_call_id", native),
        name=_take(part, "tool_name", native),
        output=tuple(output),  # type: ignore[arg-type]
        is_error=part.get("outcome", "success") != "success",
    )
    return [block], skeleton


def _split_file(part: dict[str, Any]) -> tuple[list[Block], Skeleton]:
    native: list[str] = []
    block, item = _media(_take(part, "content", native))
    return [block], {"fill": "file", "item": item, "native": native}


def _split_items(items: list[Any]) -> tuple[list[Block], list[Skeleton]]:
    """A content list: strings and text items become text blocks, media become media blocks;
    anything else is kept verbatim."""
    blocks: list[Block] = []
    skeletons: list[Skeleton] = []
    for item in items:
        if isinstance(item, str):
            blocks.append(TextBlock(text=item))
            skeletons.append({"str": True})
            continue
        try:
            if isinstance(item, dict) and item.get("kind") == "text":
                rest = dict(item)
                text = _take(rest, "content", [])
                if not isinstance(text, str):
                    raise TypeError("not text")
                block: Block = TextBlock(text=text)
                skeleton: Skeleton = {"text": rest}
            else:
                block, skeleton = _media(item)
        except (UserError, CodecError, TypeError, ValueError, KeyError):
            skeletons.append({"value": item})
            continue
        blocks.append(block)
        skeletons.append(skeleton)
    return blocks, skeletons


def _media(item: Any) -> tuple[Block, Skeleton]:
    """A media block for an image, audio, video or document item (inline or by URL)."""
    if not isinstance(item, dict):
        raise TypeError("not media")
    rest = dict(item)
    native: list[str] = []
    media_type = item.get("media_type")
    if isinstance(media_type, str):
        _take(rest, "media_type", native)
    else:
        media_type = "application/octet-stream"  # the block needs one; the item's own is kept
    kind = item.get("kind")
    if kind == "binary":
        data = _decoded(_take(rest, "data", native))
        cls = next((c for p, c in _MEDIA_PREFIXES if media_type.startswith(p)), FileBlock)
        return cls(media_type=media_type, data=data), {"media": rest, "native": native}
    cls = URL_KINDS.get(kind)  # type: ignore[arg-type]
    if cls is None or not isinstance(item.get("url"), str):
        raise TypeError("not media")
    block = cls(media_type=media_type, url=_take(rest, "url", native))
    return block, {"media": rest, "native": native}


def _decoded(encoded: Any) -> bytes:
    """Bytes from pydantic-ai's URL-safe base64, only if encoding them again gives the same
    text (so the rebuilt part is the stored one, byte for byte)."""
    if not isinstance(encoded, str):
        raise TypeError("not base64")
    try:
        data = base64.urlsafe_b64decode(encoded)
    except (binascii.Error, ValueError):
        raise ValueError("not base64") from None
    if _encoded(data) != encoded:
        raise ValueError("not canonical base64")
    return data


def _encoded(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii")


_SPLITTERS: dict[str, Callable[[dict[str, Any]], tuple[list[Block], Skeleton]]] = {
    "system-prompt": _split_text,
    "user-prompt": _split_user,
    "text": _split_text,
    "thinking": _split_thinking,
    "tool-call": _split_tool_call,
    "tool-return": _split_tool_return,
    "file": _split_file,
}


# -- filling -----------------------------------------------------------------------------


def _next(blocks: Iterator[Any], cls: type[Any] | tuple[type[Any], ...]) -> Any:
    block = next(blocks, None)
    if not isinstance(block, cls):
        raise CodecError(
            f"a stored pydantic-ai part expected a {getattr(cls, '__name__', 'media')} block, "
            f"found {type(block).__name__}"
        )
    return block


def _fill_text(skeleton: Skeleton, blocks: Iterator[Block]) -> dict[str, Any]:
    return {"content": _next(blocks, TextBlock).text}


def _fill_items(skeleton: Skeleton, blocks: Iterator[Block]) -> dict[str, Any]:
    return {"content": _items(skeleton["items"], blocks)}


def _fill_thinking(skeleton: Skeleton, blocks: Iterator[Block]) -> dict[str, Any]:
    block = _next(blocks, ThinkingBlock)
    if skeleton["fields"].get("signature") is not None:  # another provider's, kept verbatim
        return {"content": block.thinking}
    return {"content": block.thinking, "signature": block.signature}


def _fill_tool_call(skeleton: Skeleton, blocks: Iterator[Block]) -> dict[str, Any]:
    block = _next(blocks, ToolUseBlock)
    native: dict[str, Any] = {"tool_name": block.name, "tool_call_id": block.id}
    style = skeleton.get("args")
    if style == "none":
        native["args"] = None
    elif style == "object":
        native["args"] = json.loads(_dumps(arguments_object(block), "compact"))
    elif style == "raw":
        native["args"] = arguments_text(block)
    elif style in _ARGUMENT_STYLES:
        native["args"] = _dumps(thaw(block.input), style)
    return native  # no style: the arguments are kept verbatim in the skeleton


def _fill_tool_return(skeleton: Skeleton, blocks: Iterator[Block]) -> dict[str, Any]:
    block = _next(blocks, ToolResultBlock)
    native: dict[str, Any] = {"tool_name": block.name, "tool_call_id": block.id}
    output = iter(block.output)
    if skeleton.get("content") == "text":
        native["content"] = _next(output, TextBlock).text
    elif skeleton.get("content") == "items":
        native["content"] = _items(skeleton["items"], output)
    return native


def _fill_file(skeleton: Skeleton, blocks: Iterator[Block]) -> dict[str, Any]:
    return {"content": _media_item(skeleton["item"], blocks)}


def _items(skeletons: list[Skeleton], blocks: Iterator[Any]) -> list[Any]:
    items: list[Any] = []
    for skeleton in skeletons:
        if "str" in skeleton:
            items.append(_next(blocks, TextBlock).text)
        elif "text" in skeleton:
            items.append({**skeleton["text"], "content": _next(blocks, TextBlock).text})
        elif "media" in skeleton:
            items.append(_media_item(skeleton, blocks))
        else:
            items.append(skeleton["value"])
    return items


def _media_item(skeleton: Skeleton, blocks: Iterator[Any]) -> dict[str, Any]:
    block = _next(blocks, MEDIA_BLOCKS)
    native = {"media_type": block.media_type}
    if block.data is not None:
        native["data"] = _encoded(block.data)
    else:
        native["url"] = block.url
    item: dict[str, Any] = dict(skeleton["media"])
    for key in skeleton["native"]:
        item[key] = native[key]
    return item


_FILLERS: dict[str, Callable[[Skeleton, Iterator[Block]], dict[str, Any]]] = {
    "text": _fill_text,
    "items": _fill_items,
    "thinking": _fill_thinking,
    "tool_call": _fill_tool_call,
    "tool_return": _fill_tool_return,
    "file": _fill_file,
}
